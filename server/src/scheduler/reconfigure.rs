//! A reload applied in place: new settings, the same requests and models.
//!
//! [`Scheduler::reconfigure`] builds the scheduler of the new settings and
//! moves the running state into it, model by model (by ID) and request by
//! request:
//!
//! - a kept model keeps its state (ready, starting, stopping, in flight,
//!   slots learned from its upstream, TTL clock) and its requests; its new
//!   settings (floor, limits, `parallel`, TTL, aliases, group) apply to the
//!   decisions taken from now on; nothing running is preempted;
//! - a model whose process definition changed (`restart`) and that is up is
//!   *retired*: it grants nothing more, is stopped once its requests in
//!   flight end, and what waits for it then starts its new definition (the
//!   waiters of a start in progress go back to the queue: that start may run
//!   either definition, depending on whether the launcher began it before the
//!   reload);
//! - a removed model's waiting requests fail with [`RouteError::Removed`];
//!   if it is up it stays (without names, so nothing new reaches it) as a
//!   retired model until it is stopped, and the next reconfigure drops it;
//! - an added or changed model whose new definition uses the address of a
//!   retired model's old process ([`Restarts::waits`]) does not start while
//!   that process is up (`${PORT}` is numbered in ID order, so adding a
//!   model renumbers the models after it);
//! - the queue keeps its order: ranks are recomputed only for the kind of
//!   scheduler (effective priorities were fixed at admission).

use std::collections::BTreeSet;
use std::sync::Arc;

use super::core::Scheduler;
use super::model::{Model, Queued};
use super::{
    Effect, ModelSettings, ModelState, Parallel, RouteError, SchedulerSettings, SettingsError, Tick,
};

/// What a reload changed about the models' processes (the launcher's side of
/// [`Scheduler::reconfigure`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restarts {
    /// Models whose process definition changed: one that is up is stopped
    /// once its requests in flight end, and starts its new definition after.
    pub changed: Vec<String>,
    /// `(new, old)`: the new definition of model `new` (added or changed)
    /// uses an address the process of model `old` (changed or removed) may
    /// still hold, so `new` does not start while `old` runs its old process.
    pub waits: Vec<(String, String)>,
}

impl Restarts {
    /// Only `changed`, with no addresses shared between definitions.
    pub fn changed<I, S>(models: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            changed: models.into_iter().map(Into::into).collect(),
            waits: Vec::new(),
        }
    }
}

impl Scheduler {
    /// Applies new `settings` to the running scheduler (see the module docs):
    /// `restarts` says which models' process definitions changed and which
    /// new definitions must wait for which old processes. Returns, for each
    /// model index before the call, its index after (`None`: gone).
    ///
    /// # Errors
    ///
    /// [`SettingsError`] as [`Scheduler::new`]; the scheduler is then unchanged.
    pub fn reconfigure(
        &mut self,
        now: Tick,
        settings: &SchedulerSettings,
        restarts: &Restarts,
        out: &mut Vec<Effect>,
    ) -> Result<Vec<Option<usize>>, SettingsError> {
        let restart = restarts.changed.as_slice();
        let configured: BTreeSet<&str> = settings.models.iter().map(|m| m.id.as_str()).collect();
        // Removed models that are up (ready, being started or stopped) or
        // have requests: kept, without names, until they are stopped and idle.
        let stays = |m: &Model, t: usize| {
            !configured.contains(m.id.as_str())
                && (self.state_of(t) != ModelState::Stopped || m.reserved() > 0)
        };
        let mut all = settings.clone();
        for (t, m) in self.models.iter().enumerate() {
            if stays(m, t) {
                all.models.push(ModelSettings {
                    id: m.id.clone(),
                    aliases: Vec::new(),
                    priority: None,
                    concurrency_limit: m.limit,
                    unload_timeout: m.unload_timeout,
                    ttl: None,
                    max_queued: None,
                    parallel: Parallel::Unlimited,
                    memory: self
                        .placements
                        .as_ref()
                        .and_then(|p| p.memory.model(t).copied()),
                    min_resident: None,
                    sleep: m.sleep_memory,
                });
            }
        }
        let mut next = Self::build(&all, &|id| configured.contains(id))?;
        let map: Vec<Option<usize>> = self.models.iter().map(|m| next.index_of(&m.id)).collect();
        let remap = |t: usize| map.get(t).copied().flatten();
        if let (Some(new), Some(old)) = (next.placements.as_mut(), self.placements.as_ref()) {
            // Models that stay keep their GPUs.
            new.keep(old, |u| map.iter().position(|&m| m == Some(u)));
        }

        for (t, old) in std::mem::take(&mut self.models).into_iter().enumerate() {
            let Some(u) = remap(t) else { continue };
            let new = &mut next.models[u];
            let up = old.is_ready() || old.is_asleep() || old.swap.is_some() || old.is_stopping();
            new.retire =
                (old.retire || restart.contains(&old.id) || !configured.contains(old.id.as_str()))
                    && (up || old.evicted_by.is_some());
            new.keep_counters(&old);
            new.waits_for = old.waits_for;
            if new.auto_parallel && old.auto_parallel {
                // The slot count its running upstream reported.
                new.parallel = old.parallel;
            }
            new.swap = old.swap.map(|mut swap| {
                swap.evict = swap.evict.iter().filter_map(|&e| remap(e)).collect();
                swap
            });
            new.evicted_by = old.evicted_by.and_then(remap);
            new.held = old.held;
        }
        for (new, old) in &restarts.waits {
            if let Some(u) = next.index_of(new)
                && !next.models[u].waits_for.contains(old)
            {
                next.models[u].waits_for.push(old.clone());
            }
        }
        next.retiring = next.models.iter().filter(|m| m.retire).count();
        let old_queue = std::mem::take(&mut self.queue);
        next.requests = std::mem::take(&mut self.requests)
            .into_iter()
            .filter_map(|(id, mut r)| {
                r.model = remap(r.model)?;
                Some((id, r))
            })
            .collect();
        let mut queue: Vec<Queued> = old_queue
            .into_iter()
            .filter_map(|q| {
                let r = next.requests.get(&q.id)?;
                Some(Queued {
                    id: q.id,
                    model: r.model,
                    rank: Self::rank_of(next.kind, r),
                    reported: q.reported,
                })
            })
            .collect();
        // Stable: requests of equal key keep their order.
        queue.sort_by_key(Queued::key);
        for q in &queue {
            next.count_queued(q.model, q.rank);
            if next.aging_after.is_some() && next.requests.get(&q.id).is_some_and(|r| !r.aged) {
                next.not_aged.insert(q.id);
            }
        }
        next.queue = queue;
        next.dirty_from = Some(0);
        next.stops = std::mem::take(&mut self.stops)
            .into_iter()
            .map(|(id, models)| (id, models.into_iter().filter_map(remap).collect()))
            .collect();
        // Shared with the router's fast path, which keeps handing out IDs.
        next.next_request = Arc::clone(&self.next_request);
        next.next_stop = self.next_stop;
        next.fence_holds = self.fence_holds;
        next.held_total = next.models.iter().map(|m| m.held.len()).sum();
        next.resident = (0..next.models.len())
            .filter(|&u| next.models[u].residency().is_some())
            .collect();
        *self = next;

        self.requeue_joined();
        self.fail_removed(now, &configured, out);
        self.drain(out);
        self.flush_positions(out);
        Ok(map)
    }

    /// Sends the waiters of the start of each retired model back to the
    /// queue (at their rank): whether that start runs the old definition or
    /// the new one depends on whether the launcher began it before the
    /// reload, so nobody is granted on it; the model is stopped once it is
    /// ready, and they start the new definition.
    fn requeue_joined(&mut self) {
        for t in 0..self.models.len() {
            if !self.models[t].retire {
                continue;
            }
            let waiters = match self.models[t].swap.as_mut() {
                Some(swap) if !swap.cancelled => std::mem::take(&mut swap.waiters),
                _ => continue,
            };
            // Their positions are reported with the queue's.
            for id in waiters {
                self.enqueue(id);
            }
        }
    }

    /// Fails the requests waiting for a model no longer configured.
    fn fail_removed(&mut self, now: Tick, configured: &BTreeSet<&str>, out: &mut Vec<Effect>) {
        let removed: Vec<bool> = self
            .models
            .iter()
            .map(|m| !configured.contains(m.id.as_str()))
            .collect();
        if !removed.contains(&true) {
            return;
        }
        self.fail_waiters(now, out, |s, t| {
            removed[t].then(|| RouteError::Removed {
                model: s.models[t].id.clone(),
            })
        });
    }

    /// Stops each retired model that is ready with nothing in flight, and
    /// forgets the retirement of those that are stopped (what waits for them
    /// may then start their new definition).
    pub(super) fn retire_idle(&mut self, out: &mut Vec<Effect>) {
        if self.retiring == 0 {
            return;
        }
        for t in 0..self.models.len() {
            if !self.models[t].retire {
                continue;
            }
            match self.state_of(t) {
                ModelState::Stopped => {
                    self.models[t].retire = false;
                    self.retiring -= 1;
                    if self.retiring == 0 {
                        // Every old process is gone: nothing waits for one.
                        self.models.iter_mut().for_each(|m| m.waits_for.clear());
                    }
                }
                ModelState::Ready
                    if self.models[t].in_flight() == 0 && self.models[t].held.is_empty() =>
                {
                    self.issue_stop(vec![vec![t]], out);
                }
                ModelState::Sleeping => {
                    self.issue_stop(vec![vec![t]], out);
                }
                _ => {}
            }
        }
    }

    /// The index of model `id` (removed models that still run included), as
    /// [`fast_done`](Self::fast_done) and [`fast_refused`](Self::fast_refused) take it.
    pub fn model_index(&self, id: &str) -> Option<usize> {
        self.index_of(id)
    }

    /// Every model ID by index (removed models that still run included).
    pub fn model_ids(&self) -> Vec<String> {
        self.models.iter().map(|m| m.id.clone()).collect()
    }

    /// Whether model `t` waits for the old process of a retired model.
    pub(super) fn waits_for_old(&self, t: usize) -> bool {
        self.models[t]
            .waits_for
            .iter()
            .any(|id| self.index_of(id).is_some_and(|r| self.models[r].retire))
    }

    /// Whether `model` (an ID) is retired: changed or removed by a reload and
    /// not stopped yet.
    pub fn is_retired(&self, model: &str) -> bool {
        self.index_of(model).is_some_and(|t| self.models[t].retire)
    }
}
