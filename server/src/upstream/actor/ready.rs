//! Ready: serving until a stop, an exit, or (`healthCheckInterval`) too many
//! failed health checks in a row.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::sleeping::Slept;
use super::{Failure, Flow, ModelActor, Request, Waiters, answer};
use crate::upstream::ProcessState;
use crate::upstream::health::HealthTarget;
use crate::upstream::process::{Upstream, describe_exit};

type Check<'a> = Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

impl ModelActor {
    /// Serves the ready `process` (answering `waiters`) until it is stopped,
    /// exits, or turns unhealthy. `output_mark` is where its output began.
    pub(super) async fn serve(
        &mut self,
        mut process: Upstream,
        output_mark: u64,
        health: Option<HealthTarget>,
        mut waiters: Waiters,
    ) -> Flow {
        let model = self.spec.model.clone();
        let pid = process.pid();
        tracing::info!(
            model,
            pid,
            url = health.as_ref().map(HealthTarget::url),
            "upstream ready"
        );
        self.publish(ProcessState::Ready, Some(pid));
        answer(&mut waiters, &Ok(()));

        let monitor = self.spec.monitor;
        let watched = monitor.interval.zip(health);
        let mut check = next_check(watched.as_ref());
        let mut failed_checks: u32 = 0;
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
                    Some(Request::ClearFailures) => self.clear_failures(),
                    Some(Request::Stop { grace, done }) => {
                        self.stop(&mut process, grace).await;
                        let _ = done.send(());
                        return Flow::Continue;
                    }
                    Some(Request::Sleep { grace, done }) => {
                        // No checks while asleep (the pending one is
                        // not polled meanwhile); a new cycle after waking.
                        match self.sleep(&mut process, grace, done).await {
                            Slept::Woke(mut woken) => {
                                self.publish(ProcessState::Ready, Some(pid));
                                answer(&mut woken, &Ok(()));
                                failed_checks = 0;
                                check = next_check(watched.as_ref());
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
                    if monitor.interval.is_some() {
                        // Only a monitored model's exits count towards its
                        // backoff: an unmonitored one is started again by the
                        // next request, as llama-swap does.
                        self.count(Failure::Exited);
                        let last_output = self.last_output(output_mark);
                        self.record_failure(format!("exited ({status})"), last_output);
                    }
                    self.publish(ProcessState::Stopped, None);
                    return self.report_exit(status).await;
                }
                healthy = poll(check.as_mut()) => {
                    if healthy {
                        failed_checks = 0;
                    } else {
                        failed_checks += 1;
                        self.count(Failure::HealthCheck);
                        tracing::warn!(model, pid, failed = failed_checks, of = monitor.failures, "health check failed");
                    }
                    if failed_checks < monitor.failures {
                        check = next_check(watched.as_ref());
                        continue;
                    }
                    tracing::warn!(model, pid, checks = failed_checks, "upstream unhealthy: stopping it; its waiting requests start it again");
                    // Seen by the forwarding path at once: nothing more is
                    // sent to it (the router hears next).
                    self.publish(ProcessState::Stopping, Some(pid));
                    self.count(Failure::Unhealthy);
                    let last_output = self.last_output(output_mark);
                    let status = format!("unhealthy: {failed_checks} health checks in a row failed");
                    self.record_failure(status.clone(), last_output);
                    if self.report_exit(status).await == Flow::Exit {
                        self.kill(&mut process).await;
                        return Flow::Exit;
                    }
                    // Ends the requests forwarded to it (502 or an error frame).
                    self.stop(&mut process, monitor.stop_grace).await;
                    return Flow::Continue;
                }
            }
        }
    }
}

/// The next health check of a watched model: one interval, then one poll
/// bounded by the interval. `None` when the model is not watched.
fn next_check(watched: Option<&(Duration, HealthTarget)>) -> Option<Check<'_>> {
    let (interval, target) = watched?;
    let interval = *interval;
    Some(Box::pin(async move {
        tokio::time::sleep(interval).await;
        target.check(interval).await
    }))
}

/// The result of the pending check; never without one.
async fn poll(check: Option<&mut Check<'_>>) -> bool {
    match check {
        Some(check) => check.await,
        None => std::future::pending().await,
    }
}
