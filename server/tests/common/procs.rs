//! Helpers shared by the server's integration tests: locating the mockswap binary,
//! inspecting the process table, bounding waits.

#![allow(dead_code)]

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

/// Upper bound for anything a test waits on; hitting it means a hang, not slowness.
pub(crate) const LIMIT: Duration = Duration::from_secs(30);

/// Awaits `fut`, failing the test if it takes longer than [`LIMIT`].
pub(crate) async fn within<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(LIMIT, fut).await {
        Ok(out) => out,
        Err(_) => panic!("timed out after {LIMIT:?} waiting for {what}"),
    }
}

/// The mockswap binary: `$MOCKSWAP_BIN` if set, else `mockswap` next to the test's
/// `deps/` directory (`target/debug/mockswap`).
pub(crate) fn mockswap_bin() -> PathBuf {
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

/// A free loopback port for an upstream to listen on, reserved for this test
/// process until it exits: no other test process is handed it
/// ([`mockswap::reserve_port`]: below the kernel's ephemeral range, issue 31
/// #12, and locked across processes, since nextest runs each test in its own).
pub(crate) fn free_port() -> u16 {
    free_port_run(1)
}

/// `n` consecutive free loopback ports, for a config numbering `${PORT}` from the
/// first; reserved as [`free_port`] reserves one.
pub(crate) fn free_port_run(n: u16) -> u16 {
    mockswap::reserve_ports(n).unwrap_or_else(|e| panic!("no run of {n} ports for upstreams: {e}"))
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
pub(crate) fn is_alive(pid: u32) -> bool {
    matches!(stat(pid), Some((state, _)) if state != 'Z' && state != 'X')
}

/// Live members of process group `pgid`.
pub(crate) fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| matches!(stat(pid), Some((s, g)) if g == pgid && s != 'Z' && s != 'X'))
        .collect()
}

/// Waits until `pid` has exited, on its pidfd: the kernel makes it readable
/// when the process terminates, whether or not it is our child (a zombie
/// counts as exited, as it does for [`is_alive`]). Returns at once when there
/// is no such process; panics after [`LIMIT`].
pub(crate) async fn wait_exit(pid: u32) {
    use rustix::event::{PollFd, PollFlags, Timespec};
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let Some(raw) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return;
    };
    let fd = match pidfd_open(raw, PidfdFlags::empty()) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::SRCH) => return,
        Err(e) => panic!("pidfd_open({pid}): {e}"),
    };
    // A blocking poll(2) bounded by LIMIT on a thread of its own: registering
    // the pidfd with tokio's reactor needs `unsafe` since tokio 1.54.
    let ready = tokio::task::spawn_blocking(move || {
        let limit = Timespec::try_from(LIMIT).expect("LIMIT fits a timespec");
        loop {
            let mut fds = [PollFd::new(&fd, PollFlags::IN)];
            match rustix::event::poll(&mut fds, Some(&limit)) {
                Err(rustix::io::Errno::INTR) => continue,
                other => return other,
            }
        }
    })
    .await
    .expect("the pidfd poll panicked")
    .unwrap_or_else(|e| panic!("poll on the pidfd of {pid}: {e}"));
    assert!(ready > 0, "process {pid} did not exit within {LIMIT:?}");
}

/// Waits until `pid` is not running and process group `pid` (the supervisor makes
/// each upstream a group leader) has no live member: waits for every process
/// seen in the group to exit, then looks again (a member may have forked).
pub(crate) async fn wait_gone(pid: u32) {
    within(&format!("process {pid} and its group to be gone"), async {
        loop {
            let mut seen = group_members(pid);
            if is_alive(pid) {
                seen.push(pid);
            }
            if seen.is_empty() {
                return;
            }
            futures_util::future::join_all(seen.into_iter().map(wait_exit)).await;
        }
    })
    .await;
}

/// Asserts right now that neither `pid` nor any process of its group is running.
pub(crate) fn assert_gone(pid: u32) {
    assert!(!is_alive(pid), "process {pid} is still running");
    let members = group_members(pid);
    assert!(
        members.is_empty(),
        "process group {pid} still has live members {members:?}"
    );
}

/// PIDs and command lines of the mockswap processes started with
/// `--listen 127.0.0.1:<port>` for one of `ports`.
pub(crate) fn processes_listening_on(ports: &[u16]) -> Vec<(u32, String)> {
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
