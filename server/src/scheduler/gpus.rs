//! Where each model runs under the memory router (`routing.router.use:
//! memory`): the GPUs the policy gave it at its last start. The scheduler's
//! use of it (what the policy is told, what a start is given) is
//! `placement.rs`.

use crate::policy::memory::Memory;

/// Where models run under the memory router.
#[derive(Debug)]
pub(super) struct Placements {
    pub(super) memory: Memory,
    /// Per model: its GPUs (indices into the policy's GPU list) since its last start.
    pub(super) gpus: Vec<Option<Vec<usize>>>,
    /// Per model: the last measure of its process's GPU memory (bytes over
    /// all its GPUs), which `memory` counts when larger than configured.
    pub(super) measured: Vec<Option<u64>>,
}

impl Placements {
    pub(super) fn new(memory: Memory, models: usize) -> Self {
        Self {
            memory,
            gpus: vec![None; models],
            measured: vec![None; models],
        }
    }

    /// A reconfigured scheduler keeps where the models that still run sit
    /// and what they were measured to use (`old_index` maps a model of the
    /// new list to the old one).
    pub(super) fn keep(&mut self, old: &Self, old_index: impl Fn(usize) -> Option<usize>) {
        for t in 0..self.gpus.len() {
            let Some(o) = old_index(t) else { continue };
            self.gpus[t].clone_from(&old.gpus[o]);
            if let Some(bytes) = old.measured[o] {
                self.measured[t] = Some(bytes);
                self.memory.measured(t, bytes);
            }
        }
    }
}
