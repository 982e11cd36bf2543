//! Reading a model request: which API it speaks, what the echo reflects, and how big
//! the prompt is.

use serde_json::Value;

/// Which API a model request speaks; decides the request fields read and the response
/// shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
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
    /// `POST /v1/images/generations`, `/v1/images/edits`: PNGs in `b64_json`.
    Images,
    /// `POST /v1/audio/speech`: a WAV.
    Speech,
    /// `POST /v1/audio/transcriptions`: a multipart upload, answered with text.
    Transcription,
    /// `GET` or `POST /v1/audio/voices`: the voices.
    Voices,
    /// Any other path (reached through `/upstream/<model>/...` or `POST /v1/...`): a JSON
    /// echo of what was asked.
    Other,
}

impl Api {
    /// The API of a path (after any `/upstream/<model>` prefix is removed).
    pub(crate) fn of_path(path: &str) -> Self {
        match path {
            "/v1/chat/completions" | "/chat/completions" => Self::ChatCompletions,
            "/v1/completions" | "/completions" => Self::Completions,
            "/v1/embeddings" | "/embeddings" => Self::Embeddings,
            "/v1/messages" => Self::Messages,
            "/completion" => Self::LlamaCompletion,
            "/infill" => Self::Infill,
            "/rerank" | "/v1/rerank" | "/reranking" | "/v1/reranking" => Self::Rerank,
            "/v1/images/generations" | "/v1/images/edits" => Self::Images,
            "/v1/audio/speech" => Self::Speech,
            "/v1/audio/transcriptions" => Self::Transcription,
            "/v1/audio/voices" => Self::Voices,
            _ => Self::Other,
        }
    }

    /// Whether this API can answer with an SSE stream.
    pub(crate) fn streams(self) -> bool {
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
    pub(crate) fn sends_done(self) -> bool {
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
pub(crate) fn echo_source(api: Api, body: Option<&Value>) -> String {
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
        Api::Images => prompt_text(body.get("prompt")),
        Api::Speech => prompt_text(body.get("input")),
        // A transcription's source is its multipart upload (see `media::upload`).
        Api::Embeddings | Api::Rerank | Api::Transcription | Api::Voices | Api::Other => {
            String::new()
        }
    }
}

/// The default reply content: `[<model>] <last user message>`.
pub(crate) fn echo_text(model: &str, source: &str) -> String {
    if source.is_empty() {
        format!("[{model}]")
    } else {
        format!("[{model}] {source}")
    }
}

/// Deterministic prompt size: whitespace-separated words of everything the request says.
pub(super) fn prompt_tokens(api: Api, body: Option<&Value>) -> usize {
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

pub(crate) fn inputs(body: &Value) -> Vec<String> {
    match body.get("input").or_else(|| body.get("content")) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => items
            .iter()
            .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
            .collect(),
        _ => Vec::new(),
    }
}
