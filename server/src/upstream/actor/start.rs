//! Starting: the crash-loop backoff and the failed state (`monitor.rs`), the
//! spawn, and the wait for the health check.

use tokio::time::Instant;

use super::{FAILED_START_GRACE, Failure, Flow, ModelActor, Request, Waiters, answer};
use crate::launcher::{LaunchError, Released};
use crate::upstream::ProcessState;
use crate::upstream::health::HealthTarget;
use crate::upstream::monitor::Gate;
use crate::upstream::orphans::Marker;
use crate::upstream::port;
use crate::upstream::process::{Upstream, describe_exit};

/// How a start attempt ended when it did not make the model ready.
enum Attempt {
    /// The process exited or missed its health check: a failure of the model.
    Failed {
        error: LaunchError,
        /// One line for the failed state.
        reason: String,
        last_output: String,
    },
    /// Answered already (a stop, a shutdown, a spawn that could not happen):
    /// nothing more to do.
    Over(Flow),
}

impl ModelActor {
    /// One process lifetime: spawn, start, ready, until it is stopped or exits.
    /// A start that fails is retried after its backoff, for the same waiters,
    /// when the model is monitored (`healthCheckInterval`).
    pub(super) async fn run_process(&mut self, mut waiters: Waiters) -> Flow {
        // The whole lifetime uses one definition: the stop of a process started
        // before a reload is the one it was started with.
        let config = self.config.borrow_and_update().clone();
        self.spec = crate::upstream::gpu::placed(config.spec, config.gpus.as_deref());
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
        let (process, output_mark) = loop {
            if let Some(flow) = self.wait_for_turn(&mut waiters).await {
                return flow;
            }
            let (error, reason, last_output) = match self.start(&mut waiters, health.as_ref()).await
            {
                Ok(started) => break started,
                Err(Attempt::Over(flow)) => return flow,
                Err(Attempt::Failed {
                    error,
                    reason,
                    last_output,
                }) => (error, reason, last_output),
            };
            let monitor = self.spec.monitor;
            self.count(Failure::StartFailed);
            self.record_failure(reason, last_output);
            if let Gate::Failed { .. } = self.restarts.gate(Instant::now(), &monitor) {
                // Answered by the refusal at the top of the loop.
                continue;
            }
            waiters.retain(|waiter| !waiter.is_closed());
            if monitor.interval.is_some() && !waiters.is_empty() {
                tracing::warn!(model, %error, "start failed; starting it again after its backoff for the requests waiting");
                continue;
            }
            answer(&mut waiters, &Err(error));
            return Flow::Continue;
        };
        self.serve(process, output_mark, health, waiters).await
    }

    /// Waits out the crash-loop backoff before a start, or refuses it when
    /// the model is failed. `Some` when the waiters have been answered.
    async fn wait_for_turn(&mut self, waiters: &mut Waiters) -> Option<Flow> {
        let model = self.spec.model.clone();
        loop {
            let monitor = self.spec.monitor;
            let gate = self.restarts.gate(Instant::now(), &monitor);
            // The window may have passed just now.
            self.show_failure();
            let at = match gate {
                Gate::Go => return None,
                Gate::Failed {
                    failures,
                    last_output,
                } => {
                    tracing::warn!(model, failures, window = ?monitor.restart_window, "start refused: the model failed; it is started again once its restartWindow has passed since the last failure, or on an explicit load");
                    let error = LaunchError::Failed {
                        model,
                        failures,
                        window: monitor.restart_window,
                        last_output,
                    };
                    answer(waiters, &Err(error));
                    return Some(Flow::Continue);
                }
                Gate::At(at) => at,
            };
            tracing::info!(model, wait = ?at.saturating_duration_since(Instant::now()), "start held back after recent failures (crash-loop backoff)");
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => {
                    answer(waiters, &Err(LaunchError::ShuttingDown));
                    return Some(Flow::Exit);
                }
                request = self.requests.recv() => match request {
                    Some(Request::EnsureReady(reply)) => waiters.push(reply),
                    // Asked again: an explicit load starts it now.
                    Some(Request::ClearFailures) => self.clear_failures(),
                    Some(Request::Stop { done, .. }) => {
                        answer(waiters, &Err(LaunchError::Aborted { model }));
                        let _ = done.send(());
                        return Some(Flow::Continue);
                    }
                    Some(Request::Sleep { done, .. }) => {
                        answer(waiters, &Err(LaunchError::Aborted { model }));
                        let _ = done.send(Released::Stopped);
                        return Some(Flow::Continue);
                    }
                    Some(Request::Shutdown { done, .. }) => {
                        answer(waiters, &Err(LaunchError::ShuttingDown));
                        self.publish(ProcessState::ShutDown, None);
                        let _ = done.send(());
                        return Some(Flow::Exit);
                    }
                    None => {
                        answer(waiters, &Err(LaunchError::ShuttingDown));
                        return Some(Flow::Exit);
                    }
                },
                () = tokio::time::sleep_until(at) => return None,
            }
        }
    }

    /// Spawns the process and waits for its health check: the ready process
    /// and where its output began, or why not.
    async fn start(
        &mut self,
        waiters: &mut Waiters,
        health: Option<&HealthTarget>,
    ) -> Result<(Upstream, u64), Attempt> {
        let model = self.spec.model.clone();
        if let Err(busy) =
            port::ensure_free_for(&self.spec.proxy, &self.spec.cmd, &self.spec.env).await
        {
            tracing::error!(model, error = %busy, "cannot start upstream");
            let reason = busy.to_string();
            answer(
                waiters,
                &Err(LaunchError::PortInUse {
                    model,
                    port: busy.port,
                    holder: busy.holder.holder(),
                    reason,
                }),
            );
            return Err(Attempt::Over(Flow::Continue));
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
                answer(waiters, &Err(LaunchError::SpawnFailed { model, reason }));
                return Err(Attempt::Over(Flow::Continue));
            }
        };
        let pid = process.pid();
        tracing::info!(model, pid, "upstream started");
        self.publish(ProcessState::Starting, Some(pid));

        let limit = self.spec.health_check_timeout;
        let health_url = health.map(HealthTarget::url);
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
                    answer(waiters, &Err(LaunchError::ShuttingDown));
                    self.kill(&mut process).await;
                    return Err(Attempt::Over(Flow::Exit));
                }
                request = self.requests.recv() => match request {
                    Some(Request::EnsureReady(reply)) => waiters.push(reply),
                    Some(Request::ClearFailures) => self.clear_failures(),
                    Some(Request::Stop { grace, done }) => {
                        tracing::info!(model, pid, "start aborted by a stop");
                        answer(waiters, &Err(LaunchError::Aborted { model }));
                        self.stop(&mut process, grace).await;
                        let _ = done.send(());
                        return Err(Attempt::Over(Flow::Continue));
                    }
                    Some(Request::Sleep { grace, done }) => {
                        tracing::info!(model, pid, "start aborted by a stop");
                        answer(waiters, &Err(LaunchError::Aborted { model }));
                        self.stop(&mut process, grace).await;
                        let _ = done.send(Released::Stopped);
                        return Err(Attempt::Over(Flow::Continue));
                    }
                    Some(Request::Shutdown { grace, done }) => {
                        answer(waiters, &Err(LaunchError::ShuttingDown));
                        self.stop(&mut process, grace).await;
                        self.publish(ProcessState::ShutDown, None);
                        let _ = done.send(());
                        return Err(Attempt::Over(Flow::Exit));
                    }
                    None => {
                        answer(waiters, &Err(LaunchError::ShuttingDown));
                        self.kill(&mut process).await;
                        return Err(Attempt::Over(Flow::Exit));
                    }
                },
                status = process.wait() => {
                    process.finish().await;
                    return Err(self.exited_while_starting(pid, &describe_exit(&status), output_mark));
                }
                ok = &mut healthy => {
                    if ok {
                        break;
                    }
                    tracing::warn!(model, pid, url = health_url, timeout = ?limit, "upstream did not become healthy in time; stopping it");
                    self.stop(&mut process, FAILED_START_GRACE).await;
                    let last_output = self.last_output(output_mark);
                    let reason = format!("did not become healthy within {limit:?}");
                    let error = LaunchError::HealthCheckTimeout { model, timeout: limit };
                    return Err(Attempt::Failed { error, reason, last_output });
                }
            }
        }

        // Ready only while its own process lives: if it died meanwhile, whatever
        // answered the health check is not it.
        if let Some(status) = process.try_exited() {
            process.finish().await;
            return Err(self.exited_while_starting(pid, &describe_exit(&status), output_mark));
        }
        Ok((process, output_mark))
    }

    /// The failure of a start whose process exited.
    fn exited_while_starting(&self, pid: u32, status: &str, output_mark: u64) -> Attempt {
        let model = self.spec.model.clone();
        let last_output = self.last_output(output_mark);
        tracing::warn!(model, pid, %status, "upstream exited while starting");
        self.publish(ProcessState::Stopped, None);
        let error = LaunchError::ExitedDuringStart {
            model,
            status: status.to_owned(),
            last_output: last_output.clone(),
        };
        Attempt::Failed {
            error,
            reason: format!("exited while starting ({status})"),
            last_output,
        }
    }
}
