//! Request filters: llama-swap's `filters.stripParams`, `filters.setParams` and
//! `filters.setParamsByID`, applied to a JSON request body on its way upstream.
//!
//! [`Filters`] is plain data built once from the config (models now, peers
//! later); [`Filters::apply`] rewrites one body. Order, as llama-swap: every
//! `stripParams` key is deleted, then every `setParams` key is set, then the
//! `setParamsByID` entry of the name the client asked for is set (so it
//! overrides `setParams`); keys go in sorted order within each step. The
//! top-level `model` key is protected: it is never stripped or set.
//!
//! Keys are paths (`chat_template_kwargs.enable_thinking`; see `path.rs` for
//! the syntax). The body is edited in place: bytes outside the values that
//! change are forwarded exactly as sent, and a body nothing applies to is
//! returned as the very same [`Bytes`].
//!
//! ```
//! use bytes::Bytes;
//! use llama_swap_server::testing::filters::Filters;
//! use serde_json::json;
//!
//! let filters = Filters::new(
//!     "temperature, top_k",
//!     [("top_p".to_owned(), json!(0.9))],
//!     [("qwen:hot".to_owned(), vec![("temperature".to_owned(), json!(1.2))])],
//! );
//! let body = Bytes::from_static(br#"{"model":"qwen:hot", "temperature": 0.1}"#);
//! let out = filters.apply("qwen:hot", body)?;
//! assert_eq!(&out[..], br#"{"model":"qwen:hot","top_p":0.9,"temperature":1.2}"#);
//!
//! let untouched = Bytes::from_static(br#"{"model":"qwen","top_p":0.9}"#);
//! let same = filters.apply("qwen", untouched.clone())?;
//! assert_eq!(same.as_ptr(), untouched.as_ptr()); // nothing applied: the same bytes
//! # Ok::<(), llama_swap_server::testing::filters::FilterError>(())
//! ```

mod edit;
mod path;

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::Value;

use path::ParamPath;

/// The key no filter may strip or set: the proxy routes on it.
pub(crate) const PROTECTED_PARAM: &str = "model";

/// One forced value: its key path and the value, serialised once.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SetParam {
    path: ParamPath,
    value: Vec<u8>,
}

/// Body filters of one model (or peer). Cheap to share behind an `Arc`; empty
/// by default.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filters {
    strip: Vec<ParamPath>,
    set: Vec<SetParam>,
    by_id: BTreeMap<String, Vec<SetParam>>,
}

/// Why a body could not be filtered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// The body is not one JSON object.
    #[error("the request body is not a JSON object: {source}")]
    NotAnObject {
        /// What the JSON parser said.
        #[source]
        source: serde_json::Error,
    },
    /// A key path walks into an array with a segment that is not an index.
    #[error(
        "filter key '{key}' cannot be applied to this body: '{segment}' would index an array; send an object there or change the filter"
    )]
    PathConflict {
        /// The configured key path.
        key: String,
        /// The segment that met an array.
        segment: String,
    },
}

impl Filters {
    /// Builds filters from llama-swap's three settings: `strip_params` is the
    /// comma-separated `stripParams` list (blanks and duplicates dropped),
    /// `set_params` the `setParams` map, `set_params_by_id` the
    /// `setParamsByID` map of requested name → params. `model` is dropped
    /// from all three.
    pub fn new(
        strip_params: &str,
        set_params: impl IntoIterator<Item = (String, Value)>,
        set_params_by_id: impl IntoIterator<Item = (String, Vec<(String, Value)>)>,
    ) -> Self {
        let mut strip: Vec<String> = strip_params
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty() && *p != PROTECTED_PARAM)
            .map(str::to_owned)
            .collect();
        strip.sort();
        strip.dedup();
        let mut by_id = BTreeMap::new();
        for (name, params) in set_params_by_id {
            let params = sorted_params(params);
            if !params.is_empty() {
                by_id.insert(name, params);
            }
        }
        Self {
            strip: strip.iter().map(|p| ParamPath::parse(p)).collect(),
            set: sorted_params(set_params),
            by_id,
        }
    }

    /// True when no filter is configured at all.
    pub fn is_empty(&self) -> bool {
        self.strip.is_empty() && self.set.is_empty() && self.by_id.is_empty()
    }

    /// The requested names `setParamsByID` has entries for (each one is also
    /// an alias of the model), sorted.
    pub fn by_id_names(&self) -> impl Iterator<Item = &str> {
        self.by_id.keys().map(String::as_str)
    }

    /// The `stripParams` keys in the order they are applied.
    pub fn strip_params(&self) -> impl Iterator<Item = &str> {
        self.strip.iter().map(ParamPath::as_str)
    }

    /// The `setParams` keys in the order they are applied.
    pub fn set_params(&self) -> impl Iterator<Item = &str> {
        self.set.iter().map(|p| p.path.as_str())
    }

    /// Applies the filters to a JSON request `body` for a client that asked for
    /// `requested` (the model name as sent: an ID or an alias). Returns `body`
    /// itself when nothing changes.
    ///
    /// # Errors
    ///
    /// [`FilterError::NotAnObject`] when a filter applies and the body is not a
    /// JSON object; [`FilterError::PathConflict`] when a `setParams` key needs
    /// an object where the body has an array.
    pub fn apply(&self, requested: &str, body: Bytes) -> Result<Bytes, FilterError> {
        let by_id = self.by_id.get(requested).map_or(&[][..], Vec::as_slice);
        if self.strip.is_empty() && self.set.is_empty() && by_id.is_empty() {
            return Ok(body);
        }
        let mut edited: Option<Vec<u8>> = None;
        for path in &self.strip {
            // Each pass removes one occurrence; a key repeated in the body goes
            // entirely, so the upstream cannot see it whichever one it reads.
            loop {
                let doc = edited.as_deref().unwrap_or(&body);
                let Some(deletion) = edit::delete(doc, path)? else {
                    break;
                };
                edited = Some(deletion.edit.apply(doc));
                if !deletion.again {
                    break;
                }
            }
        }
        for param in self.set.iter().chain(by_id) {
            let doc = edited.as_deref().unwrap_or(&body);
            if let Some(change) = edit::set(doc, &param.path, &param.value)? {
                edited = Some(change.apply(doc));
            }
        }
        Ok(edited.map_or(body, Bytes::from))
    }
}

fn sorted_params(params: impl IntoIterator<Item = (String, Value)>) -> Vec<SetParam> {
    // A map: sorted keys, and a key given twice keeps its last value.
    let params: BTreeMap<String, Value> = params
        .into_iter()
        .filter(|(key, _)| key != PROTECTED_PARAM)
        .collect();
    params
        .into_iter()
        .map(|(key, value)| SetParam {
            path: ParamPath::parse(&key),
            value: value.to_string().into_bytes(),
        })
        .collect()
}

#[cfg(test)]
mod tests;
