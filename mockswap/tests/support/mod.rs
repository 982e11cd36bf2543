//! Spawning the `mockswap` binary for tests. Each test crate uses a subset.
#![allow(dead_code)]

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, Command};

/// Generous upper bound for anything that should happen promptly.
pub(crate) const BOUND: Duration = Duration::from_secs(10);

/// A spawned `mockswap`. Tests wait for its exit; if one fails first, the process is
/// killed on drop and tokio reaps it in the background.
pub(crate) struct Proc {
    pub child: Child,
    pub uri: String,
    stderr: Lines<BufReader<ChildStderr>>,
}

impl Proc {
    pub(crate) async fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mockswap"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(BOUND, lines.next_line())
            .await
            .expect("no listening line in time")
            .unwrap()
            .expect("stdout closed before the listening line");
        let uri = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first line is not the listening line: {first:?}"))
            .to_owned();
        assert!(uri.starts_with("http://127.0.0.1:"), "{uri}");
        assert!(!uri.ends_with(":0"), "{uri}");
        Self { child, uri, stderr }
    }

    pub(crate) fn signal(&self, signal: Signal) {
        let pid = i32::try_from(self.child.id().unwrap()).unwrap();
        kill(Pid::from_raw(pid), signal).unwrap();
    }

    pub(crate) async fn wait(&mut self) -> ExitStatus {
        tokio::time::timeout(BOUND, self.child.wait())
            .await
            .expect("mockswap did not exit in time")
            .unwrap()
    }

    /// Reads stderr until a line containing `needle` (the process logs what it does).
    pub(crate) async fn stderr_line(&mut self, needle: &str) -> String {
        tokio::time::timeout(BOUND, async {
            loop {
                let line = self
                    .stderr
                    .next_line()
                    .await
                    .unwrap()
                    .expect("stderr closed");
                if line.contains(needle) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no stderr line with {needle:?}"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // start_kill + the runtime's orphan reaping; tests that care wait explicitly.
        let _ = self.child.start_kill();
    }
}

pub(crate) fn chat(model: &str, text: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]})
}
