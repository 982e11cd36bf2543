//! One spawned upstream process: its own process group, output pumped into the
//! model's log ring, graceful then forced termination, always reaped.
//!
//! The process-group id equals the leader's pid because it is spawned with
//! `process_group(0)`. Signals go to the whole group so that whatever the model
//! server forked (a wrapper script's children, a `docker run` client) goes with it.

use std::io;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::{Instant, sleep_until, timeout};
use tokio_util::sync::CancellationToken;

use super::command::split_command;
use super::logs::{LogRing, LogStream, pump_lines};
use super::orphans::{MARKER_VAR, Marker, signal_marked, wait_ended};
use super::spawn;

/// How long to wait for the output pumps to reach end of file after the process
/// exited. Normally immediate; only a descendant that escaped the process group and
/// kept the pipes open makes this wait, and it must not hold up the supervisor.
const OUTPUT_DRAIN_LIMIT: Duration = Duration::from_millis(500);

/// How long a stop waits for SIGKILLed descendants outside the process group to
/// end (they may hold the port the next model needs). SIGKILL is not refused, so
/// only a process stuck in the kernel takes this long.
const DESCENDANTS_LIMIT: Duration = Duration::from_secs(2);

/// When a graceful stop must give way to SIGKILL before its own grace period ends:
/// at once when the supervisor is dropped (`cancel`), or at the shutdown deadline
/// once a shutdown began (`shutdown_at`), so a long eviction grace cannot hold up
/// the server's exit.
#[derive(Debug, Clone)]
pub(crate) struct Cutoff {
    pub(crate) cancel: CancellationToken,
    pub(crate) shutdown_at: watch::Receiver<Option<Instant>>,
}

impl Cutoff {
    /// Resolves when the cutoff is reached; can be called again after it resolved.
    async fn reached(&self) {
        let mut shutdown_at = self.shutdown_at.clone();
        let deadline = async move {
            // An error means the supervisor is gone; `cancel` covers that case.
            match shutdown_at.wait_for(Option::is_some).await.map(|at| *at) {
                Ok(Some(at)) => sleep_until(at).await,
                _ => std::future::pending().await,
            }
        };
        tokio::select! {
            () = self.cancel.cancelled() => {}
            () = deadline => {}
        }
    }
}

/// Why a process could not be spawned.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SpawnError {
    #[error("cannot parse command {cmd:?}: {source}")]
    Parse {
        cmd: String,
        source: super::command::CommandError,
    },
    #[error("failed to start command '{argv}': {source}")]
    Io { argv: String, source: io::Error },
}

/// A running (or exited but not yet cleaned up) child process and its output pumps.
pub(crate) struct Upstream {
    child: Child,
    pid: u32,
    pumps: JoinSet<()>,
    /// Carried by the process and everything it starts; `None` for helpers
    /// (`cmdStop`) whose descendants are not the model's.
    marker: Option<Marker>,
    /// Set once the leader has been reaped and the group swept; `Drop` has nothing
    /// left to do then (and must not signal a pid that may be reused).
    finished: bool,
}

impl Upstream {
    /// Spawns `cmd` (split without a shell) with the inherited environment plus
    /// `env`, in a new process group, with stdout and stderr pumped into `ring`.
    /// With a `marker`, the process and its descendants carry it (see `orphans`).
    pub(crate) async fn spawn(
        cmd: &str,
        env: &[(String, String)],
        ring: &Arc<LogRing>,
        marker: Option<Marker>,
    ) -> Result<Self, SpawnError> {
        let argv = split_command(cmd).map_err(|source| SpawnError::Parse {
            cmd: cmd.to_owned(),
            source,
        })?;
        let io_err = |source| SpawnError::Io {
            argv: argv.join(" "),
            source,
        };
        let mut env = env.to_vec();
        if let Some(marker) = &marker {
            env.push((MARKER_VAR.to_owned(), marker.value().to_owned()));
        }
        let mut child = spawn::spawn(&argv, &env, true).await.map_err(io_err)?;
        let Some(pid) = child.id() else {
            // Only possible if the child was already reaped, which nobody did yet.
            return Err(io_err(io::Error::other("spawned process has no pid")));
        };
        let mut pumps = JoinSet::new();
        if let Some(out) = child.stdout.take() {
            let ring = Arc::clone(ring);
            pumps.spawn(async move { pump_lines(out, &ring, LogStream::Stdout).await });
        }
        if let Some(err) = child.stderr.take() {
            let ring = Arc::clone(ring);
            pumps.spawn(async move { pump_lines(err, &ring, LogStream::Stderr).await });
        }
        Ok(Self {
            child,
            pid,
            pumps,
            marker,
            finished: false,
        })
    }

    /// The leader's pid, which is also the process-group id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits for the leader to exit (and reaps it). Cancel safe.
    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait().await;
        spawn::forget(self.pid);
        status
    }

    /// The leader's exit status if it has exited (reaping it), `None` while it runs.
    pub(crate) fn try_exited(&mut self) -> Option<io::Result<ExitStatus>> {
        match self.child.try_wait() {
            Ok(None) => None,
            Ok(Some(status)) => {
                spawn::forget(self.pid);
                Some(Ok(status))
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// Cleans up after the leader exited: kills whatever is left in its group, then
    /// lets the output pumps read what remains in the pipes (bounded) so the last
    /// lines are in the ring before anyone reads them.
    pub(crate) async fn finish(&mut self) {
        if !self.finished {
            // A pid is not reused while a group with that id has members, so this
            // reaches only our stragglers (ESRCH when there are none).
            let _ = self.signal_group(Signal::SIGKILL);
            // Descendants that left the group (or the session) still carry the marker.
            let killed = self.signal_marked(Signal::SIGKILL).await;
            if !wait_ended(&killed, DESCENDANTS_LIMIT).await {
                tracing::warn!(
                    pids = ?killed.iter().map(|p| p.pid()).collect::<Vec<_>>(),
                    "descendants of an upstream still running after SIGKILL"
                );
            }
            self.finished = true;
        }
        let pumps = &mut self.pumps;
        let _ = timeout(OUTPUT_DRAIN_LIMIT, async {
            while pumps.join_next().await.is_some() {}
        })
        .await;
        self.pumps.abort_all();
    }

    /// Stops the process: `cmd_stop` (with `${PID}` replaced) if given, else SIGTERM
    /// to the group; SIGKILL to the group once `grace` has passed or `cutoff` is reached;
    /// reaped in every case. Returns the leader's exit status.
    pub(crate) async fn terminate(
        &mut self,
        cmd_stop: Option<&str>,
        env: &[(String, String)],
        ring: &Arc<LogRing>,
        grace: Duration,
        cutoff: &Cutoff,
    ) -> io::Result<ExitStatus> {
        let deadline = Instant::now() + grace;
        let mut stopper = None;
        if let Some(cmd) = cmd_stop {
            let cmd = cmd.replace("${PID}", &self.pid.to_string());
            match Upstream::spawn(&cmd, env, ring, None).await {
                Ok(s) => stopper = Some(s),
                Err(e) => {
                    tracing::warn!(model = ring.model(), error = %e, "cmdStop failed; sending SIGTERM instead");
                }
            }
        }
        if stopper.is_none() {
            let _ = self.signal_leader_and_group(Signal::SIGTERM);
            self.signal_marked(Signal::SIGTERM).await;
        }

        let status = self.wait_until(deadline, cutoff).await;
        let status = match status {
            Some(status) => status,
            None => {
                tracing::warn!(
                    model = ring.model(),
                    pid = self.pid,
                    ?grace,
                    "upstream still running after the grace period; sending SIGKILL"
                );
                self.kill_now().await
            }
        };
        self.finish().await;

        if let Some(mut stopper) = stopper {
            match stopper.wait_until(deadline, cutoff).await {
                Some(Ok(s)) if !s.success() => {
                    tracing::warn!(model = ring.model(), status = %s, "cmdStop failed");
                }
                Some(_) => {}
                None => {
                    tracing::warn!(model = ring.model(), "cmdStop still running; killing it");
                    let _ = stopper.kill_now().await;
                }
            }
            stopper.finish().await;
        }
        status
    }

    /// SIGKILL to the group (and the leader, in case the group is gone), then reap.
    pub(crate) async fn kill_now(&mut self) -> io::Result<ExitStatus> {
        let _ = self.signal_leader_and_group(Signal::SIGKILL);
        let _ = self.child.start_kill();
        self.wait().await
    }

    /// Signals every process carrying this upstream's marker, off the runtime
    /// (it reads `/proc`), and returns them.
    async fn signal_marked(&self, signal: Signal) -> Vec<super::orphans::Signalled> {
        let Some(marker) = self.marker.clone() else {
            return Vec::new();
        };
        let found = tokio::task::spawn_blocking(move || signal_marked(&marker, signal))
            .await
            .unwrap_or_default();
        if !found.is_empty() {
            tracing::debug!(pids = ?found.iter().map(|p| p.pid()).collect::<Vec<_>>(), ?signal, "signalled descendants outside the process group");
        }
        found
    }

    /// The leader's exit status, or `None` if it has not exited by `deadline` (or
    /// `cutoff` was reached first).
    async fn wait_until(
        &mut self,
        deadline: Instant,
        cutoff: &Cutoff,
    ) -> Option<io::Result<ExitStatus>> {
        tokio::select! {
            status = self.wait() => Some(status),
            () = sleep_until(deadline) => None,
            () = cutoff.reached() => None,
        }
    }

    /// Signals the process group only. Used once the leader may have been reaped:
    /// its pid could then belong to someone else, but a group id stays reserved while
    /// the group has members.
    fn signal_group(&self, signal: Signal) -> Result<(), Errno> {
        killpg(self.raw_pid()?, signal)
    }

    /// Signals the group, or the leader alone if the group is gone (it may have moved
    /// to a group of its own). Only while the leader is not reaped.
    fn signal_leader_and_group(&self, signal: Signal) -> Result<(), Errno> {
        let pid = self.raw_pid()?;
        match killpg(pid, signal) {
            Err(Errno::ESRCH) => kill(pid, signal),
            other => other,
        }
    }

    fn raw_pid(&self) -> Result<Pid, Errno> {
        i32::try_from(self.pid)
            .map(Pid::from_raw)
            .map_err(|_| Errno::ESRCH)
    }
}

impl Drop for Upstream {
    /// The last line of defence against orphans when the owning task is dropped
    /// without a clean stop (runtime shutdown, panic): `kill_on_drop` handles the
    /// leader, this the rest of its group.
    fn drop(&mut self) {
        if !self.finished {
            let _ = self.signal_group(Signal::SIGKILL);
            if let Some(marker) = &self.marker {
                signal_marked(marker, Signal::SIGKILL);
            }
        }
        // tokio reaps it (kill_on_drop) if nobody did; it is no longer ours to track.
        spawn::forget(self.pid);
    }
}

/// Text for an exit status as the launcher contract wants it (`exit status: 1`,
/// `signal: 9 (SIGKILL)`).
pub(crate) fn describe_exit(status: &io::Result<ExitStatus>) -> String {
    match status {
        Ok(s) => s.to_string(),
        Err(e) => format!("unknown (waiting for the process failed: {e})"),
    }
}
