//! The memory router as loaded (`routing.router.use: memory`) and a model's
//! sleep mode: plain data (what is made of it with the models is `gpus.rs`).

use crate::policy::memory::Gpu;

/// `routing.router.settings.memory`: where models may be placed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryConfig {
    /// `gpus` (default `auto`): the GPUs and their memory.
    pub gpus: GpuList,
    /// `reserve` (default 0): bytes kept free on each GPU.
    pub reserve: u64,
    /// `evict_costs`: model ID → how much stopping it hurts (default 1), the
    /// last tie-break of the eviction order.
    pub evict_costs: Vec<(String, u64)>,
}

/// Where the GPUs come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum GpuList {
    /// `auto`: read at start from `nvidia-smi`, `rocm-smi` or the DRM sysfs
    /// files; none found stops the start.
    #[default]
    Auto,
    /// A list of `{id, memory}`, sorted by id.
    Listed(Vec<Gpu>),
}

/// A model's `sleep`: how it sleeps instead of stopping, and what it keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SleepConfig {
    /// The calls that put it to sleep and wake it.
    pub mode: crate::upstream::SleepSpec,
    /// `memory` (default 0): bytes it keeps on each of its GPUs asleep.
    pub memory: u64,
}

impl SleepConfig {
    /// A sleep mode keeping `memory` bytes asleep.
    #[must_use]
    pub fn new(mode: crate::upstream::SleepSpec, memory: u64) -> Self {
        Self { mode, memory }
    }
}
