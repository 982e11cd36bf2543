//! `hooks`: what the server does at start (`on_startup.preload`).

use super::document::error::{KeyPath, WarningKind};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use super::resolved::types::Hooks;
use crate::names::NameTable;

/// Reads `hooks`.
pub(crate) fn read_hooks(
    node: &Node,
    path: KeyPath,
    names: &NameTable,
    cx: &mut Diagnostics,
) -> Hooks {
    let mut hooks = Hooks::default();
    let Some(mut fields) = Fields::new(node, path, cx) else {
        return hooks;
    };
    if let Some((startup_node, startup_path)) = fields.take("on_startup")
        && let Some(mut startup) = Fields::new(startup_node, startup_path, cx)
    {
        if let Some((n, p)) = startup.take("preload") {
            hooks.preload = read_preload(n, &p, names, cx);
        }
        startup.finish(cx);
    }
    fields.finish(cx);
    hooks
}

/// `hooks.on_startup.preload`, read as llama-swap reads it: names are trimmed,
/// empty ones skipped, and a name that is not a model is skipped with a
/// warning (llama-swap drops it silently) rather than failing the load.
fn read_preload(
    node: &Node,
    path: &KeyPath,
    names: &NameTable,
    cx: &mut Diagnostics,
) -> Vec<String> {
    let Node::Seq(items) = node else {
        return cx
            .wrong_type(path, "a list of model IDs or aliases", node)
            .unwrap_or_default();
    };
    let mut preload: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = path.index(i);
        let Some(name) = cx.string(item, &item_path) else {
            continue;
        };
        let name = name.trim();
        if name.is_empty() {
            continue;
        }
        match names.local().resolve(name) {
            Some(id) if preload.iter().any(|p| p == id) => {}
            Some(id) => preload.push(id.to_owned()),
            None => cx.warn(
                item_path,
                WarningKind::PreloadNotAModel {
                    name: name.to_owned(),
                },
            ),
        }
    }
    preload
}
