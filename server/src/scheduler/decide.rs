//! The decision tree, the ranked queue and the drain walk.

use std::cmp::Reverse;

use super::core::Scheduler;
use super::model::{Queued, Request, RequestState, Swap};
use super::{Effect, ModelState, RequestId, ResidencyYield, SchedulerKind, StopModel, WaitStatus};

/// What one request should do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Decision {
    /// A swap of its model is in flight: wait with it.
    Join,
    /// The model is ready and evicts nothing: serve now (unless fenced).
    Serve,
    /// The model is ready but all of its `parallel` slots are taken: wait for one.
    Full,
    /// Stop `evict`, then start the model.
    Start(Vec<usize>),
    /// Something it needs is busy; `evict` are the models it needs stopped.
    Wait(Vec<usize>),
    /// Stop `evict`, then start the model, but some of `evict` are inside
    /// their `minResident` window: only a request ranked above `level` may
    /// (`None`: nobody, `minResidentYieldsTo: none`); others wait.
    Guarded(Vec<usize>, Option<i32>),
}

/// What the grant check lets one request do now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Serve it now.
    Grant,
    /// Wait with the start of its model in progress.
    Join,
    /// Stop `evict`, then start its model for it.
    Start(Vec<usize>),
    /// It could be served or start its model, but the drain fence holds it: a
    /// waiter of strictly higher rank needs its model stopped.
    Fenced,
    /// Wait in the queue, needing these models stopped (none when it waits
    /// for a slot or for a stop in progress).
    Queue(Vec<usize>),
}

/// The one grant check. Every site that grants, starts or lets a request
/// join (placing a new request, the drain walk, a freed slot's refill, the
/// waiters of a start that ended, the serial walk, the fast path's cap)
/// takes the model's [`Decision`] (`Scheduler::decide`), the request's `rank`
/// and the `fence` level over the model (`None` when the fence is off or
/// nothing fences it), and does what this returns.
pub(super) fn verdict(decision: Decision, rank: i32, fence: Option<i32>) -> Verdict {
    let fenced = fence.is_some_and(|level| level > rank);
    match decision {
        Decision::Join => Verdict::Join,
        Decision::Serve | Decision::Start(_) if fenced => Verdict::Fenced,
        Decision::Serve => Verdict::Grant,
        Decision::Start(evict) => Verdict::Start(evict),
        Decision::Guarded(evict, level) if level.is_some_and(|l| rank > l) => {
            verdict(Decision::Start(evict), rank, fence)
        }
        Decision::Full => Verdict::Queue(Vec::new()),
        Decision::Wait(evict) | Decision::Guarded(evict, _) => Verdict::Queue(evict),
    }
}

impl Scheduler {
    /// Whether an operation (swap or stop) touches model `t`.
    pub(super) fn is_busy(&self, t: usize) -> bool {
        let m = &self.models[t];
        m.swap.is_some() || m.is_stopping() || m.evicted_by.is_some()
    }

    /// Models that are up (ready, starting or stopping), `t` included when it is:
    /// what the policy is asked about (a running target evicts nothing under the
    /// matrix, as in llama-swap). A sleeping model is not: it has given its
    /// GPU memory back, so groups and the matrix let anything run beside it
    /// (the memory router counts what it keeps asleep, `placement.rs`).
    fn up(&self) -> Vec<usize> {
        (0..self.models.len())
            .filter(|&r| !matches!(self.state_of(r), ModelState::Stopped | ModelState::Sleeping))
            .collect()
    }

    /// When model `r` was last used, for the policies' tie-breaks (larger is
    /// more recent): the moment its last request ended or it became ready
    /// with nothing admitted; one in use counts as used now.
    pub(super) fn last_used(&self, r: usize) -> u64 {
        self.models[r].idle_since().map_or(u64::MAX, |tick| {
            u64::try_from(tick.since_start().as_micros()).unwrap_or(u64::MAX)
        })
    }

    /// Models that are up (ready, starting or stopping) and must stop before `t` can run.
    fn evict_set(&self, t: usize) -> Vec<usize> {
        if self.placements.is_some() {
            // Under the memory router a model that cannot fit waits (see `decide`).
            return self
                .memory_plan(t)
                .map(|plan| plan.evict)
                .unwrap_or_default();
        }
        let up = self.up();
        if up.iter().all(|&r| r == t) {
            return Vec::new();
        }
        self.policy.evict(t, &up, &|r| self.last_used(r))
    }

    /// The decision tree for a request for model `t`, before the drain fence.
    pub(super) fn decide(&self, t: usize) -> Decision {
        let m = &self.models[t];
        if m.retire {
            // Its process is to stop once its requests end; what waits for it
            // waits for the start of its new definition.
            return Decision::Wait(Vec::new());
        }
        if self.retiring > 0
            && !m.waits_for.is_empty()
            && !m.is_ready()
            && m.swap.is_none()
            && self.waits_for_old(t)
        {
            // Its new process waits until every old one is gone.
            return Decision::Wait(Vec::new());
        }
        match &m.swap {
            Some(swap) if !swap.cancelled => return Decision::Join,
            Some(_) => return Decision::Wait(Vec::new()),
            None => {}
        }
        if m.is_stopping() || m.evicted_by.is_some() {
            return Decision::Wait(Vec::new());
        }
        if m.is_ready() && m.slots_full() {
            // A waiter for a model whose slots are all busy waits for a slot, even
            // when something it cannot run beside has started meanwhile (a model of
            // a non-exclusive group beside an exclusive one): a swap started now
            // could not serve it, and would mark a serving model as starting.
            return Decision::Full;
        }
        if m.is_ready() && self.placements.is_some() {
            // Placed when it started: it holds its memory already.
            return Decision::Serve;
        }
        if self.placements.is_some() && self.memory_plan(t).is_none() {
            // Persistent models hold the memory it needs: it waits for a change.
            return Decision::Wait(Vec::new());
        }
        let evict = self.evict_set(t);
        if m.is_ready() && evict.is_empty() {
            return Decision::Serve;
        }
        let blocked = evict
            .iter()
            .any(|&e| self.is_busy(e) || self.models[e].in_flight() > 0);
        if blocked {
            return Decision::Wait(evict);
        }
        match self.residency_level(&evict) {
            Some(level) => Decision::Guarded(evict, level),
            None => Decision::Start(evict),
        }
    }

    /// Whether some of `evict` are inside their `minResident` window, and if
    /// so the rank a waiter must be above to stop them (`Some(None)`: no rank
    /// is enough). A guarded model that served nothing since its start guards
    /// against nothing but a waiter of the lowest rank.
    fn residency_level(&self, evict: &[usize]) -> Option<Option<i32>> {
        if self.resident.is_empty() {
            return None;
        }
        let guarded: Vec<Option<i32>> = evict
            .iter()
            .filter_map(|&e| self.models[e].residency().map(|(_, rank)| rank))
            .collect();
        if guarded.is_empty() {
            return None;
        }
        Some(match self.residency_yield {
            ResidencyYield::Nobody => None,
            ResidencyYield::Higher => Some(guarded.into_iter().flatten().max().unwrap_or(i32::MIN)),
        })
    }

    pub(super) fn fence_enabled(&self) -> bool {
        matches!(self.kind, SchedulerKind::Fifo { drain_fence: true })
    }

    /// The fence level over model `t` for a request placed now: `None` when
    /// the fence is off.
    pub(super) fn fence_over(&self, t: usize) -> Option<i32> {
        if self.fence_enabled() {
            self.fence_level(t)
        } else {
            None
        }
    }

    /// Highest rank of a queued request whose model cannot run alongside `t`: it
    /// needs `t` stopped (if `t` runs) or would need it stopped (if `t` started);
    /// or whose current decision needs `t` stopped (`needed_stopped`).
    pub(super) fn fence_level(&self, t: usize) -> Option<i32> {
        let conflicting = self
            .waiting_models
            .iter()
            .filter(|&&u| self.policy.conflicts_with(u, t))
            .filter_map(|&u| {
                self.models[u]
                    .queued
                    .last_key_value()
                    .map(|(&rank, _)| rank)
            })
            .max();
        conflicting.max(self.needed_stopped[t])
    }

    /// One more request of `rank` for model `t` in the ranked queue.
    pub(super) fn count_queued(&mut self, t: usize, rank: i32) {
        *self.models[t].queued.entry(rank).or_insert(0) += 1;
        self.waiting_models.insert(t);
    }

    /// A request of `rank` was queued needing `evict` stopped.
    fn note_needed(&mut self, evict: &[usize], rank: i32) {
        for &e in evict {
            let level = &mut self.needed_stopped[e];
            *level = Some(level.map_or(rank, |l| l.max(rank)));
        }
    }

    /// Places a newly admitted request (FIFO scheduler): serve, join, start or queue.
    pub(super) fn place(&mut self, id: RequestId, out: &mut Vec<Effect>) {
        let Some(request) = self.requests.get(&id) else {
            return;
        };
        let (t, effective) = (request.model, request.effective);
        match verdict(self.decide(t), effective, self.fence_over(t)) {
            Verdict::Join if self.models[t].queued.range(effective..).next().is_some() => {
                // Requests of the same or a higher rank already wait for this
                // model (held back when its start was decided): it does not
                // overtake them. The walk lets them join first, in order.
                self.enqueue(id);
                self.drain(out);
            }
            Verdict::Join => self.join(id, t, out),
            Verdict::Fenced => {
                self.note_fenced(id);
                self.enqueue(id);
            }
            Verdict::Grant => self.grant(id, out),
            Verdict::Start(evict) => self.start_swap(t, evict, id, out),
            Verdict::Queue(needs) => {
                self.enqueue(id);
                self.note_needed(&needs, effective);
            }
        }
    }

    pub(super) fn note_fenced(&mut self, id: RequestId) {
        if let Some(r) = self.requests.get_mut(&id)
            && !r.fenced
        {
            r.fenced = true;
            self.fence_holds += 1;
        }
    }

    fn join(&mut self, id: RequestId, t: usize, out: &mut Vec<Effect>) {
        if let Some(swap) = self.models[t].swap.as_mut() {
            swap.waiters.push(id);
        }
        if let Some(r) = self.requests.get_mut(&id) {
            r.state = RequestState::Joined;
        }
        Self::push_status(out, id, WaitStatus::Starting);
    }

    fn start_swap(&mut self, t: usize, evict: Vec<usize>, id: RequestId, out: &mut Vec<Effect>) {
        // Under the memory router, room that only stopping makes: none sleeps.
        let sleepless = self
            .memory_plan_sleepless(t)
            .is_some_and(|(_, sleepless)| sleepless);
        // Asked before the state changes, so it explains the decision just made.
        let reason = match self.place_on_gpus(t) {
            Some(reason) => Some(reason),
            None => self.policy.explain(t, &self.up(), &|r| self.last_used(r)),
        };
        // An awake model with a sleep mode sleeps; one asleep already (the
        // memory router stopping what it keeps asleep) stops for good.
        let sleeping: Vec<usize> = evict
            .iter()
            .copied()
            .filter(|&e| {
                !sleepless && self.models[e].sleep_memory.is_some() && !self.models[e].is_asleep()
            })
            .collect();
        let stops = evict
            .iter()
            .map(|&e| StopModel {
                model: self.models[e].id.clone(),
                grace: self.models[e].unload_timeout,
                may_sleep: sleeping.contains(&e),
            })
            .collect();
        for &e in &evict {
            self.models[e].evicted_by = Some(t);
            self.models[e].unready();
        }
        self.models[t].swap = Some(Swap {
            waiters: Vec::new(),
            evict,
            sleeping,
            cancelled: false,
            reason,
        });
        out.push(Effect::StartSwap {
            model: self.models[t].id.clone(),
            evict: stops,
        });
        self.join(id, t, out);
    }

    /// Inserts an admitted request at its rank (after every request of equal or higher rank).
    pub(super) fn enqueue(&mut self, id: RequestId) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        request.state = RequestState::Queued;
        let rank = Self::rank_of(self.kind, request);
        let aging = self.aging_after.is_some() && !request.aged;
        let t = request.model;
        if aging {
            self.not_aged.insert(id);
        }
        let entry = Queued {
            id,
            model: t,
            rank,
            reported: 0,
        };
        let index = self.queue.partition_point(|q| q.key() < entry.key());
        self.queue.insert(index, entry);
        self.count_queued(t, rank);
        self.mark_dirty(index);
    }

    /// Removes one queued request (its reservation is the caller's business).
    pub(super) fn dequeue(&mut self, id: RequestId) {
        let Some(request) = self.requests.get(&id) else {
            return;
        };
        let rank = Self::rank_of(self.kind, request);
        let key = (Reverse(rank), id);
        if let Ok(index) = self.queue.binary_search_by(|q| q.key().cmp(&key)) {
            let q = self.queue.remove(index);
            self.uncount(&q);
            self.mark_dirty(index);
        }
    }

    /// Removes every queued request matching `pred`, in queue order.
    pub(super) fn remove_queued(&mut self, pred: impl Fn(&Queued) -> bool) -> Vec<Queued> {
        let mut removed = Vec::new();
        let mut first = None;
        let mut write = 0;
        for read in 0..self.queue.len() {
            let q = self.queue[read];
            if pred(&q) {
                first.get_or_insert(write);
                removed.push(q);
            } else {
                self.queue[write] = q;
                write += 1;
            }
        }
        self.queue.truncate(write);
        for q in &removed {
            self.uncount(q);
        }
        if let Some(index) = first {
            self.mark_dirty(index);
        }
        removed
    }

    /// What a queued request ranks by: 0 under serial, the top for an aged
    /// request, its effective priority otherwise.
    pub(super) fn rank_of(kind: SchedulerKind, request: &Request) -> i32 {
        match kind {
            SchedulerKind::Serial => 0,
            SchedulerKind::Fifo { .. } if request.aged => i32::MAX,
            SchedulerKind::Fifo { .. } => request.effective,
        }
    }

    pub(super) fn uncount(&mut self, q: &Queued) {
        if self.aging_after.is_some() {
            self.not_aged.remove(&q.id);
        }
        let counts = &mut self.models[q.model].queued;
        if let Some(n) = counts.get_mut(&q.rank) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&q.rank);
            }
        }
        if counts.is_empty() {
            self.waiting_models.remove(&q.model);
        }
    }

    pub(super) fn mark_dirty(&mut self, index: usize) {
        self.dirty_from = Some(self.dirty_from.map_or(index, |d| d.min(index)));
    }

    /// Reports the positions that changed since the last report.
    pub(super) fn flush_positions(&mut self, out: &mut Vec<Effect>) {
        let Some(from) = self.dirty_from.take() else {
            return;
        };
        let mut changes = Vec::with_capacity(self.queue.len().saturating_sub(from));
        for (offset, q) in self.queue.iter_mut().enumerate().skip(from) {
            let position = offset + 1;
            if q.reported != position {
                q.reported = position;
                changes.push((q.id, position));
            }
        }
        if !changes.is_empty() {
            out.push(Effect::Positions { changes });
        }
    }

    /// Walks the queue in order and lets every request go that can.
    pub(super) fn drain(&mut self, out: &mut Vec<Effect>) {
        if self.shutting_down {
            return;
        }
        self.retire_idle(out);
        self.release_held();
        if self.queue.is_empty() {
            self.needed_stopped.fill(None);
            return;
        }
        if self.kind == SchedulerKind::Serial {
            self.drain_serial(out);
            return;
        }
        let fence_on = self.fence_enabled();
        // Highest rank of a request earlier in this walk that stays and needs
        // each model stopped now: lower requests may not use or start it.
        let mut fence: Vec<Option<i32>> = vec![None; self.models.len()];
        // The first request of each model that stayed in this walk, in walk
        // order (so by rank, highest first): a model that cannot run
        // alongside its model is fenced at its rank. Asked pair by pair
        // (`fenced_by`), never expanded into every conflicting model.
        let mut stayers: Vec<(usize, i32)> = Vec::new();
        // Whether a request for the model already stayed in this walk (ranks only go
        // down along the walk, so the first one sets the fence).
        let mut stayed = vec![false; self.models.len()];
        // Decisions only change when a swap starts or a model gets its first request in
        // flight; between those, requests for the same model decide alike.
        let mut cache: Vec<Option<Decision>> = vec![None; self.models.len()];
        // Compacted in place, so the queue keeps its allocation.
        let mut queue = std::mem::take(&mut self.queue);
        let mut write = 0;
        let mut first_removed = None;
        for read in 0..queue.len() {
            let q = queue[read];
            let t = q.model;
            let decision = match &cache[t] {
                Some(d) => d.clone(),
                None => {
                    let d = self.decide(t);
                    cache[t] = Some(d.clone());
                    d
                }
            };
            let level = if fence_on {
                fence[t].max(self.fenced_by(&stayers, t, q.rank))
            } else {
                None
            };
            let leaves = match verdict(decision, q.rank, level) {
                Verdict::Join => {
                    self.join(q.id, t, out);
                    true
                }
                Verdict::Fenced => {
                    self.note_fenced(q.id);
                    false
                }
                Verdict::Grant => {
                    let first_in_flight = self.models[t].in_flight() == 0;
                    self.grant(q.id, out);
                    if first_in_flight {
                        cache.iter_mut().for_each(|c| *c = None);
                    } else if self.models[t].slots_full() {
                        cache[t] = Some(Decision::Full);
                    }
                    true
                }
                Verdict::Start(evict) => {
                    self.start_swap(t, evict, q.id, out);
                    cache.iter_mut().for_each(|c| *c = None);
                    true
                }
                Verdict::Queue(_) => false,
            };
            if !leaves && !stayed[t] {
                stayed[t] = true;
                // What its model can never run beside (its entry in
                // `stayers`), and what it needs stopped now (the cached
                // decision is still this request's).
                stayers.push((t, q.rank));
                let needs = match &cache[t] {
                    Some(
                        Decision::Wait(evict)
                        | Decision::Start(evict)
                        | Decision::Guarded(evict, _),
                    ) => evict.as_slice(),
                    _ => &[],
                };
                for &e in needs {
                    let level = &mut fence[e];
                    *level = Some(level.map_or(q.rank, |l| l.max(q.rank)));
                }
            }
            if leaves {
                first_removed.get_or_insert(write);
                self.uncount(&q);
            } else {
                queue[write] = q;
                write += 1;
            }
        }
        queue.truncate(write);
        self.queue = queue;
        // Every waiter's needs as of now, for requests placed before the next
        // walk (what their models can never run beside is `fence_level`'s).
        self.needed_stopped = fence;
        if let Some(index) = first_removed {
            self.mark_dirty(index);
        }
    }

    /// The highest rank above `rank` among `stayers` (model, rank; ranks
    /// non-increasing) whose model cannot run alongside `t`.
    fn fenced_by(&self, stayers: &[(usize, i32)], t: usize, rank: i32) -> Option<i32> {
        stayers
            .iter()
            .take_while(|&&(_, level)| level > rank)
            .find(|&&(u, _)| self.policy.conflicts_with(u, t))
            .map(|&(_, level)| level)
    }

    /// Serial: one request in flight overall, strictly in arrival order.
    fn drain_serial(&mut self, out: &mut Vec<Effect>) {
        let busy = self
            .models
            .iter()
            .any(|m| m.in_flight() > 0 || m.swap.is_some() || m.is_stopping());
        if busy {
            return;
        }
        let Some(&head) = self.queue.first() else {
            return;
        };
        // No fence: one request at a time, in arrival order.
        match verdict(self.decide(head.model), head.rank, None) {
            Verdict::Grant => {
                self.pop_head();
                self.grant(head.id, out);
            }
            Verdict::Start(evict) => {
                self.pop_head();
                self.start_swap(head.model, evict, head.id, out);
            }
            // No swap runs and nothing is in flight, so a wait can only be a stop in progress.
            Verdict::Join | Verdict::Fenced | Verdict::Queue(_) => {}
        }
    }

    fn pop_head(&mut self) {
        if self.queue.is_empty() {
            return;
        }
        let q = self.queue.remove(0);
        self.uncount(&q);
        self.mark_dirty(0);
    }
}
