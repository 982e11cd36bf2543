//! Model lifecycle outside requests: stops (unload, TTL, shutdown) and exits.

use super::core::Scheduler;
use super::{Effect, ModelState, RouteError, StopId, StopModel, Tick};

impl Scheduler {
    /// A stop operation issued with [`Effect::Stop`] finished: its models are stopped.
    pub fn stop_done(&mut self, id: StopId, out: &mut Vec<Effect>) {
        let Some(models) = self.stops.remove(&id) else {
            return;
        };
        for m in models {
            self.models[m].stop_ended();
        }
        self.drain(out);
        self.flush_positions(out);
    }

    /// A ready or sleeping model's process exited by itself: it is stopped, and
    /// the next request for it starts it again. Ignored otherwise (a start or
    /// stop in progress reports its own outcome).
    ///
    /// A model a swap in progress puts to sleep that exits (it fell asleep and
    /// died before the swap ended) counts as stopped once the swap ends.
    pub fn upstream_exited(&mut self, model: &str, out: &mut Vec<Effect>) {
        let Some(t) = self.index_of(model) else {
            return;
        };
        if self.forget_sleep(t) {
            return;
        }
        if !matches!(self.state_of(t), ModelState::Ready | ModelState::Sleeping) {
            return;
        }
        self.models[t].exited();
        // The drain re-places the requests this exit refused.
        self.drain(out);
        self.flush_positions(out);
    }

    /// The swap that evicts `model` stopped it instead of putting it to sleep
    /// (its sleep call failed, or it was not running awake): once the swap
    /// ends it counts as stopped, not sleeping. Call it before
    /// [`swap_done`](Self::swap_done); ignored for a model no swap in
    /// progress puts to sleep.
    pub fn stopped_not_slept(&mut self, model: &str) {
        if let Some(e) = self.index_of(model) {
            self.forget_sleep(e);
        }
    }

    /// Takes evicted model `e` off the sleepers of the swap that evicts it;
    /// whether it was one.
    fn forget_sleep(&mut self, e: usize) -> bool {
        let Some(t) = self.models[e].evicted_by else {
            return false;
        };
        let Some(swap) = self.models[t].swap.as_mut() else {
            return false;
        };
        let before = swap.sleeping.len();
        swap.sleeping.retain(|&s| s != e);
        swap.sleeping.len() != before
    }

    /// Unloads `models` (IDs or aliases; `None` = every model): their waiters fail with
    /// [`RouteError::Unloaded`] and the non-stopped ones are stopped with their
    /// `unload_timeout`, smallest timeout first, equal timeouts in parallel.
    ///
    /// Returns the stop to wait for, or `None` when nothing was running.
    ///
    /// # Errors
    ///
    /// [`RouteError::UnknownModel`] for a name that is not configured (nothing is
    /// changed), [`RouteError::ShuttingDown`] during shutdown.
    pub fn unload(
        &mut self,
        now: Tick,
        models: Option<&[String]>,
        out: &mut Vec<Effect>,
    ) -> Result<Option<StopId>, RouteError> {
        if self.shutting_down {
            return Err(RouteError::ShuttingDown);
        }
        let mut targets: Vec<usize> = match models {
            None => (0..self.models.len()).collect(),
            Some(names) => names
                .iter()
                .map(|n| {
                    self.names
                        .index(n)
                        .ok_or_else(|| RouteError::UnknownModel { model: n.clone() })
                })
                .collect::<Result<_, _>>()?,
        };
        targets.sort_unstable();
        targets.dedup();
        let mut selected = vec![false; self.models.len()];
        for &t in &targets {
            selected[t] = true;
        }
        self.fail_waiters(now, out, |s, t| {
            selected[t].then(|| RouteError::Unloaded {
                model: s.models[t].id.clone(),
            })
        });
        let mut running: Vec<usize> = targets
            .into_iter()
            .filter(|&t| self.state_of(t) != ModelState::Stopped)
            .collect();
        running.sort_by_key(|&t| (self.models[t].unload_timeout, t));
        let mut batches: Vec<Vec<usize>> = Vec::new();
        for t in running {
            match batches.last_mut() {
                Some(batch)
                    if self.models[batch[0]].unload_timeout == self.models[t].unload_timeout =>
                {
                    batch.push(t);
                }
                _ => batches.push(vec![t]),
            }
        }
        let stop = self.issue_stop(batches, out);
        self.drain(out);
        self.flush_positions(out);
        Ok(stop)
    }

    /// Starts shutdown: every waiter fails with [`RouteError::ShuttingDown`], later
    /// submits are refused, and every non-stopped model is stopped in parallel.
    ///
    /// Returns the stop to wait for; `None` when nothing runs or shutdown had already begun.
    pub fn shutdown(&mut self, now: Tick, out: &mut Vec<Effect>) -> Option<StopId> {
        if self.shutting_down {
            return None;
        }
        self.fail_waiters(now, out, |_, _| Some(RouteError::ShuttingDown));
        self.shutting_down = true;
        let running: Vec<usize> = (0..self.models.len())
            .filter(|&t| self.state_of(t) != ModelState::Stopped)
            .collect();
        let batches = if running.is_empty() {
            Vec::new()
        } else {
            vec![running]
        };
        self.issue_stop(batches, out)
    }

    /// Stops models whose TTL expired at `now` (ready or asleep, nothing
    /// admitted, unused for `ttl`): a sleeping model's process is stopped for
    /// good, its `ttl` counted from its last use as for a ready one.
    pub fn tick(&mut self, now: Tick, out: &mut Vec<Effect>) {
        if self.shutting_down {
            return;
        }
        let expired: Vec<usize> = (0..self.models.len())
            .filter(|&t| self.ttl_deadline(t).is_some_and(|d| d <= now))
            .collect();
        for t in expired {
            self.issue_stop(vec![vec![t]], out);
        }
        self.end_residencies(now, out);
        self.expire_held(now, out);
        self.age(now, out);
    }

    /// When [`Scheduler::tick`] next has work to do, if ever.
    pub fn next_wake(&self) -> Option<Tick> {
        if self.shutting_down {
            return None;
        }
        (0..self.models.len())
            .filter_map(|t| self.ttl_deadline(t))
            .chain(self.next_residency_end())
            .chain(self.next_aging())
            .chain(self.next_refusal_deadline())
            .min()
    }

    /// Ends the `minResident` windows that ran out by `now` (and forgets
    /// models no longer inside one); what waited for them may go.
    fn end_residencies(&mut self, now: Tick, out: &mut Vec<Effect>) {
        if self.resident.is_empty() {
            return;
        }
        let mut ended = false;
        let resident = std::mem::take(&mut self.resident);
        for t in resident {
            match self.models[t].residency() {
                Some((until, _)) if until > now => {
                    self.resident.insert(t);
                }
                Some(_) => {
                    self.models[t].residency_ended();
                    ended = true;
                }
                None => {}
            }
        }
        if ended {
            self.drain(out);
            self.flush_positions(out);
        }
    }

    /// When the next `minResident` window runs out, if one runs.
    fn next_residency_end(&self) -> Option<Tick> {
        self.resident
            .iter()
            .filter_map(|&t| self.models[t].residency().map(|(until, _)| until))
            .min()
    }

    fn ttl_deadline(&self, t: usize) -> Option<Tick> {
        let m = &self.models[t];
        let ttl = m.ttl?;
        let idle = m.idle_since()?;
        let up = matches!(self.state_of(t), ModelState::Ready | ModelState::Sleeping);
        (m.reserved() == 0 && up).then_some(idle + ttl)
    }

    /// Fails every queued and swap-waiting request of the models `error_for` names,
    /// cancelling those models' swaps.
    pub(super) fn fail_waiters(
        &mut self,
        now: Tick,
        out: &mut Vec<Effect>,
        error_for: impl Fn(&Self, usize) -> Option<RouteError>,
    ) {
        let errors: Vec<Option<RouteError>> =
            (0..self.models.len()).map(|t| error_for(self, t)).collect();
        for (t, error) in errors.iter().enumerate() {
            let Some(error) = error else { continue };
            let Some(swap) = self.models[t].swap.as_mut() else {
                continue;
            };
            swap.cancelled = true;
            for id in std::mem::take(&mut swap.waiters) {
                self.fail(now, id, error.clone(), out);
            }
        }
        let removed = self.remove_queued(|q| errors[q.model].is_some());
        for q in removed {
            if let Some(error) = &errors[q.model] {
                self.fail(now, q.id, error.clone(), out);
            }
        }
        for (t, error) in errors.iter().enumerate() {
            let Some(error) = error else { continue };
            for held in std::mem::take(&mut self.models[t].held) {
                self.held_total -= 1;
                self.models[t].release();
                self.fail(now, held.id, error.clone(), out);
            }
        }
    }

    /// Emits a stop for `batches` of model indices (empty batches skipped).
    pub(super) fn issue_stop(
        &mut self,
        batches: Vec<Vec<usize>>,
        out: &mut Vec<Effect>,
    ) -> Option<StopId> {
        let batches: Vec<Vec<usize>> = batches.into_iter().filter(|b| !b.is_empty()).collect();
        if batches.is_empty() {
            return None;
        }
        let id = StopId(self.next_stop);
        self.next_stop += 1;
        let mut all = Vec::new();
        let mut effect_batches = Vec::with_capacity(batches.len());
        for batch in batches {
            let mut effect_batch = Vec::with_capacity(batch.len());
            for t in batch {
                let m = &mut self.models[t];
                m.stop_begun();
                if let Some(swap) = m.swap.as_mut() {
                    swap.cancelled = true;
                }
                effect_batch.push(StopModel {
                    model: m.id.clone(),
                    grace: m.unload_timeout,
                    may_sleep: false,
                });
                all.push(t);
            }
            effect_batches.push(effect_batch);
        }
        self.stops.insert(id, all);
        out.push(Effect::Stop {
            id,
            batches: effect_batches,
        });
        Some(id)
    }
}
