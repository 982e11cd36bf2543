//! Anti-starvation aging (`aging_after`, FIFO only, off by default).
//!
//! A request that has been queued for `aging_after` ranks as if at the top
//! priority (`i32::MAX`), ties by arrival, so it goes ahead of every request
//! that has not aged, whatever their priority. Its requested and effective
//! priorities are kept for display and metrics.
//!
//! Bound: once aged, only requests that arrived before it (aged too) or that
//! carry `i32::MAX` itself rank ahead of it. So its wait is at most
//! `aging_after`, plus the time to serve those, plus the remaining time of the
//! requests in flight it must outlast (no preemption) and one swap.

use std::cmp::Reverse;

use super::core::Scheduler;
use super::{Effect, Tick};

impl Scheduler {
    /// When the oldest queued request that has not aged will age.
    pub(super) fn next_aging(&self) -> Option<Tick> {
        let age = self.aging_after?;
        let id = self.not_aged.first()?;
        self.requests.get(id).map(|r| r.arrived + age)
    }

    /// Ages every queued request that has waited `aging_after` by `now`, then
    /// lets the queue go as far as it can with the new order.
    pub(super) fn age(&mut self, now: Tick, out: &mut Vec<Effect>) {
        let Some(age) = self.aging_after else {
            return;
        };
        let mut changed = false;
        while let Some(&id) = self.not_aged.first() {
            let Some(request) = self.requests.get_mut(&id) else {
                self.not_aged.remove(&id);
                continue;
            };
            if request.arrived + age > now {
                break;
            }
            self.not_aged.remove(&id);
            request.aged = true;
            let t = request.model;
            let Some(q) = self.queue.iter_mut().find(|q| q.id == id) else {
                continue;
            };
            let old = q.rank;
            q.rank = i32::MAX;
            let counts = &mut self.models[t].queued;
            if let Some(n) = counts.get_mut(&old) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(&old);
                }
            }
            *counts.entry(i32::MAX).or_insert(0) += 1;
            changed = true;
            tracing::debug!(request = id.0, "aged: ranks ahead of newer work");
        }
        if changed {
            self.queue.sort_by_key(|q| (Reverse(q.rank), q.id));
            self.mark_dirty(0);
            self.drain(out);
            self.flush_positions(out);
        }
    }
}
