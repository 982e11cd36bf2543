//! Typed reads out of the generic tree, collecting every problem instead of stopping
//! at the first, and noticing keys nobody asked for.

use std::time::Duration;

use super::error::{ConfigWarning, Issue, KeyPath, Reason, WarningKind};
use super::node::Node;

/// Problems and warnings gathered during one load, and the typed reads that
/// report into them. Every reader takes it as `cx`.
#[derive(Debug, Default)]
pub(crate) struct Diagnostics {
    pub(crate) issues: Vec<Issue>,
    pub(crate) warnings: Vec<ConfigWarning>,
    /// Bytes macro expansion has added so far in this load (bounded; see
    /// `macros.rs`).
    pub(crate) expanded: u64,
}

impl Diagnostics {
    /// Records a problem. Only the first problem at a path is kept: a value whose
    /// macro failed to expand would otherwise also be reported as malformed.
    pub(crate) fn error(&mut self, path: KeyPath, reason: Reason) {
        if self.issues.iter().any(|issue| issue.path == path) {
            return;
        }
        self.issues.push(Issue { path, reason });
    }

    pub(crate) fn warn(&mut self, path: KeyPath, kind: WarningKind) {
        self.warnings.push(ConfigWarning { path, kind });
    }

    /// Reads a boolean.
    pub(crate) fn bool(&mut self, node: &Node, path: &KeyPath) -> Option<bool> {
        match node {
            Node::Bool(b, _) => Some(*b),
            other => self.wrong_type(path, "true or false", other),
        }
    }

    /// Reads an integer (fractions are refused, as llama-swap's Go types refuse them).
    pub(crate) fn int(&mut self, node: &Node, path: &KeyPath) -> Option<i64> {
        match node {
            Node::Int(i, _) => Some(*i),
            other => self.wrong_type(path, "an integer", other),
        }
    }

    /// Reads an integer and checks it is at least `min`.
    pub(crate) fn int_min(&mut self, node: &Node, path: &KeyPath, min: i64) -> Option<i64> {
        let value = self.int(node, path)?;
        if value < min {
            self.error(path.clone(), Reason::TooSmall { min, got: value });
            return None;
        }
        Some(value)
    }

    /// Reads an integer and checks it lies in `min..=max`.
    pub(crate) fn int_range(
        &mut self,
        node: &Node,
        path: &KeyPath,
        min: i64,
        max: i64,
    ) -> Option<i64> {
        let value = self.int(node, path)?;
        if !(min..=max).contains(&value) {
            self.error(
                path.clone(),
                Reason::OutOfRange {
                    min,
                    max,
                    got: value,
                },
            );
            return None;
        }
        Some(value)
    }

    /// Reads a non-negative whole number of seconds.
    pub(crate) fn seconds(&mut self, node: &Node, path: &KeyPath) -> Option<u64> {
        let value = self.int_min(node, path, 0)?;
        u64::try_from(value).ok()
    }

    /// Reads a string; numbers and booleans are accepted as their text.
    pub(crate) fn string(&mut self, node: &Node, path: &KeyPath) -> Option<String> {
        match node.scalar_text() {
            Some(text) => Some(text),
            None => self.wrong_type(path, "a string", node),
        }
    }

    /// Reads a string that must not be empty.
    pub(crate) fn non_empty_string(&mut self, node: &Node, path: &KeyPath) -> Option<String> {
        let text = self.string(node, path)?;
        if text.trim().is_empty() {
            self.error(path.clone(), Reason::Empty);
            return None;
        }
        Some(text)
    }

    /// Reads one of a fixed set of words.
    pub(crate) fn word(
        &mut self,
        node: &Node,
        path: &KeyPath,
        allowed: &'static [&'static str],
    ) -> Option<&'static str> {
        let text = self.string(node, path)?;
        if let Some(word) = allowed.iter().find(|w| **w == text) {
            return Some(word);
        }
        self.error(path.clone(), Reason::NotOneOf { allowed, got: text });
        None
    }

    /// Reads a list of strings, each with its own path; bad entries are reported and
    /// skipped.
    pub(crate) fn string_list(
        &mut self,
        node: &Node,
        path: &KeyPath,
    ) -> Option<Vec<(String, KeyPath)>> {
        let Node::Seq(items) = node else {
            return self.wrong_type(path, "a list of strings", node);
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let item_path = path.index(i);
            if let Some(text) = self.non_empty_string(item, &item_path) {
                out.push((text, item_path));
            }
        }
        Some(out)
    }

    pub(crate) fn wrong_type<T>(
        &mut self,
        path: &KeyPath,
        expected: &'static str,
        found: &Node,
    ) -> Option<T> {
        self.error(
            path.clone(),
            Reason::WrongType {
                expected,
                found: found.kind(),
            },
        );
        None
    }
}

/// Seconds to a `Duration`, for the many `*Timeout`/`ttl` keys.
pub(crate) fn secs(seconds: u64) -> Duration {
    Duration::from_secs(seconds)
}

/// A map being read key by key; keys never read are reported when it is finished.
pub(crate) struct Fields<'a> {
    path: KeyPath,
    entries: &'a [(String, Node)],
    used: Vec<bool>,
    unsupported: Vec<&'static str>,
}

impl<'a> Fields<'a> {
    /// Starts reading `node` as a map. A null node (a key with nothing after the
    /// colon) reads as an empty map; anything else that is not a map is reported.
    pub(crate) fn new(node: &'a Node, path: KeyPath, cx: &mut Diagnostics) -> Option<Self> {
        let entries: &'a [(String, Node)] = match node {
            Node::Map(entries) => entries,
            Node::Null => &[],
            other => return cx.wrong_type(&path, "a map", other),
        };
        Some(Self {
            path,
            used: vec![false; entries.len()],
            entries,
            unsupported: Vec::new(),
        })
    }

    /// Takes a key. A key whose value is null counts as absent (as a Go zero value
    /// does in llama-swap) but is still marked as known.
    pub(crate) fn take(&mut self, key: &str) -> Option<(&'a Node, KeyPath)> {
        let index = self.entries.iter().position(|(k, _)| k == key)?;
        self.used[index] = true;
        let value = &self.entries[index].1;
        if matches!(value, Node::Null) {
            return None;
        }
        Some((value, self.path.key(key)))
    }

    /// Declares keys llama-swap knows but this server does not implement: each one
    /// present gets a "not supported yet" warning instead of "unknown key".
    pub(crate) fn unsupported(&mut self, keys: impl IntoIterator<Item = &'static str>) {
        self.unsupported = keys.into_iter().collect();
    }

    /// Reports every key that was never taken, in document order.
    pub(crate) fn finish(self, cx: &mut Diagnostics) {
        for ((key, _), used) in self.entries.iter().zip(&self.used) {
            if *used {
                continue;
            }
            let kind = if self.unsupported.contains(&key.as_str()) {
                WarningKind::NotSupported
            } else {
                WarningKind::UnknownKey
            };
            cx.warn(self.path.key(key), kind);
        }
    }
}
