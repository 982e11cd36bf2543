//! `hooks`: what the server does at start (`on_startup.preload`) and once
//! idle (`on_idle: {after, preload}`, this server's extension).

use super::document::error::{KeyPath, WarningKind};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use super::resolved::types::{Hooks, OnIdle};
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
    if let Some((idle_node, idle_path)) = fields.take("on_idle")
        && let Some(mut idle) = Fields::new(idle_node, idle_path.clone(), cx)
    {
        let after = match idle.take("after") {
            None => {
                cx.error(
                    idle_path.key("after"),
                    super::document::error::Reason::Missing,
                );
                None
            }
            Some((n, p)) => cx
                .int_min(n, &p, 1)
                .and_then(|s| u64::try_from(s).ok())
                .map(std::time::Duration::from_secs),
        };
        let preload = match idle.take("preload") {
            None => {
                cx.error(
                    idle_path.key("preload"),
                    super::document::error::Reason::Missing,
                );
                Vec::new()
            }
            Some((n, p)) => read_preload(n, &p, names, cx),
        };
        idle.finish(cx);
        if let Some(after) = after
            && !preload.is_empty()
        {
            hooks.on_idle = Some(OnIdle { after, preload });
        }
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
