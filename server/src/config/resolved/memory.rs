//! The memory router as loaded (`routing.router.use: memory`).

use crate::policy::memory::{Gpu, Memory, MemoryError, MemoryModel, MemorySettings};

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

impl super::types::Config {
    /// With `gpus: auto`, the memory router on the GPUs found (`detected`):
    /// checked as a listed `gpus` is at load. Any other configuration is
    /// returned unchanged.
    ///
    /// # Errors
    ///
    /// [`MemoryError::NoGpus`] when `detected` is empty, or the error of
    /// [`Memory::new`] (a model larger than any GPU, naming it).
    pub fn on_detected_gpus(mut self, detected: Vec<Gpu>) -> Result<Self, MemoryError> {
        let Some(memory) = &mut self.memory else {
            return Ok(self);
        };
        if memory.gpus != GpuList::Auto {
            return Ok(self);
        }
        if detected.is_empty() {
            return Err(MemoryError::NoGpus);
        }
        let ids: Vec<String> = self.models.iter().map(|m| m.id.clone()).collect();
        Memory::new(&ids, &memory.settings_for(&self.models, detected.clone()))?;
        memory.gpus = GpuList::Listed(detected);
        Ok(self)
    }

    /// Whether the memory router waits for [`on_detected_gpus`](Self::on_detected_gpus).
    #[must_use]
    pub fn detects_gpus(&self) -> bool {
        self.memory
            .as_ref()
            .is_some_and(|m| m.gpus == GpuList::Auto)
    }
}

impl MemoryConfig {
    /// The policy's settings for `models` (sorted by ID) on `gpus`.
    pub fn settings_for<'a>(
        &self,
        models: impl IntoIterator<Item = &'a super::model::ModelConfig>,
        gpus: Vec<Gpu>,
    ) -> MemorySettings {
        MemorySettings {
            gpus,
            reserve: self.reserve,
            models: models
                .into_iter()
                .map(|m| MemoryModel {
                    memory: m.memory.unwrap_or(0),
                    gpus: m.gpus,
                    persistent: m.persistent,
                })
                .collect(),
            evict_costs: self.evict_costs.clone(),
        }
    }
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
