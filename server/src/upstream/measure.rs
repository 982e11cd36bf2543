//! What a running model really holds on its GPUs (the memory router's
//! measure): the per-process rows of `nvidia-smi` (or `rocm-smi`) that
//! belong to the model's process tree, summed. The router asks once after
//! each start and counts the larger of this and the model's `memory` from
//! then on; `--check-config` asks for every model running on the machine.

use std::collections::BTreeMap;
use std::fmt;

use super::orphans::{belongs_to, models_of};

/// Bytes of GPU memory the process `root` of `model` and its descendants
/// use now, over all GPUs. `None` when no tool answered or it lists none of
/// them (the model runs on the CPU, or the tool sees another pid namespace).
pub(crate) async fn gpu_memory(model: &str, root: u32) -> Option<u64> {
    let Some(rows) = crate::hardware::compute_apps().await else {
        tracing::debug!(
            model,
            "no GPU memory measure: nvidia-smi and rocm-smi did not answer"
        );
        return None;
    };
    let mine: Vec<u64> = rows
        .iter()
        .filter(|(pid, _)| belongs_to(*pid, root, model))
        .map(|(_, bytes)| *bytes)
        .collect();
    if mine.is_empty() {
        tracing::debug!(
            model,
            pid = root,
            "no GPU memory measure: the GPU tool lists no process of the model"
        );
        return None;
    }
    Some(mine.iter().fold(0u64, |sum, b| sum.saturating_add(*b)))
}

/// A model whose running process uses more GPU memory than its `memory`
/// says (`--check-config`'s hint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryHint {
    /// The model ID.
    pub model: String,
    /// Its `memory`, in bytes.
    pub estimate: u64,
    /// What its processes use now, in bytes, over all its GPUs.
    pub measured: u64,
}

impl fmt::Display for MemoryHint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "models.{}.memory is {}, but its process running now uses {} of GPU memory; the memory router counts the larger from each start on: raise memory to at least {}",
            self.model,
            gib(self.estimate),
            gib(self.measured),
            gib(self.measured)
        )
    }
}

fn gib(bytes: u64) -> String {
    // Display only: the precision of a float is plenty for a size shown in GiB.
    #[allow(clippy::cast_precision_loss)]
    let gib = bytes as f64 / f64::from(1u32 << 30);
    format!("{gib:.1} GiB")
}

/// For `--check-config` under the memory router: each of `estimates`
/// (model ID and its `memory` in bytes) whose processes running on this
/// machine now (started by any server, found by the marker every upstream
/// process carries) use more GPU memory than that, in the order given. Empty
/// when no GPU tool answers.
pub async fn memory_hints<'a>(
    estimates: impl IntoIterator<Item = (&'a str, u64)>,
) -> Vec<MemoryHint> {
    let Some(rows) = crate::hardware::compute_apps().await else {
        return Vec::new();
    };
    let models: BTreeMap<u32, String> = models_of(rows.iter().map(|(pid, _)| *pid))
        .into_iter()
        .collect();
    let mut used: BTreeMap<&str, u64> = BTreeMap::new();
    for (pid, bytes) in &rows {
        if let Some(model) = models.get(pid) {
            let sum = used.entry(model.as_str()).or_default();
            *sum = sum.saturating_add(*bytes);
        }
    }
    estimates
        .into_iter()
        .filter_map(|(model, estimate)| {
            let measured = *used.get(model)?;
            (measured > estimate).then(|| MemoryHint {
                model: model.to_owned(),
                estimate,
                measured,
            })
        })
        .collect()
}
