//! The `llama-swap-server` binary: serving, SIGHUP and `--watch-config`
//! reloads, and a graceful SIGTERM shutdown that exits 0 and leaves no
//! upstream process.

use std::path::Path;
use std::process::Stdio;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::support::{LIMIT, ServerEvents, config_yaml, free_port, free_port_run, model};

/// A `llama-swap-server` process; its log (stdout after the `listening on`
/// line, and stderr) is read all the time, so it never blocks on a full pipe,
/// and arrives here line by line.
pub(crate) struct Server {
    child: Child,
    /// The address from the `listening on` line.
    pub(crate) base: String,
    /// Log lines, `true` for stdout.
    logs: mpsc::UnboundedReceiver<(bool, String)>,
    http: reqwest::Client,
    _readers: JoinSet<()>,
}

impl Server {
    /// Serves `config` on a free loopback port, with `extra` arguments.
    pub(crate) async fn start(config: &Path, extra: &[&str]) -> Self {
        let config = config.to_str().unwrap();
        let mut args = vec!["--config", config, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        Self::start_args(&args).await
    }

    /// Runs the binary with exactly `args`.
    pub(crate) async fn start_args(args: &[&str]) -> Self {
        Self::start_args_env(args, &[]).await
    }

    /// Runs the binary with exactly `args`, and `env` added to its environment.
    pub(crate) async fn start_args_env(args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_llama-swap-server"))
            .args(args)
            .envs(env.iter().copied())
            .env_remove("RUST_LOG")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = tokio::time::timeout(LIMIT, stdout.next_line())
            .await
            .unwrap()
            .unwrap()
            .expect("no listening line");
        let base = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
            .to_owned();
        let (tx, logs) = mpsc::unbounded_channel();
        let mut readers = JoinSet::new();
        let out = tx.clone();
        readers.spawn(async move {
            while let Ok(Some(line)) = stdout.next_line().await {
                let _ = out.send((true, line));
            }
        });
        readers.spawn(async move {
            while let Ok(Some(line)) = stderr.next_line().await {
                let _ = tx.send((false, line));
            }
        });
        Self {
            child,
            base,
            logs,
            http: reqwest::Client::new(),
            _readers: readers,
        }
    }

    /// SIGKILL, then reap it.
    pub(crate) async fn sigkill(mut self) {
        self.signal(Signal::SIGKILL);
        tokio::time::timeout(LIMIT, self.child.wait())
            .await
            .expect("the killed server did not exit")
            .unwrap();
    }

    pub(crate) fn signal(&self, signal: Signal) {
        let pid = i32::try_from(self.child.id().unwrap()).unwrap();
        kill(Pid::from_raw(pid), signal).unwrap();
    }

    /// Reads the log until a line contains `needle`.
    pub(crate) async fn wait_log(&mut self, needle: &str) -> String {
        tokio::time::timeout(LIMIT, async {
            loop {
                let (_, line) = self.logs.recv().await.expect("the log ended");
                if line.contains(needle) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no log line with {needle:?}"))
    }

    async fn model_ids(&self) -> Vec<String> {
        let body: serde_json::Value = self
            .http
            .get(format!("{}/v1/models", self.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    }

    pub(crate) async fn chat(&self, model: &str) -> u16 {
        self.http
            .post(format!("{}/v1/chat/completions", self.base))
            .json(&serde_json::json!({"model": model, "messages": []}))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// SIGTERM, then the exit status must be success.
    pub(crate) async fn terminate(self) {
        self.terminate_with_output().await;
    }

    /// As [`terminate`](Self::terminate); returns the stdout lines not read yet.
    pub(crate) async fn terminate_with_output(mut self) -> Vec<String> {
        self.signal(Signal::SIGTERM);
        let status = tokio::time::timeout(LIMIT, self.child.wait())
            .await
            .expect("the server did not exit after SIGTERM");
        assert!(status.unwrap().success(), "non-zero exit after SIGTERM");
        // The readers end at the pipes' end of file, which follows the exit.
        let mut stdout = Vec::new();
        while let Some((is_stdout, line)) = tokio::time::timeout(LIMIT, self.logs.recv())
            .await
            .expect("the output did not end")
        {
            if is_stdout {
                stdout.push(line);
            }
        }
        stdout
    }
}

fn mockswaps_on(ports: &[u16]) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmdline.contains("mockswap")
            && ports
                .iter()
                .any(|p| cmdline.contains(&format!("127.0.0.1:{p} ")))
        {
            found.push(cmdline);
        }
    }
    found
}

/// Waits until `/v1/models` lists `want`, on the server's `/api/events`.
async fn wait_models(server: &Server, want: &[&str]) {
    // A reload ends the event stream of the instance it retires; the
    // subscription renews itself on the new one.
    ServerEvents::subscribe(&server.base, None)
        .await
        .until(|| async { (server.model_ids().await == want).then_some(()) })
        .await;
}

#[tokio::test]
async fn sigterm_shuts_down_gracefully_with_exit_0_and_no_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let port = free_port();
    std::fs::write(&file, config_yaml(&[(model("a", ""), port)])).unwrap();
    let server = Server::start(&file, &[]).await;
    assert_eq!(server.chat("a").await, 200);
    assert_eq!(
        mockswaps_on(&[port]).len(),
        1,
        "the upstream should be running"
    );
    server.terminate().await;
    assert!(
        mockswaps_on(&[port]).is_empty(),
        "orphan upstream after SIGTERM"
    );
}

#[tokio::test]
async fn sighup_reloads_a_good_config_and_keeps_running_on_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let (pa, pb) = (free_port(), free_port());
    std::fs::write(&file, config_yaml(&[(model("a", ""), pa)])).unwrap();
    let mut server = Server::start(&file, &[]).await;
    assert_eq!(server.chat("a").await, 200);

    std::fs::write(
        &file,
        config_yaml(&[(model("a", ""), pa), (model("b", ""), pb)]),
    )
    .unwrap();
    server.signal(Signal::SIGHUP);
    server.wait_log("configuration reloaded").await;
    assert_eq!(server.model_ids().await, vec!["a", "b"]);
    // The old instance's upstream was stopped; the new one starts its own.
    assert_eq!(server.chat("a").await, 200);
    assert_eq!(server.chat("b").await, 200);

    std::fs::write(&file, "models: [this is not a model map").unwrap();
    server.signal(Signal::SIGHUP);
    server.wait_log("reload failed").await;
    assert_eq!(server.model_ids().await, vec!["a", "b"]);
    assert_eq!(server.chat("b").await, 200);

    server.terminate().await;
    assert!(
        mockswaps_on(&[pa, pb]).is_empty(),
        "orphan upstream after SIGTERM"
    );
}

#[tokio::test]
async fn reloads_after_a_doubling_macro_chain_and_a_bad_file_still_apply() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let (pa, pb) = (free_port(), free_port());
    let plain = config_yaml(&[(model("a", ""), pa)]);
    std::fs::write(&file, &plain).unwrap();
    let mut server = Server::start(&file, &[]).await;
    assert_eq!(server.chat("a").await, 200);

    // 40 levels of empty macros, each its predecessor twice: 2^40 expansions
    // if expanded naively. The reload finishes (and the next ones run).
    let mut chain = String::from("macros:\n  m0: \"\"\n");
    for level in 1..=40 {
        let below = level - 1;
        chain.push_str(&format!("  m{level}: \"${{m{below}}}${{m{below}}}\"\n"));
    }
    let chained = format!("{chain}{}", plain.replace("--models a", "--models a${m40}"));
    std::fs::write(&file, chained).unwrap();
    server.signal(Signal::SIGHUP);
    let line = tokio::time::timeout(LIMIT, async {
        loop {
            let line = server.wait_log("reload").await;
            if line.contains("configuration reloaded") || line.contains("reload failed") {
                return line;
            }
        }
    })
    .await
    .expect("the reload with the macro chain never said how it went");
    assert!(line.contains("configuration reloaded"), "{line}");

    std::fs::write(&file, "models: [this is not a model map").unwrap();
    server.signal(Signal::SIGHUP);
    server.wait_log("reload failed").await;

    std::fs::write(
        &file,
        config_yaml(&[(model("a", ""), pa), (model("b", ""), pb)]),
    )
    .unwrap();
    server.signal(Signal::SIGHUP);
    server.wait_log("configuration reloaded").await;
    assert_eq!(server.model_ids().await, vec!["a", "b"]);
    assert_eq!(server.chat("b").await, 200);

    server.terminate().await;
    assert!(
        mockswaps_on(&[pa, pb]).is_empty(),
        "orphan upstream after SIGTERM"
    );
}

/// Models whose mockswap listens on `${PORT}` from `start_port`.
fn numbered_yaml(start_port: u16, ids: &[&str]) -> String {
    let bin = crate::support::mockswap_bin();
    let mut yaml = format!("healthCheckTimeout: 15\nstartPort: {start_port}\nmodels:\n");
    for id in ids {
        yaml.push_str(&format!(
            "  {id}:\n    cmd: {} --listen 127.0.0.1:${{PORT}} --models {id}\n    proxy: http://127.0.0.1:${{PORT}}\n",
            bin.display()
        ));
    }
    yaml
}

#[tokio::test]
async fn a_reload_adding_a_model_that_sorts_first_keeps_the_others_ports_and_processes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let start = free_port_run(3);
    let ports = [start, start + 1, start + 2];
    std::fs::write(&file, numbered_yaml(start, &["b", "c"])).unwrap();
    let mut server = Server::start(&file, &[]).await;
    assert_eq!(server.chat("c").await, 200);
    let running = crate::support::processes_listening_on(&ports);
    assert_eq!(running.len(), 1, "{running:?}");
    let (c_pid, c_cmd) = running[0].clone();
    assert!(
        c_cmd.contains(&format!("127.0.0.1:{} ", start + 1)),
        "{c_cmd}"
    );

    // `a` sorts before `b` and `c`: numbered afresh, it would take b's port
    // and shift c's, which a reload counts as a changed definition.
    std::fs::write(&file, numbered_yaml(start, &["a", "b", "c"])).unwrap();
    server.signal(Signal::SIGHUP);
    server.wait_log("configuration reloaded").await;
    assert_eq!(server.chat("c").await, 200);
    assert_eq!(
        crate::support::processes_listening_on(&[start + 1]),
        [(c_pid, c_cmd)],
        "c kept its port and its process"
    );
    assert_eq!(server.chat("a").await, 200);
    let a = crate::support::processes_listening_on(&[start + 2]);
    assert_eq!(a.len(), 1, "a is numbered past the kept ports: {a:?}");

    server.terminate().await;
    assert!(
        mockswaps_on(&ports).is_empty(),
        "orphan upstream after SIGTERM"
    );
}

#[tokio::test]
async fn watch_config_reloads_when_the_file_changes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let (pa, pb) = (free_port(), free_port());
    std::fs::write(&file, config_yaml(&[(model("a", ""), pa)])).unwrap();
    let server = Server::start(&file, &["--watch-config"]).await;
    assert_eq!(server.model_ids().await, vec!["a"]);
    std::fs::write(
        &file,
        config_yaml(&[(model("a", ""), pa), (model("b", ""), pb)]),
    )
    .unwrap();
    wait_models(&server, &["a", "b"]).await;
    assert_eq!(server.chat("b").await, 200);
    server.terminate().await;
    assert!(mockswaps_on(&[pa, pb]).is_empty());
}

#[tokio::test]
async fn a_reload_whose_file_never_finishes_reading_stalls_neither_serving_nor_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let pa = free_port();
    std::fs::write(&file, config_yaml(&[(model("a", ""), pa)])).unwrap();
    let mut server = Server::start(&file, &[]).await;
    assert_eq!(server.chat("a").await, 200);

    // Opening a FIFO with no writer blocks until one comes: a read that never ends.
    std::fs::remove_file(&file).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&file)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo failed");
    server.signal(Signal::SIGHUP);
    server.wait_log("SIGHUP: reloading").await;
    assert_eq!(server.chat("a").await, 200);
    assert_eq!(server.model_ids().await, vec!["a"]);

    server.terminate().await;
    assert!(
        mockswaps_on(&[pa]).is_empty(),
        "orphan upstream after SIGTERM"
    );
}

#[tokio::test]
async fn a_model_whose_proxy_is_the_listen_address_is_refused_at_start_and_on_reload() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let port = free_port();
    let looping = format!(
        "models:\n  looper:\n    cmd: llama-server --port {port}\n    proxy: http://127.0.0.1:{port}\n"
    );
    std::fs::write(&file, &looping).unwrap();
    let out = tokio::time::timeout(
        LIMIT,
        Command::new(env!("CARGO_BIN_EXE_llama-swap-server"))
            .arg("--config")
            .arg(&file)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .output(),
    )
    .await
    .expect("the server did not exit")
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("model looper: proxy"), "{stderr}");

    // Served on another port, then reloaded with a model on the bound port.
    let pa = free_port();
    std::fs::write(&file, config_yaml(&[(model("a", ""), pa)])).unwrap();
    let mut server = Server::start(&file, &[]).await;
    // Served (so the SIGHUP handler is installed), then reloaded.
    assert_eq!(server.chat("a").await, 200);
    let bound = server.base.rsplit(':').next().unwrap().to_owned();
    std::fs::write(
        &file,
        format!(
            "models:\n  looper:\n    cmd: llama-server --port {bound}\n    proxy: http://localhost:{bound}\n"
        ),
    )
    .unwrap();
    server.signal(Signal::SIGHUP);
    let line = server.wait_log("reload refused").await;
    assert!(line.contains("model looper"), "{line}");
    assert_eq!(server.model_ids().await, vec!["a"]);
    assert_eq!(server.chat("a").await, 200);
    server.terminate().await;
    assert!(
        mockswaps_on(&[pa]).is_empty(),
        "orphan upstream after SIGTERM"
    );
}

#[tokio::test]
async fn a_signal_sent_as_soon_as_the_address_is_printed_is_handled_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let pa = free_port();
    std::fs::write(&file, config_yaml(&[(model("a", ""), pa)])).unwrap();
    // SIGHUP's default action would end the process: it must reload instead.
    let mut server = Server::start(&file, &[]).await;
    server.signal(Signal::SIGHUP);
    server.wait_log("configuration reloaded").await;
    assert_eq!(server.chat("a").await, 200);
    server.terminate().await;
    // SIGTERM at once is the graceful shutdown (exit 0), not death by signal.
    Server::start(&file, &[]).await.terminate().await;
    assert!(
        mockswaps_on(&[pa]).is_empty(),
        "orphan upstream after SIGTERM"
    );
}
