//! The memory router's side of the scheduler (`routing.router.use: memory`):
//! where each model runs, what the policy is told about the models holding
//! memory, and the GPUs a start is given.
//!
//! A model's GPUs are chosen when its swap starts ([`Scheduler::placement`]
//! hands them to the launcher) and kept while it is up. The policy
//! ([`Memory::plan`]) is asked with every model that is up and placed: how much
//! it holds, whether it can be stopped now (no request in flight, no start or
//! stop under way), the highest rank waiting for it, and when it was last used
//! (the moment its last request ended).

use super::ModelState;
use super::core::Scheduler;
use super::gpus::Placements;
use crate::policy::memory::{Plan, Resident};

impl Scheduler {
    /// The models holding GPU memory now, as the policy sees them.
    fn residents(&self, placements: &Placements) -> Vec<Resident> {
        (0..self.models.len())
            .filter_map(|r| {
                if self.state_of(r) == ModelState::Stopped {
                    return None;
                }
                let gpus = placements.gpus.get(r)?.clone()?;
                let m = &self.models[r];
                Some(Resident {
                    model: r,
                    gpus,
                    held: placements.memory.model(r)?.share(),
                    busy: self.is_busy(r) || m.in_flight() > 0,
                    waiting: m.queued.last_key_value().map(|(&rank, _)| rank),
                    // A model in use counts as used now.
                    last_used: m.idle_since().map_or(u64::MAX, |tick| {
                        u64::try_from(tick.since_start().as_micros()).unwrap_or(u64::MAX)
                    }),
                })
            })
            .collect()
    }

    /// The memory router's plan for starting `t` now; `None` without the
    /// memory router, or when `t` cannot fit even with every model that may be
    /// stopped stopped.
    pub(super) fn memory_plan(&self, t: usize) -> Option<Plan> {
        let placements = self.placements.as_ref()?;
        placements.memory.plan(t, &self.residents(placements))
    }

    /// Records where the swap of `t` starting now puts it; its account for
    /// the swap's log line.
    pub(super) fn place_on_gpus(&mut self, t: usize) -> Option<String> {
        let plan = self.memory_plan(t)?;
        let placements = self.placements.as_mut()?;
        let reason = placements.memory.describe(t, &plan);
        if let Some(slot) = placements.gpus.get_mut(t) {
            *slot = Some(plan.gpus);
        }
        Some(reason)
    }

    /// The ids of the GPUs the memory router gave `model` at its last start
    /// (what [`Launcher::ensure_ready_on`](crate::launcher::Launcher::ensure_ready_on)
    /// is given); `None` without the memory router.
    pub fn placement(&self, model: &str) -> Option<Vec<u32>> {
        let t = self.index_of(model)?;
        let placements = self.placements.as_ref()?;
        let gpus = placements.gpus.get(t)?.as_ref()?;
        let all = placements.memory.gpus();
        Some(gpus.iter().filter_map(|&g| all.get(g).map(|gpu| gpu.id)).collect())
    }
}
