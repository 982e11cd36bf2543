//! The memory router's side of the scheduler (`routing.router.use: memory`):
//! where each model runs, what the policy is told about the models holding
//! memory, and the GPUs a start is given.
//!
//! A model's GPUs are chosen when its swap starts ([`Scheduler::placement`]
//! hands them to the launcher) and kept while it is up, asleep included (it
//! wakes where its process is). The policy
//! ([`Memory::plan`](crate::policy::memory::Memory::plan)) is asked with every
//! model that is up or asleep and placed: how much it holds (its share of
//! `memory`; asleep, its sleep `memory`), whether it can be stopped now (no
//! request in flight, no start or stop under way), the highest rank waiting for
//! it, and when it was last used (the moment its last request ended).

use super::core::Scheduler;
use super::gpus::Placements;
use super::{Effect, GpuUsage, Measured, ModelState};
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
                    held: self.held(placements, r)?,
                    // An awake model with a sleep mode goes to sleep when
                    // evicted, and keeps its sleep memory.
                    kept: match m.sleep_memory {
                        Some(asleep) if !m.is_asleep() => asleep,
                        _ => 0,
                    },
                    // Inside its `minResident` window it is stopped last
                    // (as a busy one), and only for a waiter `decide` lets.
                    busy: self.is_busy(r) || m.in_flight() > 0 || m.residency().is_some(),
                    waiting: m.queued.last_key_value().map(|(&rank, _)| rank),
                    last_used: self.last_used(r),
                })
            })
            .collect()
    }

    /// Bytes model `r` (up) holds on each of its GPUs: its share, or asleep
    /// what its sleep mode keeps (never more than its share). One waking (a
    /// start under way) holds its share already: its wake is placed on it.
    fn held(&self, placements: &Placements, r: usize) -> Option<u64> {
        let share = placements.memory.model(r)?.share();
        let m = &self.models[r];
        Some(if self.state_of(r) == ModelState::Sleeping {
            m.sleep_memory.unwrap_or(0).min(share)
        } else {
            share
        })
    }

    /// The GPU ids model `t` is placed on and the bytes it holds on each, for
    /// `/running`; nothing when it is stopped or the memory router is off.
    pub(super) fn gpus_of(&self, t: usize) -> (Vec<u32>, u64) {
        let Some(placements) = self.placements.as_ref() else {
            return (Vec::new(), 0);
        };
        if self.state_of(t) == ModelState::Stopped {
            return (Vec::new(), 0);
        }
        let Some(Some(gpus)) = placements.gpus.get(t) else {
            return (Vec::new(), 0);
        };
        let all = placements.memory.gpus();
        let ids = gpus
            .iter()
            .filter_map(|&g| all.get(g).map(|gpu| gpu.id))
            .collect();
        (ids, self.held(placements, t).unwrap_or(0))
    }

    /// Each GPU of the memory router with the memory the models placed on it
    /// hold and what is left; empty when the memory router is off.
    pub fn gpu_usage(&self) -> Vec<GpuUsage> {
        let Some(placements) = self.placements.as_ref() else {
            return Vec::new();
        };
        let mut used = vec![0u64; placements.memory.gpus().len()];
        for resident in self.residents(placements) {
            for g in resident.gpus {
                if let Some(u) = used.get_mut(g) {
                    *u = u.saturating_add(resident.held);
                }
            }
        }
        placements
            .memory
            .gpus()
            .iter()
            .zip(used)
            .enumerate()
            .map(|(g, (gpu, used))| GpuUsage {
                id: gpu.id,
                memory: gpu.memory,
                reserve: gpu.memory.saturating_sub(placements.memory.usable(g)),
                used,
                free: placements.memory.usable(g).saturating_sub(used),
            })
            .collect()
    }

    /// The memory router's plan for starting `t` now; `None` without the
    /// memory router, or when `t` cannot fit even with every model that may be
    /// stopped stopped.
    pub(super) fn memory_plan(&self, t: usize) -> Option<Plan> {
        self.memory_plan_sleepless(t).map(|(plan, _)| plan)
    }

    /// As [`memory_plan`](Self::memory_plan), and whether the models it
    /// evicts must stop for good rather than sleep: when what they would
    /// keep asleep leaves `t` too little room, the plan counts them stopped.
    pub(super) fn memory_plan_sleepless(&self, t: usize) -> Option<(Plan, bool)> {
        let placements = self.placements.as_ref()?;
        let residents = self.residents(placements);
        if let Some(plan) = placements.memory.plan(t, &residents) {
            return Some((plan, false));
        }
        let stopped: Vec<Resident> = residents
            .into_iter()
            .map(|r| Resident { kept: 0, ..r })
            .collect();
        placements.memory.plan(t, &stopped).map(|plan| (plan, true))
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

    /// A measure of `model`'s running process: `bytes` of GPU memory over
    /// all its GPUs. Under the memory router it counts the larger of this and
    /// its configured `memory` from now on (until the next measure), and what
    /// waits is placed again with that. `None` without the memory router or
    /// for an unknown model; else what was configured and what counts now.
    pub fn measured(&mut self, model: &str, bytes: u64, out: &mut Vec<Effect>) -> Option<Measured> {
        let t = self.index_of(model)?;
        let placements = self.placements.as_mut()?;
        let estimate = placements.memory.configured(t)?;
        *placements.measured.get_mut(t)? = Some(bytes);
        let counted = placements.memory.measured(t, bytes)?;
        self.drain(out);
        self.flush_positions(out);
        Some(Measured {
            estimate,
            measured: bytes,
            counted,
        })
    }

    /// The last measure of model `t`'s GPU memory (bytes over all its GPUs).
    pub(super) fn measure_of(&self, t: usize) -> Option<u64> {
        self.placements.as_ref()?.measured.get(t).copied().flatten()
    }

    /// The ids of the GPUs the memory router gave `model` at its last start
    /// (what [`Launcher::ensure_ready_on`](crate::launcher::Launcher::ensure_ready_on)
    /// is given); `None` without the memory router.
    pub fn placement(&self, model: &str) -> Option<Vec<u32>> {
        let t = self.index_of(model)?;
        let placements = self.placements.as_ref()?;
        let gpus = placements.gpus.get(t)?.as_ref()?;
        let all = placements.memory.gpus();
        Some(
            gpus.iter()
                .filter_map(|&g| all.get(g).map(|gpu| gpu.id))
                .collect(),
        )
    }
}
