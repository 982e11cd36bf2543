    /// One process lifetime: spawn, start, ready, until it is stopped or exits.
    /// A start that fails is retried after its backoff for the same waiters
    /// when the model is monitored (see [`super::monitor`]).
    async fn run_process(&mut self, mut waiters: Waiters) -> Flow {
        // The whole lifetime uses one definition: the stop of a process started
        // before a reload is the one it was started with.
        let config = self.config.borrow_and_update().clone();
        self.spec = config.spec;
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
        let (mut process, output_mark) = loop {
            if let Some(flow) = self.wait_for_turn(&mut waiters).await {
                return flow;
            }
            match self.start(&mut waiters, health.as_ref()).await {
                Ok(started) => break started,
                Err(Attempt::Over(flow)) => return flow,
                Err(Attempt::Failed(error)) => {
                    let now = Instant::now();
                    let monitor = self.spec.monitor;
                    let last_output = match &error {
                        LaunchError::ExitedDuringStart { last_output, .. } => last_output.clone(),
                        _ => String::new(),
                    };
                    self.restarts.record(now, &monitor, last_output);
                    self.count_restart("start_failed");
                    let failed = self.restarts.is_failed(now, &monitor);
                    if monitor.interval.is_some() && !failed && !waiters.is_empty() {
                        tracing::warn!(model, error = %error, "start failed; retrying after its backoff for the requests waiting");
                        continue;
                    }
                    let error = match self.restarts.gate(now, &monitor) {
                        Gate::Failed {
                            failures,
                            last_output,
                        } => self.failed(failures, last_output),
                        Gate::Go | Gate::At(_) => error,
                    };
                    answer(&mut waiters, &Err(error));
                    return Flow::Continue;
                }
            }
        };
        let pid = process.pid();
        let health_url = health.as_ref().map(HealthTarget::url);
        tracing::info!(model, pid, url = health_url, "upstream ready");
        self.publish(ProcessState::Ready, Some(pid));
        answer(&mut waiters, &Ok(()));
        drop(output_mark);

        let monitor = self.spec.monitor;
        let watched = monitor.interval.zip(health);
        let mut ticks = watched.as_ref().map(|(interval, _)| {
            let mut ticks = tokio::time::interval_at(Instant::now() + *interval, *interval);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks
        });
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
                    Some(Request::Stop { grace, done }) => {
                        self.stop(&mut process, grace).await;
                        let _ = done.send(());
                        return Flow::Continue;
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
                    self.restarts.record(Instant::now(), &monitor, self.ring_tail());
                    self.count_restart("exited");
                    self.publish(ProcessState::Stopped, None);
                    return self.report_exit(UpstreamEvent::Exited { model, status }).await;
                }
                () = tick(ticks.as_mut()) => {
                    let Some((interval, target)) = &watched else { continue };
                    // Polled here, so requests and the process's exit wait at
                    // most one interval (the poll's bound) to be seen.
                    if target.check(*interval).await {
                        failed_checks = 0;
                        continue;
                    }
                    failed_checks += 1;
                    self.count_health_failure();
                    tracing::warn!(model, pid, failed = failed_checks, of = monitor.failures, "health check failed");
                    if failed_checks < monitor.failures {
                        continue;
                    }
                    tracing::warn!(model, pid, checks = failed_checks, "upstream unhealthy: stopping it; its waiting requests start it again");
                    self.restarts.record(Instant::now(), &monitor, self.ring_tail());
                    self.count_restart("unhealthy");
                    // Told first: it grants nothing more while it stops.
                    let status = format!("unhealthy after {failed_checks} failed health checks");
                    let event = UpstreamEvent::Exited { model, status };
                    if self.report_exit(event).await == Flow::Exit {
                        self.kill(&mut process).await;
                        return Flow::Exit;
                    }
                    self.stop(&mut process, monitor.stop_grace).await;
                    return Flow::Continue;
                }
            }
        }
    }

    /// Waits out the crash-loop backoff before a start; refuses it when the
    /// model is failed. `Some` when the waiters have been answered.
    async fn wait_for_turn(&mut self, waiters: &mut Waiters) -> Option<Flow> {
        let monitor = self.spec.monitor;
        if self
            .clear_failures
            .swap(false, std::sync::atomic::Ordering::AcqRel)
        {
            self.restarts.clear();
        }
        let at = match self.restarts.gate(Instant::now(), &monitor) {
            Gate::Go => return None,
            Gate::Failed {
                failures,
                last_output,
            } => {
                let error = self.failed(failures, last_output);
                answer(waiters, &Err(error));
                return Some(Flow::Continue);
            }
            Gate::At(at) => at,
        };
        let model = self.spec.model.clone();
        tracing::info!(model, wait = ?at.saturating_duration_since(Instant::now()), "start held back after recent failures");
        loop {
            tokio::select! {
                biased;
                () = self.cancel.cancelled() => {
                    answer(waiters, &Err(LaunchError::ShuttingDown));
                    return Some(Flow::Exit);
                }
                request = self.requests.recv() => match request {
                    Some(Request::EnsureReady(reply)) => waiters.push(reply),
                    Some(Request::Stop { done, .. }) => {
                        answer(waiters, &Err(LaunchError::Aborted { model }));
                        let _ = done.send(());
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
                    Some(Request::Stop { grace, done }) => {
                        tracing::info!(model, pid, "start aborted by a stop");
                        answer(waiters, &Err(LaunchError::Aborted { model }));
                        self.stop(&mut process, grace).await;
                        let _ = done.send(());
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
                    let status = describe_exit(&status);
                    let last_output = self.last_output(output_mark);
                    tracing::warn!(model, pid, %status, "upstream exited while starting");
                    self.publish(ProcessState::Stopped, None);
                    return Err(Attempt::Failed(LaunchError::ExitedDuringStart { model, status, last_output }));
                }
                ok = &mut healthy => {
                    if ok {
                        break;
                    }
                    tracing::warn!(model, pid, url = health_url, timeout = ?limit, "upstream did not become healthy in time; stopping it");
                    self.stop(&mut process, FAILED_START_GRACE).await;
                    return Err(Attempt::Failed(LaunchError::HealthCheckTimeout { model, timeout: limit }));
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
            return Err(Attempt::Failed(LaunchError::ExitedDuringStart {
                model,
                status,
                last_output,
            }));
        }
        Ok((process, output_mark))
    }

    /// Tells the router a ready model is gone; `Exit` when the task must end.
    async fn report_exit(&self, event: UpstreamEvent) -> Flow {
        tokio::select! {
            // An error only means the router is gone; nobody to tell.
            _ = self.events.send(event) => Flow::Continue,
            () = self.cancel.cancelled() => Flow::Exit,
        }
    }

    /// The refusal of a start while the model is failed.
    fn failed(&self, failures: u32, last_output: String) -> LaunchError {
        let model = self.spec.model.clone();
        tracing::warn!(model, failures, "model failed: starts are refused until its restart window has passed or it is loaded explicitly");
        LaunchError::Failed {
            model,
            failures,
            window: self.spec.monitor.restart_window,
            last_output,
        }
    }

    /// The last lines of output, for a failure of a ready process.
    fn ring_tail(&self) -> String {
        let mark = self.ring.next_seq().saturating_sub(LAST_OUTPUT_LINES as u64);
        self.last_output(mark)
    }

    fn count_restart(&self, reason: &'static str) {
        if let Some(metrics) = &self.metrics {
            metrics.upstream_failure(&self.spec.model, reason);
        }
    }

    fn count_health_failure(&self) {
        if let Some(metrics) = &self.metrics {
            metrics.upstream_failure(&self.spec.model, "health_check");
        }
    }
