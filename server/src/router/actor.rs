//! The actor task: owns the scheduler, turns events into scheduler calls and
//! effects into work on tasks it owns.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::future::join_all;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::{Id as TaskId, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::fast::Gates;
use super::serve_times::ServeTimes;
use super::ticket::{Lease, Notice, Ticket, Waiter};
use super::{Published, ReconfigureError, RouterOptions};
use crate::launcher::{LaunchError, Launcher, Released, UpstreamEvent};
use crate::metrics::Metrics;
use crate::priority::Priority;
use crate::scheduler::{
    Effect, GpuUsage, QueueEntry, RequestId, Restarts, RouteError, RunningModel, Scheduler,
    SchedulerSettings, StopId, StopModel, Tick, WaitStatus,
};

/// A request to the actor from a [`super::RouterHandle`].
pub(super) enum Command {
    Submit {
        model: String,
        priority: Priority,
        reply: oneshot::Sender<Result<Ticket, RouteError>>,
    },
    Queue {
        reply: oneshot::Sender<Vec<QueueEntry>>,
    },
    Running {
        reply: oneshot::Sender<Vec<RunningModel>>,
    },
    Gpus {
        reply: oneshot::Sender<Vec<GpuUsage>>,
    },
    Unload {
        models: Option<Vec<String>>,
        reply: oneshot::Sender<Result<(), RouteError>>,
    },
    Shutdown {
        reply: oneshot::Sender<()>,
    },
    Reconfigure {
        settings: Box<SchedulerSettings>,
        /// The launcher's side, called in the step: returns the models to restart.
        update: Box<dyn FnOnce() -> Restarts + Send>,
        reply: oneshot::Sender<Result<(), ReconfigureError>>,
    },
}

/// What an owned task reports when it ends.
enum TaskDone {
    Swap {
        model: String,
        /// Ready, with the slot count the upstream reported when it was asked.
        result: Result<Option<usize>, LaunchError>,
        /// The evicted models that could sleep but were stopped instead.
        not_slept: Vec<String>,
    },
    Stop {
        id: StopId,
    },
    /// The GPU memory a model's process uses, measured after its start.
    Measure {
        model: String,
        bytes: Option<u64>,
    },
}

/// What an owned task was doing, to report for it should it panic.
enum TaskKind {
    Swap { model: String },
    Stop { id: StopId },
    Measure,
}

struct Shutdown {
    /// The stop of every model, until it is done.
    stop: Option<StopId>,
    replies: Vec<oneshot::Sender<()>>,
}

pub(super) struct Actor {
    scheduler: Scheduler,
    launcher: Arc<dyn Launcher>,
    started: Instant,
    waiters: HashMap<RequestId, Waiter>,
    unloads: HashMap<StopId, Vec<oneshot::Sender<Result<(), RouteError>>>>,
    tasks: JoinSet<TaskDone>,
    task_kinds: HashMap<TaskId, TaskKind>,
    /// Cancels swaps in progress at shutdown, so that no start begins after the final stops.
    swaps_cancel: CancellationToken,
    notices_tx: mpsc::UnboundedSender<Notice>,
    /// Bumped after every step that may change the queue or the models' states
    /// ([`super::RouterHandle::changes`]).
    changes: watch::Sender<u64>,
    shutdown: Option<Shutdown>,
    metrics: Option<Arc<Metrics>>,
    /// Drain-fence holds already recorded into `metrics`.
    fence_seen: u64,
    /// When each swap in progress started, by target model.
    swap_started: HashMap<String, Instant>,
    /// Measured serve durations, for `Retry-After` on a full queue.
    serve_times: ServeTimes,
    /// The fast path's gates, one per model (see `fast.rs`).
    gates: Arc<Gates>,
    /// Where the names and gates are published to the handles.
    published: Arc<std::sync::RwLock<Published>>,
    /// The model IDs of earlier configurations by number, to place the fast
    /// leases of their gates that end after a reconfigure.
    past_ids: HashMap<u64, Vec<String>>,
}

/// One event the loop took.
enum Step {
    Notice(Notice),
    Task(Result<(TaskId, TaskDone), tokio::task::JoinError>),
    Upstream(UpstreamEvent),
    Command(Command),
    /// Every handle is gone.
    Orphaned,
    Wake,
}

impl Step {
    /// Whether the step may read or change what the fast path's gates
    /// publish: every step but the end of an absorbed fast grant (which with
    /// the gates open has nothing waiting to act on) and snapshots.
    fn closes_gates(&self) -> bool {
        !matches!(
            self,
            Self::Notice(Notice::FastDone { .. })
                | Self::Command(
                    Command::Queue { .. } | Command::Running { .. } | Command::Gpus { .. }
                )
        )
    }
}

impl Actor {
    pub(super) fn new(
        scheduler: Scheduler,
        launcher: Arc<dyn Launcher>,
        notices_tx: mpsc::UnboundedSender<Notice>,
        changes: watch::Sender<u64>,
        published: Arc<std::sync::RwLock<Published>>,
        options: RouterOptions,
    ) -> Self {
        let gates = Arc::clone(
            &published
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .gates,
        );
        Self {
            scheduler,
            launcher,
            started: gates.epoch(),
            waiters: HashMap::new(),
            unloads: HashMap::new(),
            tasks: JoinSet::new(),
            task_kinds: HashMap::new(),
            swaps_cancel: CancellationToken::new(),
            notices_tx,
            changes,
            shutdown: None,
            metrics: options.metrics,
            fence_seen: 0,
            swap_started: HashMap::new(),
            serve_times: ServeTimes::default(),
            gates,
            published,
            past_ids: HashMap::new(),
        }
    }

    /// The current index of model `t` of configuration `config`.
    fn current_index(&self, config: u64, t: usize) -> Option<usize> {
        if config == self.gates.config() {
            return Some(t);
        }
        let id = self.past_ids.get(&config)?.get(t)?;
        self.scheduler.model_index(id)
    }

    fn reconfigure(
        &mut self,
        settings: &SchedulerSettings,
        update: Box<dyn FnOnce() -> Restarts + Send>,
        reply: oneshot::Sender<Result<(), ReconfigureError>>,
    ) {
        if self.shutdown.is_some() {
            let _ = reply.send(Err(ReconfigureError::ShuttingDown));
            return;
        }
        if let Err(error) = Scheduler::new(settings) {
            let _ = reply.send(Err(error.into()));
            return;
        }
        let restarts = update();
        let before = self.scheduler.model_ids();
        let mut out = Vec::new();
        // Every gate is closed (this step closes them): nothing is granted
        // from the old indices meanwhile.
        match self
            .scheduler
            .reconfigure(self.now(), settings, &restarts, &mut out)
        {
            Err(error) => {
                let _ = reply.send(Err(error.into()));
                return;
            }
            Ok(_) => {
                let config = self.gates.config();
                self.past_ids.insert(config, before);
                let names = self.scheduler.names();
                let gates = Arc::new(Gates::new(
                    self.scheduler.model_ids().len(),
                    self.gates.epoch(),
                    config + 1,
                ));
                self.gates = Arc::clone(&gates);
                *self
                    .published
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Published { names, gates };
                tracing::info!(
                    restart = ?restarts.changed,
                    "router reconfigured: waiting requests and running models kept"
                );
                let _ = reply.send(Ok(()));
            }
        }
        self.apply(out);
    }

    fn now(&self) -> Tick {
        Tick::new(self.started.elapsed())
    }

    /// The event loop; returns once shutdown has stopped every model.
    pub(super) async fn run(
        mut self,
        mut commands: mpsc::Receiver<Command>,
        mut notices: mpsc::UnboundedReceiver<Notice>,
        mut events: mpsc::Receiver<UpstreamEvent>,
    ) {
        let mut commands_open = true;
        let mut events_open = true;
        loop {
            if self.shutdown_finished() {
                break;
            }
            let wake = self
                .scheduler
                .next_wake()
                .map(|tick| self.started + tick.since_start());
            let step = tokio::select! {
                biased;
                Some(notice) = notices.recv() => Step::Notice(notice),
                Some(done) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                    Step::Task(done)
                }
                event = events.recv(), if events_open => match event {
                    Some(event) => Step::Upstream(event),
                    None => {
                        events_open = false;
                        continue;
                    }
                },
                command = commands.recv(), if commands_open => match command {
                    Some(command) => Step::Command(command),
                    None => {
                        commands_open = false;
                        Step::Orphaned
                    }
                },
                () = sleep_until_opt(wake), if wake.is_some() => Step::Wake,
            };
            if step.closes_gates() {
                self.close_gates();
            }
            match step {
                Step::Notice(notice) => self.on_notice(notice),
                Step::Task(done) => self.on_task(done),
                Step::Upstream(event) => self.on_upstream(event),
                Step::Command(command) => self.on_command(command),
                // Every handle is gone: nobody can submit or shut down any more.
                Step::Orphaned => self.begin_shutdown(None),
                Step::Wake => {
                    let mut out = Vec::new();
                    self.scheduler.tick(self.now(), &mut out);
                    self.apply(out);
                }
            }
            self.open_gates();
        }
        // Nothing is granted any more; outstanding fast leases report to nobody.
        self.close_gates();
        if let Some(shutdown) = self.shutdown.take() {
            for reply in shutdown.replies {
                let _ = reply.send(());
            }
        }
    }

    fn shutdown_finished(&self) -> bool {
        self.shutdown
            .as_ref()
            .is_some_and(|s| s.stop.is_none() && self.tasks.is_empty())
    }

    fn on_notice(&mut self, notice: Notice) {
        let now = self.now();
        let mut out = Vec::new();
        match notice {
            Notice::Cancel(id) => {
                self.waiters.remove(&id);
                self.scheduler.cancel(now, id, &mut out);
            }
            Notice::ServeDone(id) => {
                self.serve_times.done(id);
                self.scheduler.serve_done(now, id, &mut out);
            }
            Notice::Refused { id, waiter } => {
                self.serve_times.forget(id);
                self.waiters.insert(id, waiter);
                self.scheduler.refused(now, id, &mut out);
            }
            Notice::FastDone { config, model } => {
                if let Some(t) = self.current_index(config, model) {
                    self.scheduler.fast_done(now, t, &mut out);
                }
            }
            Notice::FastRefused {
                config,
                model,
                id,
                priority,
                start,
                absorbed,
                waiter,
            } => match self.current_index(config, model) {
                Some(t) => {
                    self.waiters.insert(id, waiter);
                    self.scheduler
                        .fast_refused(now, t, id, priority, start, absorbed, &mut out);
                }
                None => {
                    let _ = waiter.grant.send(Err(RouteError::ShuttingDown));
                }
            },
        }
        self.apply(out);
    }

    /// Closes every open gate; the grants still outstanding in it become the
    /// scheduler's (it must see every request in flight before deciding).
    fn close_gates(&mut self) {
        for t in 0..self.gates.len() {
            self.close_gate(t);
        }
    }

    fn close_gate(&mut self, t: usize) {
        if let Some(closed) = self.gates.close(t) {
            self.scheduler
                .absorb_fast(t, closed.outstanding, closed.last_done.map(Tick::new));
        }
    }

    /// Opens the gate of every model a request would be granted at once for
    /// (and closes any other, which only a step that keeps gates open reaches).
    fn open_gates(&mut self) {
        for t in 0..self.gates.len() {
            match self.scheduler.fast_cap(t) {
                Some(cap) => self.gates.open(t, cap),
                None => self.close_gate(t),
            }
        }
    }

    fn on_task(&mut self, done: Result<(TaskId, TaskDone), tokio::task::JoinError>) {
        let done = match done {
            Ok((id, done)) => {
                self.task_kinds.remove(&id);
                done
            }
            Err(error) => match self.task_kinds.remove(&error.id()) {
                Some(TaskKind::Swap { model }) => TaskDone::Swap {
                    result: Err(LaunchError::SpawnFailed {
                        model: model.clone(),
                        reason: format!("the launcher failed: {error}"),
                    }),
                    model,
                    not_slept: Vec::new(),
                },
                Some(TaskKind::Stop { id }) => TaskDone::Stop { id },
                Some(TaskKind::Measure) | None => return,
            },
        };
        let now = self.now();
        let mut out = Vec::new();
        match done {
            TaskDone::Swap {
                model,
                result,
                not_slept,
            } => {
                for evicted in &not_slept {
                    tracing::info!(model = %evicted, "stopped instead of put to sleep: shown as stopped");
                    self.scheduler.stopped_not_slept(evicted);
                }
                let took = self
                    .swap_started
                    .remove(&model)
                    .map(|started| started.elapsed())
                    .unwrap_or_default();
                if let Err(error) = &result {
                    tracing::warn!(%model, %error, ?took, "model start failed");
                } else {
                    tracing::debug!(%model, ?took, "model ready");
                }
                if let Some(metrics) = &self.metrics {
                    metrics.swap(&model, result.is_ok(), took);
                }
                if let Ok(slots) = &result
                    && self.scheduler.wants_slots(&model)
                {
                    match slots {
                        Some(n) => {
                            tracing::info!(%model, slots = n, "parallel: auto: the upstream serves {n} at once")
                        }
                        None => {
                            tracing::warn!(%model, "parallel: auto: the upstream did not report its slots (GET /props total_slots); no limit")
                        }
                    }
                    self.scheduler.set_slots(&model, *slots);
                }
                let ready = result.is_ok();
                self.scheduler
                    .swap_done(now, &model, result.map(|_| ()), &mut out);
                if ready && self.scheduler.placement(&model).is_some() {
                    self.spawn_measure(model);
                }
            }
            TaskDone::Measure { model, bytes } => self.on_measure(&model, bytes, &mut out),
            TaskDone::Stop { id } => {
                self.scheduler.stop_done(id, &mut out);
                for reply in self.unloads.remove(&id).unwrap_or_default() {
                    let _ = reply.send(Ok(()));
                }
                if let Some(shutdown) = self.shutdown.as_mut()
                    && shutdown.stop == Some(id)
                {
                    shutdown.stop = None;
                }
            }
        }
        self.apply(out);
    }

    fn on_upstream(&mut self, event: UpstreamEvent) {
        let mut out = Vec::new();
        match event {
            UpstreamEvent::Exited { model, status } => {
                tracing::info!(%model, %status, "upstream exited by itself; the next request starts it again");
                self.scheduler.upstream_exited(&model, &mut out);
            }
        }
        self.apply(out);
    }

    fn on_command(&mut self, command: Command) {
        let now = self.now();
        match command {
            Command::Submit {
                model,
                priority,
                reply,
            } => self.submit(now, &model, priority, reply),
            Command::Queue { reply } => {
                let _ = reply.send(self.scheduler.queue(now));
            }
            Command::Running { reply } => {
                let mut running = self.scheduler.running();
                // Fast grants the scheduler has not absorbed are in flight too.
                let ids = self.scheduler.names();
                for model in &mut running {
                    if let Some(t) = ids.index(&model.model) {
                        model.in_flight += self.gates.counted(t);
                    }
                }
                let _ = reply.send(running);
            }
            Command::Gpus { reply } => {
                let _ = reply.send(self.scheduler.gpu_usage());
            }
            Command::Unload { models, reply } => {
                let mut out = Vec::new();
                match self.scheduler.unload(now, models.as_deref(), &mut out) {
                    Err(error) => {
                        let _ = reply.send(Err(error));
                    }
                    Ok(None) => {
                        let _ = reply.send(Ok(()));
                    }
                    Ok(Some(id)) => self.unloads.entry(id).or_default().push(reply),
                }
                self.apply(out);
            }
            Command::Shutdown { reply } => self.begin_shutdown(Some(reply)),
            Command::Reconfigure {
                settings,
                update,
                reply,
            } => self.reconfigure(&settings, update, reply),
        }
    }

    fn submit(
        &mut self,
        now: Tick,
        model: &str,
        priority: Priority,
        reply: oneshot::Sender<Result<Ticket, RouteError>>,
    ) {
        let mut out = Vec::new();
        let submitted = self.scheduler.submit(now, model, priority, &mut out);
        let admitted = match submitted {
            Ok(admitted) => admitted,
            Err(RouteError::QueueFull { model, waiting, .. }) => {
                let retry_after =
                    self.serve_times
                        .retry_after(&model, waiting, self.scheduler.in_flight(&model));
                tracing::info!(%model, waiting, ?retry_after, "queue full: request refused");
                let _ = reply.send(Err(RouteError::QueueFull {
                    model,
                    waiting,
                    retry_after,
                }));
                return;
            }
            Err(error) => {
                let _ = reply.send(Err(error));
                return;
            }
        };
        let (waiter, ticket) = Waiter::pair(
            admitted.id,
            admitted.model,
            admitted.effective_priority,
            self.notices_tx.clone(),
        );
        self.waiters.insert(admitted.id, waiter);
        self.apply(out);
        // If the submitter is gone, dropping the ticket cancels the request (or, if it
        // was already granted, drops its lease): nothing leaks.
        let _ = reply.send(Ok(ticket));
    }

    fn begin_shutdown(&mut self, reply: Option<oneshot::Sender<()>>) {
        if let Some(shutdown) = self.shutdown.as_mut() {
            shutdown.replies.extend(reply);
            return;
        }
        tracing::info!("router shutting down");
        self.swaps_cancel.cancel();
        let mut out = Vec::new();
        let stop = self.scheduler.shutdown(self.now(), &mut out);
        self.shutdown = Some(Shutdown {
            stop,
            replies: reply.into_iter().collect(),
        });
        self.apply(out);
    }

    fn apply(&mut self, effects: Vec<Effect>) {
        // Every state-changing step ends here. No receivers is fine: nobody watches.
        self.changes.send_modify(|generation| *generation += 1);
        let holds = self.scheduler.fence_holds();
        if let Some(metrics) = &self.metrics {
            metrics.fence_holds(holds.saturating_sub(self.fence_seen));
        }
        self.fence_seen = holds;
        for effect in effects {
            match effect {
                Effect::Grant { id, model } => {
                    self.serve_times.granted(id, &model);
                    // Built even without a waiter, so that dropping it reports the end.
                    let waiter = self.waiters.remove(&id);
                    let effective = waiter.as_ref().map_or(0, |w| w.effective_priority);
                    let lease = Lease::new(id, model, effective, self.notices_tx.clone());
                    if let Some(waiter) = waiter {
                        waiter.status.send_replace(WaitStatus::Granted);
                        let _ = waiter.grant.send(Ok(lease));
                    }
                }
                Effect::Fail { id, error } => {
                    if let Some(waiter) = self.waiters.remove(&id) {
                        let _ = waiter.grant.send(Err(error));
                    }
                }
                Effect::Positions { changes } => {
                    for (id, position) in changes {
                        if let Some(waiter) = self.waiters.get(&id) {
                            waiter.status.send_replace(WaitStatus::Queued { position });
                        }
                    }
                }
                Effect::Status { id, status } => {
                    if let Some(waiter) = self.waiters.get(&id) {
                        waiter.status.send_replace(status);
                    }
                }
                Effect::StartSwap { model, evict } => self.spawn_swap(model, evict),
                Effect::Stop { id, batches } => self.spawn_stop(id, batches),
            }
        }
    }

    fn spawn_swap(&mut self, model: String, evict: Vec<StopModel>) {
        // The one line per swap: what goes, what comes, the request it is for,
        // and why the policy chose those evictions (the matrix's set and cost).
        let stops = evict;
        let evict: Vec<&str> = stops.iter().map(|s| s.model.as_str()).collect();
        let why = self
            .scheduler
            .swap_reason(&model)
            .map(|reason| format!(" ({reason})"))
            .unwrap_or_default();
        match self.scheduler.swap_trigger(&model) {
            Some((id, priority, effective)) => tracing::info!(
                %model,
                evicted = ?evict,
                for_request = id.0,
                requested_priority = priority.requested(),
                effective_priority = effective,
                "swap: starting {model}, stopping {evict:?} first{why}"
            ),
            None => {
                tracing::info!(%model, evicted = ?evict, "swap: starting {model}, stopping {evict:?} first{why}")
            }
        }
        self.swap_started.insert(model.clone(), Instant::now());
        let launcher = Arc::clone(&self.launcher);
        let cancel = self.swaps_cancel.clone();
        let target = model.clone();
        let ask_slots = self.scheduler.wants_slots(&model);
        let gpus = self.scheduler.placement(&model);
        let handle = self.tasks.spawn(async move {
            let mut not_slept = Vec::new();
            let work = async {
                // A model with a sleep mode sleeps instead of stopping (one
                // asleep already that the memory router evicts stops for
                // good); each gets its own unloadTimeout as grace.
                let released = join_all(stops.iter().map(|s| {
                    if s.may_sleep {
                        launcher.release(&s.model, s.grace)
                    } else {
                        let stop = launcher.stop(&s.model, s.grace);
                        Box::pin(async move {
                            stop.await;
                            Released::Stopped
                        })
                    }
                }))
                .await;
                // The scheduler counts a model asleep only if it slept.
                not_slept = stops
                    .iter()
                    .zip(released)
                    .filter(|(s, r)| s.may_sleep && *r != Released::Slept)
                    .map(|(s, _)| s.model.clone())
                    .collect();
                match &gpus {
                    Some(gpus) => launcher.ensure_ready_on(&target, gpus).await?,
                    None => launcher.ensure_ready(&target).await?,
                }
                Ok(if ask_slots {
                    launcher.slots(&target).await
                } else {
                    None
                })
            };
            let result = tokio::select! {
                biased;
                () = cancel.cancelled() => Err(LaunchError::ShuttingDown),
                result = work => result,
            };
            TaskDone::Swap {
                model: target,
                result,
                not_slept,
            }
        });
        self.task_kinds
            .insert(handle.id(), TaskKind::Swap { model });
    }

    /// Measures the GPU memory of `model`, just started under the memory
    /// router, on a task of its own (the grant does not wait for it).
    fn spawn_measure(&mut self, model: String) {
        let launcher = Arc::clone(&self.launcher);
        let cancel = self.swaps_cancel.clone();
        let handle = self.tasks.spawn(async move {
            let bytes = tokio::select! {
                biased;
                () = cancel.cancelled() => None,
                bytes = launcher.gpu_memory(&model) => bytes,
            };
            TaskDone::Measure { model, bytes }
        });
        self.task_kinds.insert(handle.id(), TaskKind::Measure);
    }

    fn on_measure(&mut self, model: &str, bytes: Option<u64>, out: &mut Vec<Effect>) {
        let Some(bytes) = bytes else {
            return;
        };
        let Some(m) = self.scheduler.measured(model, bytes, out) else {
            return;
        };
        let (measured_mib, estimate_mib, counted_mib) =
            (m.measured >> 20, m.estimate >> 20, m.counted >> 20);
        if m.measured > m.estimate {
            tracing::warn!(
                %model,
                measured_mib,
                estimate_mib,
                counted_mib,
                "model uses more GPU memory than its memory estimate: placement counts {counted_mib} MiB from now on; raise models.{model}.memory"
            );
        } else {
            tracing::info!(%model, measured_mib, estimate_mib, "GPU memory measured within the estimate");
        }
    }

    fn spawn_stop(&mut self, id: StopId, batches: Vec<Vec<StopModel>>) {
        tracing::info!(?batches, "stopping models");
        let launcher = Arc::clone(&self.launcher);
        let handle = self.tasks.spawn(async move {
            for batch in batches {
                join_all(batch.iter().map(|s| launcher.stop(&s.model, s.grace))).await;
            }
            TaskDone::Stop { id }
        });
        self.task_kinds.insert(handle.id(), TaskKind::Stop { id });
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}
