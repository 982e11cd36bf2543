//! Requests whose upstream refused them before they reached it.
//!
//! A request is granted a ready model, but the connection is refused: the
//! upstream crashed an instant ago and its exit is not processed yet (or it
//! runs and does not listen). The lease hands the request back
//! ([`Scheduler::refused`]) instead of ending it:
//!
//! - if the model is no longer the instance that refused it (its exit was
//!   processed, it is stopping, or it was started again), the request goes back
//!   into the queue at once;
//! - otherwise it is **held** until that instance is gone (the exit arrives),
//!   then goes back into the queue. While held it still counts as in flight on
//!   the model, so nothing evicts the model under it and no later request takes
//!   its turn;
//! - a held request whose instance is still there after [`REFUSAL_GRACE`] (the
//!   upstream runs but refuses connections) fails with
//!   [`RouteError::UpstreamRefused`].
//!
//! Back in the queue, it keeps its identity (so its arrival order), its priority
//! and its aging clock: it ranks where it did when it arrived, and the drain walk
//! gives it its turn, which usually means starting the model again. Unload and
//! shutdown fail held requests like waiters; a request refused once shutdown
//! has begun fails at once.

use std::time::Duration;

use super::core::Scheduler;
use super::model::{Held, RequestState};
use super::{Effect, ModelState, RequestId, RouteError, Tick};

/// How long a refused request waits for its upstream's exit before it fails.
pub const REFUSAL_GRACE: Duration = Duration::from_secs(1);

impl Scheduler {
    /// The upstream of a granted request refused its connection before the
    /// request reached it: the request goes back into the queue once the model's
    /// exit is processed (see the module docs). A no-op unless the request is
    /// being served.
    pub fn refused(&mut self, now: Tick, id: RequestId, out: &mut Vec<Effect>) {
        let Some(request) = self.requests.get_mut(&id) else {
            return;
        };
        if request.state != RequestState::Serving {
            return;
        }
        let t = request.model;
        if self.shutting_down {
            // Nothing starts any more: it ends as a waiter would.
            self.models[t].release();
            self.fail(now, id, RouteError::ShuttingDown, out);
            return;
        }
        let start = request.granted_start;
        request.state = RequestState::Held;
        self.models[t].held.push(Held {
            id,
            start,
            until: now + REFUSAL_GRACE,
        });
        self.held_total += 1;
        // Releases it at once if the instance is already gone.
        self.drain(out);
        self.flush_positions(out);
    }

    /// Whether `held` still waits for the instance that refused it to go away.
    fn still_held(&self, t: usize, held: &Held) -> bool {
        self.state_of(t) == ModelState::Ready && self.models[t].starts() == held.start
    }

    /// Puts back into the queue every held request whose refusing instance is
    /// gone; the drain walk that follows gives them their turn.
    pub(super) fn release_held(&mut self) {
        if self.held_total == 0 {
            return;
        }
        for t in 0..self.models.len() {
            if self.models[t].held.is_empty() {
                continue;
            }
            let held = std::mem::take(&mut self.models[t].held);
            let (keep, release): (Vec<Held>, Vec<Held>) =
                held.into_iter().partition(|h| self.still_held(t, h));
            self.models[t].held = keep;
            for h in release {
                self.held_total -= 1;
                self.models[t].release();
                self.enqueue(h.id);
            }
        }
    }

    /// Fails the held requests whose grace ran out while their instance still
    /// runs; the others are placed again.
    pub(super) fn expire_held(&mut self, now: Tick, out: &mut Vec<Effect>) {
        if self.held_total == 0 {
            return;
        }
        for t in 0..self.models.len() {
            if !self.models[t].held.iter().any(|h| h.until <= now) {
                continue;
            }
            let held = std::mem::take(&mut self.models[t].held);
            let (expired, keep): (Vec<Held>, Vec<Held>) =
                held.into_iter().partition(|h| h.until <= now);
            self.models[t].held = keep;
            for h in expired {
                self.held_total -= 1;
                self.models[t].release();
                if self.still_held(t, &h) {
                    let model = self.models[t].id.clone();
                    self.fail(now, h.id, RouteError::UpstreamRefused { model }, out);
                } else {
                    self.enqueue(h.id);
                }
            }
        }
        self.drain(out);
        self.flush_positions(out);
    }

    /// When the first held request runs out of grace.
    pub(super) fn next_refusal_deadline(&self) -> Option<Tick> {
        if self.held_total == 0 {
            return None;
        }
        self.models
            .iter()
            .flat_map(|m| m.held.iter().map(|h| h.until))
            .min()
    }

    /// Takes a held request out of its model's list (it is about to end).
    pub(super) fn unhold(&mut self, t: usize, id: RequestId) {
        let before = self.models[t].held.len();
        self.models[t].held.retain(|h| h.id != id);
        let removed = before - self.models[t].held.len();
        self.held_total -= removed;
        for _ in 0..removed {
            self.models[t].release();
        }
    }
}
