//! The wire shapes mockswap answers with: OpenAI chat/completions/embeddings/models,
//! llama.cpp `/completion`, `/infill` and `/rerank`, and Anthropic `/v1/messages`.
//!
//! Everything is deterministic: ids derive from the journal sequence number, `created`
//! is a fixed instant, and the default content echoes the model and the last user
//! message. These are mockswap's own types on purpose (see the crate docs): they must not
//! share a serde bug with the client crate.

mod anthropic;
mod chat;
mod sse;

use serde_json::{Value, json};

pub(crate) use anthropic::error_body as anthropic_error_body;
pub use sse::{LoadingStatus, SseEvent, loading_events, loading_frame, stream_events};

pub use crate::reply::ToolCall;

/// What a reply says: its text and the tool calls it makes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    /// The text content (may be empty when the reply only calls tools).
    pub text: String,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
}

impl Answer {
    /// Text only.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            tool_calls: Vec::new(),
        }
    }
}

/// The pieces a tool call's arguments are streamed in: up to three of equal size (at
/// most 16 characters each, so long arguments take more), cut at character boundaries,
/// so a client must join several deltas to read them. Empty arguments are one empty
/// piece.
pub fn argument_pieces(arguments: &str) -> Vec<String> {
    let chars: Vec<char> = arguments.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(3).clamp(1, 16);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The `created` timestamp of every response (fixed, so responses are reproducible).
pub const CREATED: u64 = 1_700_000_000;

/// Which API a model request speaks; decides the request fields read and the response
/// shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/chat/completions`.
    ChatCompletions,
    /// `POST /v1/completions`.
    Completions,
    /// `POST /v1/embeddings`.
    Embeddings,
    /// `POST /v1/messages` (Anthropic).
    Messages,
    /// `POST /completion` (llama.cpp).
    LlamaCompletion,
    /// `POST /infill` (llama.cpp).
    Infill,
    /// `POST /rerank`, `/v1/rerank`, `/reranking`, `/v1/reranking`.
    Rerank,
    /// Any other path (reached through `/upstream/<model>/...` or `POST /v1/...`): a JSON
    /// echo of what was asked.
    Other,
}

impl Api {
    /// The API of a path (after any `/upstream/<model>` prefix is removed).
    pub fn of_path(path: &str) -> Self {
        match path {
            "/v1/chat/completions" | "/chat/completions" => Self::ChatCompletions,
            "/v1/completions" | "/completions" => Self::Completions,
            "/v1/embeddings" | "/embeddings" => Self::Embeddings,
            "/v1/messages" => Self::Messages,
            "/completion" => Self::LlamaCompletion,
            "/infill" => Self::Infill,
            "/rerank" | "/v1/rerank" | "/reranking" | "/v1/reranking" => Self::Rerank,
            _ => Self::Other,
        }
    }

    /// Whether this API can answer with an SSE stream.
    pub fn streams(self) -> bool {
        matches!(
            self,
            Self::ChatCompletions
                | Self::Completions
                | Self::Messages
                | Self::LlamaCompletion
                | Self::Infill
        )
    }

    /// Whether the stream ends with `data: [DONE]` (the OpenAI family only).
    pub fn sends_done(self) -> bool {
        matches!(self, Self::ChatCompletions | Self::Completions)
    }
}

/// Text of a message `content`: a string, or the text parts of an array of parts.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

fn prompt_text(prompt: Option<&Value>) -> String {
    match prompt {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(items)) => items
            .iter()
            .rev()
            .find_map(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

/// What the echo reflects for a request: the last user message (chat, messages), the
/// prompt (completions), or the prefix (infill).
pub fn echo_source(api: Api, body: Option<&Value>) -> String {
    let Some(body) = body else {
        return String::new();
    };
    match api {
        Api::ChatCompletions | Api::Messages => body
            .get("messages")
            .and_then(Value::as_array)
            .and_then(|msgs| {
                msgs.iter()
                    .rev()
                    .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            })
            .and_then(|m| m.get("content"))
            .map(content_text)
            .unwrap_or_default(),
        Api::Completions | Api::LlamaCompletion => prompt_text(body.get("prompt")),
        Api::Infill => {
            let prefix = prompt_text(body.get("input_prefix"));
            if prefix.is_empty() {
                prompt_text(body.get("prompt"))
            } else {
                prefix
            }
        }
        Api::Embeddings | Api::Rerank | Api::Other => String::new(),
    }
}

/// The default reply content: `[<model>] <last user message>`.
pub fn echo_text(model: &str, source: &str) -> String {
    if source.is_empty() {
        format!("[{model}]")
    } else {
        format!("[{model}] {source}")
    }
}

/// Splits content into tokens: each word with the whitespace before it, so the tokens
/// concatenate back to the content exactly.
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_word = false;
    for c in text.chars() {
        if c.is_whitespace() {
            if in_word {
                out.push(std::mem::take(&mut current));
                in_word = false;
            }
        } else {
            in_word = true;
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Deterministic prompt size: whitespace-separated words of everything the request says.
pub fn prompt_tokens(api: Api, body: Option<&Value>) -> usize {
    let Some(body) = body else { return 0 };
    let words = |s: &str| s.split_whitespace().count();
    match api {
        Api::ChatCompletions | Api::Messages => body
            .get("messages")
            .and_then(Value::as_array)
            .map(|msgs| {
                msgs.iter()
                    .filter_map(|m| m.get("content"))
                    .map(|c| words(&content_text(c)))
                    .sum()
            })
            .unwrap_or(0),
        Api::Embeddings => inputs(body).iter().map(|s| words(s)).sum(),
        Api::Rerank => words(body.get("query").and_then(Value::as_str).unwrap_or("")),
        _ => words(&echo_source(api, Some(body))),
    }
}

fn inputs(body: &Value) -> Vec<String> {
    match body.get("input").or_else(|| body.get("content")) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}

/// Identity of one response: model and journal sequence number.
#[derive(Debug, Clone, Copy)]
pub struct Ids<'a> {
    /// The model named by the request.
    pub model: &'a str,
    /// The journal sequence number of the request.
    pub seq: u64,
}

pub(crate) fn usage(prompt: usize, completion: usize) -> Value {
    json!({
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    })
}

/// The non-streaming JSON response of a model request. Tool calls are rendered by chat
/// completions and messages; the other APIs answer with the text only.
pub fn complete(
    api: Api,
    ids: Ids<'_>,
    answer: &Answer,
    body: Option<&Value>,
    path: &str,
) -> Value {
    let prompt = prompt_tokens(api, body);
    let content = answer.text.as_str();
    let completion = tokens(content).len();
    let Ids { model, seq } = ids;
    match api {
        Api::ChatCompletions => chat::complete(ids, answer, prompt),
        Api::Messages => anthropic::complete(ids, answer, prompt),
        Api::Completions => json!({
            "id": format!("cmpl-mockswap-{seq}"),
            "object": "text_completion",
            "created": CREATED,
            "model": model,
            "choices": [{"index": 0, "text": content, "logprobs": null, "finish_reason": "stop"}],
            "usage": usage(prompt, completion),
        }),
        Api::Embeddings => {
            let data: Vec<Value> = inputs(body.unwrap_or(&Value::Null))
                .iter()
                .enumerate()
                .map(|(index, text)| {
                    json!({"object": "embedding", "index": index, "embedding": embedding(text)})
                })
                .collect();
            json!({
                "object": "list",
                "data": data,
                "model": model,
                "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
            })
        }
        Api::LlamaCompletion | Api::Infill => json!({
            "content": content,
            "model": model,
            "stop": true,
            "stop_type": "eos",
            "tokens_predicted": completion,
            "tokens_evaluated": prompt,
        }),
        Api::Rerank => rerank(model, body.unwrap_or(&Value::Null), prompt),
        Api::Other => json!({
            "object": "mockswap.echo",
            "model": model,
            "path": path,
            "content": content,
        }),
    }
}

/// A deterministic 8-dimensional unit-free vector derived from the text (FNV-1a).
pub fn embedding(text: &str) -> Vec<f64> {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    (0..8)
        .map(|i| {
            let byte = (hash >> (i * 8)) & 0xff;
            // Map each byte to [-1, 1] with two decimals, so values print exactly.
            ((byte as f64) / 127.5 - 1.0).mul_add(100.0, 0.0).round() / 100.0
        })
        .collect()
}

fn rerank(model: &str, body: &Value, prompt: usize) -> Value {
    let query: Vec<String> = body
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    let docs: Vec<String> = body
        .get("documents")
        .and_then(Value::as_array)
        .map(|d| {
            d.iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_owned)
                        .or_else(|| x.get("text").and_then(Value::as_str).map(str::to_owned))
                        .unwrap_or_default()
                })
                .collect()
        })
        .unwrap_or_default();
    let results: Vec<Value> = docs
        .iter()
        .enumerate()
        .map(|(index, doc)| {
            let lower = doc.to_lowercase();
            let hits = query.iter().filter(|w| lower.contains(w.as_str())).count();
            let score = if query.is_empty() {
                0.0
            } else {
                hits as f64 / query.len() as f64
            };
            json!({"index": index, "relevance_score": score, "document": {"text": doc}})
        })
        .collect();
    json!({
        "model": model,
        "object": "list",
        "usage": {"prompt_tokens": prompt, "total_tokens": prompt},
        "results": results,
    })
}

/// The `/v1/models` list: `(id, loaded)` pairs, in the order given, with the
/// server's `status.value` (`loaded` / `unloaded`).
pub fn model_list<'a>(models: impl IntoIterator<Item = (&'a str, bool)>) -> Value {
    let data: Vec<Value> = models
        .into_iter()
        .map(|(id, loaded)| {
            json!({
                "id": id,
                "object": "model",
                "created": CREATED,
                "owned_by": "mockswap",
                "status": {"value": if loaded { "loaded" } else { "unloaded" }},
            })
        })
        .collect();
    json!({"object": "list", "data": data})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_concatenate_back_to_the_content() {
        let text = "[m]  héllo wörld\n again ";
        let toks = tokens(text);
        assert_eq!(toks.concat(), text);
        assert_eq!(toks[0], "[m]");
        assert_eq!(toks[1], "  héllo");
    }

    #[test]
    fn echo_reflects_the_last_user_message_in_string_or_parts_form() {
        let body = json!({"messages": [
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "ignored"},
            {"role": "user", "content": [{"type": "text", "text": "second"}]},
        ]});
        assert_eq!(echo_source(Api::ChatCompletions, Some(&body)), "second");
        assert_eq!(echo_text("qwen", "second"), "[qwen] second");
    }

    #[test]
    fn embeddings_are_deterministic_per_input() {
        assert_eq!(embedding("a"), embedding("a"));
        assert_ne!(embedding("a"), embedding("b"));
        assert_eq!(embedding("a").len(), 8);
    }
}
