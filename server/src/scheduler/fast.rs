//! The fast path's side of the scheduler: when a request may be granted
//! without asking the scheduler, and how the requests admitted that way are
//! accounted for once it hears of them.
//!
//! The router publishes, per model, whether a request for it would be granted
//! at once whatever its priority ([`Scheduler::fast_cap`]) and how many such
//! grants fit. Handlers then take grants from that published state without a
//! round trip to the actor. The scheduler stays the only one that decides:
//! before any event that could change a decision, the router closes every
//! model's fast path and hands the scheduler the number of grants still
//! outstanding ([`Scheduler::absorb_fast`]); they then count as admitted and
//! in flight exactly like granted requests (so nothing evicts the model under
//! them, TTL waits, the concurrency limit and slots count them), and each one
//! that ends is reported ([`Scheduler::fast_done`]). A fast grant refused by
//! its upstream becomes an ordinary held request ([`Scheduler::fast_refused`]).
//!
//! The fast path is open only while nothing waits anywhere (queue empty, no
//! held request), so no fence, no ranking and no waiter's turn can be
//! bypassed by it: with an empty queue every admitted request for a ready
//! model that evicts nothing is granted at once (module docs, step 7).

use std::sync::atomic::Ordering;

use super::core::Scheduler;
use super::decide::{Verdict, verdict};
use super::model::{Request, RequestState};
use super::{Effect, RequestId, SchedulerKind, Tick};
use crate::priority::Priority;

/// What the fast path may grant for one model while it stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastCap {
    /// How many more requests it may grant (concurrency limit and slots).
    pub admits: usize,
    /// The model's instance (its count of successful starts), carried by each
    /// grant so that a refusal is matched to the instance that refused it.
    pub start: u64,
    /// The model's configured priority floor (for the effective priority).
    pub floor: Option<i32>,
}

impl Scheduler {
    /// Whether a request for model `t` (an index of [`ModelNames::index`](super::ModelNames::index))
    /// would be granted at once now, whatever its priority, and how many such.
    ///
    /// `None` unless the FIFO scheduler runs, nothing waits (queue empty, no
    /// refused request held), the model is ready, evicts nothing and is not
    /// being stopped, and it has room under its concurrency limit and slots.
    pub fn fast_cap(&self, t: usize) -> Option<FastCap> {
        if self.shutting_down
            || self.kind == SchedulerKind::Serial
            || !self.queue.is_empty()
            || self.held_total > 0
        {
            return None;
        }
        let m = self.models.get(t)?;
        // Nothing waits, so nothing fences: the lowest rank is granted as any.
        if !m.is_ready() || verdict(self.decide(t), i32::MIN, None) != Verdict::Grant {
            return None;
        }
        let admits = m.room();
        (admits > 0).then_some(FastCap {
            admits,
            start: m.starts(),
            floor: m.priority,
        })
    }

    /// A fresh request ID, from the sequence the fast path shares.
    pub fn next_id(&self) -> RequestId {
        RequestId(self.next_request.fetch_add(1, Ordering::Relaxed))
    }

    /// The sequence of request IDs, shared with the router's fast path.
    pub fn id_source(&self) -> std::sync::Arc<std::sync::atomic::AtomicU64> {
        std::sync::Arc::clone(&self.next_request)
    }

    /// The fast path of model `t` closed with `outstanding` grants not yet
    /// ended: they count as admitted and in flight from now on. `last_done`
    /// is when the last fast grant that ended before the close ended (for TTL).
    pub fn absorb_fast(&mut self, t: usize, outstanding: usize, last_done: Option<Tick>) {
        if let Some(m) = self.models.get_mut(t) {
            m.absorb_fast(outstanding, last_done);
        }
    }

    /// A fast grant of model `t` absorbed by [`absorb_fast`](Self::absorb_fast) ended.
    pub fn fast_done(&mut self, now: Tick, t: usize, out: &mut Vec<Effect>) {
        let Some(m) = self.models.get_mut(t) else {
            return;
        };
        if !m.fast_done(now) {
            return;
        }
        if m.in_flight() == 0 {
            self.drain(out);
            self.flush_positions(out);
        } else if m.parallel.is_some() {
            self.refill(t, out);
            self.flush_positions(out);
        }
    }

    /// The upstream refused a fast grant `id` of model `t`, made for instance
    /// `start` at `priority`: from now on it is an ordinary granted request
    /// handed back ([`refused`](Self::refused)). `absorbed` says whether the
    /// scheduler already counts it ([`absorb_fast`](Self::absorb_fast)).
    #[allow(clippy::too_many_arguments)]
    pub fn fast_refused(
        &mut self,
        now: Tick,
        t: usize,
        id: RequestId,
        priority: Priority,
        start: u64,
        absorbed: bool,
        out: &mut Vec<Effect>,
    ) {
        let Some(m) = self.models.get_mut(t) else {
            return;
        };
        if !m.adopt_fast(absorbed) {
            return;
        }
        let effective = priority.effective(m.priority);
        self.requests.insert(
            id,
            Request {
                model: t,
                priority,
                effective,
                arrived: now,
                state: RequestState::Serving,
                fenced: false,
                aged: false,
                granted_start: start,
            },
        );
        self.refused(now, id, out);
    }

    /// Fast grants of model `t` the scheduler counts (absorbed, not yet ended).
    pub fn fast_outstanding(&self, t: usize) -> usize {
        self.models.get(t).map_or(0, |m| m.fast())
    }
}
