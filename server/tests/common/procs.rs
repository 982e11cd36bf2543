//! Helpers shared by the server's integration tests: locating the mockswap binary,
//! inspecting the process table, bounding waits.

#![allow(dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

/// Upper bound for anything a test waits on; hitting it means a hang, not slowness.
pub const LIMIT: Duration = Duration::from_secs(30);

/// Awaits `fut`, failing the test if it takes longer than [`LIMIT`].
pub async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(LIMIT, fut).await {
        Ok(out) => out,
        Err(_) => panic!("timed out after {LIMIT:?} waiting for {what}"),
    }
}

/// The mockswap binary: `$MOCKSWAP_BIN` if set, else `mockswap` next to the test's
/// `deps/` directory (`target/debug/mockswap`).
pub fn mockswap_bin() -> PathBuf {
    if let Some(path) = std::env::var_os("MOCKSWAP_BIN") {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("current_exe");
    // target/debug/deps/<test>-<hash> -> target/debug/mockswap
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("test binary lives in target/<profile>/deps");
    let bin = dir.join("mockswap");
    assert!(
        bin.exists(),
        "mockswap binary not found at {}; run `cargo build -p mockswap --bin mockswap` \
         (scripts/test builds all binaries first) or set MOCKSWAP_BIN",
        bin.display()
    );
    bin
}

/// A free loopback port: bound, read, released. Another process could take it in
/// between; acceptable for tests.
pub fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local_addr").port()
}

/// `(state, process group)` of `pid` from `/proc/<pid>/stat`, or `None` if there is
/// no such process.
fn stat(pid: u32) -> Option<(char, u32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces and parentheses; fields resume after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let _ppid = fields.next()?;
    let pgrp = fields.next()?.parse().ok()?;
    Some((state, pgrp))
}

/// Whether `pid` is a live process (a zombie has finished running and counts as gone).
pub fn is_alive(pid: u32) -> bool {
    matches!(stat(pid), Some((state, _)) if state != 'Z' && state != 'X')
}

/// Live members of process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| matches!(stat(pid), Some((s, g)) if g == pgid && s != 'Z' && s != 'X'))
        .collect()
}

/// Waits until `pid` is not running and process group `pid` (the supervisor makes
/// each upstream a group leader) has no live member. Polls the process table: a
/// SIGKILLed process that is not our child dies asynchronously and nothing notifies
/// us, so this is a bounded check of a condition, not a sleep standing in for one.
pub async fn wait_gone(pid: u32) {
    let deadline = tokio::time::Instant::now() + LIMIT;
    loop {
        let members = group_members(pid);
        if !is_alive(pid) && members.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} or its group survived: alive={} members={members:?}",
            is_alive(pid)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Asserts right now that neither `pid` nor any process of its group is running.
pub fn assert_gone(pid: u32) {
    assert!(!is_alive(pid), "process {pid} is still running");
    let members = group_members(pid);
    assert!(
        members.is_empty(),
        "process group {pid} still has live members {members:?}"
    );
}

/// PIDs and command lines of the mockswap processes started with
/// `--listen 127.0.0.1:<port>` for one of `ports`.
pub fn processes_listening_on(ports: &[u16]) -> Vec<(u32, String)> {
    // The trailing space keeps port 4000 from matching 40001.
    let needles: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p} ")).collect();
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(raw) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
        if cmdline.contains("mockswap") && needles.iter().any(|n| cmdline.contains(n.as_str())) {
            // A zombie has an empty cmdline, so anything found here is alive.
            found.push((pid, cmdline));
        }
    }
    found
}
