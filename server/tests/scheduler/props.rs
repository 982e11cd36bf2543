//! Property tests: random event scripts against the pure scheduler, with invariants
//! checked after every step and after the script settles: every request ends in
//! exactly one outcome, equal priorities keep arrival order, no model with work in
//! flight is evicted, grants go to ready models only (so a sleeping model is never
//! forwarded a request before it woke), and, under the memory router with sleep
//! modes and `minResident`, what is placed fits each GPU less its reserve and a
//! model inside its `minResident` window is evicted only for a waiter ranking
//! above everything it served since it became ready.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use llama_swap_server::testing::launcher::LaunchError;
use llama_swap_server::testing::policy::memory::{Gpu, GpuPool, MemoryModel};
use llama_swap_server::testing::scheduler::{
    Effect, FastCap, ModelSettings, ModelState, Parallel, RequestId, ResidencyYield, SchedulerKind,
    SchedulerSettings, StopId, Tick, WaitStatus,
};
use proptest::prelude::*;

use crate::support::{Harness, Outcome, group};

const MODELS: [&str; 4] = ["a", "b", "c", "d"];
const PRIORITIES: [i32; 4] = [-10, 0, 5, 10];

#[derive(Debug, Clone)]
enum Op {
    Submit {
        model: usize,
        priority: usize,
    },
    Cancel(usize),
    Done(usize),
    /// The upstream of a served request refuses it (it has just crashed).
    Refuse(usize),
    FinishSwap {
        pick: usize,
        ok: bool,
    },
    FinishStop(usize),
    Exit(usize),
    Unload(Option<usize>),
    Advance(u64),
    Shutdown,
    /// A request the router's fast path grants when the model's gate is open
    /// (else it is submitted); with `check`, submitted anyway, and then it must
    /// be granted at once.
    Fast {
        model: usize,
        priority: usize,
        check: bool,
    },
    /// A fast-path grant ends.
    FastDone(usize),
    /// The upstream refuses a fast-path grant.
    FastRefuse(usize),
    /// The release of a model a swap puts to sleep stopped it instead (its
    /// sleep call failed).
    NotSlept(usize),
}

/// A model's fast-path gate as the router keeps it.
#[derive(Debug, Default, Clone, Copy)]
struct Gate {
    open: Option<FastCap>,
    /// Grants counted in since it opened.
    counted: usize,
    /// When the last grant that counted itself out ended.
    last_done: Option<Tick>,
}

/// A fast-path grant not yet ended.
#[derive(Debug, Clone, Copy)]
struct FastLease {
    id: RequestId,
    model: usize,
    priority: i32,
    start: u64,
    /// A close handed it to the scheduler.
    absorbed: bool,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..MODELS.len(), 0..PRIORITIES.len()).prop_map(|(model, priority)| Op::Submit { model, priority }),
        2 => any::<usize>().prop_map(Op::Cancel),
        5 => any::<usize>().prop_map(Op::Done),
        1 => any::<usize>().prop_map(Op::Refuse),
        5 => (any::<usize>(), prop::bool::weighted(0.85)).prop_map(|(pick, ok)| Op::FinishSwap { pick, ok }),
        2 => any::<usize>().prop_map(Op::FinishStop),
        1 => (0..MODELS.len()).prop_map(Op::Exit),
        1 => prop::option::of(0..MODELS.len()).prop_map(Op::Unload),
        2 => (1u64..90).prop_map(Op::Advance),
        1 => Just(Op::Shutdown),
        6 => (0..MODELS.len(), 0..PRIORITIES.len(), prop::bool::weighted(0.3)).prop_map(|(model, priority, check)| Op::Fast { model, priority, check }),
        4 => any::<usize>().prop_map(Op::FastDone),
        1 => any::<usize>().prop_map(Op::FastRefuse),
        1 => (0..MODELS.len()).prop_map(Op::NotSlept),
    ]
}

const GIB: u64 = 1 << 30;

/// The memory router on two 24 GiB GPUs (1 GiB reserved on each), models with
/// and without sleep modes, one spanning both GPUs, `minResident` on some.
fn placed_setup() -> impl Strategy<Value = SchedulerSettings> {
    (0..3usize, 0..3usize, 0..3usize, prop::bool::ANY, 0..3usize).prop_map(
        |(kind, sizes, resident, ttl, parallel)| {
            // (memory GiB, gpus, sleep memory GiB)
            let shapes: [(u64, usize, Option<u64>); 4] = match sizes {
                0 => [
                    (20, 1, Some(2)),
                    (20, 1, None),
                    (10, 2, Some(0)),
                    (8, 1, None),
                ],
                1 => [
                    (12, 1, Some(1)),
                    (12, 1, Some(1)),
                    (30, 2, None),
                    (4, 1, None),
                ],
                _ => [
                    (23, 1, Some(3)),
                    (6, 1, None),
                    (6, 1, Some(1)),
                    (46, 2, None),
                ],
            };
            let mut models: Vec<ModelSettings> = MODELS
                .iter()
                .zip(shapes)
                .map(|(id, (memory, gpus, sleep))| ModelSettings {
                    concurrency_limit: 4,
                    memory: Some(MemoryModel {
                        gpus,
                        ..MemoryModel::new(memory * GIB)
                    }),
                    sleep: sleep.map(|s| s * GIB),
                    ..ModelSettings::new(*id)
                })
                .collect();
            if parallel >= 1 {
                models[0].parallel = Parallel::limit(1).unwrap();
            }
            if parallel >= 2 {
                models[1].parallel = Parallel::limit(2).unwrap();
            }
            if ttl {
                models[0].ttl = Some(Duration::from_secs(30));
            }
            let mut s_kind = SchedulerKind::Fifo { drain_fence: true };
            if kind == 1 {
                s_kind = SchedulerKind::Fifo { drain_fence: false };
            } else if kind == 2 {
                s_kind = SchedulerKind::Serial;
            }
            if s_kind != SchedulerKind::Serial {
                models[3].priority = Some(5);
            }
            if resident >= 1 {
                models[0].min_resident = Some(Duration::from_secs(40));
                models[1].min_resident = Some(Duration::from_secs(20));
            }
            let mut s = SchedulerSettings::new(models);
            s.kind = s_kind;
            if resident == 2 {
                s.min_resident_yields_to = ResidencyYield::Nobody;
            }
            s.memory = Some(GpuPool {
                gpus: vec![
                    Gpu {
                        id: 0,
                        memory: 24 * GIB,
                    },
                    Gpu {
                        id: 1,
                        memory: 24 * GIB,
                    },
                ],
                reserve: GIB,
                evict_costs: Vec::new(),
            });
            s
        },
    )
}

/// Scheduler kind, group layout and slot limits.
fn setup() -> impl Strategy<Value = SchedulerSettings> {
    (0..4usize, 0..4usize, 1..4usize, prop::bool::ANY, 0..3usize).prop_map(
        |(kind, layout, limit, ttl, parallel)| {
            let mut models: Vec<ModelSettings> = MODELS
                .iter()
                .map(|id| {
                    let mut m = ModelSettings::new(*id);
                    // Room for requests to wait for a slot.
                    m.concurrency_limit = limit + 2;
                    m
                })
                .collect();
            // None; a: 1 slot; a: 1, b: 2 slots and c's count told by its upstream.
            if parallel >= 1 {
                models[0].parallel = Parallel::limit(1).unwrap();
            }
            if parallel >= 2 {
                models[1].parallel = Parallel::limit(2).unwrap();
                models[2].parallel = Parallel::Auto;
            }
            if ttl {
                models[0].ttl = Some(Duration::from_secs(30));
            }
            let kind = match kind {
                0 | 1 => SchedulerKind::Fifo { drain_fence: true },
                2 => SchedulerKind::Fifo { drain_fence: false },
                _ => SchedulerKind::Serial,
            };
            if kind != SchedulerKind::Serial {
                models[3].priority = Some(5);
            }
            let mut s = SchedulerSettings::new(models);
            s.kind = kind;
            s.groups = match layout {
                0 => Vec::new(),
                1 => vec![group("all", &MODELS, false, false, false)],
                2 => vec![
                    group("g1", &["a", "b"], true, true, false),
                    group("g2", &["c"], true, false, false),
                    group("p", &["d"], true, false, true),
                ],
                _ => vec![
                    group("g1", &["a", "b"], true, false, false),
                    group("g2", &["c", "d"], true, true, false),
                ],
            };
            s
        },
    )
}

struct World {
    h: Harness,
    serial: bool,
    /// Every admitted request: (model, effective priority).
    admitted: BTreeMap<RequestId, (String, i32)>,
    cancelled: BTreeSet<RequestId>,
    /// Granted requests whose lease is still held.
    serving: Vec<RequestId>,
    /// Requests refused by their upstream and handed back.
    refused: BTreeSet<RequestId>,
    /// Targets of swaps in progress.
    swaps: Vec<String>,
    stops: Vec<StopId>,
    /// How much of the harness log has been checked.
    checked: usize,
    /// The ranked queue after the last step.
    queued_before: BTreeSet<RequestId>,
    /// Fast-path gates, by model index.
    gates: [Gate; MODELS.len()],
    fast: Vec<FastLease>,
    /// Requests first granted on the fast path (their later grants are no new turn).
    fast_ids: BTreeSet<RequestId>,
    /// Under the memory router: each GPU's id and memory less the reserve.
    usable: Vec<(u32, u64)>,
    /// The models each swap in progress stops or puts to sleep, by target.
    evicting: BTreeMap<String, Vec<String>>,
    /// Models a swap that ended has stopped (its stops end before its
    /// target starts) that still show as stopping, for an unload or shutdown
    /// that also stops them, until they start again.
    gone: BTreeSet<String>,
    /// Each model's `minResident` and the yield rule.
    min_resident: BTreeMap<String, Duration>,
    yields_to_nobody: bool,
    /// When each model last became ready, and the highest rank the scheduler
    /// granted it since.
    ready_at: BTreeMap<String, Tick>,
    served_rank: BTreeMap<String, i32>,
}

impl World {
    fn new(settings: SchedulerSettings) -> Self {
        let serial = settings.kind == SchedulerKind::Serial;
        let usable = settings.memory.as_ref().map_or(Vec::new(), |pool| {
            pool.gpus
                .iter()
                .map(|g| (g.id, g.memory - pool.reserve))
                .collect()
        });
        let min_resident = settings
            .models
            .iter()
            .filter_map(|m| Some((m.id.clone(), m.min_resident.filter(|d| !d.is_zero())?)))
            .collect();
        let yields_to_nobody = settings.min_resident_yields_to == ResidencyYield::Nobody;
        Self {
            h: Harness::new(settings),
            serial,
            admitted: BTreeMap::new(),
            cancelled: BTreeSet::new(),
            serving: Vec::new(),
            refused: BTreeSet::new(),
            swaps: Vec::new(),
            stops: Vec::new(),
            checked: 0,
            queued_before: BTreeSet::new(),
            gates: [Gate::default(); MODELS.len()],
            fast: Vec::new(),
            fast_ids: BTreeSet::new(),
            usable,
            evicting: BTreeMap::new(),
            gone: BTreeSet::new(),
            min_resident,
            yields_to_nobody,
            ready_at: BTreeMap::new(),
            served_rank: BTreeMap::new(),
        }
    }

    /// The swap of `model` ended (`ok`: it is ready).
    fn end_swap(&mut self, model: &str, ok: bool) {
        self.gone
            .extend(self.evicting.remove(model).unwrap_or_default());
        if ok {
            self.h.swap_ok(model);
            if self.h.s.model_state(model) == Some(ModelState::Ready) {
                self.ready_at.insert(model.to_owned(), self.h.now);
                self.served_rank.remove(model);
            }
        } else {
            self.h.swap_err(
                model,
                LaunchError::Aborted {
                    model: model.to_owned(),
                },
            );
        }
    }

    /// What the router does before every step but the end of an absorbed
    /// fast grant: it closes every gate, handing its grants to the scheduler.
    fn close_gates(&mut self) {
        for t in 0..MODELS.len() {
            self.close_gate(t);
        }
    }

    fn close_gate(&mut self, t: usize) {
        let gate = std::mem::take(&mut self.gates[t]);
        if gate.open.is_none() {
            self.gates[t].last_done = gate.last_done;
            return;
        }
        for lease in self.fast.iter_mut().filter(|l| l.model == t && !l.absorbed) {
            lease.absorbed = true;
        }
        self.h.s.absorb_fast(t, gate.counted, gate.last_done);
    }

    /// What the router does after every step: it opens the gates the
    /// scheduler says would grant at once (and closes the others).
    fn open_gates(&mut self) {
        for t in 0..MODELS.len() {
            match self.h.s.fast_cap(t) {
                Some(cap) if self.gates[t].open.is_none() => self.gates[t].open = Some(cap),
                Some(_) => {}
                None => self.close_gate(t),
            }
        }
    }

    fn absorbed_fast(&self, m: &str) -> usize {
        self.fast
            .iter()
            .filter(|l| l.absorbed && MODELS[l.model] == m)
            .count()
    }

    fn step(&mut self, op: &Op) {
        // Only a grant taken from an open gate skips the router; a request the
        // gate turns away is submitted, and the router closes the gates first.
        let quiet = match *op {
            Op::Fast { model, check, .. } => {
                let gate = self.gates[model];
                !check && gate.open.is_some_and(|cap| gate.counted < cap.admits)
            }
            Op::FastDone(k) => pick(&self.fast, k).is_some_and(|l| !l.absorbed),
            _ => false,
        };
        // A refused lease counts itself out of a gate still open before the
        // router hears of it (and closes the gates).
        let refused = match *op {
            Op::FastRefuse(k) if !self.fast.is_empty() => {
                let lease = self.fast.remove(k % self.fast.len());
                if !lease.absorbed {
                    self.gates[lease.model].counted -= 1;
                }
                Some(lease)
            }
            _ => None,
        };
        if !quiet {
            self.close_gates();
        }
        match refused {
            Some(lease) => self.refuse_fast(lease),
            None => self.apply(op),
        }
        self.open_gates();
        self.check_step();
    }

    fn refuse_fast(&mut self, lease: FastLease) {
        let name = MODELS[lease.model];
        let expected = if name == "d" && !self.serial {
            lease.priority.max(5)
        } else {
            lease.priority
        };
        self.admitted.insert(lease.id, (name.to_owned(), expected));
        self.refused.insert(lease.id);
        self.h.fast_refused(
            lease.model,
            lease.id,
            lease.priority,
            lease.start,
            lease.absorbed,
        );
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Fast {
                model,
                priority: index,
                check,
            } => {
                let priority = if self.serial { 0 } else { PRIORITIES[index] };
                let gate = self.gates[model];
                match gate.open {
                    Some(cap) if !check && gate.counted < cap.admits => {
                        assert_eq!(self.h.s.queue_len(), 0, "fast grant past waiters");
                        let name = MODELS[model];
                        assert_eq!(self.h.s.model_state(name), Some(ModelState::Ready));
                        let id = self.h.s.next_id();
                        self.gates[model].counted += 1;
                        self.fast_ids.insert(id);
                        self.fast.push(FastLease {
                            id,
                            model,
                            priority,
                            start: cap.start,
                            absorbed: false,
                        });
                    }
                    open => {
                        let before = self.h.grants.len();
                        self.apply(&Op::Submit {
                            model,
                            priority: index,
                        });
                        if check && open.is_some_and(|cap| gate.counted < cap.admits) {
                            let granted = self.h.grants[before..].len();
                            assert_eq!(
                                granted, 1,
                                "the gate of {} was open, but a request was not granted at once",
                                MODELS[model]
                            );
                        }
                    }
                }
            }
            Op::FastDone(k) => {
                if !self.fast.is_empty() {
                    let lease = self.fast.remove(k % self.fast.len());
                    if lease.absorbed {
                        self.h.fast_done(lease.model);
                    } else {
                        let gate = &mut self.gates[lease.model];
                        gate.counted -= 1;
                        gate.last_done = Some(self.h.now);
                    }
                }
            }
            // Taken apart by `step`.
            Op::FastRefuse(_) => {}
            Op::Submit { model, priority } => {
                let priority = if self.serial { 0 } else { PRIORITIES[priority] };
                let name = MODELS[model];
                if let Ok(id) = self.h.try_submit(name, priority) {
                    let effective = self
                        .h
                        .s
                        .queue(self.h.now)
                        .iter()
                        .find(|e| e.id == id)
                        .map(|e| e.effective_priority);
                    // Only `d` has a configured floor; the others rank by the header alone.
                    let expected = if name == "d" && !self.serial {
                        priority.max(5)
                    } else {
                        priority
                    };
                    if let Some(effective) = effective {
                        assert_eq!(effective, expected);
                    }
                    self.admitted.insert(id, (name.to_owned(), expected));
                }
            }
            Op::Cancel(k) => {
                let waiting: Vec<RequestId> = self
                    .admitted
                    .keys()
                    .copied()
                    .filter(|id| !self.h.ended(*id) && !self.cancelled.contains(id))
                    .collect();
                if let Some(&id) = pick(&waiting, k) {
                    self.cancelled.insert(id);
                    self.h.cancel(id);
                }
            }
            Op::Done(k) => {
                if !self.serving.is_empty() {
                    let id = self.serving.remove(k % self.serving.len());
                    self.h.done(id);
                }
            }
            Op::Refuse(k) => {
                if !self.serving.is_empty() {
                    let id = self.serving.remove(k % self.serving.len());
                    self.refused.insert(id);
                    self.h.refused(id);
                }
            }
            Op::FinishSwap { pick: k, ok } => {
                if !self.swaps.is_empty() {
                    let model = self.swaps.remove(k % self.swaps.len());
                    if ok && self.h.s.wants_slots(&model) {
                        self.h.s.set_slots(&model, Some(1));
                    }
                    self.end_swap(&model, ok);
                }
            }
            Op::FinishStop(k) => {
                if !self.stops.is_empty() {
                    let id = self.stops.remove(k % self.stops.len());
                    self.h.stop_done(id);
                }
            }
            Op::Exit(m) => {
                self.left_ready(MODELS[m]);
                self.h.exited(MODELS[m]);
            }
            Op::NotSlept(m) => {
                self.left_ready(MODELS[m]);
                self.h.s.stopped_not_slept(MODELS[m]);
            }
            Op::Unload(m) => {
                let list = m.map(|m| [MODELS[m]]);
                let _ = self.h.unload(list.as_ref().map(|l| &l[..]));
            }
            Op::Advance(secs) => {
                self.h.advance(Duration::from_secs(secs));
                self.h.tick();
            }
            Op::Shutdown => {
                self.h.shutdown();
            }
        }
    }

    /// Invariants that hold after every step.
    fn check_step(&mut self) {
        let new: Vec<Effect> = self.h.log[self.checked..].to_vec();
        self.checked = self.h.log.len();
        // Who was in the ranked queue before this step.
        let was_queued: BTreeSet<RequestId> = std::mem::take(&mut self.queued_before);
        let queue_after = self.h.s.queue(self.h.now);
        for effect in &new {
            // A request released from the queue outranks every waiter for the same
            // model that stays: (effective priority desc, arrival asc).
            if let Effect::Grant { id, model } = effect
                && was_queued.contains(id)
            {
                let (_, rank) = self.admitted[id];
                for stays in queue_after.iter().filter(|e| &e.model == model) {
                    assert!(
                        (stays.effective_priority, std::cmp::Reverse(stays.id))
                            < (rank, std::cmp::Reverse(*id)),
                        "{id:?} ({rank}) left the queue of {model} before {:?} ({})",
                        stays.id,
                        stays.effective_priority
                    );
                }
            }
        }
        self.queued_before = queue_after.iter().map(|e| e.id).collect();
        for effect in &new {
            match effect {
                Effect::Grant { id, model } => {
                    assert!(
                        !self.cancelled.contains(id),
                        "cancelled request {id:?} granted"
                    );
                    assert_eq!(
                        self.h.s.model_state(model),
                        Some(ModelState::Ready),
                        "grant on a model that is not ready (a sleeping one must wake first)"
                    );
                    let rank = self.admitted[id].1;
                    let served = self.served_rank.entry(model.clone()).or_insert(rank);
                    *served = (*served).max(rank);
                    self.serving.push(*id);
                }
                Effect::Fail { id, .. } => assert!(
                    !self.cancelled.contains(id),
                    "cancelled request {id:?} failed"
                ),
                Effect::StartSwap { model, evict } => {
                    for e in evict.iter().map(|s| &s.model) {
                        assert_eq!(
                            self.h.s.in_flight(e),
                            0,
                            "{model} evicts {e}, which has requests in flight"
                        );
                        self.check_residency(model, e);
                    }
                    // Evicted, its window is over (it stops or sleeps).
                    for e in evict.iter().map(|s| &s.model) {
                        self.left_ready(e);
                    }
                    self.gone.remove(model);
                    self.evicting.insert(
                        model.clone(),
                        evict.iter().map(|s| s.model.clone()).collect(),
                    );
                    self.swaps.push(model.clone());
                }
                Effect::Stop { id, batches } => {
                    // An unload, a TTL or a shutdown ends a window too.
                    for stopped in batches.iter().flatten() {
                        self.left_ready(&stopped.model);
                    }
                    self.stops.push(*id);
                }
                Effect::Status { .. } | Effect::Positions { .. } => {}
            }
        }
        // Positions: every queued request's last reported position is its place, 1..N.
        let queue = self.h.s.queue(self.h.now);
        for (i, entry) in queue.iter().enumerate() {
            assert_eq!(entry.position, i + 1);
            assert_eq!(
                self.h.status.get(&entry.id),
                Some(&WaitStatus::Queued { position: i + 1 }),
                "stale position for {:?}",
                entry.id
            );
        }
        // Reservations match what is pending.
        for m in MODELS {
            let pending = self
                .admitted
                .iter()
                .filter(|(id, (model, _))| {
                    model == m
                        && !self.cancelled.contains(id)
                        && match self.h.outcomes.get(id) {
                            None => true,
                            Some(Outcome::Granted) => self.serving.contains(id),
                            Some(Outcome::Failed(_)) => false,
                        }
                })
                .count();
            let pending = pending + self.absorbed_fast(m);
            assert_eq!(self.h.s.reserved(m), pending, "reservations of {m}");
            let serving = self
                .serving
                .iter()
                .filter(|id| self.admitted[id].0 == m)
                .count();
            // A refused request still counts on its model until it is back in
            // line (a status again) or over.
            let held = self
                .refused
                .iter()
                .filter(|id| {
                    self.admitted[id].0 == m
                        && !self.h.ended(**id)
                        && !self.cancelled.contains(id)
                        && !self.h.status.contains_key(id)
                })
                .count();
            let absorbed = self.absorbed_fast(m);
            assert_eq!(
                self.h.s.in_flight(m),
                serving + held + absorbed,
                "in flight on {m}"
            );
            let t = MODELS.iter().position(|x| *x == m).unwrap_or_default();
            assert_eq!(self.h.s.fast_outstanding(t), absorbed);
            let counted = self.gates[t].counted;
            if let Some(cap) = self.gates[t].open {
                assert!(counted <= cap.admits);
            }
            if let Some(limit) = self.h.s.parallel(m) {
                let in_flight = serving + held + absorbed + counted;
                assert!(
                    in_flight <= limit,
                    "{in_flight} requests in flight on {m}, over its parallel {limit}"
                );
            }
        }
        if self.serial {
            let serving = self.serving.len();
            assert!(
                serving <= 1,
                "serial serves one request at a time, not {serving}"
            );
        }
        self.check_placement();
    }

    /// Under the memory router: on each GPU, what the models placed there
    /// hold (asleep, their sleep memory), less what the swaps in progress stop
    /// before their target's process starts (and what an ended swap stopped
    /// that an unload or shutdown still shows stopping), fits its memory less
    /// the reserve.
    fn check_placement(&self) {
        if self.usable.is_empty() {
            return;
        }
        let leaving: BTreeSet<&String> = self.evicting.values().flatten().collect();
        let running = self.h.s.running();
        for &(gpu, usable) in &self.usable {
            let held: u64 = running
                .iter()
                .filter(|m| m.state != ModelState::Stopped && !leaving.contains(&m.model))
                .filter(|m| !(m.state == ModelState::Stopping && self.gone.contains(&m.model)))
                .filter(|m| m.gpus.contains(&gpu))
                .map(|m| m.memory)
                .sum();
            assert!(
                held <= usable,
                "GPU {gpu} holds {held} bytes, more than its {usable} usable: {running:?}"
            );
        }
    }

    /// `model` is no longer ready (stopped, asleep or gone): its `minResident`
    /// window is over, and a later start opens a new one.
    fn left_ready(&mut self, model: &str) {
        self.ready_at.remove(model);
        self.served_rank.remove(model);
    }

    /// A swap for `target` evicts `evicted`: inside its `minResident` window
    /// only for a waiter ranking above everything it served since it became
    /// ready (never, when the window yields to nobody).
    fn check_residency(&self, target: &str, evicted: &str) {
        let (Some(window), Some(&ready)) =
            (self.min_resident.get(evicted), self.ready_at.get(evicted))
        else {
            return;
        };
        if self.h.now >= ready + *window {
            return;
        }
        let (id, _, effective) = self
            .h
            .s
            .swap_trigger(target)
            .expect("a swap is started for a request");
        let rank = if self.serial { 0 } else { effective };
        let served = self.served_rank.get(evicted).copied().unwrap_or(i32::MIN);
        assert!(
            !self.yields_to_nobody && rank > served,
            "{evicted} stopped inside its minResident window for {id:?} ({target}, rank {rank}), not above the {served} it served"
        );
    }

    /// Completes everything outstanding until nothing is left to do.
    fn settle(&mut self) {
        for _ in 0..1000 {
            // No more fast traffic: every grant still out is the scheduler's.
            self.close_gates();
            if let Some(lease) = self.fast.first().copied() {
                self.fast.remove(0);
                self.h.fast_done(lease.model);
            } else if let Some(model) = self.swaps.first().cloned() {
                self.swaps.remove(0);
                if self.h.s.wants_slots(&model) {
                    self.h.s.set_slots(&model, Some(1));
                }
                self.end_swap(&model, true);
            } else if let Some(id) = self.stops.first().copied() {
                self.stops.remove(0);
                self.h.stop_done(id);
            } else if let Some(id) = self.serving.first().copied() {
                self.serving.remove(0);
                self.h.done(id);
            } else if self.h.s.pending() > 0
                && let Some(wake) = self.h.s.next_wake()
            {
                // A refused request whose upstream never exits waits out its grace.
                self.h.advance(wake.saturating_since(self.h.now));
                self.h.tick();
            } else {
                return;
            }
            self.check_step();
        }
        panic!("the scheduler never settled");
    }

    fn check_settled(&self) {
        for id in self.admitted.keys() {
            let ended = self.h.ended(*id);
            let cancelled = self.cancelled.contains(id);
            assert!(
                ended ^ cancelled,
                "request {id:?} must end in exactly one outcome (ended {ended}, cancelled {cancelled})"
            );
        }
        for m in MODELS {
            assert_eq!(self.h.s.reserved(m), 0);
            assert_eq!(self.h.s.in_flight(m), 0);
        }
        assert_eq!(self.h.s.pending(), 0);
        assert_eq!(self.h.s.queue_len(), 0);
        // FIFO within equal priority (per model); strict arrival order under serial.
        // A refused request's second grant is not a new turn: first grants count.
        let mut seen = BTreeSet::new();
        let grants: Vec<RequestId> = self
            .h
            .grants
            .iter()
            .map(|(id, _)| *id)
            .filter(|id| seen.insert(*id) && !self.fast_ids.contains(id))
            .collect();
        for (i, a) in grants.iter().enumerate() {
            for b in &grants[i + 1..] {
                let (ma, pa) = &self.admitted[a];
                let (mb, pb) = &self.admitted[b];
                if self.serial || (ma == mb && pa == pb) {
                    assert!(
                        a < b,
                        "{b:?} was granted before the earlier {a:?} ({ma} {pa})"
                    );
                }
            }
        }
    }
}

fn pick<T>(items: &[T], k: usize) -> Option<&T> {
    if items.is_empty() {
        None
    } else {
        items.get(k % items.len())
    }
}

/// Slot limits under load: many requests per model, models that often stay up.
fn busy_setup() -> impl Strategy<Value = SchedulerSettings> {
    (prop::bool::ANY, prop::bool::ANY).prop_map(|(fence, together)| {
        let mut models: Vec<ModelSettings> = MODELS
            .iter()
            .map(|id| {
                let mut m = ModelSettings::new(*id);
                m.concurrency_limit = 8;
                m
            })
            .collect();
        models[0].parallel = Parallel::limit(2).unwrap();
        models[1].parallel = Parallel::limit(3).unwrap();
        models[2].parallel = Parallel::Auto;
        models[3].priority = Some(5);
        let mut s = SchedulerSettings::new(models);
        s.kind = SchedulerKind::Fifo { drain_fence: fence };
        if together {
            s.groups = vec![group("all", &MODELS, false, false, false)];
        }
        s
    })
}

fn run_and_replay(settings: SchedulerSettings, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut world = World::new(settings.clone());
    for op in ops {
        world.step(op);
    }
    world.settle();
    world.check_settled();

    // Determinism: the same script gives the same effects.
    let mut again = World::new(settings);
    for op in ops {
        again.step(op);
    }
    again.settle();
    prop_assert_eq!(&world.h.log, &again.h.log);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_scripts_on_slot_limited_models_keep_the_invariants(settings in busy_setup(), ops in prop::collection::vec(op(), 1..200)) {
        run_and_replay(settings, &ops)?;
    }

    #[test]
    fn random_scripts_keep_the_scheduler_invariants(settings in setup(), ops in prop::collection::vec(op(), 1..120)) {
        run_and_replay(settings, &ops)?;
    }

    #[test]
    fn random_scripts_under_the_memory_router_with_sleep_and_min_resident_keep_the_invariants(settings in placed_setup(), ops in prop::collection::vec(op(), 1..160)) {
        run_and_replay(settings, &ops)?;
    }
}
