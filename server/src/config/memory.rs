//! The memory router's settings (`routing.router.settings.memory`) and the
//! checks that need every model: each has a `memory`, fits on the listed GPUs,
//! and uses `${GPU}` only under this router (sizes: `document/sizes.rs`).

use super::document::error::{KeyPath, Reason, WarningKind};
use super::document::fields::{Diagnostics, Fields};
use super::document::macros::GPU_PLACEHOLDER;
use super::document::node::Node;
use super::document::sizes::read_bytes;
use super::model::ParsedModel;
use super::resolved::memory::{GpuList, MemoryConfig};
use crate::names::NameTable;
use crate::policy::memory::{Gpu, Memory, MemoryError};

/// Reads `routing.router.settings.memory`: `gpus` (`auto`, the default, or a
/// list of `{id, memory}`), `reserve` (default 0) and `evict_costs`.
pub(crate) fn read_memory_settings(
    node: &Node,
    path: KeyPath,
    names: &NameTable,
    cx: &mut Diagnostics,
) -> MemoryConfig {
    let mut config = MemoryConfig::default();
    let Some(mut fields) = Fields::new(node, path, cx) else {
        return config;
    };
    if let Some((node, path)) = fields.take("gpus") {
        config.gpus = read_gpus(node, &path, cx);
    }
    if let Some((node, path)) = fields.take("reserve") {
        config.reserve = read_bytes(node, &path, cx).unwrap_or(0);
    }
    if let Some((node, path)) = fields.take("evict_costs") {
        config.evict_costs = read_costs(node, &path, names, cx);
    }
    fields.finish(cx);
    config
}

fn read_gpus(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> GpuList {
    match node {
        Node::Str(s) if s == "auto" => GpuList::Auto,
        Node::Seq(items) => {
            let mut gpus: Vec<Gpu> = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                let item_path = path.index(i);
                let Some(mut fields) = Fields::new(item, item_path.clone(), cx) else {
                    continue;
                };
                let id = match fields.take("id") {
                    Some((n, p)) => cx.int_range(n, &p, 0, i64::from(u32::MAX)),
                    None => {
                        cx.error(item_path.key("id"), Reason::Missing);
                        None
                    }
                };
                let memory = match fields.take("memory") {
                    Some((n, p)) => read_bytes(n, &p, cx),
                    None => {
                        cx.error(item_path.key("memory"), Reason::Missing);
                        None
                    }
                };
                fields.finish(cx);
                let (Some(id), Some(memory)) = (id, memory) else {
                    continue;
                };
                let Ok(id) = u32::try_from(id) else {
                    continue;
                };
                if gpus.iter().any(|g| g.id == id) {
                    cx.error(
                        item_path.key("id"),
                        Reason::Duplicate {
                            item: id.to_string(),
                        },
                    );
                    continue;
                }
                gpus.push(Gpu { id, memory });
            }
            if items.is_empty() {
                cx.error(path.clone(), Reason::Empty);
            }
            gpus.sort_by_key(|g| g.id);
            GpuList::Listed(gpus)
        }
        other => cx
            .wrong_type(path, "auto or a list of {id, memory}", other)
            .unwrap_or_default(),
    }
}

fn read_costs(
    node: &Node,
    path: &KeyPath,
    names: &NameTable,
    cx: &mut Diagnostics,
) -> Vec<(String, u64)> {
    let Node::Map(entries) = node else {
        return cx
            .wrong_type(path, "a map of model names to costs", node)
            .unwrap_or_default();
    };
    let mut costs: Vec<(String, u64)> = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        let entry_path = path.key(name);
        let Some(cost) = cx.int_min(value, &entry_path, 0) else {
            continue;
        };
        match names.local().resolve(name) {
            None => cx.error(entry_path, Reason::UnknownModel { name: name.clone() }),
            Some(id) if costs.iter().any(|(c, _)| c == id) => {
                cx.error(entry_path, Reason::Duplicate { item: name.clone() });
            }
            Some(id) => costs.push((id.to_owned(), u64::try_from(cost).unwrap_or(0))),
        }
    }
    costs
}

/// The memory router's checks across models: under it every model states
/// `memory`, fits the listed GPUs, and may use `${GPU}`; under the others
/// `memory`, `gpus` and `persistent` have no effect and `${GPU}` is an error.
pub(crate) fn check_memory(
    models: &[ParsedModel],
    memory: Option<&MemoryConfig>,
    router_path: &KeyPath,
    cx: &mut Diagnostics,
) {
    let Some(memory) = memory else {
        for model in models {
            for path in &model.placement_paths {
                cx.warn(
                    path.clone(),
                    WarningKind::NoEffect {
                        because: "routing.router.use is not memory",
                    },
                );
            }
            if uses_gpu(model) {
                cx.error(
                    model.model_path.key("cmd"),
                    Reason::MacroNotAvailable {
                        name: "GPU",
                        where_available: "with routing.router.use: memory",
                    },
                );
            }
        }
        return;
    };
    let mut complete = true;
    for model in models {
        if model.config.memory.is_none() && model.memory_path.is_none() {
            complete = false;
            cx.error(
                model.model_path.key("memory"),
                Reason::RequiredBy {
                    key: router_path.key("use"),
                    value: "memory",
                },
            );
        }
    }
    let GpuList::Listed(gpus) = &memory.gpus else {
        // Detected at start, then checked the same way (`serve`).
        return;
    };
    if !complete || gpus.is_empty() {
        return;
    }
    let ids: Vec<String> = models.iter().map(|m| m.config.id.clone()).collect();
    let settings = memory.settings_for(models.iter().map(|m| &m.config), gpus.clone());
    if let Err(error) = Memory::new(&ids, &settings) {
        let at = |key: &str, id: &str| {
            models
                .iter()
                .find(|m| m.config.id == id)
                .map(|m| match key {
                    "gpus" => m
                        .gpus_path
                        .clone()
                        .unwrap_or_else(|| m.model_path.key("gpus")),
                    _ => m
                        .memory_path
                        .clone()
                        .unwrap_or_else(|| m.model_path.key("memory")),
                })
        };
        let path = match &error {
            MemoryError::TooLarge { model, .. } => at("memory", model),
            MemoryError::NotEnoughGpus { model, .. } | MemoryError::ZeroGpus { model } => {
                at("gpus", model)
            }
            _ => None,
        };
        cx.error(
            path.unwrap_or_else(|| router_path.key("settings").key("memory")),
            Reason::Memory(error),
        );
    }
}

/// Whether `${GPU}` is in the model's command, stop command or environment.
fn uses_gpu(model: &ParsedModel) -> bool {
    let c = &model.config;
    c.cmd.contains(GPU_PLACEHOLDER)
        || c.cmd_stop
            .as_deref()
            .is_some_and(|s| s.contains(GPU_PLACEHOLDER))
        || c.env.iter().any(|(_, v)| v.contains(GPU_PLACEHOLDER))
}
