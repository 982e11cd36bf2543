//! The top-level `priority:` section (an extension of llama-swap's format):
//! trust controls on `X-Priority`, metric bands, anti-starvation aging,
//! per-model queue bounds and the minimum residency against swap thrash.
//!
//! ```yaml
//! priority:
//!   ignoreHeader: false       # true: every X-Priority counts as absent (0)
//!   maxHeaderPriority: 10     # cap on the header value, before max(floor, header)
//!   apiKeys:                  # per-key caps; `key` must be one of apiKeys
//!     - key: sk-batch
//!       maxPriority: -10      # this key's calls rank at -10 at most
//!   bands: { low: -2147483648, normal: 0, elevated: 1 }   # metric bands: name → lowest priority
//!   agingAfter: 120           # seconds; a waiter older than this ranks first (off by default)
//!   maxQueued: { qwen: 20 }   # per model (ID or alias): waiting requests beyond → 429 queue_full
//!   minResident: 30           # seconds a model that became ready is kept from swaps (off by default)
//!   minResidentYieldsTo: higher   # or none: who may stop it inside that window
//! ```

use std::collections::BTreeMap;
use std::time::Duration;

use super::document::error::{KeyPath, Reason};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use super::resolved::api_key::ApiKey;
use super::resolved::types::PriorityConfig;
use crate::names::NameTable;
use crate::priority::Bands;
use crate::scheduler::ResidencyYield;

/// Reads `priority`. `api_keys` are the configured keys (a cap may only name one).
pub(crate) fn read_priority(
    node: &Node,
    path: KeyPath,
    api_keys: &[ApiKey],
    names: &NameTable,
    cx: &mut Diagnostics,
) -> PriorityConfig {
    let mut out = PriorityConfig::default();
    let Some(mut fields) = Fields::new(node, path, cx) else {
        return out;
    };
    if let Some((node, path)) = fields.take("ignoreHeader") {
        out.ignore_header = cx.bool(node, &path).unwrap_or(false);
    }
    if let Some((node, path)) = fields.take("maxHeaderPriority") {
        out.max_header_priority = int32(node, &path, cx);
    }
    if let Some((node, path)) = fields.take("apiKeys") {
        out.key_caps = read_key_caps(node, &path, api_keys, cx);
    }
    if let Some((node, path)) = fields.take("bands")
        && let Some(bands) = read_bands(node, &path, cx)
    {
        out.bands = bands;
    }
    if let Some((node, path)) = fields.take("agingAfter") {
        out.aging_after = cx
            .int_min(node, &path, 1)
            .and_then(|s| u64::try_from(s).ok())
            .map(Duration::from_secs);
    }
    if let Some((node, path)) = fields.take("maxQueued") {
        out.max_queued = read_max_queued(node, &path, names, cx);
    }
    if let Some((node, path)) = fields.take("minResident") {
        out.min_resident = cx
            .int_min(node, &path, 0)
            .and_then(|s| u64::try_from(s).ok())
            .filter(|&s| s > 0)
            .map(Duration::from_secs);
    }
    if let Some((node, path)) = fields.take("minResidentYieldsTo") {
        out.min_resident_yields_to = match cx.word(node, &path, &["higher", "none"]) {
            Some("none") => ResidencyYield::Nobody,
            _ => ResidencyYield::Higher,
        };
    }
    fields.finish(cx);
    out
}

fn int32(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Option<i32> {
    cx.int_range(node, path, i64::from(i32::MIN), i64::from(i32::MAX))
        .and_then(|v| i32::try_from(v).ok())
}

/// Per-key caps, as (index into `apiKeys`, cap). A key's text never appears in
/// a message: problems are reported by position.
fn read_key_caps(
    node: &Node,
    path: &KeyPath,
    api_keys: &[ApiKey],
    cx: &mut Diagnostics,
) -> Vec<(usize, i32)> {
    let Node::Seq(items) = node else {
        return cx
            .wrong_type(path, "a list of {key, maxPriority}", node)
            .unwrap_or_default();
    };
    let mut caps: Vec<(usize, i32)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let item_path = path.index(i);
        let Some(mut entry) = Fields::new(item, item_path.clone(), cx) else {
            continue;
        };
        let key = entry.take("key");
        let cap = entry.take("maxPriority");
        entry.finish(cx);
        let index = match key {
            None => {
                cx.error(item_path.key("key"), Reason::Missing);
                None
            }
            Some((node, key_path)) => match cx.non_empty_string(node, &key_path) {
                None => None,
                Some(text) => match api_keys.iter().position(|k| k.matches(&text)) {
                    Some(index) => Some(index),
                    None => {
                        cx.error(key_path, Reason::NotAnApiKey);
                        None
                    }
                },
            },
        };
        let cap = match cap {
            None => {
                cx.error(item_path.key("maxPriority"), Reason::Missing);
                None
            }
            Some((node, cap_path)) => int32(node, &cap_path, cx),
        };
        if let (Some(index), Some(cap)) = (index, cap) {
            if caps.iter().any(|(k, _)| *k == index) {
                cx.error(
                    item_path.key("key"),
                    Reason::Duplicate {
                        item: format!("apiKeys[{index}]"),
                    },
                );
            } else {
                caps.push((index, cap));
            }
        }
    }
    caps
}

fn read_bands(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Option<Bands> {
    let Node::Map(entries) = node else {
        return cx.wrong_type(path, "a map of band name to lowest priority", node);
    };
    let mut list = Vec::with_capacity(entries.len());
    for (name, value) in entries {
        list.push((name.clone(), int32(value, &path.key(name), cx)?));
    }
    match Bands::new(list) {
        Ok(bands) => Some(bands),
        Err(error) => {
            cx.error(path.clone(), Reason::InvalidBands(error));
            None
        }
    }
}

fn read_max_queued(
    node: &Node,
    path: &KeyPath,
    names: &NameTable,
    cx: &mut Diagnostics,
) -> BTreeMap<String, usize> {
    let Node::Map(entries) = node else {
        return cx
            .wrong_type(path, "a map of model to a number of requests", node)
            .unwrap_or_default();
    };
    let mut out = BTreeMap::new();
    for (name, value) in entries {
        let entry_path = path.key(name);
        let Some(limit) = cx
            .int_min(value, &entry_path, 1)
            .and_then(|v| usize::try_from(v).ok())
        else {
            continue;
        };
        match names.local().resolve(name) {
            None => cx.error(entry_path, Reason::UnknownModel { name: name.clone() }),
            Some(id) if out.contains_key(id) => {
                cx.error(entry_path, Reason::Duplicate { item: name.clone() })
            }
            Some(id) => {
                out.insert(id.to_owned(), limit);
            }
        }
    }
    out
}
