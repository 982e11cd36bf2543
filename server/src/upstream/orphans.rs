//! Keeping an upstream's processes from outliving their model or the server.
//!
//! Each layer covers what the one before cannot:
//! 1. The upstream itself dies with the server, however the server dies: it runs
//!    behind the shim (`spawn`) with a parent-death signal.
//! 2. Everything an upstream starts carries an environment marker naming the
//!    server (pid and start time) and that process lifetime of the model.
//!    Stopping a model signals every process with its marker, including
//!    descendants that left its process group or session (`setsid`). A new
//!    server first stops marked processes whose server is gone ([`reclaim`]):
//!    the descendants a SIGKILLed server left, which the death signal (sent to
//!    the upstream only) does not reach.
//! 3. With [`adopt_orphans`] the server is a child subreaper: a descendant whose
//!    parent exits is re-parented to the server instead of init, stays in reach,
//!    and is reaped when it exits (by a task of each [`Supervisor`](super::Supervisor)).
//!
//! All of it reads `/proc` (Linux); elsewhere markers are still set and the rest
//! does nothing.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio_util::sync::CancellationToken;

use super::spawn;

/// The environment variable carrying the marker:
/// `<server pid>.<server start time>.<serial>:<model>`.
pub(crate) const MARKER_VAR: &str = "LLAMA_SWAP_UPSTREAM";

/// How long orphans found by [`reclaim`] get after SIGTERM before SIGKILL.
const RECLAIM_GRACE: Duration = Duration::from_secs(3);

/// Whether this process adopts and reaps orphaned descendants.
static ADOPTING: AtomicBool = AtomicBool::new(false);

/// A process identity that survives pid reuse: pid and start time (clock ticks
/// after boot, `/proc/<pid>/stat` field 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    pid: u32,
    start: u64,
}

/// The fields of `/proc/<pid>/stat` used here.
#[derive(Debug, Clone, Copy)]
struct Stat {
    state: char,
    ppid: u32,
    start: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Parses a stat line; the command name may hold blanks and parentheses, so the
/// fields are counted from after the last `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3 (state); start time is field 22.
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

fn this_process() -> Option<Identity> {
    static ME: OnceLock<Option<Identity>> = OnceLock::new();
    *ME.get_or_init(|| {
        let pid = std::process::id();
        stat(pid).map(|s| Identity {
            pid,
            start: s.start,
        })
    })
}

fn is_running(id: Identity) -> bool {
    matches!(stat(id.pid), Some(s) if s.start == id.start && s.state != 'Z' && s.state != 'X')
}

/// The marker of one process lifetime of one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Marker(String);

impl Marker {
    /// A fresh marker for a process of `model`.
    pub(crate) fn new(model: &str) -> Self {
        static SERIAL: AtomicU64 = AtomicU64::new(0);
        let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
        let (pid, start) = this_process().map_or((std::process::id(), 0), |i| (i.pid, i.start));
        Self(format!("{pid}.{start}.{serial}:{model}"))
    }

    /// The variable's value.
    pub(crate) fn value(&self) -> &str {
        &self.0
    }
}

/// What a marker value says: the server that set it and the model.
fn parse_marker(value: &str) -> Option<(Identity, &str)> {
    let (id, model) = value.split_once(':')?;
    let mut parts = id.split('.');
    let pid = parts.next()?.parse().ok()?;
    let start = parts.next()?.parse().ok()?;
    parts.next()?.parse::<u64>().ok()?;
    Some((Identity { pid, start }, model))
}

fn all_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// The marker `pid` was started with (its initial environment), if any.
fn marker_of(pid: u32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{MARKER_VAR}=");
    environ
        .split(|b| *b == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .map(|value| String::from_utf8_lossy(value).into_owned())
}

/// Processes (other than this one) whose marker satisfies `wanted`.
fn marked(wanted: impl Fn(&str) -> bool) -> Vec<(u32, String)> {
    let me = std::process::id();
    all_pids()
        .into_iter()
        .filter(|&pid| pid != me)
        .filter_map(|pid| Some((pid, marker_of(pid)?)))
        .filter(|(_, value)| wanted(value))
        .collect()
}

/// Whether process `pid` belongs to the process `root` of `model`: it is
/// `root`, descends from it, or carries a marker of this server naming
/// `model` (a descendant that left the tree, such as a worker started with
/// `setsid` whose parent exited). Blocking (reads `/proc`).
pub(crate) fn belongs_to(pid: u32, root: u32, model: &str) -> bool {
    if descends_from(pid, root) {
        return true;
    }
    let Some(value) = marker_of(pid) else {
        return false;
    };
    matches!(parse_marker(&value), Some((server, m)) if m == model && Some(server) == this_process())
}

/// Whether `pid` is `root` or one of its descendants (its parent chain
/// reaches `root`).
fn descends_from(mut pid: u32, root: u32) -> bool {
    // A chain longer than this is a loop read while processes changed.
    for _ in 0..64 {
        if pid == root {
            return true;
        }
        match stat(pid) {
            Some(s) if s.ppid != 0 && s.ppid != pid => pid = s.ppid,
            _ => return false,
        }
    }
    false
}

/// The model each process carrying any server's marker runs, for the pids
/// given: (pid, model) for those that have one. Blocking (reads `/proc`).
pub(crate) fn models_of(pids: impl IntoIterator<Item = u32>) -> Vec<(u32, String)> {
    pids.into_iter()
        .filter_map(|pid| {
            let value = marker_of(pid)?;
            let (_, model) = parse_marker(&value)?;
            Some((pid, model.to_owned()))
        })
        .collect()
}

fn signal_pid(pid: u32, signal: Signal) {
    if let Ok(raw) = i32::try_from(pid) {
        // ESRCH: it ended meanwhile, which is what we want.
        let _ = kill(Pid::from_raw(raw), signal);
    }
}

/// Sends `signal` to every process carrying `marker` and returns them. Blocking
/// (reads `/proc`).
pub(crate) fn signal_marked(marker: &Marker, signal: Signal) -> Vec<Signalled> {
    let found = marked(|value| value == marker.value());
    let mut signalled = Vec::with_capacity(found.len());
    for (pid, _) in found {
        let Some(s) = stat(pid) else {
            continue;
        };
        signal_pid(pid, signal);
        signalled.push(Signalled(Identity {
            pid,
            start: s.start,
        }));
    }
    signalled
}

/// A process [`signal_marked`] signalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Signalled(Identity);

impl Signalled {
    /// Its pid.
    pub(crate) fn pid(self) -> u32 {
        self.0.pid
    }
}

/// Waits until every process of `procs` has ended (a zombie counts as ended), at
/// most `limit`. Nothing notifies us when a process that is not our child ends,
/// so this polls the process table.
pub(crate) async fn wait_ended(procs: &[Signalled], limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if !procs.iter().any(|p| is_running(p.0)) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A process left running by a server that is gone, stopped by [`reclaim`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reclaimed {
    /// The orphan's pid.
    pub pid: u32,
    /// The model it was started for.
    pub model: String,
    /// The pid of the server that started it.
    pub server_pid: u32,
}

/// Stops every process carrying the marker of a server that is no longer running
/// (SIGTERM, SIGKILL after a short grace) and returns what it found. Call it once
/// when a server starts, before any upstream is spawned: a server killed with
/// SIGKILL leaves its upstreams' descendants behind, holding GPU memory and ports.
pub(crate) async fn reclaim() -> Vec<Reclaimed> {
    let found = tokio::task::spawn_blocking(|| {
        marked(|value| parse_marker(value).is_some_and(|(owner, _)| !is_running(owner)))
    })
    .await
    .unwrap_or_default();
    let orphans: Vec<Reclaimed> = found
        .into_iter()
        .filter_map(|(pid, value)| {
            let (owner, model) = parse_marker(&value)?;
            Some(Reclaimed {
                pid,
                model: model.to_owned(),
                server_pid: owner.pid,
            })
        })
        .collect();
    if orphans.is_empty() {
        return orphans;
    }
    let starts: Vec<(u32, Option<u64>)> = orphans
        .iter()
        .map(|o| (o.pid, stat(o.pid).map(|s| s.start)))
        .collect();
    for orphan in &orphans {
        tracing::warn!(
            model = orphan.model,
            pid = orphan.pid,
            server_pid = orphan.server_pid,
            "stopping an upstream process left running by a server that is gone"
        );
        signal_pid(orphan.pid, Signal::SIGTERM);
    }
    // Nothing notifies us when a process that is not our child ends: poll, bounded.
    let deadline = tokio::time::Instant::now() + RECLAIM_GRACE;
    let alive = |&(pid, start): &(u32, Option<u64>)| matches!(stat(pid), Some(s) if Some(s.start) == start && s.state != 'Z' && s.state != 'X');
    while starts.iter().any(alive) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (pid, _) in starts.iter().filter(|s| alive(s)) {
        signal_pid(*pid, Signal::SIGKILL);
    }
    orphans
}

/// Makes this process a child subreaper, so descendants of upstreams whose parent
/// exits are re-parented here and reaped by the supervisors. Only for a process
/// whose children are all spawned by this module (the server binary): the
/// reaper reaps every exited child it does not know, and would take the exit
/// status of a child spawned elsewhere.
///
/// # Errors
///
/// When the kernel refuses (not Linux, or `prctl` failed).
pub fn adopt_orphans() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_child_subreaper(true).map_err(std::io::Error::from)?;
        ADOPTING.store(true, Ordering::Release);
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    Err(std::io::Error::from(std::io::ErrorKind::Unsupported))
}

/// Whether [`adopt_orphans`] is in effect.
pub(crate) fn adopting() -> bool {
    ADOPTING.load(Ordering::Acquire)
}

/// Reaps every exited child of this process that was not spawned by `spawn` (an
/// adopted orphan). Blocking (reads `/proc`).
fn reap_adopted() -> usize {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let me = std::process::id();
    let zombies: Vec<u32> = all_pids()
        .into_iter()
        .filter(|&pid| matches!(stat(pid), Some(s) if s.ppid == me && s.state == 'Z'))
        .collect();
    if zombies.is_empty() {
        return 0;
    }
    spawn::with_spawned(|ours| {
        let mut reaped = 0;
        for pid in zombies.into_iter().filter(|pid| !ours.contains(pid)) {
            if let Ok(raw) = i32::try_from(pid)
                && waitpid(Pid::from_raw(raw), Some(WaitPidFlag::WNOHANG)).is_ok()
            {
                reaped += 1;
            }
        }
        reaped
    })
}

/// Reaps adopted orphans whenever a child exits, until `cancel` (and once more
/// then, for those the final stop just killed).
pub(crate) async fn reap_adopted_until(cancel: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut children = match signal(SignalKind::child()) {
        Ok(stream) => stream,
        Err(error) => {
            tracing::warn!(%error, "SIGCHLD cannot be watched; orphaned descendants of upstreams stay zombies");
            return;
        }
    };
    loop {
        let last = tokio::select! {
            () = cancel.cancelled() => true,
            got = children.recv() => got.is_none(),
        };
        // A SIGCHLD that arrives during the scan is delivered by the next recv.
        let reaped = tokio::task::spawn_blocking(reap_adopted).await.unwrap_or(0);
        if reaped > 0 {
            tracing::debug!(reaped, "reaped orphaned descendants of upstreams");
        }
        if last {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_the_last_parenthesis() {
        let line = "4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10 18446744073709551615";
        let s = parse_stat(line).unwrap();
        assert_eq!((s.state, s.ppid, s.start), ('S', 17, 987_654));
    }

    #[test]
    fn a_marker_names_this_server_and_the_model() {
        let a = Marker::new("qwen:7b");
        let b = Marker::new("qwen:7b");
        assert_ne!(a, b, "each process lifetime gets its own marker");
        let (owner, model) = parse_marker(a.value()).unwrap();
        assert_eq!(model, "qwen:7b");
        assert_eq!(Some(owner), this_process());
        assert!(is_running(owner));
    }

    #[test]
    fn a_marker_of_a_dead_server_is_recognised_as_such() {
        let me = this_process().unwrap();
        let stale = format!("{}.{}.0:m", me.pid, me.start + 1);
        let (owner, _) = parse_marker(&stale).unwrap();
        assert!(
            !is_running(owner),
            "a reused pid is not the server that set the marker"
        );
        assert!(parse_marker("garbage").is_none());
        assert!(parse_marker("1.2:m").is_none());
    }
}
