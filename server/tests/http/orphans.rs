//! A SIGKILLed server takes its upstreams with it, and a new server stops what a
//! killed one left behind (descendants the death signal does not reach) before it
//! serves the model again.

use std::path::{Path, PathBuf};

use crate::cli::Server;
use crate::support::{free_port, is_alive, mockswap_bin, wait_exit};

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

fn write_config(dir: &Path, model: &str, cmd: &str, port: u16) -> PathBuf {
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
    let server = Server::start(&write_config(dir.path(), "m", &cmd, port), &[]).await;
    assert_eq!(server.chat("m").await, 200);
    let needle = format!("--listen 127.0.0.1:{port} ");
    let upstream = pids_running(&needle);
    assert_eq!(upstream.len(), 1, "one upstream runs: {upstream:?}");

    server.sigkill().await;
    for pid in upstream {
        wait_exit(pid).await;
    }
    let left = pids_running(&needle);
    assert!(
        left.is_empty(),
        "the upstream outlived the server: {left:?}"
    );
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
    let first = Server::start(&config, &[]).await;
    assert_eq!(first.chat("m").await, 200);
    let needle = format!("--listen 127.0.0.1:{port} ");
    let left = pids_running(&needle);
    assert_eq!(left.len(), 1, "{left:?}");
    first.sigkill().await;
    assert!(
        is_alive(left[0]),
        "the setsid'd server outlives the wrapper"
    );

    let second = Server::start(&config, &[]).await;
    wait_exit(left[0]).await;
    assert!(
        !is_alive(left[0]),
        "the orphan outlived the new server's start"
    );
    assert_eq!(second.chat("m").await, 200);
    let now = pids_running(&needle);
    assert_eq!(now.len(), 1, "{now:?}");
    assert_ne!(now, left, "served by a new upstream, not the orphan");
    second.terminate().await;
    assert!(pids_running(&needle).is_empty());
}
