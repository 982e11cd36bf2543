//! Per-model slot limits (`parallel: N`): at most N requests in flight to a
//! model's upstream, the rest ranked in the queue like every waiter.
//!
//! A model without a limit behaves exactly as before (llama-swap's fast path
//! never queues a request for a ready model). With one, a request for the ready
//! model whose slots are all taken queues ([`Decision::Full`]); when one of its
//! responses ends, the highest-ranked waiter for that model takes the slot,
//! unless the drain fence holds it (a waiter of strictly higher rank needs the
//! model stopped: refilling the slot would only make it wait longer). Nothing
//! forwarded is ever cut short.

use std::cmp::Reverse;

use super::core::Scheduler;
use super::decide::{Decision, Verdict, verdict};
use super::{Effect, RequestId};

impl Scheduler {
    /// Whether model `t` has a slot limit and every slot is taken.
    pub(super) fn slots_full(&self, t: usize) -> bool {
        self.models[t].slots_full()
    }

    /// A response of model `t` ended while others are still in flight: its
    /// highest waiters take the free slots. Nothing else can have changed (the
    /// model is still busy, so nothing waiting to evict it can go), so only its
    /// own entries are looked at.
    pub(super) fn refill(&mut self, t: usize, out: &mut Vec<Effect>) {
        if self.shutting_down || self.models[t].queued.is_empty() {
            return;
        }
        // Every conflicting waiter of higher rank is ahead of the entries it
        // holds back, as in the full walk, so the level over the whole queue is
        // the level the walk would build.
        let fence = self.fence_over(t);
        // Only a model that serves at once can refill; anything else waits
        // for the full walk.
        if self.decide(t) != Decision::Serve {
            return;
        }
        let mut index = 0;
        let mut first_removed = None;
        while index < self.queue.len() {
            let q = self.queue[index];
            if q.model != t {
                index += 1;
                continue;
            }
            if verdict(Decision::Serve, q.rank, fence) != Verdict::Grant {
                // Fenced. Ranks only go down from here: every later entry is held too.
                self.note_fenced(q.id);
                index += 1;
                continue;
            }
            self.queue.remove(index);
            self.uncount(&q);
            first_removed.get_or_insert(index);
            self.grant(q.id, out);
            if self.slots_full(t) {
                break;
            }
        }
        if let Some(index) = first_removed {
            self.mark_dirty(index);
        }
    }

    /// The start of model `t` succeeded: the requests that waited with it are
    /// granted. With a slot limit only the highest-ranked ones up to it are
    /// (joiners wait unranked, so this is where their priority counts); the
    /// others wait in the ranked queue for a slot.
    pub(super) fn grant_joined(
        &mut self,
        t: usize,
        mut waiters: Vec<RequestId>,
        out: &mut Vec<Effect>,
    ) {
        let kind = self.kind;
        let rank = |s: &Self, id: &RequestId| {
            s.requests
                .get(id)
                .map_or(i32::MIN, |r| Self::rank_of(kind, r))
        };
        if self.models[t].parallel.is_some() {
            waiters.sort_by_key(|id| (Reverse(rank(self, id)), *id));
        }
        for id in waiters {
            // Their swap is done: only the slots can hold them, and the
            // fence never does (they were let in before it could).
            let decision = if self.slots_full(t) {
                Decision::Full
            } else {
                Decision::Serve
            };
            match verdict(decision, rank(self, &id), None) {
                Verdict::Grant => self.grant(id, out),
                _ => self.enqueue(id),
            }
        }
    }

    /// Whether `model` (ID) takes its slot limit from its upstream (`parallel: auto`):
    /// the router then asks the launcher after each start and reports it with
    /// [`set_slots`](Self::set_slots) before `swap_done`.
    pub fn wants_slots(&self, model: &str) -> bool {
        self.index_of(model)
            .is_some_and(|t| self.models[t].auto_parallel)
    }

    /// The slot count the upstream of a `parallel: auto` model reported after
    /// its start (`None` or 0: it did not say, so no limit). Ignored for other models.
    pub fn set_slots(&mut self, model: &str, slots: Option<usize>) {
        let Some(t) = self.index_of(model) else {
            return;
        };
        if self.models[t].auto_parallel {
            self.models[t].parallel = slots.filter(|&n| n > 0);
        }
    }

    /// The slot limit of `model` (ID or alias) now: `None` for no limit.
    pub fn parallel(&self, model: &str) -> Option<usize> {
        self.names
            .index(model)
            .and_then(|t| self.models[t].parallel)
    }
}
