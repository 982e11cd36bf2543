//! A model's `capabilities` (`in`, `out`, `tools`, `reranker`, `context`), shown
//! in `/v1/models` the way llama-swap renders them.

use serde_json::{Map, Value, json};

use super::error::{KeyPath, Reason};
use super::fields::{Diagnostics, Fields};
use super::node::Node;

/// The modalities llama-swap accepts.
const MODALITIES: &[&str] = &["text", "audio", "image"];

/// Keys the rendering owns: a model's `metadata` entries with these names are
/// dropped from `meta.llamaswap` when capabilities are set (as in llama-swap).
const RENDERED_KEYS: &[&str] = &[
    "architecture",
    "capabilities",
    "supported_parameters",
    "context_length",
];

/// What a model supports, for clients reading `/v1/models`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Capabilities {
    /// `in`: input modalities (`text`, `audio`, `image`).
    pub input: Vec<String>,
    /// `out`: output modalities.
    pub output: Vec<String>,
    /// `tools`: function calling.
    pub tools: bool,
    /// `reranker`.
    pub reranker: bool,
    /// `context`: the context length in tokens (0 = not said).
    pub context: u64,
}

impl Capabilities {
    /// Adds llama-swap's fields to a `/v1/models` row: `architecture`
    /// (modalities), `capabilities` (vision, audio_transcriptions, audio_speech,
    /// image_generation, image_to_image, function_calling, reranker),
    /// `supported_parameters`, `context_length` and `meta.n_ctx`; removes the
    /// same names from `meta.llamaswap`.
    pub fn render_into(&self, row: &mut Value) {
        let has = |list: &[String], m: &str| list.iter().any(|x| x == m);
        let (has_in, has_out) = (!self.input.is_empty(), !self.output.is_empty());
        let mut arch = Map::new();
        if has_in {
            arch.insert("input_modalities".into(), json!(self.input));
        }
        if has_out {
            arch.insert("output_modalities".into(), json!(self.output));
        }
        if has_in && has_out {
            arch.insert(
                "modality".into(),
                json!(format!(
                    "{}->{}",
                    self.input.join("+"),
                    self.output.join("+")
                )),
            );
        }
        let mut caps = Map::new();
        if has(&self.input, "image") {
            caps.insert("vision".into(), json!(true));
        }
        for (input, output, name) in [
            ("audio", "text", "audio_transcriptions"),
            ("text", "audio", "audio_speech"),
            ("text", "image", "image_generation"),
            ("image", "image", "image_to_image"),
        ] {
            if has(&self.input, input) && has(&self.output, output) {
                caps.insert(name.into(), json!(true));
            }
        }
        if self.tools {
            caps.insert("function_calling".into(), json!(true));
            row["supported_parameters"] = json!(["tools", "tool_choice"]);
        }
        if self.reranker {
            caps.insert("reranker".into(), json!(true));
        }
        if !arch.is_empty() {
            row["architecture"] = Value::Object(arch);
        }
        if !caps.is_empty() {
            row["capabilities"] = Value::Object(caps);
        }
        if let Some(Value::Object(meta)) = row.get_mut("meta") {
            if let Some(Value::Object(llamaswap)) = meta.get_mut("llamaswap") {
                for key in RENDERED_KEYS {
                    llamaswap.remove(*key);
                }
            }
            if self.context > 0 {
                meta.insert("n_ctx".into(), json!(self.context));
            }
        } else if self.context > 0 {
            row["meta"] = json!({"n_ctx": self.context});
        }
        if self.context > 0 {
            row["context_length"] = json!(self.context);
        }
    }
}

/// Reads `capabilities`; an empty block is no block (as in llama-swap).
pub(crate) fn read_capabilities(
    node: &Node,
    path: &KeyPath,
    cx: &mut Diagnostics,
) -> Option<Capabilities> {
    let mut fields = Fields::new(node, path.clone(), cx)?;
    let modalities = |key: &str, cx: &mut Diagnostics, fields: &mut Fields<'_>| {
        let mut out = Vec::new();
        if let Some((node, p)) = fields.take(key)
            && let Some(list) = cx.string_list(node, &p)
        {
            for (m, m_path) in list {
                if MODALITIES.contains(&m.as_str()) {
                    out.push(m);
                } else {
                    cx.error(
                        m_path,
                        Reason::NotOneOf {
                            allowed: MODALITIES,
                            got: m,
                        },
                    );
                }
            }
        }
        out
    };
    let input = modalities("in", cx, &mut fields);
    let output = modalities("out", cx, &mut fields);
    let flag = |key: &str, cx: &mut Diagnostics, fields: &mut Fields<'_>| {
        fields
            .take(key)
            .and_then(|(node, p)| cx.bool(node, &p))
            .unwrap_or(false)
    };
    let tools = flag("tools", cx, &mut fields);
    let reranker = flag("reranker", cx, &mut fields);
    let context = fields
        .take("context")
        .and_then(|(node, p)| cx.seconds(node, &p))
        .unwrap_or(0);
    fields.finish(cx);
    let caps = Capabilities {
        input,
        output,
        tools,
        reranker,
        context,
    };
    (caps != Capabilities::default()).then_some(caps)
}
