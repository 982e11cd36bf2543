//! Spawning upstream processes so that they cannot outlive the server.
//!
//! Linux sends a process its parent-death signal (`PR_SET_PDEATHSIG`) when the
//! *thread* that forked it ends, however the server dies (SIGKILL included). The
//! signal must be set in the child between fork and exec, which Rust's `Command`
//! allows only through an `unsafe` `pre_exec`; the workspace forbids `unsafe`, so
//! the server instead starts itself as a tiny shim ([`run_shim_if_requested`]):
//! the shim sets the signal on itself through nix's safe `prctl`, checks that its
//! parent is still the server, and execs the real command, which keeps the pid
//! (so `${PID}`, process groups and signals are unchanged) and the death signal.
//!
//! Because the signal follows the forking thread, every spawn runs on one thread
//! that lives as long as the process ([`on_spawner_thread`]); tokio's worker and
//! blocking threads come and go.
//!
//! The shim is used only when the process enabled it ([`enable_shim`]): a test
//! binary linking this library cannot act as the shim, the server binary can.
//!
//! Every pid spawned here is recorded until it is reaped, so the reaper of
//! adopted processes (`orphans`) never takes the exit status of one of ours.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Mutex, OnceLock, mpsc};

use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// The first argument that turns the server binary into the shim. Followed by the
/// expected parent pid, the program (resolved path) and its arguments.
const SHIM_FLAG: &str = "--llama-swap-upstream-shim";

/// Exit status of a shim that could not exec its command (as shells use).
const EXIT_CANNOT_EXEC: u8 = 127;

/// The executable started as the shim, once enabled.
static SHIM: OnceLock<PathBuf> = OnceLock::new();

/// Pids spawned by this module and not reaped yet.
static SPAWNED: Mutex<BTreeSet<u32>> = Mutex::new(BTreeSet::new());

type Job = Box<dyn FnOnce() + Send>;

/// Runs the shim and never returns when this process was started as one (the
/// command replaces it); returns `None` otherwise. Call it first in `main`,
/// before anything else runs, so the shim stays a few microseconds long.
pub fn run_shim_if_requested() -> Option<ExitCode> {
    let mut args = std::env::args_os();
    // The server sets the shim's argv[0] to the command's own, which the command
    // gets back, as if it had been spawned directly.
    let arg0 = args.next().unwrap_or_default();
    if args.next().as_deref() != Some(OsStr::new(SHIM_FLAG)) {
        return None;
    }
    let parent = args.next().and_then(|p| p.to_str()?.parse::<i32>().ok());
    let Some(program) = args.next() else {
        eprintln!("llama-swap upstream shim: no command given");
        return Some(ExitCode::from(EXIT_CANNOT_EXEC));
    };
    Some(shim(parent, &arg0, &program, args.collect()))
}

fn shim(parent: Option<i32>, arg0: &OsStr, program: &OsStr, args: Vec<OsString>) -> ExitCode {
    #[cfg(target_os = "linux")]
    {
        use nix::sys::signal::Signal;
        if let Err(err) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
            eprintln!("llama-swap upstream shim: cannot set the parent-death signal: {err}");
            return ExitCode::from(EXIT_CANNOT_EXEC);
        }
        // The server may have died between the fork and the prctl; then nobody
        // would ever send the signal.
        if parent != Some(nix::unistd::getppid().as_raw()) {
            eprintln!("llama-swap upstream shim: the server is gone; not starting the command");
            return ExitCode::from(EXIT_CANNOT_EXEC);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = parent;
    let err = std::process::Command::new(program)
        .arg0(arg0)
        .args(args)
        .exec();
    eprintln!(
        "llama-swap upstream shim: cannot run {}: {err}",
        Path::new(program).display()
    );
    ExitCode::from(EXIT_CANNOT_EXEC)
}

/// Starts every later upstream through `executable` acting as the shim (the server
/// binary, which calls [`run_shim_if_requested`] first). Only the first call has
/// an effect. Linux only; elsewhere upstreams are spawned directly.
///
/// # Errors
///
/// When the spawner thread cannot be started; upstreams are then spawned directly.
pub(crate) fn enable_shim(executable: PathBuf) -> io::Result<()> {
    spawner()?;
    if cfg!(target_os = "linux") {
        let _ = SHIM.set(executable);
    }
    Ok(())
}

/// The channel to the spawner thread, started on first use. The thread blocks on
/// the channel for the rest of the process's life: it must never end, because its
/// end is what sends the children their death signal.
fn spawner() -> io::Result<&'static mpsc::Sender<Job>> {
    static SPAWNER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    if let Some(sender) = SPAWNER.get() {
        return Ok(sender);
    }
    let (sender, jobs) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("upstream-spawner".into())
        .spawn(move || {
            for job in jobs {
                job();
            }
        })?;
    // Two first calls at once each start a thread; the loser's thread ends at once
    // (its sender is dropped) and no child was ever spawned from it.
    Ok(SPAWNER.get_or_init(|| sender))
}

/// Runs `job` on the spawner thread and returns its result.
async fn on_spawner_thread<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let sender = spawner()?;
    let (reply, answer) = oneshot::channel();
    sender
        .send(Box::new(move || {
            let _ = reply.send(job());
        }))
        .map_err(|_| io::Error::other("the upstream spawner thread is gone"))?;
    answer
        .await
        .map_err(|_| io::Error::other("the upstream spawner thread dropped a spawn"))
}

/// Spawns `argv` with `env` added, in a new process group, stdin closed and
/// stdout/stderr piped, through the shim when it is enabled. The child is
/// recorded as ours until [`forget`] is called for it.
pub(crate) async fn spawn(
    argv: &[String],
    env: &[(String, String)],
    kill_on_drop: bool,
) -> io::Result<Child> {
    let (program, args) = argv
        .split_first()
        .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut command = match SHIM.get() {
        Some(shim) => {
            // Resolved here so that a missing program is a spawn error, as without
            // the shim, rather than an early exit of the shim.
            let path_var = env
                .iter()
                .rev()
                .find(|(k, _)| k == "PATH")
                .map(|(_, v)| OsString::from(v))
                .or_else(|| std::env::var_os("PATH"));
            let resolved = resolve_program(program, path_var.as_deref())?;
            let mut command = Command::new(shim);
            command
                .arg(SHIM_FLAG)
                .arg(std::process::id().to_string())
                .arg(resolved)
                .args(args)
                .arg0(program);
            command
        }
        None => {
            let mut command = Command::new(program);
            command.args(args);
            command
        }
    };
    command
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(kill_on_drop);
    if SHIM.get().is_some() {
        let runtime = tokio::runtime::Handle::current();
        on_spawner_thread(move || {
            let _entered = runtime.enter();
            spawn_recorded(&mut command)
        })
        .await?
    } else {
        spawn_recorded(&mut command)
    }
}

/// Spawns and records the pid under the registry's lock, so the reaper cannot see
/// the child exit before it is known to be ours.
fn spawn_recorded(command: &mut Command) -> io::Result<Child> {
    let mut spawned = SPAWNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let child = command.spawn()?;
    if let Some(pid) = child.id() {
        spawned.insert(pid);
    }
    Ok(child)
}

/// Forgets `pid` once its owner reaped it (or gave it to tokio to reap).
pub(crate) fn forget(pid: u32) {
    SPAWNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&pid);
}

/// Runs `f` with the set of pids spawned here and not reaped yet, holding the lock
/// (no spawn can happen meanwhile).
pub(crate) fn with_spawned<T>(f: impl FnOnce(&BTreeSet<u32>) -> T) -> T {
    let spawned = SPAWNED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    f(&spawned)
}

/// `program` as `execvp` would find it: as given when it contains a slash, else
/// the first executable file of that name in `path_var`.
fn resolve_program(program: &str, path_var: Option<&OsStr>) -> io::Result<PathBuf> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    let dirs = path_var.map(OsStr::as_bytes).unwrap_or(b"/usr/bin:/bin");
    for dir in dirs.split(|b| *b == b':') {
        // An empty entry means the current directory, as for execvp.
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(dir))
        };
        let candidate = dir.join(program);
        if is_executable_file(&candidate) {
            return Ok(candidate);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "No such file or directory (not found in PATH)",
    ))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_with_a_slash_is_used_as_given() {
        assert_eq!(
            resolve_program("./run.sh", Some(OsStr::new("/nowhere"))).unwrap(),
            PathBuf::from("./run.sh")
        );
    }

    #[test]
    fn a_bare_program_is_found_in_the_first_path_entry_that_has_it() {
        let first = tempfile::tempdir().unwrap();
        let second = tempfile::tempdir().unwrap();
        let plain = first.path().join("tool");
        std::fs::write(&plain, b"not executable").unwrap();
        let exe = second.path().join("tool");
        std::fs::write(&exe, b"#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:{}", first.path().display(), second.path().display());
        assert_eq!(
            resolve_program("tool", Some(OsStr::new(&path))).unwrap(),
            exe
        );
    }

    #[test]
    fn a_missing_program_is_not_found() {
        let err =
            resolve_program("no-such-tool-xyz", Some(OsStr::new("/nonexistent"))).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }
}
