//! `keys` (this server's extension): what each API key may use and the name
//! it is shown by.
//!
//! ```yaml
//! apiKeys: [sk-bot, sk-batch, sk-admin]
//! keys:
//!   - key: sk-batch          # or ${env.NAME}; must be one of apiKeys
//!     name: batch            # shown in activity, logs, metrics and the UI
//!     models: [qwen-*, embed]   # IDs, aliases, peer models or globs; default all
//!     maxPriority: -10       # as priority.apiKeys' cap (one place, not both)
//!     maxConcurrent: 4       # requests admitted at once; beyond: 429 key_busy
//!   - key: sk-admin
//!     name: admin
//!     admin: true            # only admin keys may manage, read logs and captures
//! ```
//!
//! A key's text never appears in a message: problems name the entry's position.

use super::document::error::{KeyPath, Reason};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use super::resolved::api_key::ApiKey;
use super::resolved::key_scope::{KeyScope, is_glob};
use super::resolved::types::PriorityConfig;
use crate::names::{Lead, NameTable};

/// Reads `keys`; a `maxPriority` joins `priority`'s per-key caps.
pub(crate) fn read_keys(
    node: &Node,
    path: &KeyPath,
    api_keys: &[ApiKey],
    names: &NameTable,
    priority: &mut PriorityConfig,
    cx: &mut Diagnostics,
) -> Vec<KeyScope> {
    let Node::Seq(items) = node else {
        return cx
            .wrong_type(path, "a list of {key, name, models, ...}", node)
            .unwrap_or_default();
    };
    let mut out: Vec<KeyScope> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = path.index(i);
        let Some(mut entry) = Fields::new(item, item_path.clone(), cx) else {
            continue;
        };
        let key = match entry.take("key") {
            None => {
                cx.error(item_path.key("key"), Reason::Missing);
                None
            }
            Some((node, key_path)) => cx.non_empty_string(node, &key_path).and_then(|text| {
                let found = api_keys.iter().position(|k| k.matches(&text));
                if found.is_none() {
                    cx.error(key_path, Reason::NotAnApiKey);
                }
                found
            }),
        };
        let name = entry
            .take("name")
            .and_then(|(node, p)| Some((cx.non_empty_string(node, &p)?, p)));
        let models = entry
            .take("models")
            .and_then(|(node, p)| read_models(node, &p, names, cx));
        let max_priority = entry.take("maxPriority").and_then(|(node, p)| {
            let cap = cx
                .int_range(node, &p, i64::from(i32::MIN), i64::from(i32::MAX))
                .and_then(|v| i32::try_from(v).ok())?;
            Some((cap, p))
        });
        let max_concurrent = entry.take("maxConcurrent").and_then(|(node, p)| {
            cx.int_min(node, &p, 1)
                .and_then(|v| usize::try_from(v).ok())
        });
        let admin = entry
            .take("admin")
            .and_then(|(node, p)| cx.bool(node, &p))
            .unwrap_or(false);
        entry.finish(cx);
        let Some(key) = key else {
            continue;
        };
        if out.iter().any(|scope| scope.key == key) {
            cx.error(
                item_path.key("key"),
                Reason::Duplicate {
                    item: format!("apiKeys[{key}]"),
                },
            );
            continue;
        }
        let name = match name {
            Some((name, p)) => {
                if out.iter().any(|scope| scope.name == name) {
                    cx.error(p.clone(), Reason::Duplicate { item: name.clone() });
                }
                if api_keys.iter().any(|k| k.matches(&name)) {
                    // The name is shown everywhere: it must not be a secret.
                    cx.error(p, Reason::KeyAsName);
                }
                name
            }
            None => format!("key{key}"),
        };
        if let Some((cap, cap_path)) = max_priority {
            if priority.key_caps.iter().any(|(k, _)| *k == key) {
                cx.error(cap_path, Reason::KeyCapTwice);
            } else {
                priority.key_caps.push((key, cap));
            }
        }
        out.push(KeyScope {
            key,
            name,
            models,
            max_concurrent,
            admin,
        });
    }
    out
}

/// `models` of one entry: each a glob, or a name of a model, an alias or a
/// peer model (a selector is refused: name the models it may choose).
fn read_models(
    node: &Node,
    path: &KeyPath,
    names: &NameTable,
    cx: &mut Diagnostics,
) -> Option<Vec<String>> {
    let list = cx.string_list(node, path)?;
    let mut out = Vec::with_capacity(list.len());
    for (name, item_path) in list {
        let known = is_glob(&name)
            || matches!(
                names.target(&name),
                Some(Lead::Model { .. } | Lead::Peer(_))
            );
        if known {
            out.push(name);
        } else {
            cx.error(item_path, Reason::UnknownTarget { name });
        }
    }
    Some(out)
}
