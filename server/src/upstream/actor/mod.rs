//! The owner task of one model's process: the single writer of its state.
//!
//! Requests arrive on a channel and are handled one at a time. While a stop runs the
//! task does not read the channel, so a start asked for meanwhile is picked up only
//! once the stop is complete (llama-swap issue 946); while a start runs it keeps
//! reading, so a stop can abort the start.
//!
//! One file per state of a process lifetime, each an `impl ModelActor`:
//!
//! | file | state |
//! |---|---|
//! | `start` | the crash-loop backoff, the spawn and the wait for the health check |
//! | `ready` | serving, with the health monitor's polls (`healthCheckInterval`) |
//! | `sleeping` | asleep (`sleep:`) and waking |

mod ready;
mod sleeping;
mod start;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::logs::LogRing;
use super::monitor::{Incident, Restarts};
use super::process::{Cutoff, Upstream, describe_exit};
use super::{ActorConfig, FailedModels, ProcessSpec, ProcessState, ProcessStatus};
use crate::launcher::{LaunchError, Released, UpstreamEvent};
use crate::metrics::Metrics;
use crate::proxy::UpstreamTls;

/// Grace given to a process that failed its health check before it is killed.
pub(crate) const FAILED_START_GRACE: Duration = Duration::from_secs(5);

/// Lines of output quoted in [`LaunchError::ExitedDuringStart`] and
/// [`LaunchError::Failed`].
const LAST_OUTPUT_LINES: usize = 20;

/// What callers ask of a model's owner task.
pub(crate) enum Request {
    /// Make the model ready; answered when it is (or cannot be).
    EnsureReady(oneshot::Sender<Result<(), LaunchError>>),
    /// Stop the process if there is one; answered when it is reaped.
    Stop {
        grace: Duration,
        done: oneshot::Sender<()>,
    },
    /// Free the model's memory: put a ready process to sleep when the model
    /// has a sleep mode (answered `Slept` once asleep), else as `Stop`
    /// (answered `Stopped`; `sleeping.rs`).
    Sleep {
        grace: Duration,
        done: oneshot::Sender<Released>,
    },
    /// Stop the process and end the task.
    Shutdown {
        grace: Duration,
        done: oneshot::Sender<()>,
    },
    /// Forget the model's recent failures (an explicit load): a failed
    /// model's next start is not refused, and no backoff holds it back.
    ClearFailures,
}

/// Whether the task keeps serving requests after a process lifetime ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Exit,
}

type Waiters = Vec<oneshot::Sender<Result<(), LaunchError>>>;

/// Why an upstream failed, as counted in `llamaswap_upstream_failures_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// A start failed: the process exited or missed its health check.
    StartFailed,
    /// A ready process exited by itself.
    Exited,
    /// One health check of a ready process failed or hung.
    HealthCheck,
    /// A ready process failed `healthCheckFailures` checks in a row.
    Unhealthy,
    /// `maxRestarts` failures within `restartWindow`: starts are refused.
    Failed,
}

impl Failure {
    fn label(self) -> &'static str {
        match self {
            Self::StartFailed => "start_failed",
            Self::Exited => "exited",
            Self::HealthCheck => "health_check",
            Self::Unhealthy => "unhealthy",
            Self::Failed => "failed",
        }
    }
}

/// The state owned by one model's task.
pub(crate) struct ModelActor {
    /// The definition of the process running now (or of the last one).
    pub(crate) spec: ProcessSpec,
    /// The definition the next start uses (a reload changes it).
    pub(crate) config: watch::Receiver<ActorConfig>,
    pub(crate) ring: Arc<LogRing>,
    pub(crate) requests: mpsc::Receiver<Request>,
    pub(crate) events: mpsc::Sender<UpstreamEvent>,
    pub(crate) status: watch::Sender<ProcessStatus>,
    pub(crate) cancel: CancellationToken,
    /// Set by `Supervisor::shutdown` to the instant by which every process must be gone.
    pub(crate) shutdown_at: watch::Receiver<Option<Instant>>,
    /// For health checks of an `https://` upstream.
    pub(crate) tls: Option<UpstreamTls>,
    /// Recent failures: the crash-loop backoff and the failed state.
    pub(crate) restarts: Restarts,
    /// Where the failed state is shown (every model's, shared).
    pub(crate) failed: Arc<FailedModels>,
    /// Where failures are counted.
    pub(crate) metrics: Option<Arc<Metrics>>,
}

impl ModelActor {
    /// Serves requests until shutdown, cancellation, or every sender is gone. Never
    /// returns with a process still running.
    pub(crate) async fn run(mut self) {
        loop {
            if !self.config.borrow().listed {
                // A reload removed the model and it has no process: nothing
                // will ask for it again.
                break;
            }
            let failed_until = self.restarts.failed_until(&self.spec.monitor);
            let request = tokio::select! {
                request = self.requests.recv() => request,
                () = self.cancel.cancelled() => None,
                // A reload removed it (checked at the top of the loop).
                Ok(()) = self.config.changed() => continue,
                // Its window has passed: failed no more.
                () = sleep_until(failed_until), if failed_until.is_some() => {
                    self.show_failure();
                    continue;
                }
            };
            match request {
                None => break,
                Some(Request::EnsureReady(reply)) => {
                    if self.run_process(vec![reply]).await == Flow::Exit {
                        break;
                    }
                }
                Some(Request::Stop { done, .. }) => {
                    let _ = done.send(());
                }
                Some(Request::Sleep { done, .. }) => {
                    let _ = done.send(Released::Stopped);
                }
                Some(Request::ClearFailures) => self.clear_failures(),
                Some(Request::Shutdown { done, .. }) => {
                    self.publish(ProcessState::ShutDown, None);
                    let _ = done.send(());
                    return;
                }
            }
        }
        self.publish(ProcessState::ShutDown, None);
        // Removed by a reload, or shut down: no longer shown.
        let model = &self.spec.model;
        self.failed
            .send_if_modified(|failed| failed.remove(model).is_some());
    }

    /// Records a failure of the model (`reason`, with its output since
    /// `output_mark`), counts it, and shows the failed state it may cause.
    fn record_failure(&mut self, reason: String, last_output: String) {
        let incident = Incident {
            reason,
            last_output,
            at_ms: unix_ms(),
        };
        if self
            .restarts
            .record(Instant::now(), &self.spec.monitor, incident)
        {
            self.count(Failure::Failed);
        }
        self.show_failure();
    }

    /// Forgets the model's failures (an explicit load).
    fn clear_failures(&mut self) {
        self.restarts.clear();
        self.show_failure();
    }

    /// Publishes the failed state as it is now (a change only).
    fn show_failure(&mut self) {
        let shown = self.restarts.shown(Instant::now(), &self.spec.monitor);
        let model = &self.spec.model;
        self.failed.send_if_modified(|failed| match shown {
            Some(shown) if failed.get(model) != Some(&shown) => {
                failed.insert(model.clone(), shown);
                true
            }
            Some(_) => false,
            None => failed.remove(model).is_some(),
        });
    }

    /// Graceful stop with `grace`, then forced; the process is reaped on return.
    async fn stop(&mut self, process: &mut Upstream, grace: Duration) {
        let pid = process.pid();
        self.publish(ProcessState::Stopping, Some(pid));
        let status = process
            .terminate(
                self.spec.cmd_stop.as_deref(),
                &self.spec.env,
                &self.ring,
                grace,
                &Cutoff {
                    cancel: self.cancel.clone(),
                    shutdown_at: self.shutdown_at.clone(),
                },
            )
            .await;
        tracing::info!(model = self.spec.model, pid, status = %describe_exit(&status), "upstream stopped");
        self.publish(ProcessState::Stopped, None);
    }

    /// Immediate SIGKILL to the group, for teardown without a grace period.
    async fn kill(&mut self, process: &mut Upstream) {
        let _ = process.kill_now().await;
        process.finish().await;
        self.publish(ProcessState::ShutDown, None);
    }

    /// Tells the router a ready model is gone; `Exit` when the task must end.
    async fn report_exit(&self, status: String) -> Flow {
        let event = UpstreamEvent::Exited {
            model: self.spec.model.clone(),
            status,
        };
        tokio::select! {
            // An error only means the router is gone; nobody to tell.
            _ = self.events.send(event) => Flow::Continue,
            () = self.cancel.cancelled() => Flow::Exit,
        }
    }

    /// The last lines the process wrote since `mark`, with the values of
    /// the model's `env` blanked out (they are quoted to clients by
    /// [`LaunchError::Failed`]).
    fn last_output(&self, mark: u64) -> String {
        let text = self
            .ring
            .tail_since(mark, LAST_OUTPUT_LINES)
            .iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        redact(text, &self.spec.env)
    }

    fn count(&self, failure: Failure) {
        if let Some(metrics) = &self.metrics {
            metrics.upstream_failure(&self.spec.model, failure.label());
        }
    }

    fn publish(&self, state: ProcessState, pid: Option<u32>) {
        self.status.send_replace(ProcessStatus { state, pid });
    }
}

/// Now, in ms since the Unix epoch.
fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Sleeps until `at`; never without one.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Environment values shorter than this are not blanked out: they are flags
/// and numbers (`1`, `true`, `0,1`), not secrets, and would blank out half
/// the text.
const MIN_REDACTED: usize = 8;

/// `text` with every value of `env` at least [`MIN_REDACTED`] bytes long
/// replaced by `[redacted]`.
fn redact(mut text: String, env: &[(String, String)]) -> String {
    for (_, value) in env {
        if value.len() >= MIN_REDACTED && text.contains(value.as_str()) {
            text = text.replace(value.as_str(), "[redacted]");
        }
    }
    text
}

fn answer(waiters: &mut Waiters, result: &Result<(), LaunchError>) {
    for reply in waiters.drain(..) {
        // A waiter that went away no longer needs the answer.
        let _ = reply.send(result.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoted_output_hides_long_environment_values_only() {
        let env = vec![
            ("HF_TOKEN".to_owned(), "hf_secretsecret".to_owned()),
            ("CUDA_VISIBLE_DEVICES".to_owned(), "0".to_owned()),
        ];
        let text = "login with hf_secretsecret failed on GPU 0".to_owned();
        assert_eq!(redact(text, &env), "login with [redacted] failed on GPU 0");
    }
}
