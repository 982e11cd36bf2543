//! No upstream process outlives its model or the server: descendants that left the
//! process group or session are stopped with their model, orphaned descendants are
//! adopted and reaped, a SIGKILLed server takes its upstreams with it, and a new
//! server stops what a killed one left behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use llama_swap_server::router::Launcher;
use llama_swap_server::upstream::{ProcessSpec, Supervisor, adopt_orphans};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use support::{GENEROUS, free_port, is_alive, mockswap_bin, within};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

fn spec(model: &str, cmd: &str) -> ProcessSpec {
    ProcessSpec {
        model: model.into(),
        cmd: cmd.into(),
        cmd_stop: None,
        env: vec![],
        proxy: format!("http://127.0.0.1:{}", free_port()),
        check_endpoint: None,
        health_check_timeout: Duration::from_secs(60),
    }
}

/// The pid printed by the upstream on a line `<prefix><pid>`.
async fn pid_line(sup: &Supervisor, model: &str, prefix: &str) -> u32 {
    let mut sub = sup.logs().subscribe(model).unwrap();
    let parse = |text: &str| text.strip_prefix(prefix)?.trim().parse().ok();
    if let Some(pid) = sub.history.iter().find_map(|l| parse(&l.text)) {
        return pid;
    }
    within(&format!("a line {prefix:?}"), async {
        loop {
            if let Some(pid) = parse(&sub.live.recv().await.unwrap().text) {
                return pid;
            }
        }
    })
    .await
}

/// Field `index` (1-based, as in proc(5)) of `/proc/<pid>/stat`.
fn stat_field(pid: u32, index: usize) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(index - 3).map(str::to_owned)
}

/// Polls until `cond` holds: these are processes that are not our children, so
/// nothing notifies us when they change.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + GENEROUS;
    while !cond() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting until {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn exists(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn a_descendant_that_left_the_session_is_stopped_with_its_model() {
    let cmd = "sh -c 'setsid sleep 300 & echo escaped $!; exec sleep 300'";
    let (sup, _events) = Supervisor::new(vec![spec("m", cmd)], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let leader = sup.status("m").unwrap().pid.unwrap();
    let escaped = pid_line(&sup, "m", "escaped ").await;
    eventually("the descendant has its own session", || {
        stat_field(escaped, 6).is_some_and(|sid| sid == escaped.to_string())
    })
    .await;
    assert_ne!(stat_field(escaped, 5), Some(leader.to_string()));

    within("stop", sup.stop("m", Duration::from_secs(5))).await;
    eventually("the descendant is gone", || !is_alive(escaped)).await;
    sup.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn an_orphaned_descendant_is_adopted_and_reaped_when_its_model_stops() {
    adopt_orphans().unwrap();
    // The inner shell exits at once, orphaning its background child, which has
    // moved to a session of its own.
    let cmd = r#"sh -c 'sh -c "setsid sleep 300 & echo orphan \$!"; exec sleep 300'"#;
    let (sup, _events) = Supervisor::new(vec![spec("m", cmd)], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let orphan = pid_line(&sup, "m", "orphan ").await;
    let me = std::process::id().to_string();
    eventually("the orphan is adopted by this process", || {
        stat_field(orphan, 4).is_some_and(|ppid| ppid == me)
    })
    .await;

    within("stop", sup.stop("m", Duration::from_secs(5))).await;
    eventually("the orphan is stopped and reaped", || !exists(orphan)).await;
    sup.shutdown(Duration::from_secs(5)).await;
}

/// A `llama-swap-server` binary serving `config`, its stderr drained in the
/// background so it never blocks on a full pipe.
struct Server {
    child: Child,
    base: String,
    stderr: tokio::task::JoinHandle<()>,
}

impl Server {
    async fn start(config: &Path) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_llama-swap-server"))
            .arg("--config")
            .arg(config)
            .args(["--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let first = within("the listening line", async {
            BufReader::new(stdout).lines().next_line().await
        })
        .await
        .unwrap()
        .expect("no listening line");
        let base = first.strip_prefix("listening on ").unwrap().to_owned();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let stderr = tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                eprintln!("server: {line}");
            }
        });
        Self {
            child,
            base,
            stderr,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id().unwrap()
    }

    async fn chat(&self, model: &str) -> u16 {
        reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", self.base))
            .json(&serde_json::json!({"model": model, "messages": []}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    async fn sigkill(mut self) {
        let pid = i32::try_from(self.pid()).unwrap();
        kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
        within("the killed server to exit", self.child.wait())
            .await
            .unwrap();
        self.stderr.abort();
    }

    async fn terminate(mut self) {
        let pid = i32::try_from(self.pid()).unwrap();
        kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
        let status = within("the server to exit", self.child.wait())
            .await
            .unwrap();
        assert!(status.success());
        let _ = self.stderr.await;
    }
}

/// Pids of live mockswap processes whose command line contains `needle`.
fn pids_running(needle: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        let program = cmdline.split(' ').next().unwrap_or_default();
        if program.ends_with("mockswap") && cmdline.contains(needle) && is_alive(pid) {
            found.push(pid);
        }
    }
    found
}

fn write_config(dir: &Path, model: &str, cmd: &str, port: u16) -> std::path::PathBuf {
    let file = dir.join("config.yaml");
    let yaml = format!(
        "healthCheckTimeout: 15\nmodels:\n  {model}:\n    cmd: {cmd}\n    proxy: http://127.0.0.1:{port}\n"
    );
    std::fs::write(&file, yaml).unwrap();
    file
}

#[tokio::test]
async fn a_sigkilled_server_takes_its_upstream_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let cmd = format!(
        "{} --listen 127.0.0.1:{port} --models m",
        mockswap_bin().display()
    );
    let server = Server::start(&write_config(dir.path(), "m", &cmd, port)).await;
    assert_eq!(server.chat("m").await, 200);
    let needle = format!("--listen 127.0.0.1:{port} ");
    let upstream = pids_running(&needle);
    assert_eq!(upstream.len(), 1, "one upstream runs: {upstream:?}");

    server.sigkill().await;
    eventually("the upstream died with the server", || {
        pids_running(&needle).is_empty()
    })
    .await;
}

#[tokio::test]
async fn a_new_server_stops_what_a_killed_server_left_behind_and_serves_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    // The model's real server runs in a session of its own under a wrapper: the
    // death signal reaches the wrapper only. Its output does not go to the dead
    // server's pipes, so writing cannot end it either (SIGPIPE).
    let cmd = format!(
        "sh -c 'setsid {} --listen 127.0.0.1:{port} --models m >/dev/null 2>&1 & wait'",
        mockswap_bin().display()
    );
    let config = write_config(dir.path(), "m", &cmd, port);
    let first = Server::start(&config).await;
    assert_eq!(first.chat("m").await, 200);
    let needle = format!("--listen 127.0.0.1:{port} ");
    let left = pids_running(&needle);
    assert_eq!(left.len(), 1, "{left:?}");
    first.sigkill().await;
    assert!(
        is_alive(left[0]),
        "the setsid'd server outlives the wrapper"
    );

    let second = Server::start(&config).await;
    eventually("the orphan is stopped", || !is_alive(left[0])).await;
    assert_eq!(second.chat("m").await, 200);
    let now = pids_running(&needle);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, left, "served by a new upstream, not the orphan");
    second.terminate().await;
    assert!(pids_running(&needle).is_empty());
}
