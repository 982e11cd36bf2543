//! Asleep (a model's `sleep:`, the calls in `upstream/sleep.rs`): the process
//! is kept while its GPU memory is freed; the next start wakes it and waits
//! for its health check. If sleeping or waking fails, the process is stopped
//! and, for a wake, started afresh: logged, never silent.

use std::time::Duration;

use tokio::sync::oneshot;

use super::{FAILED_START_GRACE, Flow, ModelActor, Request as ActorRequest};
use crate::launcher::{LaunchError, Released};
use crate::upstream::health::HealthTarget;
use crate::upstream::process::{Upstream, describe_exit};
use crate::upstream::sleep::{SleepCallError, call};
use crate::upstream::{ProcessState, SleepSpec};

/// How a sleep ended for the owner task.
pub(super) enum Slept {
    /// It woke for these waiters and passed its health check: ready again.
    Woke(Vec<oneshot::Sender<Result<(), LaunchError>>>),
    /// The process is gone (stopped, failed to sleep, exited); serve requests.
    Gone,
    /// It failed to wake and was stopped: start afresh for these waiters.
    Restart(Vec<oneshot::Sender<Result<(), LaunchError>>>),
    /// The task ends (shutdown, cancelled, every sender gone).
    Exit,
}

impl ModelActor {
    /// Puts the ready `process` to sleep (within `grace`), answers `done`, and
    /// keeps it asleep until it is woken, stopped or exits. Without a sleep
    /// mode, or when the sleep call fails, the process is stopped instead.
    pub(super) async fn sleep(
        &mut self,
        process: &mut Upstream,
        grace: Duration,
        done: oneshot::Sender<Released>,
    ) -> Slept {
        let model = self.spec.model.clone();
        let pid = process.pid();
        let Some(mode) = self.spec.sleep.clone() else {
            self.stop(process, grace).await;
            let _ = done.send(Released::Stopped);
            return Slept::Gone;
        };
        self.publish(ProcessState::Stopping, Some(pid));
        if let Err(error) = call(&self.spec.proxy, &mode.sleep, self.tls.as_ref(), grace).await {
            tracing::warn!(model, pid, %error, "upstream did not go to sleep; stopping it instead");
            self.stop(process, grace).await;
            let _ = done.send(Released::Stopped);
            return Slept::Gone;
        }
        tracing::info!(model, pid, "upstream asleep");
        self.publish(ProcessState::Sleeping, Some(pid));
        let _ = done.send(Released::Slept);
        loop {
            tokio::select! {
                () = self.cancel.cancelled() => {
                    self.kill(process).await;
                    return Slept::Exit;
                }
                request = self.requests.recv() => match request {
                    Some(ActorRequest::EnsureReady(reply)) => {
                        return self.wake(process, &mode, vec![reply]).await;
                    }
                    Some(ActorRequest::Sleep { done, .. }) => {
                        let _ = done.send(Released::Slept);
                    }
                    Some(ActorRequest::ClearFailures) => self.clear_failures(),
                    Some(ActorRequest::Stop { grace, done }) => {
                        self.stop(process, grace).await;
                        let _ = done.send(());
                        return Slept::Gone;
                    }
                    Some(ActorRequest::Shutdown { grace, done }) => {
                        self.stop(process, grace).await;
                        self.publish(ProcessState::ShutDown, None);
                        let _ = done.send(());
                        return Slept::Exit;
                    }
                    None => {
                        self.kill(process).await;
                        return Slept::Exit;
                    }
                },
                status = process.wait() => {
                    process.finish().await;
                    let status = describe_exit(&status);
                    tracing::warn!(model, pid, %status, "upstream exited while asleep");
                    self.publish(ProcessState::Stopped, None);
                    // The router counts it asleep until told: an exit like
                    // a ready model's, so it shows stopped everywhere.
                    return match self.report_exit(status).await {
                        Flow::Continue => Slept::Gone,
                        Flow::Exit => Slept::Exit,
                    };
                }
            }
        }
    }

    /// Wakes the sleeping `process` and waits for its health check.
    async fn wake(
        &mut self,
        process: &mut Upstream,
        mode: &SleepSpec,
        waiters: Vec<oneshot::Sender<Result<(), LaunchError>>>,
    ) -> Slept {
        let model = self.spec.model.clone();
        let pid = process.pid();
        let limit = self.spec.health_check_timeout;
        self.publish(ProcessState::Starting, Some(pid));
        let woke = async {
            call(&self.spec.proxy, &mode.wake, self.tls.as_ref(), limit).await?;
            let healthy = match &self.spec.check_endpoint {
                None => true,
                Some(endpoint) => {
                    match HealthTarget::new(&self.spec.proxy, endpoint, self.tls.as_ref()) {
                        Ok(target) => target.wait_healthy(limit).await,
                        Err(e) => return Err(SleepCallError::Url(e.to_string())),
                    }
                }
            };
            if healthy {
                Ok(())
            } else {
                Err(SleepCallError::Timeout {
                    url: self.spec.proxy.clone(),
                    limit,
                })
            }
        };
        let result = tokio::select! {
            biased;
            () = self.cancel.cancelled() => {
                self.kill(process).await;
                return Slept::Exit;
            }
            status = process.wait() => {
                process.finish().await;
                tracing::warn!(model, pid, status = %describe_exit(&status), "upstream exited while waking; starting it afresh");
                self.publish(ProcessState::Stopped, None);
                return Slept::Restart(waiters);
            }
            result = woke => result,
        };
        match result {
            Ok(()) => {
                tracing::info!(model, pid, "upstream woke");
                Slept::Woke(waiters)
            }
            Err(error) => {
                tracing::warn!(model, pid, %error, "upstream did not wake; stopping it and starting it afresh");
                self.stop(process, FAILED_START_GRACE).await;
                Slept::Restart(waiters)
            }
        }
    }
}
