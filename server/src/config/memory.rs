//! The memory router's settings (`routing.router.settings.memory`), sizes in
//! bytes, and the checks that need every model: each has a `memory`, fits on
//! the listed GPUs, and uses `${GPU}` only under this router.

use super::document::error::{KeyPath, Reason, WarningKind};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use super::model::ParsedModel;
use super::resolved::memory::{GpuList, MemoryConfig};
use crate::names::NameTable;
use crate::policy::memory::{Gpu, Memory, MemoryError};

/// The placeholder `${GPU}` leaves in `cmd`, `cmdStop` and `env` until a
/// model is placed.
pub(crate) const GPU_PLACEHOLDER: &str = "${GPU}";

/// A size in bytes: a whole number, or a number (fractions allowed) with a
/// decimal (`KB`, `MB`, `GB`, `TB`) or binary (`KiB`, `MiB`, `GiB`, `TiB`, and
/// `K`, `M`, `G`, `T` alone) unit.
pub(crate) fn parse_bytes(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let factor: u64 = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "TB" => 1_000_000_000_000,
        "K" | "Ki" | "KiB" => 1 << 10,
        "M" | "Mi" | "MiB" => 1 << 20,
        "G" | "Gi" | "GiB" => 1 << 30,
        "T" | "Ti" | "TiB" => 1 << 40,
        _ => return None,
    };
    match number.split_once('.') {
        None => number.parse::<u64>().ok()?.checked_mul(factor),
        Some((whole, fraction)) => {
            if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
                return None;
            }
            let whole: u64 = if whole.is_empty() {
                0
            } else {
                whole.parse().ok()?
            };
            let digits = fraction.len().min(9);
            let fraction: u64 = if digits == 0 {
                0
            } else {
                fraction[..digits].parse().ok()?
            };
            let scale = 10u64.pow(u32::try_from(digits).ok()?);
            let part = u128::from(fraction) * u128::from(factor) / u128::from(scale);
            whole
                .checked_mul(factor)?
                .checked_add(u64::try_from(part).ok()?)
        }
    }
}

/// Reads a size in bytes (0 allowed); a bad value is an error naming its key.
pub(crate) fn read_bytes(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Option<u64> {
    if let Node::Int(..) = node {
        let bytes = cx.int_min(node, path, 0)?;
        return u64::try_from(bytes).ok();
    }
    let text = cx.string(node, path)?;
    let parsed = parse_bytes(&text);
    if parsed.is_none() {
        cx.error(path.clone(), Reason::InvalidSize { got: text });
    }
    parsed
}

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

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes_take_fractions_and_decimal_and_binary_units() {
        assert_eq!(parse_bytes("1024"), Some(1024));
        assert_eq!(parse_bytes("21GiB"), Some(21 << 30));
        assert_eq!(parse_bytes("21G"), Some(21 << 30));
        assert_eq!(parse_bytes("1.5GiB"), Some(3 << 29));
        assert_eq!(parse_bytes("24 GB"), Some(24_000_000_000));
        assert_eq!(parse_bytes("512MiB"), Some(512 << 20));
        assert_eq!(parse_bytes(".5K"), Some(512));
        assert_eq!(parse_bytes("1.2.3G"), None);
        assert_eq!(parse_bytes("GiB"), None);
        assert_eq!(parse_bytes("12 parsecs"), None);
    }
}
