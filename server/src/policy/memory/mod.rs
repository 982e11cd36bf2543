//! The memory placement policy (`routing.router.use: memory`, this server's
//! extension): models run where their GPU memory fits, instead of by hand-written
//! groups.
//!
//! Every model states the memory it needs (`memory`) and on how many GPUs it
//! runs (`gpus`, default 1; the memory is split evenly over them). Each GPU
//! offers its memory less a `reserve`. To start a model the policy chooses the
//! GPUs and the models to stop:
//!
//! 1. a model already placed (running, or asleep with its process kept) stays on
//!    its GPUs;
//! 2. otherwise every choice of GPUs is a candidate. On each, the models that
//!    must stop are chosen in eviction order (first evicted first): models that
//!    cannot be stopped now (work in flight, a start or stop under way) last,
//!    then models nobody waits for before models with waiters, lower waiting
//!    priority first, then the least recently used, then the lower configured
//!    evict cost, then the model ID. Models are added in that order until the
//!    memory is free, then any that turned out unnecessary are kept;
//! 3. the candidates compare by what they stop, in the same terms (a plan that
//!    must wait for busy models is worse than any that need not; then fewer
//!    models with waiters, a lower highest waiting priority, older use, a lower
//!    total cost, fewer models), then by the tightest fit (the least memory left
//!    on the chosen GPUs, so large holes stay for large models), then by GPU.
//!
//! `persistent` models are never chosen. A plan that stops a busy model
//! ([`Plan::waits`]) is not carried out: the request waits until that model's
//! work ends (no preemption), as under the other policies.
//!
//! Like the other policies this is pure: numbers in, numbers out; the scheduler
//! keeps where each model runs and tells the policy ([`Resident`]).
//!
//! ```
//! use llama_swap_server::testing::policy::memory::{Gpu, Memory, MemoryModel, MemorySettings, Resident};
//!
//! const GIB: u64 = 1 << 30;
//! let settings = MemorySettings {
//!     gpus: vec![Gpu { id: 0, memory: 24 * GIB }, Gpu { id: 1, memory: 24 * GIB }],
//!     reserve: GIB,
//!     models: vec![
//!         MemoryModel::new(5 * GIB),      // 0: gemma
//!         MemoryModel::new(21 * GIB),     // 1: qwen
//!         MemoryModel { gpus: 2, ..MemoryModel::new(40 * GIB) }, // 2: llama-70b
//!     ],
//!     evict_costs: vec![],
//! };
//! let ids: Vec<String> = ["gemma", "qwen", "llama-70b"].map(String::from).into();
//! let memory = Memory::new(&ids, &settings)?;
//!
//! // qwen on GPU 0; gemma goes beside it, on GPU 1.
//! let qwen = Resident::placed(1, vec![0], 21 * GIB);
//! let plan = memory.plan(0, &[qwen.clone()]).expect("fits");
//! assert_eq!((plan.gpus.as_slice(), plan.evict.as_slice()), (&[1][..], &[][..]));
//!
//! // llama-70b needs both GPUs: qwen and gemma stop.
//! let gemma = Resident::placed(0, vec![1], 5 * GIB);
//! let plan = memory.plan(2, &[gemma, qwen]).expect("fits");
//! assert_eq!(plan.evict, [0, 1]);
//! # Ok::<(), llama_swap_server::testing::policy::memory::MemoryError>(())
//! ```

#[cfg(test)]
mod props;
#[cfg(test)]
mod tests;

use std::cmp::Reverse;
use std::collections::BTreeMap;

/// Most GPUs one placement considers (choices of GPUs grow with the count).
pub(crate) const MAX_GPUS: usize = 16;

/// One GPU as configured or detected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gpu {
    /// Its id: what `${GPU}` and `CUDA_VISIBLE_DEVICES` say.
    pub id: u32,
    /// Its memory in bytes.
    pub memory: u64,
}

/// What the policy knows of one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryModel {
    /// GPU memory it needs, in bytes, over all its GPUs.
    pub memory: u64,
    /// On how many GPUs it runs (at least 1); the memory is split evenly.
    pub gpus: usize,
    /// Never stopped to make room (`persistent: true`).
    pub persistent: bool,
}

impl MemoryModel {
    /// A model needing `memory` bytes on one GPU, not persistent.
    #[must_use]
    pub fn new(memory: u64) -> Self {
        Self {
            memory,
            gpus: 1,
            persistent: false,
        }
    }

    /// What it holds on each of its GPUs when it runs.
    #[must_use]
    pub fn share(&self) -> u64 {
        let n = self.gpus.max(1) as u64;
        self.memory.div_ceil(n)
    }
}

/// The memory router's settings, models numbered like the sorted model IDs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemorySettings {
    /// The GPUs, in id order.
    pub gpus: Vec<Gpu>,
    /// Bytes kept free on each GPU.
    pub reserve: u64,
    /// One entry per model, by index into the sorted model IDs.
    pub models: Vec<MemoryModel>,
    /// `evict_costs`: model ID → how much stopping it hurts (default 1).
    pub evict_costs: Vec<(String, u64)>,
}

/// The GPUs the memory router places models on, before the models are
/// numbered (what the scheduler is configured with).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuPool {
    /// The GPUs.
    pub gpus: Vec<Gpu>,
    /// Bytes kept free on each GPU.
    pub reserve: u64,
    /// `evict_costs`: model ID → how much stopping it hurts (default 1).
    pub evict_costs: Vec<(String, u64)>,
}

impl GpuPool {
    /// The policy's settings for `models`, numbered like the sorted model IDs.
    #[must_use]
    pub fn with_models(&self, models: Vec<MemoryModel>) -> MemorySettings {
        MemorySettings {
            gpus: self.gpus.clone(),
            reserve: self.reserve,
            models,
            evict_costs: self.evict_costs.clone(),
        }
    }
}

/// Why memory settings cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// No GPU was configured or found.
    #[error("no GPU to place models on")]
    NoGpus,
    /// More GPUs than a placement considers.
    #[error("{count} GPUs; the memory router handles at most {MAX_GPUS}")]
    TooManyGpus {
        /// How many there are.
        count: usize,
    },
    /// Two GPUs share an id.
    #[error("GPU {id} is listed twice")]
    DuplicateGpu {
        /// The id.
        id: u32,
    },
    /// The settings do not describe every model once.
    #[error("{got} models described, {expected} configured")]
    ModelCount {
        /// Configured models.
        expected: usize,
        /// Entries in the settings.
        got: usize,
    },
    /// A model asks for more GPUs than there are.
    #[error("model {model} runs on {wants} GPUs, but there are {have}")]
    NotEnoughGpus {
        /// The model ID.
        model: String,
        /// Its `gpus`.
        wants: usize,
        /// GPUs available.
        have: usize,
    },
    /// A model asks for zero GPUs.
    #[error("model {model} runs on 0 GPUs; gpus must be at least 1")]
    ZeroGpus {
        /// The model ID.
        model: String,
    },
    /// A model does not fit even on empty GPUs.
    #[error(
        "model {model} needs {need} bytes on each of {gpus} GPU(s), more than any GPU offers ({largest} bytes after the reserve)"
    )]
    TooLarge {
        /// The model ID.
        model: String,
        /// Bytes it needs per GPU.
        need: u64,
        /// Its `gpus`.
        gpus: usize,
        /// The most a GPU offers.
        largest: u64,
    },
    /// `evict_costs` names a model that is not configured.
    #[error("evict_costs names {model}, which is not configured")]
    UnknownCostModel {
        /// The name.
        model: String,
    },
}

/// A model that holds GPU memory now, as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resident {
    /// The model (index into the sorted IDs).
    pub model: usize,
    /// Its GPUs (indices into [`MemorySettings::gpus`]).
    pub gpus: Vec<usize>,
    /// Bytes it holds on each of them (its share, or less while asleep).
    pub held: u64,
    /// Bytes it would still hold on each of them once evicted (a model with a
    /// sleep mode put to sleep keeps its sleep memory; 0 when it stops).
    pub kept: u64,
    /// It cannot be stopped now: requests in flight, or a start or stop under way.
    pub busy: bool,
    /// Highest rank of the requests waiting for it, if any.
    pub waiting: Option<i32>,
    /// When it was last used (any increasing count; larger is more recent).
    pub last_used: u64,
}

impl Resident {
    /// A model on `gpus` holding `held` bytes on each, idle, unused since 0.
    #[must_use]
    pub fn placed(model: usize, gpus: Vec<usize>, held: u64) -> Self {
        Self {
            model,
            gpus,
            held,
            kept: 0,
            busy: false,
            waiting: None,
            last_used: 0,
        }
    }
}

impl Resident {
    /// What evicting it frees on each of its GPUs.
    fn frees(&self) -> u64 {
        self.held.saturating_sub(self.kept)
    }
}

/// Where a model starts and what must stop first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Its GPUs (indices into [`MemorySettings::gpus`]), ascending.
    pub gpus: Vec<usize>,
    /// The models to stop, ascending.
    pub evict: Vec<usize>,
    /// Some of `evict` are busy: wait for them instead of starting.
    pub waits: bool,
    /// The sum of the evict costs of `evict`.
    pub cost: u64,
}

/// Validated memory settings: the GPUs' usable memory and each model's needs.
#[derive(Debug, Clone)]
pub struct Memory {
    ids: Vec<String>,
    gpus: Vec<Gpu>,
    /// Per GPU: memory less the reserve.
    usable: Vec<u64>,
    models: Vec<MemoryModel>,
    /// Per model: its configured `memory` (what `models` says until a
    /// measure counts more, [`Memory::measured`]).
    configured: Vec<u64>,
    costs: Vec<u64>,
    /// Every choice of GPUs, by how many (only the counts models use).
    choices: BTreeMap<usize, Vec<Vec<usize>>>,
}

/// How bad stopping one model is; smaller is stopped first.
type VictimKey = (bool, bool, i32, u64, u64, usize);

/// How bad a plan is; smaller wins.
type PlanKey = (bool, usize, Option<i32>, Option<u64>, u64, usize, u64);

impl Memory {
    /// Validates `settings` for the models `ids` (sorted; a model's index is its
    /// position).
    ///
    /// # Errors
    ///
    /// [`MemoryError`] when there is no GPU or too many, a GPU id repeats, the
    /// settings describe a different number of models, a model wants zero GPUs or
    /// more than exist, a model does not fit on its GPUs even when they are empty,
    /// or `evict_costs` names an unknown model.
    pub fn new(ids: &[String], settings: &MemorySettings) -> Result<Self, MemoryError> {
        let mut gpus = settings.gpus.clone();
        if gpus.is_empty() {
            return Err(MemoryError::NoGpus);
        }
        if gpus.len() > MAX_GPUS {
            return Err(MemoryError::TooManyGpus { count: gpus.len() });
        }
        gpus.sort_by_key(|g| g.id);
        if let Some(pair) = gpus.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(MemoryError::DuplicateGpu { id: pair[0].id });
        }
        if ids.len() != settings.models.len() {
            return Err(MemoryError::ModelCount {
                expected: ids.len(),
                got: settings.models.len(),
            });
        }
        let usable: Vec<u64> = gpus
            .iter()
            .map(|g| g.memory.saturating_sub(settings.reserve))
            .collect();
        let mut by_size = usable.clone();
        by_size.sort_unstable_by_key(|&u| Reverse(u));
        for (id, model) in ids.iter().zip(&settings.models) {
            if model.gpus == 0 {
                return Err(MemoryError::ZeroGpus { model: id.clone() });
            }
            if model.gpus > gpus.len() {
                return Err(MemoryError::NotEnoughGpus {
                    model: id.clone(),
                    wants: model.gpus,
                    have: gpus.len(),
                });
            }
            // The n-th largest GPU bounds what n GPUs offer each.
            if by_size[model.gpus - 1] < model.share() {
                return Err(MemoryError::TooLarge {
                    model: id.clone(),
                    need: model.share(),
                    gpus: model.gpus,
                    largest: by_size[0],
                });
            }
        }
        let mut costs = vec![1; ids.len()];
        for (name, cost) in &settings.evict_costs {
            let Some(index) = ids.iter().position(|id| id == name) else {
                return Err(MemoryError::UnknownCostModel {
                    model: name.clone(),
                });
            };
            costs[index] = *cost;
        }
        let choices = settings
            .models
            .iter()
            .map(|m| (m.gpus, subsets(gpus.len(), m.gpus)))
            .collect();
        Ok(Self {
            ids: ids.to_vec(),
            gpus,
            usable,
            configured: settings.models.iter().map(|m| m.memory).collect(),
            models: settings.models.clone(),
            costs,
            choices,
        })
    }

    /// The GPUs, in id order (the indices plans use).
    #[must_use]
    pub fn gpus(&self) -> &[Gpu] {
        &self.gpus
    }

    /// What a GPU offers: its memory less the reserve.
    #[must_use]
    pub fn usable(&self, gpu: usize) -> u64 {
        self.usable.get(gpu).copied().unwrap_or(0)
    }

    /// What `model` is configured with (`None` for an unknown index).
    #[must_use]
    pub fn model(&self, model: usize) -> Option<&MemoryModel> {
        self.models.get(model)
    }

    /// The `memory` `model` is configured with (`None` for an unknown index).
    #[must_use]
    pub fn configured(&self, model: usize) -> Option<u64> {
        self.configured.get(model).copied()
    }

    /// Counts `model` as needing the larger of its configured `memory` and
    /// `bytes` (a measure of its running process, over all its GPUs) from
    /// now on; a later measure replaces this one. Never more than its GPUs
    /// can hold (the `gpus`-th largest GPU's usable memory on each), so it
    /// can always start again. Returns what it counts now (`None` for an
    /// unknown model).
    pub fn measured(&mut self, model: usize, bytes: u64) -> Option<u64> {
        let configured = *self.configured.get(model)?;
        let gpus = self.models.get(model)?.gpus.max(1);
        let mut by_size = self.usable.clone();
        by_size.sort_unstable_by_key(|&u| Reverse(u));
        let per_gpu = by_size.get(gpus - 1).copied().unwrap_or(0);
        let most = per_gpu.saturating_mul(gpus as u64);
        let counted = bytes.min(most).max(configured);
        let m = self.models.get_mut(model)?;
        m.memory = counted;
        Some(counted)
    }

    /// The evict cost of `model` (1 unless configured).
    #[must_use]
    pub fn cost(&self, model: usize) -> u64 {
        self.costs.get(model).copied().unwrap_or(1)
    }

    /// Where `target` can start with `residents` holding memory, and which of
    /// them must stop first; `None` when it cannot fit even with every model
    /// that may be stopped stopped (persistent models hold the memory), or the
    /// target is unknown.
    ///
    /// A target among `residents` keeps its GPUs (asleep, it needs the rest of
    /// its share back there). Residents with an unknown model or GPU are ignored.
    #[must_use]
    pub fn plan(&self, target: usize, residents: &[Resident]) -> Option<Plan> {
        let model = self.models.get(target)?;
        let share = model.share();
        let residents: Vec<&Resident> = residents
            .iter()
            .filter(|r| r.model < self.models.len() && r.gpus.iter().all(|&g| g < self.gpus.len()))
            .collect();
        let mut used = vec![0u64; self.gpus.len()];
        let mut own: Option<&Resident> = None;
        for r in &residents {
            if r.model == target {
                own = Some(r);
                continue;
            }
            for &g in &r.gpus {
                used[g] = used[g].saturating_add(r.held);
            }
        }
        let own_choice;
        let candidates: &[Vec<usize>] = match own {
            Some(r) => {
                let mut gpus = r.gpus.clone();
                gpus.sort_unstable();
                gpus.dedup();
                own_choice = [gpus];
                &own_choice
            }
            None => self.choices.get(&model.gpus)?,
        };
        let mut best: Option<(PlanKey, Vec<usize>, Plan)> = None;
        for gpus in candidates {
            let Some(plan) = self.plan_on(target, share, gpus, &residents, &used) else {
                continue;
            };
            let key = self.plan_key(&plan, share, &residents, &used);
            let better = match &best {
                None => true,
                Some((k, g, _)) => (&key, gpus) < (k, g),
            };
            if better {
                best = Some((key, gpus.clone(), plan));
            }
        }
        best.map(|(_, _, plan)| plan)
    }

    /// The cheapest way to free `share` on each of `gpus`, or `None`.
    fn plan_on(
        &self,
        target: usize,
        share: u64,
        gpus: &[usize],
        residents: &[&Resident],
        used: &[u64],
    ) -> Option<Plan> {
        let mut deficit: BTreeMap<usize, i128> = gpus
            .iter()
            .map(|&g| {
                let free = i128::from(self.usable[g]) - i128::from(used[g]);
                (g, i128::from(share) - free)
            })
            .collect();
        let mut victims: Vec<&Resident> = residents
            .iter()
            .copied()
            .filter(|r| {
                r.model != target
                    && r.frees() > 0
                    && !self.models[r.model].persistent
                    && r.gpus.iter().any(|g| deficit.contains_key(g))
            })
            .collect();
        victims.sort_by_key(|r| self.victim_key(r));
        let short = |d: &BTreeMap<usize, i128>| d.values().any(|&v| v > 0);
        let mut chosen: Vec<&Resident> = Vec::new();
        for v in victims {
            if !short(&deficit) {
                break;
            }
            // Only a model on a GPU still short of memory helps.
            if !v
                .gpus
                .iter()
                .any(|g| deficit.get(g).is_some_and(|&d| d > 0))
            {
                continue;
            }
            for g in &v.gpus {
                if let Some(d) = deficit.get_mut(g) {
                    *d -= i128::from(v.frees());
                }
            }
            chosen.push(v);
        }
        if short(&deficit) {
            return None;
        }
        // Keep the models that turned out unnecessary, the worst to stop first.
        let mut i = chosen.len();
        while i > 0 {
            i -= 1;
            let v = chosen[i];
            let still = v.gpus.iter().all(|g| {
                deficit
                    .get(g)
                    .is_none_or(|&d| d + i128::from(v.frees()) <= 0)
            });
            if still {
                for g in &v.gpus {
                    if let Some(d) = deficit.get_mut(g) {
                        *d += i128::from(v.frees());
                    }
                }
                chosen.remove(i);
            }
        }
        let mut evict: Vec<usize> = chosen.iter().map(|r| r.model).collect();
        evict.sort_unstable();
        evict.dedup();
        Some(Plan {
            gpus: gpus.to_vec(),
            waits: chosen.iter().any(|r| r.busy),
            cost: evict.iter().map(|&m| self.cost(m)).sum(),
            evict,
        })
    }

    fn victim_key(&self, r: &Resident) -> VictimKey {
        (
            r.busy,
            r.waiting.is_some(),
            r.waiting.unwrap_or(i32::MIN),
            r.last_used,
            self.cost(r.model),
            r.model,
        )
    }

    fn plan_key(&self, plan: &Plan, share: u64, residents: &[&Resident], used: &[u64]) -> PlanKey {
        let stopped: Vec<&&Resident> = residents
            .iter()
            .filter(|r| plan.evict.binary_search(&r.model).is_ok())
            .collect();
        // Memory left on the chosen GPUs once the plan is carried out.
        let left: u64 = plan
            .gpus
            .iter()
            .map(|&g| {
                let freed: u64 = stopped
                    .iter()
                    .filter(|r| r.gpus.contains(&g))
                    .map(|r| r.frees())
                    .sum();
                self.usable[g]
                    .saturating_sub(used[g].saturating_sub(freed))
                    .saturating_sub(share)
            })
            .sum();
        (
            plan.waits,
            stopped.iter().filter(|r| r.waiting.is_some()).count(),
            stopped.iter().filter_map(|r| r.waiting).max(),
            stopped.iter().map(|r| r.last_used).max(),
            plan.cost,
            plan.evict.len(),
            left,
        )
    }

    /// Whether `a` and `b` can run at once on empty GPUs (each on its own GPUs
    /// or sharing some).
    #[must_use]
    pub fn fit_together(&self, a: usize, b: usize) -> bool {
        let (Some(ma), Some(mb)) = (self.models.get(a), self.models.get(b)) else {
            return false;
        };
        let Some(choices) = self.choices.get(&ma.gpus) else {
            return false;
        };
        choices.iter().any(|ga| {
            let mut free = self.usable.clone();
            if ga.iter().any(|&g| free[g] < ma.share()) {
                return false;
            }
            for &g in ga {
                free[g] -= ma.share();
            }
            free.iter().filter(|&&f| f >= mb.share()).count() >= mb.gpus
        })
    }

    /// The members of `models` that can never run beside `target`, whatever
    /// else runs (they do not fit together even on empty GPUs).
    #[must_use]
    pub fn conflicts(&self, target: usize, models: &[usize]) -> Vec<usize> {
        if target >= self.models.len() {
            return Vec::new();
        }
        models
            .iter()
            .copied()
            .filter(|&m| m != target && m < self.models.len() && !self.fit_together(target, m))
            .collect()
    }

    /// One line for the swap log: where `plan` puts `target` and what it costs.
    #[must_use]
    pub fn describe(&self, target: usize, plan: &Plan) -> String {
        let gpus: Vec<String> = plan
            .gpus
            .iter()
            .filter_map(|&g| self.gpus.get(g).map(|gpu| gpu.id.to_string()))
            .collect();
        let need = self.models.get(target).map_or(0, MemoryModel::share);
        format!(
            "memory: {} on GPU {} ({} MiB each), evict cost {}",
            self.ids.get(target).map_or("?", String::as_str),
            gpus.join(","),
            need >> 20,
            plan.cost
        )
    }
}

/// Every `n`-subset of `0..len`, each ascending, in lexicographic order.
fn subsets(len: usize, n: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut current = Vec::with_capacity(n);
    fn walk(
        start: usize,
        len: usize,
        n: usize,
        current: &mut Vec<usize>,
        out: &mut Vec<Vec<usize>>,
    ) {
        if current.len() == n {
            out.push(current.clone());
            return;
        }
        for i in start..len {
            if len - i < n - current.len() {
                break;
            }
            current.push(i);
            walk(i + 1, len, n, current, out);
            current.pop();
        }
    }
    walk(0, len, n, &mut current, &mut out);
    out
}

impl super::EvictionPolicy for Memory {
    /// Without knowing where the running models sit, the models that can
    /// never run beside `target`: the scheduler asks [`Memory::plan`] with
    /// the placements instead, and this answer only bounds it.
    fn evict(
        &self,
        target: usize,
        running: &[usize],
        _last_used: &dyn Fn(usize) -> u64,
    ) -> Vec<usize> {
        self.conflicts(target, running)
    }

    fn conflicts(&self, target: usize, models: &[usize]) -> Vec<usize> {
        Memory::conflicts(self, target, models)
    }
}
