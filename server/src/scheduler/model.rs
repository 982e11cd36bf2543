//! The records the scheduler keeps per model and per request, and the one
//! owner of each model's counters.
//!
//! This is the bottom of the scheduler: it imports nothing from the other
//! scheduler files, and they all stand on it.
//!
//! A model's counters (`reserved`, `in_flight`, `fast`, `stopping`,
//! `idle_since`, `ready`, `starts`) are private to this file: the rest of the
//! scheduler changes them only through the methods below, each named for the
//! event it records ([`Model::admit`], [`Model::grant`], [`Model::release`],
//! [`Model::finish`], ...). The TTL clock (`idle_since`) follows from the
//! others here and nowhere else.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::time::Duration;

use super::{ModelSettings, Parallel, RequestId, Tick};
use crate::priority::Priority;

#[derive(Debug)]
pub(super) struct Model {
    pub(super) id: String,
    pub(super) priority: Option<i32>,
    pub(super) limit: usize,
    pub(super) max_queued: Option<usize>,
    pub(super) unload_timeout: Duration,
    pub(super) ttl: Option<Duration>,
    /// Admitted, unfinished requests (queued + waiting on a swap + serving).
    reserved: usize,
    /// Granted requests whose lease is not yet dropped.
    in_flight: usize,
    /// Of `reserved` and `in_flight`: requests the fast path admitted, absorbed
    /// when it closed (`fast.rs`); the scheduler knows only their number.
    fast: usize,
    /// Most requests in flight at once (`parallel`); `None` = no limit.
    pub(super) parallel: Option<usize>,
    /// `parallel: auto`: the limit is the upstream's slot count, told after each start.
    pub(super) auto_parallel: bool,
    /// Known ready (the last start succeeded and nothing stopped it since).
    ready: bool,
    /// Stop operations (unload, TTL, shutdown) in progress.
    stopping: usize,
    /// The swap whose target is this model.
    pub(super) swap: Option<Swap>,
    /// Target of the swap that is stopping this model.
    pub(super) evicted_by: Option<usize>,
    /// Effective priority → number of queued requests, for the drain fence.
    pub(super) queued: BTreeMap<i32, usize>,
    /// Since when the model is ready with no request admitted (for TTL).
    idle_since: Option<Tick>,
    /// Successful starts so far: which instance of the model a grant was for.
    starts: u64,
    /// Granted requests its upstream refused, waiting for the exit to be
    /// processed (`refusal.rs`).
    pub(super) held: Vec<Held>,
    /// A reload changed or removed it while it ran: it is stopped once its
    /// requests in flight end, and grants nothing until then
    /// (`reconfigure.rs`).
    pub(super) retire: bool,
    /// Retired models whose old process may hold the address its new
    /// definition uses: it does not start while one of them is up
    /// (`reconfigure.rs`).
    pub(super) waits_for: Vec<String>,
    /// `minResident`: how long after becoming ready it is guarded from swaps.
    pub(super) min_resident: Option<Duration>,
    /// Until when it is guarded (`minResident` from its last start), while
    /// the guard holds; cleared by `Scheduler::tick` and by anything that
    /// stops or loses it.
    resident_until: Option<Tick>,
    /// The highest effective priority it was granted to since it became
    /// ready: a waiter must rank above it to stop it inside the window.
    resident_rank: Option<i32>,
    /// Its sleep mode's `memory` (bytes kept on each GPU asleep); `None`: no
    /// sleep mode, a swap stops it.
    pub(super) sleep_memory: Option<u64>,
    /// Asleep: a swap freed it and its process sleeps (not ready, not
    /// stopped). Cleared by anything that starts, stops or loses it.
    asleep: bool,
}

impl Model {
    /// A stopped model with nothing admitted, as `settings` describe it.
    pub(super) fn new(settings: &ModelSettings) -> Self {
        Self {
            id: settings.id.clone(),
            priority: settings.priority,
            limit: settings.concurrency_limit,
            max_queued: settings.max_queued,
            unload_timeout: settings.unload_timeout,
            ttl: settings.ttl,
            reserved: 0,
            in_flight: 0,
            fast: 0,
            parallel: match settings.parallel {
                Parallel::Limit(n) => Some(n.get()),
                Parallel::Unlimited | Parallel::Auto => None,
            },
            auto_parallel: settings.parallel == Parallel::Auto,
            ready: false,
            stopping: 0,
            swap: None,
            evicted_by: None,
            queued: BTreeMap::new(),
            idle_since: None,
            starts: 0,
            held: Vec::new(),
            retire: false,
            waits_for: Vec::new(),
            sleep_memory: settings.sleep,
            asleep: false,
            min_resident: settings.min_resident,
            resident_until: None,
            resident_rank: None,
        }
    }

    /// Admitted, unfinished requests (queued + waiting on a start + serving).
    pub(super) fn reserved(&self) -> usize {
        self.reserved
    }

    /// Granted requests whose lease is still held (held refusals included).
    pub(super) fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// Admitted requests not in flight: queued or waiting on a start.
    pub(super) fn waiting(&self) -> usize {
        self.reserved - self.in_flight
    }

    /// Fast-path grants the scheduler counts (absorbed, not yet ended).
    pub(super) fn fast(&self) -> usize {
        self.fast
    }

    /// Known ready: the last start succeeded and nothing stopped it since.
    pub(super) fn is_ready(&self) -> bool {
        self.ready
    }

    /// Whether a stop operation (unload, TTL, shutdown) is in progress.
    pub(super) fn is_stopping(&self) -> bool {
        self.stopping > 0
    }

    /// Since when the model is ready with nothing admitted (for TTL).
    pub(super) fn idle_since(&self) -> Option<Tick> {
        self.idle_since
    }

    /// Asleep: its process sleeps; a start wakes it.
    pub(super) fn is_asleep(&self) -> bool {
        self.asleep
    }

    /// Inside its `minResident` window: (until when, the highest effective
    /// priority it served since it became ready).
    pub(super) fn residency(&self) -> Option<(Tick, Option<i32>)> {
        self.resident_until.map(|until| (until, self.resident_rank))
    }

    /// Its `minResident` window has run out.
    pub(super) fn residency_ended(&mut self) {
        self.resident_until = None;
    }

    /// A request of effective priority `rank` was granted to it (what a
    /// waiter must rank above to stop it inside its window).
    pub(super) fn served_at(&mut self, rank: i32) {
        if self.resident_until.is_some() {
            self.resident_rank = Some(self.resident_rank.map_or(rank, |r| r.max(rank)));
        }
    }

    /// Successful starts so far: the instance a grant is made on.
    pub(super) fn starts(&self) -> u64 {
        self.starts
    }

    /// Whether the model has a slot limit and every slot is taken.
    pub(super) fn slots_full(&self) -> bool {
        self.parallel.is_some_and(|limit| self.in_flight >= limit)
    }

    /// Grants that fit now under the concurrency limit and the slots.
    pub(super) fn room(&self) -> usize {
        let by_limit = self.limit.saturating_sub(self.reserved);
        let by_slots = self
            .parallel
            .map_or(usize::MAX, |n| n.saturating_sub(self.in_flight));
        by_limit.min(by_slots)
    }

    /// A request is admitted: it counts against the concurrency limit, and
    /// the TTL clock stops.
    pub(super) fn admit(&mut self) {
        self.reserved += 1;
        self.idle_since = None;
    }

    /// An admitted request is granted: it is in flight.
    pub(super) fn grant(&mut self) {
        self.in_flight += 1;
    }

    /// A granted request is no longer in flight (its lease ended, or it was
    /// handed back and waits or fails); it stays admitted until [`finish`](Self::finish).
    pub(super) fn release(&mut self) {
        self.in_flight -= 1;
    }

    /// An admitted request ended (served, failed or cancelled): the last one
    /// starts the TTL clock of a ready or sleeping model.
    pub(super) fn finish(&mut self, now: Tick) {
        self.reserved -= 1;
        if self.reserved == 0 && (self.ready || self.asleep) {
            self.idle_since = Some(now);
        }
    }

    /// The fast path closed with `outstanding` grants not yet ended: they count
    /// as admitted and in flight. `last_done` is when the last fast grant that
    /// ended before the close ended: the TTL clock of an idle model runs from it.
    pub(super) fn absorb_fast(&mut self, outstanding: usize, last_done: Option<Tick>) {
        self.fast += outstanding;
        self.reserved += outstanding;
        self.in_flight += outstanding;
        if self.reserved > 0 {
            self.idle_since = None;
        } else if let Some(done) = last_done
            && self.ready
        {
            self.idle_since = Some(self.idle_since.map_or(done, |idle| idle.max(done)));
        }
    }

    /// An absorbed fast grant ended. False (nothing changed) when none is counted.
    pub(super) fn fast_done(&mut self, now: Tick) -> bool {
        if self.fast == 0 {
            return false;
        }
        self.fast -= 1;
        self.release();
        self.finish(now);
        true
    }

    /// A fast grant was refused by its upstream and becomes an ordinary
    /// granted request: an absorbed one stops counting as fast, one the
    /// scheduler did not know of is admitted and granted. False (nothing
    /// changed) for an absorbed one when none is counted.
    pub(super) fn adopt_fast(&mut self, absorbed: bool) -> bool {
        if absorbed {
            if self.fast == 0 {
                return false;
            }
            self.fast -= 1;
        } else {
            self.admit();
            self.grant();
        }
        true
    }

    /// Its start succeeded: a new instance is ready; with nothing admitted
    /// the TTL clock starts.
    pub(super) fn started(&mut self, now: Tick) {
        self.ready = true;
        self.asleep = false;
        self.resident_until = self.min_resident.filter(|d| !d.is_zero()).map(|d| now + d);
        self.resident_rank = None;
        self.starts += 1;
        if self.reserved == 0 {
            self.idle_since = Some(now);
        }
    }

    /// It is no longer known ready: its start failed or was cancelled, or a
    /// swap is stopping it.
    pub(super) fn unready(&mut self) {
        self.ready = false;
        self.asleep = false;
        self.resident_until = None;
    }

    /// The swap that freed it put it to sleep: its process stays, not
    /// serving. Its TTL clock keeps running from its last use (a `ttl`
    /// stops a sleeping model for good).
    pub(super) fn fell_asleep(&mut self) {
        self.ready = false;
        self.asleep = true;
        self.resident_until = None;
    }

    /// A stop operation (unload, TTL, shutdown) began on it.
    pub(super) fn stop_begun(&mut self) {
        self.stopping += 1;
        self.ready = false;
        self.asleep = false;
        self.resident_until = None;
        self.idle_since = None;
    }

    /// A stop operation that included it ended: it is stopped.
    pub(super) fn stop_ended(&mut self) {
        self.stopping = self.stopping.saturating_sub(1);
        self.ready = false;
        self.idle_since = None;
    }

    /// Its process exited by itself.
    pub(super) fn exited(&mut self) {
        self.ready = false;
        self.asleep = false;
        self.resident_until = None;
        self.idle_since = None;
    }

    /// A reload rebuilt the model: it keeps `old`'s counters (requests,
    /// readiness, stops in progress, instance, TTL clock).
    pub(super) fn keep_counters(&mut self, old: &Self) {
        self.reserved = old.reserved;
        self.in_flight = old.in_flight;
        self.fast = old.fast;
        self.ready = old.ready;
        self.asleep = old.asleep;
        self.resident_until = old.resident_until;
        self.resident_rank = old.resident_rank;
        self.stopping = old.stopping;
        self.idle_since = old.idle_since;
        self.starts = old.starts;
    }
}

/// A refused request waiting for its model's exit.
#[derive(Debug, Clone, Copy)]
pub(super) struct Held {
    pub(super) id: RequestId,
    /// The instance that refused it (the model's `starts` at the grant).
    pub(super) start: u64,
    /// When it fails if the exit never comes (the upstream refuses but runs).
    pub(super) until: Tick,
}

#[derive(Debug)]
pub(super) struct Swap {
    pub(super) waiters: Vec<RequestId>,
    pub(super) evict: Vec<usize>,
    /// Of `evict`: the ones put to sleep rather than stopped.
    pub(super) sleeping: Vec<usize>,
    /// Unloaded or shut down meanwhile: the model is stopped once the start ends.
    pub(super) cancelled: bool,
    /// The policy's account of why `evict` was chosen (the matrix's set and cost).
    pub(super) reason: Option<String>,
}

#[derive(Debug)]
pub(super) struct Request {
    pub(super) model: usize,
    /// Requested and capped, as the HTTP layer built it.
    pub(super) priority: Priority,
    /// `max(floor, capped)`, fixed at admission.
    pub(super) effective: i32,
    pub(super) arrived: Tick,
    pub(super) state: RequestState,
    /// The drain fence held it back at least once.
    pub(super) fenced: bool,
    /// Waited `aging_after`: ranks ahead of everything that has not aged.
    pub(super) aged: bool,
    /// The model's `starts` when it was last granted.
    pub(super) granted_start: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RequestState {
    Queued,
    Joined,
    Serving,
    /// Refused by its upstream; waiting for the exit (see `refusal.rs`).
    Held,
}

/// One request in the ranked queue.
#[derive(Debug, Clone, Copy)]
pub(super) struct Queued {
    pub(super) id: RequestId,
    pub(super) model: usize,
    /// Ranking priority: the effective priority (0 for every request under `serial`).
    pub(super) rank: i32,
    /// Last position reported to the request (0 = none yet).
    pub(super) reported: usize,
}

impl Queued {
    pub(super) fn key(&self) -> (Reverse<i32>, RequestId) {
        (Reverse(self.rank), self.id)
    }
}
