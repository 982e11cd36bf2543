//! A model's `filters`: `stripParams` (or the legacy `strip_params`),
//! `setParams` and `setParamsByID`, read into [`Filters`].
//!
//! `setParamsByID` keys are the one place map keys are macro-expanded (as in
//! llama-swap), and each key names the model: the loader registers it as an
//! alias, so a collision with another model or alias is a load error.

use crate::config::document::error::{KeyPath, Reason, WarningKind};
use crate::config::document::fields::{Diagnostics, Fields};
use crate::config::document::macros::Scope;
use crate::config::document::node::Node;
use crate::filters::{Filters, PROTECTED_PARAM};

/// Expands the keys of `filters.setParamsByID` in an already value-expanded
/// `filters` node. Two keys that expand to the same name are an error.
pub(crate) fn expand_by_id_keys(
    scope: &Scope<'_>,
    filters: &mut Node,
    path: &KeyPath,
    cx: &mut Diagnostics,
) {
    let Node::Map(entries) = filters else {
        return;
    };
    let Some((_, Node::Map(by_id))) = entries.iter_mut().find(|(k, _)| k == "setParamsByID") else {
        return;
    };
    let by_id_path = path.key("setParamsByID");
    let mut expanded: Vec<(String, Node)> = Vec::with_capacity(by_id.len());
    for (key, value) in std::mem::take(by_id) {
        let key_path = by_id_path.key(&key);
        let name = match scope.expand(&Node::Str(key.clone()), &key_path, false, cx) {
            node if node.is_scalar() => node.scalar_text().unwrap_or(key),
            _ => key,
        };
        if expanded.iter().any(|(k, _)| *k == name) {
            cx.error(key_path, Reason::Duplicate { item: name });
            continue;
        }
        expanded.push((name, value));
    }
    *by_id = expanded;
}

/// Reads `filters`. Returns the filters and where each `setParamsByID` name
/// was written (for alias checks).
pub(crate) fn read_filters(
    node: &Node,
    path: &KeyPath,
    cx: &mut Diagnostics,
) -> (Filters, Vec<(String, KeyPath)>) {
    let Some(mut fields) = Fields::new(node, path.clone(), cx) else {
        return (Filters::default(), Vec::new());
    };
    let strip = fields
        .take("stripParams")
        .and_then(|(node, p)| strip_list(node, &p, cx))
        .filter(|s| !s.trim().is_empty());
    let legacy = fields.take("strip_params");
    let strip = match (strip, legacy) {
        (Some(strip), Some((_, legacy_path))) => {
            cx.warn(
                legacy_path,
                WarningKind::NoEffect {
                    because: "filters.stripParams is set",
                },
            );
            strip
        }
        (Some(strip), None) => strip,
        (None, Some((node, legacy_path))) => strip_list(node, &legacy_path, cx).unwrap_or_default(),
        (None, None) => String::new(),
    };
    for param in strip.split(',').map(str::trim) {
        if param == PROTECTED_PARAM {
            cx.warn(
                path.key("stripParams"),
                WarningKind::Protected {
                    key: PROTECTED_PARAM,
                },
            );
        }
    }

    let set = match fields.take("setParams") {
        Some((node, p)) => read_params(node, &p, cx),
        None => Vec::new(),
    };
    let mut by_id = Vec::new();
    let mut by_id_paths = Vec::new();
    if let Some((node, by_id_path)) = fields.take("setParamsByID") {
        match node {
            Node::Map(entries) => {
                for (name, params) in entries {
                    let name_path = by_id_path.key(name);
                    if name.trim().is_empty() {
                        cx.error(name_path, Reason::Empty);
                        continue;
                    }
                    let params = read_params(params, &name_path, cx);
                    by_id_paths.push((name.clone(), name_path));
                    by_id.push((name.clone(), params));
                }
            }
            other => {
                cx.wrong_type::<()>(
                    &by_id_path,
                    "a map of requested model names to params",
                    other,
                );
            }
        }
    }
    fields.finish(cx);
    (Filters::new(&strip, set, by_id), by_id_paths)
}

/// `stripParams`: llama-swap's comma-separated string; a YAML list of keys is
/// accepted too.
fn strip_list(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Option<String> {
    match node {
        Node::Seq(_) => cx.string_list(node, path).map(|items| {
            items
                .into_iter()
                .map(|(k, _)| k)
                .collect::<Vec<_>>()
                .join(",")
        }),
        other => cx.string(other, path),
    }
}

/// A map of key path → value (any YAML value, sent as its JSON form).
fn read_params(
    node: &Node,
    path: &KeyPath,
    cx: &mut Diagnostics,
) -> Vec<(String, serde_json::Value)> {
    let Node::Map(entries) = node else {
        cx.wrong_type::<()>(path, "a map of parameter names to values", node);
        return Vec::new();
    };
    let mut params = Vec::with_capacity(entries.len());
    for (key, value) in entries {
        if key == PROTECTED_PARAM {
            cx.warn(
                path.key(key),
                WarningKind::Protected {
                    key: PROTECTED_PARAM,
                },
            );
            continue;
        }
        if key.is_empty() {
            cx.error(path.key(key), Reason::Empty);
            continue;
        }
        params.push((key.clone(), value.to_json()));
    }
    params
}
