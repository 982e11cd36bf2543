//! The memory router's settings combined with the models: the policy's
//! settings, and the GPUs found at start for `gpus: auto`.

use super::memory::{GpuList, MemoryConfig};
use super::model::ModelConfig;
use super::types::Config;
use crate::policy::memory::{Gpu, Memory, MemoryError, MemoryModel, MemorySettings};

impl Config {
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
        models: impl IntoIterator<Item = &'a ModelConfig>,
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
