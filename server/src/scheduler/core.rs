//! The scheduler state and its event handlers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use super::model::{Model, Queued, Request, RequestState};
use super::names::ModelNames;
use super::{
    Admitted, CONCURRENCY_RETRY_AFTER, Effect, ModelState, QueueEntry, RequestId, ResidencyYield,
    RouteError, RunningModel, SchedulerKind, SchedulerSettings, SettingsError, StopId, Tick,
    WaitReason, WaitStatus,
};
use crate::launcher::LaunchError;
use crate::policy::matrix::Matrix;
use crate::policy::{EvictionPolicy, Groups};
use crate::priority::Priority;

/// The pure scheduling state machine (see the module docs for the rules).
///
/// Every method takes the current [`Tick`] where time matters and appends what the
/// router must do to `out`; nothing here performs I/O or reads a clock.
#[derive(Debug)]
pub struct Scheduler {
    pub(super) kind: SchedulerKind,
    /// Which running models a start must stop.
    pub(super) policy: Box<dyn EvictionPolicy>,
    /// Models with requests in the ranked queue: whose waiters may fence a
    /// model off (the policy is asked pair by pair about these only, so
    /// nothing here grows with the square of the model count).
    pub(super) waiting_models: BTreeSet<usize>,
    /// The memory router's placements (`placement.rs`); `None` under groups
    /// and the matrix.
    pub(super) placements: Option<super::gpus::Placements>,
    /// For each model, the highest rank of a queued request whose current
    /// decision needs it stopped: evictions that depend on what runs (the
    /// matrix's cheapest combination), beyond `conflicts`. Rebuilt by every
    /// drain walk, raised when a request is queued; read by the fence.
    pub(super) needed_stopped: Vec<Option<i32>>,
    /// Sorted by ID; the index is the policy's model index.
    pub(super) models: Vec<Model>,
    /// Every ID and alias → model index; shared with the router handle.
    pub(super) names: Arc<ModelNames>,
    pub(super) requests: BTreeMap<RequestId, Request>,
    /// Ranked queue: (rank desc, id asc).
    pub(super) queue: Vec<Queued>,
    /// Lowest queue index whose position may have changed since positions were last reported.
    pub(super) dirty_from: Option<usize>,
    pub(super) stops: BTreeMap<StopId, Vec<usize>>,
    /// Arrival sequence numbers, shared with the router's fast path (which
    /// admits requests the scheduler only hears about later, if ever).
    pub(super) next_request: Arc<AtomicU64>,
    pub(super) next_stop: u64,
    pub(super) shutting_down: bool,
    /// Requests the drain fence held back, each counted once (for metrics).
    pub(super) fence_holds: u64,
    /// `aging_after` (FIFO only).
    pub(super) aging_after: Option<Duration>,
    /// Queued requests that have not aged yet, in arrival order (only with aging on).
    pub(super) not_aged: BTreeSet<RequestId>,
    /// Refused requests held over every model, so nothing is scanned when there are none.
    pub(super) held_total: usize,
    /// Models with `retire` set, so nothing is scanned when there are none.
    pub(super) retiring: usize,
    /// Who may stop a model inside its `minResident` window.
    pub(super) residency_yield: ResidencyYield,
    /// Models inside their `minResident` window, so `tick` scans nothing
    /// when there are none.
    pub(super) resident: BTreeSet<usize>,
}

impl Scheduler {
    /// Builds a scheduler from validated settings.
    ///
    /// # Errors
    ///
    /// [`SettingsError`] when a model ID repeats, a name refers to two models, a limit
    /// is 0, the serial scheduler is given priorities, or the groups are invalid.
    pub fn new(settings: &SchedulerSettings) -> Result<Self, SettingsError> {
        Self::build(settings, &|_| true)
    }

    /// As [`new`](Self::new); only the models `listed` accepts (by ID) have
    /// names (`reconfigure.rs` keeps removed models that still run).
    pub(super) fn build(
        settings: &SchedulerSettings,
        listed: &dyn Fn(&str) -> bool,
    ) -> Result<Self, SettingsError> {
        let mut sorted: Vec<_> = settings.models.iter().collect();
        sorted.sort_by(|a, b| a.id.cmp(&b.id));
        let mut models = Vec::with_capacity(sorted.len());
        for (index, m) in sorted.iter().enumerate() {
            if index > 0 && sorted[index - 1].id == m.id {
                return Err(SettingsError::DuplicateModel {
                    model: m.id.clone(),
                });
            }
            if m.concurrency_limit == 0 {
                return Err(SettingsError::ZeroConcurrencyLimit {
                    model: m.id.clone(),
                });
            }
            if let (SchedulerKind::Serial, Some(priority)) = (settings.kind, m.priority) {
                return Err(SettingsError::PriorityWithSerial {
                    model: m.id.clone(),
                    priority,
                });
            }
            models.push(Model::new(m));
        }
        let names = Arc::new(super::names::listing(&sorted, |index| {
            listed(&sorted[index].id)
        })?);
        let ids: Vec<String> = models.iter().map(|m| m.id.clone()).collect();
        let memory = match &settings.memory {
            Some(pool) => {
                let needs = sorted
                    .iter()
                    .map(|m| {
                        m.memory
                            .unwrap_or(crate::policy::memory::MemoryModel::new(0))
                    })
                    .collect();
                Some(crate::policy::memory::Memory::new(
                    &ids,
                    &pool.with_models(needs),
                )?)
            }
            None => None,
        };
        let policy: Box<dyn EvictionPolicy> = match (&memory, &settings.matrix) {
            (Some(memory), _) => Box::new(memory.clone()),
            (None, Some(matrix)) => Box::new(Matrix::new(&ids, matrix, |name| {
                names.resolve(name).map(str::to_owned)
            })?),
            (None, None) => Box::new(Groups::new(&ids, &settings.groups)?),
        };
        let placements = memory.map(|memory| super::gpus::Placements::new(memory, ids.len()));
        Ok(Self {
            kind: settings.kind,
            policy,
            waiting_models: BTreeSet::new(),
            placements,
            needed_stopped: vec![None; models.len()],
            models,
            names,
            requests: BTreeMap::new(),
            queue: Vec::new(),
            dirty_from: None,
            stops: BTreeMap::new(),
            next_request: Arc::new(AtomicU64::new(0)),
            next_stop: 0,
            shutting_down: false,
            fence_holds: 0,
            aging_after: match settings.kind {
                SchedulerKind::Fifo { .. } => settings.aging_after,
                SchedulerKind::Serial => None,
            },
            not_aged: BTreeSet::new(),
            held_total: 0,
            retiring: 0,
            residency_yield: settings.min_resident_yields_to,
            resident: BTreeSet::new(),
        })
    }

    /// Every name a request may use, shared (the router handle resolves with it).
    pub fn names(&self) -> Arc<ModelNames> {
        Arc::clone(&self.names)
    }

    /// The model ID a request name (ID or alias) refers to.
    pub fn resolve(&self, name: &str) -> Option<&str> {
        self.names.resolve(name)
    }

    /// Admits a request for `model` (ID or alias) at `priority`; it ranks at
    /// `max(model floor, priority.capped())` (both values show in [`QueueEntry`]).
    ///
    /// On success the request is granted, joins a swap, starts one, or queues; the
    /// effects say which. The caller must register the returned id before applying them.
    ///
    /// # Errors
    ///
    /// [`RouteError::ShuttingDown`], [`RouteError::UnknownModel`],
    /// [`RouteError::PriorityNotSupported`] (serial scheduler, non-zero priority),
    /// [`RouteError::ConcurrencyLimit`], or [`RouteError::QueueFull`] when the
    /// model has its `max_queued` requests waiting; a rejected request leaves no trace.
    pub fn submit(
        &mut self,
        now: Tick,
        model: &str,
        priority: Priority,
        out: &mut Vec<Effect>,
    ) -> Result<Admitted, RouteError> {
        if self.shutting_down {
            return Err(RouteError::ShuttingDown);
        }
        let Some(t) = self.names.index(model) else {
            return Err(RouteError::UnknownModel {
                model: model.to_owned(),
            });
        };
        let serial = self.kind == SchedulerKind::Serial;
        // A cap alone (a key's negative ceiling on a call without a header, or
        // an ignored header) is the operator's doing, not the client's: only a
        // priority the client asked for and that would count is refused.
        if serial && priority.requested() != 0 && priority.capped() != 0 {
            return Err(RouteError::PriorityNotSupported {
                priority: priority.requested(),
            });
        }
        let m = &mut self.models[t];
        if m.reserved() >= m.limit {
            return Err(RouteError::ConcurrencyLimit {
                model: m.id.clone(),
                retry_after: CONCURRENCY_RETRY_AFTER,
            });
        }
        let waiting = m.waiting();
        if m.max_queued.is_some_and(|max| waiting >= max) {
            return Err(RouteError::QueueFull {
                model: m.id.clone(),
                waiting,
                retry_after: CONCURRENCY_RETRY_AFTER,
            });
        }
        m.admit();
        let effective = priority.effective(m.priority);
        let id = self.next_id();
        self.requests.insert(
            id,
            Request {
                model: t,
                priority,
                effective,
                arrived: now,
                state: RequestState::Queued,
                fenced: false,
                aged: false,
                granted_start: 0,
            },
        );
        if serial {
            self.enqueue(id);
            self.drain(out);
        } else {
            self.place(id, out);
        }
        self.flush_positions(out);
        Ok(Admitted {
            id,
            model: self.models[t].id.clone(),
            effective_priority: effective,
        })
    }

    /// The request's client went away before it was granted: it is removed and will
    /// never cause a load. A no-op for a granted or unknown request.
    pub fn cancel(&mut self, now: Tick, id: RequestId, out: &mut Vec<Effect>) {
        let Some(request) = self.requests.get(&id) else {
            return;
        };
        let (t, state) = (request.model, request.state);
        match state {
            RequestState::Serving => return,
            RequestState::Queued => self.dequeue(id),
            RequestState::Joined => {
                if let Some(swap) = self.models[t].swap.as_mut() {
                    swap.waiters.retain(|w| *w != id);
                }
            }
            RequestState::Held => self.unhold(t, id),
        }
        self.finish(now, id);
        if matches!(state, RequestState::Queued | RequestState::Held) {
            // The cancelled request may have been fencing others, or (held)
            // keeping its model from being evicted.
            self.drain(out);
        }
        self.flush_positions(out);
    }

    /// A granted request ended (its lease was dropped).
    pub fn serve_done(&mut self, now: Tick, id: RequestId, out: &mut Vec<Effect>) {
        let Some(request) = self.requests.get(&id) else {
            return;
        };
        if request.state != RequestState::Serving {
            return;
        }
        let t = request.model;
        self.models[t].release();
        self.finish(now, id);
        if self.models[t].in_flight() == 0 {
            self.drain(out);
            self.flush_positions(out);
        } else if self.models[t].parallel.is_some() {
            // The model still serves others, so nothing else can change: only
            // its own waiters may take the freed slot.
            self.refill(t, out);
            self.flush_positions(out);
        }
    }

    /// The swap started for `model` ended: evicted models are stopped, and `model` is
    /// ready (`Ok`) or not (`Err`, every waiter fails with it).
    pub fn swap_done(
        &mut self,
        now: Tick,
        model: &str,
        result: Result<(), LaunchError>,
        out: &mut Vec<Effect>,
    ) {
        let Some(t) = self.index_of(model) else {
            return;
        };
        let Some(swap) = self.models[t].swap.take() else {
            return;
        };
        for &e in &swap.evict {
            self.models[e].evicted_by = None;
            if swap.sleeping.contains(&e) {
                self.models[e].fell_asleep();
            } else {
                self.models[e].unready();
            }
        }
        if swap.cancelled {
            self.models[t].unready();
            // The stop that cancelled it (an unload, a TTL) may have reached the
            // model before the start did, and found nothing to stop: a start
            // that succeeded left a process running, which is stopped now
            // rather than counted as stopped. (At shutdown every process is
            // stopped anyway.)
            if result.is_ok() && !self.shutting_down {
                self.issue_stop(vec![vec![t]], out);
            }
        } else {
            match result {
                Ok(()) => {
                    self.models[t].started(now);
                    if self.models[t].residency().is_some() {
                        self.resident.insert(t);
                    }
                    self.grant_joined(t, swap.waiters, out);
                }
                Err(error) => {
                    self.models[t].unready();
                    for id in swap.waiters {
                        self.fail(now, id, RouteError::StartFailed(error.clone()), out);
                    }
                }
            }
        }
        self.drain(out);
        self.flush_positions(out);
    }

    /// Waiting requests in queue order, with their positions.
    pub fn queue(&self, now: Tick) -> Vec<QueueEntry> {
        self.queue
            .iter()
            .enumerate()
            .filter_map(|(i, q)| {
                let r = self.requests.get(&q.id)?;
                Some(QueueEntry {
                    id: q.id,
                    model: self.models[r.model].id.clone(),
                    requested_priority: r.priority.requested(),
                    capped_priority: r.priority.capped(),
                    effective_priority: r.effective,
                    aged: r.aged,
                    position: i + 1,
                    reason: if self.state_of(r.model) == ModelState::Ready
                        && self.slots_full(r.model)
                    {
                        WaitReason::SlotsFull
                    } else {
                        WaitReason::Swap
                    },
                    waited: now.saturating_since(r.arrived),
                })
            })
            .collect()
    }

    /// Every model that is not stopped (sleeping ones included), sorted by ID.
    pub fn running(&self) -> Vec<RunningModel> {
        (0..self.models.len())
            .filter_map(|t| {
                let state = self.state_of(t);
                (state != ModelState::Stopped).then(|| {
                    let (gpus, memory) = self.gpus_of(t);
                    RunningModel {
                        model: self.models[t].id.clone(),
                        state,
                        in_flight: self.models[t].in_flight(),
                        parallel: self.models[t].parallel,
                        gpus,
                        memory,
                        memory_measured: self.measure_of(t),
                    }
                })
            })
            .collect()
    }

    /// The scheduler's view of `model` (ID or alias); `None` if unknown.
    pub fn model_state(&self, model: &str) -> Option<ModelState> {
        self.names.index(model).map(|t| self.state_of(t))
    }

    /// Requests waiting for `model` (queued, or waiting on its start).
    pub fn waiting(&self, model: &str) -> usize {
        self.names
            .index(model)
            .map_or(0, |t| self.models[t].waiting())
    }

    /// Admitted, unfinished requests for `model` (queued, waiting on a start, serving).
    pub fn reserved(&self, model: &str) -> usize {
        self.names
            .index(model)
            .map_or(0, |t| self.models[t].reserved())
    }

    /// Granted requests for `model` whose lease is still held.
    pub fn in_flight(&self, model: &str) -> usize {
        self.names
            .index(model)
            .map_or(0, |t| self.models[t].in_flight())
    }

    /// Number of requests in the ranked queue.
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Number of admitted requests that have not ended.
    pub fn pending(&self) -> usize {
        self.requests.len()
    }

    /// How many requests the drain fence has held back so far (each counted once).
    pub fn fence_holds(&self) -> u64 {
        self.fence_holds
    }

    /// The request that started the swap of `model` in progress, with its
    /// priority and effective priority: the reason for the swap, for logs.
    pub fn swap_trigger(&self, model: &str) -> Option<(RequestId, Priority, i32)> {
        let t = self.names.index(model)?;
        let id = *self.models[t].swap.as_ref()?.waiters.first()?;
        let r = self.requests.get(&id)?;
        Some((id, r.priority, r.effective))
    }

    /// The policy's account of the evictions of the swap of `model` in progress
    /// (the matrix names its set and the cost), for the swap's log line.
    pub fn swap_reason(&self, model: &str) -> Option<&str> {
        let t = self.names.index(model)?;
        self.models[t].swap.as_ref()?.reason.as_deref()
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down
    }

    /// Index of a model ID (not an alias) in `models`.
    pub(super) fn index_of(&self, id: &str) -> Option<usize> {
        self.models.binary_search_by(|m| m.id.as_str().cmp(id)).ok()
    }

    pub(super) fn state_of(&self, t: usize) -> ModelState {
        let m = &self.models[t];
        match &m.swap {
            Some(swap) if !swap.cancelled => ModelState::Starting,
            Some(_) => ModelState::Stopping,
            None if m.is_stopping() || m.evicted_by.is_some() => ModelState::Stopping,
            None if m.is_ready() => ModelState::Ready,
            None if m.is_asleep() => ModelState::Sleeping,
            None => ModelState::Stopped,
        }
    }

    pub(super) fn grant(&mut self, id: RequestId, out: &mut Vec<Effect>) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        request.state = RequestState::Serving;
        let t = request.model;
        request.granted_start = self.models[t].starts();
        let effective = request.effective;
        self.models[t].grant();
        self.models[t].served_at(effective);
        out.push(Effect::Grant {
            id,
            model: self.models[t].id.clone(),
        });
    }

    /// Ends a request that is not (or no longer) in the queue or a swap with `error`.
    pub(super) fn fail(
        &mut self,
        now: Tick,
        id: RequestId,
        error: RouteError,
        out: &mut Vec<Effect>,
    ) {
        if self.finish(now, id) {
            out.push(Effect::Fail { id, error });
        }
    }

    /// Forgets a request and releases its reservation. Returns false if it was unknown.
    pub(super) fn finish(&mut self, now: Tick, id: RequestId) -> bool {
        let Some(request) = self.requests.remove(&id) else {
            return false;
        };
        self.models[request.model].finish(now);
        true
    }

    pub(super) fn push_status(out: &mut Vec<Effect>, id: RequestId, status: WaitStatus) {
        out.push(Effect::Status { id, status });
    }
}
