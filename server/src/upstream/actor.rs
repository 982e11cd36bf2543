//! The owner task of one model's process: the single writer of its state.
//!
//! Requests arrive on a channel and are handled one at a time. While a stop runs the
//! task does not read the channel, so a start asked for meanwhile is picked up only
//! once the stop is complete (llama-swap issue 946); while a start runs it keeps
//! reading, so a stop can abort the start.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::health::HealthTarget;
use super::logs::LogRing;
use super::orphans::Marker;
use super::port;
use super::process::{Cutoff, Upstream, describe_exit};
use super::sleep::Slept;
use super::{ActorConfig, ProcessSpec, ProcessState, ProcessStatus};
use crate::launcher::{LaunchError, UpstreamEvent};
use crate::proxy::UpstreamTls;

/// Grace given to a process that failed its health check before it is killed.
pub(crate) const FAILED_START_GRACE: Duration = Duration::from_secs(5);

/// Lines of output quoted in [`LaunchError::ExitedDuringStart`].
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
    /// has a sleep mode (answered once asleep), else as `Stop` (`sleep.rs`).
    Sleep {
        grace: Duration,
        done: oneshot::Sender<()>,
    },
    /// Stop the process and end the task.
    Shutdown {
        grace: Duration,
        done: oneshot::Sender<()>,
    },
}

/// Whether the task keeps serving requests after a process lifetime ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Exit,
}

type Waiters = Vec<oneshot::Sender<Result<(), LaunchError>>>;

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
            let request = tokio::select! {
                request = self.requests.recv() => request,
                () = self.cancel.cancelled() => None,
                // A reload removed it (checked at the top of the loop).
                Ok(()) = self.config.changed() => continue,
            };
            match request {
                None => break,
                Some(Request::EnsureReady(reply)) => {
                    if self.run_process(vec![reply]).await == Flow::Exit {
                        break;
                    }
                }
                Some(Request::Stop { done, .. } | Request::Sleep { done, .. }) => {
                    let _ = done.send(());
                }
                Some(Request::Shutdown { done, .. }) => {
                    self.publish(ProcessState::ShutDown, None);
                    let _ = done.send(());
                    return;
                }
            }
        }
        self.publish(ProcessState::ShutDown, None);
    }

    /// One process lifetime: spawn, start, ready, until it is stopped or exits.
    async fn run_process(&mut self, mut waiters: Waiters) -> Flow {
        // The whole lifetime uses one definition: the stop of a process started
        // before a reload is the one it was started with.
        let config = self.config.borrow_and_update().clone();
        self.spec = super::gpu::placed(config.spec, config.gpus.as_deref());
        self.tls = config.tls;
        let model = self.spec.model.clone();
        if self.shutdown_at.borrow().is_some() {
            // Queued before the shutdown request: starting now would be wasted work.
            answer(&mut waiters, &Err(LaunchError::ShuttingDown));
            return Flow::Continue;
        }
        let health = match &self.spec.check_endpoint {
            None => None,
            Some(endpoint) => {
                match HealthTarget::new(&self.spec.proxy, endpoint, self.tls.as_ref()) {
                    Ok(target) => Some(target),
                    Err(e) => {
                        answer(
                            &mut waiters,
                            &Err(LaunchError::SpawnFailed {
                                model,
                                reason: e.to_string(),
                            }),
                        );
                        return Flow::Continue;
                    }
                }
            }
        };
        if let Err(busy) =
            port::ensure_free_for(&self.spec.proxy, &self.spec.cmd, &self.spec.env).await
        {
            tracing::error!(model, error = %busy, "cannot start upstream");
            let reason = busy.to_string();
            answer(
                &mut waiters,
                &Err(LaunchError::PortInUse {
                    model,
                    port: busy.port,
                    holder: busy.holder.holder(),
                    reason,
                }),
            );
            return Flow::Continue;
        }
        // Taken before the spawn: the output pumps may push lines right away.
        let output_mark = self.ring.next_seq();
        let spawned = Upstream::spawn(
            &self.spec.cmd,
            &self.spec.env,
            &self.ring,
            Some(Marker::new(&model)),
        )
        .await;
        let mut process = match spawned {
            Ok(p) => p,
            Err(e) => {
                tracing::error!(model, error = %e, "cannot start upstream");
                let reason = e.to_string();
                answer(
                    &mut waiters,
                    &Err(LaunchError::SpawnFailed { model, reason }),
                );
                return Flow::Continue;
            }
        };
        let pid = process.pid();
        tracing::info!(model, pid, "upstream started");
        self.publish(ProcessState::Starting, Some(pid));

        let limit = self.spec.health_check_timeout;
        let health_url = health.as_ref().map(HealthTarget::url);
        let healthy = async move {
            match health {
                Some(target) => target.wait_healthy(limit).await,
                None => true,
            }
        };
        tokio::pin!(healthy);

        loop {
            tokio::select! {
                // An exit seen together with a passing health check wins: the
                // answer did not come from this model's process.
                biased;
                () = self.cancel.cancelled() => {
                    answer(&mut waiters, &Err(LaunchError::ShuttingDown));
                    self.kill(&mut process).await;
                    return Flow::Exit;
                }
                request = self.requests.recv() => match request {
                    Some(Request::EnsureReady(reply)) => waiters.push(reply),
                    Some(Request::Stop { grace, done } | Request::Sleep { grace, done }) => {
                        tracing::info!(model, pid, "start aborted by a stop");
                        answer(&mut waiters, &Err(LaunchError::Aborted { model }));
                        self.stop(&mut process, grace).await;
                        let _ = done.send(());
                        return Flow::Continue;
                    }
                    Some(Request::Shutdown { grace, done }) => {
                        answer(&mut waiters, &Err(LaunchError::ShuttingDown));
                        self.stop(&mut process, grace).await;
                        self.publish(ProcessState::ShutDown, None);
                        let _ = done.send(());
                        return Flow::Exit;
                    }
                    None => {
                        answer(&mut waiters, &Err(LaunchError::ShuttingDown));
                        self.kill(&mut process).await;
                        return Flow::Exit;
                    }
                },
                status = process.wait() => {
                    process.finish().await;
                    let status = describe_exit(&status);
                    let last_output = self.last_output(output_mark);
                    tracing::warn!(model, pid, %status, "upstream exited while starting");
                    self.publish(ProcessState::Stopped, None);
                    answer(&mut waiters, &Err(LaunchError::ExitedDuringStart { model, status, last_output }));
                    return Flow::Continue;
                }
                ok = &mut healthy => {
                    if ok {
                        break;
                    }
                    tracing::warn!(model, pid, url = health_url, timeout = ?limit, "upstream did not become healthy in time; stopping it");
                    self.stop(&mut process, FAILED_START_GRACE).await;
                    answer(&mut waiters, &Err(LaunchError::HealthCheckTimeout { model, timeout: limit }));
                    return Flow::Continue;
                }
            }
        }

        // Ready only while its own process lives: if it died meanwhile, whatever
        // answered the health check is not it.
        if let Some(status) = process.try_exited() {
            process.finish().await;
            let status = describe_exit(&status);
            let last_output = self.last_output(output_mark);
            tracing::warn!(model, pid, %status, "upstream exited while starting");
            self.publish(ProcessState::Stopped, None);
            answer(
                &mut waiters,
                &Err(LaunchError::ExitedDuringStart {
                    model,
                    status,
                    last_output,
                }),
            );
            return Flow::Continue;
        }
        tracing::info!(model, pid, url = health_url, "upstream ready");
        self.publish(ProcessState::Ready, Some(pid));
        answer(&mut waiters, &Ok(()));

        loop {
            tokio::select! {
                () = self.cancel.cancelled() => {
                    self.kill(&mut process).await;
                    return Flow::Exit;
                }
                request = self.requests.recv() => match request {
                    Some(Request::EnsureReady(reply)) => {
                        let _ = reply.send(Ok(()));
                    }
                    Some(Request::Stop { grace, done }) => {
                        self.stop(&mut process, grace).await;
                        let _ = done.send(());
                        return Flow::Continue;
                    }
                    Some(Request::Sleep { grace, done }) => {
                        match self.sleep(&mut process, grace, done).await {
                            Slept::Woke(mut woken) => {
                                self.publish(ProcessState::Ready, Some(pid));
                                answer(&mut woken, &Ok(()));
                            }
                            Slept::Gone => return Flow::Continue,
                            Slept::Restart(waiters) => {
                                return Box::pin(self.run_process(waiters)).await;
                            }
                            Slept::Exit => return Flow::Exit,
                        }
                    }
                    Some(Request::Shutdown { grace, done }) => {
                        self.stop(&mut process, grace).await;
                        self.publish(ProcessState::ShutDown, None);
                        let _ = done.send(());
                        return Flow::Exit;
                    }
                    None => {
                        self.kill(&mut process).await;
                        return Flow::Exit;
                    }
                },
                status = process.wait() => {
                    process.finish().await;
                    let status = describe_exit(&status);
                    tracing::warn!(model, pid, %status, "upstream exited unexpectedly");
                    self.publish(ProcessState::Stopped, None);
                    let event = UpstreamEvent::Exited { model, status };
                    tokio::select! {
                        // An error only means the router is gone; nobody to tell.
                        _ = self.events.send(event) => {}
                        () = self.cancel.cancelled() => return Flow::Exit,
                    }
                    return Flow::Continue;
                }
            }
        }
    }

    /// Graceful stop with `grace`, then forced; the process is reaped on return.
    pub(super) async fn stop(&mut self, process: &mut Upstream, grace: Duration) {
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
    pub(super) async fn kill(&mut self, process: &mut Upstream) {
        let _ = process.kill_now().await;
        process.finish().await;
        self.publish(ProcessState::ShutDown, None);
    }

    /// The last lines the process wrote since `mark`, for a failed start.
    fn last_output(&self, mark: u64) -> String {
        self.ring
            .tail_since(mark, LAST_OUTPUT_LINES)
            .iter()
            .map(|l| l.text.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }

    pub(super) fn publish(&self, state: ProcessState, pid: Option<u32>) {
        self.status.send_replace(ProcessStatus { state, pid });
    }
}

fn answer(waiters: &mut Waiters, result: &Result<(), LaunchError>) {
    for reply in waiters.drain(..) {
        // A waiter that went away no longer needs the answer.
        let _ = reply.send(result.clone());
    }
}
