//! Chat completions: the response, the stream chunk, and why generation stopped.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::chat::{ChatMessage, Role};
use super::usage::{Timings, Usage};
use super::{null_as_default, pick_reasoning};
use crate::error::{DecodeTarget, Error};

/// Why generation stopped. Unknown values are kept as [`FinishReason::Other`]; an
/// empty string (sent by some compatible servers) reads as no reason.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FinishReason {
    /// Natural end or stop sequence.
    Stop,
    /// Token limit.
    Length,
    /// The model called tools.
    ToolCalls,
    /// Filtered.
    ContentFilter,
    /// Legacy function call.
    FunctionCall,
    /// Anything else.
    Other(String),
}

impl FinishReason {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::FunctionCall => "function_call",
            FinishReason::Other(s) => s,
        }
    }

    fn from_wire(text: String) -> Option<FinishReason> {
        Some(match text.as_str() {
            "" => return None,
            "stop" => FinishReason::Stop,
            "length" => FinishReason::Length,
            "tool_calls" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            "function_call" => FinishReason::FunctionCall,
            _ => FinishReason::Other(text),
        })
    }
}

impl Serialize for FinishReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

pub(crate) fn finish_reason<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<FinishReason>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.and_then(FinishReason::from_wire))
}

/// A non-streaming chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ChatResponse {
    /// Completion id (may be empty with some servers).
    #[serde(deserialize_with = "null_as_default")]
    pub id: String,
    /// Usually `chat.completion`.
    #[serde(deserialize_with = "null_as_default")]
    pub object: String,
    /// Unix seconds.
    #[serde(deserialize_with = "null_as_default")]
    pub created: u64,
    /// The model that answered.
    #[serde(deserialize_with = "null_as_default")]
    pub model: String,
    /// The answers (usually one).
    #[serde(deserialize_with = "null_as_default")]
    pub choices: Vec<ChatChoice>,
    /// Token accounting, if reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// llama.cpp's speed report, if sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
    /// Every other field (`system_fingerprint`, ...), kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ChatResponse {
    /// A response of `model` with one assistant `message` that ended for `reason`.
    pub fn new(
        model: impl Into<String>,
        message: ChatMessage,
        reason: Option<FinishReason>,
    ) -> ChatResponse {
        ChatResponse {
            object: "chat.completion".to_owned(),
            model: model.into(),
            choices: vec![ChatChoice {
                index: 0,
                message,
                finish_reason: reason,
                extra: Map::new(),
            }],
            ..ChatResponse::default()
        }
    }

    /// The first choice's text (empty when there is none).
    pub fn text(&self) -> String {
        self.choices
            .first()
            .map(|c| c.message.text())
            .unwrap_or_default()
    }

    /// The first choice's message.
    pub fn message(&self) -> Option<&ChatMessage> {
        self.choices.first().map(|c| &c.message)
    }

    /// The first choice's tool calls (empty when it made none).
    pub fn tool_calls(&self) -> &[super::ToolCall] {
        self.message().map_or(&[], |m| m.tool_calls.as_slice())
    }

    /// The first choice's finish reason.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.choices.first()?.finish_reason.as_ref()
    }

    /// The first choice's text deserialised into `T`: the structured-output
    /// counterpart of [`ResponseFormat`](crate::ResponseFormat). A Markdown code
    /// fence around the JSON (which small models like to add) is removed first.
    ///
    /// ```
    /// use llama_swap_client::{ChatMessage, ChatResponse, FinishReason};
    ///
    /// #[derive(serde::Deserialize)]
    /// struct Verdict { ok: bool }
    ///
    /// let resp = ChatResponse::new("m", ChatMessage::assistant("```json\n{\"ok\": true}\n```"), Some(FinishReason::Stop));
    /// assert!(resp.parse::<Verdict>().unwrap().ok);
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Refusal`] when the model refused; [`Error::Decode`] with
    /// [`DecodeTarget::StructuredOutput`] and the raw text when the text is not JSON
    /// of that shape (or there is no text).
    pub fn parse<T: DeserializeOwned>(&self) -> Result<T, Error> {
        let message = self.message();
        if let Some(refusal) = message.and_then(|m| m.refusal.clone()) {
            return Err(Error::Refusal { message: refusal });
        }
        let raw = message.map(ChatMessage::text).unwrap_or_default();
        serde_json::from_str(strip_code_fence(&raw)).map_err(|source| Error::Decode {
            what: DecodeTarget::StructuredOutput,
            raw,
            source,
        })
    }
}

/// The JSON inside a Markdown code fence, or the text itself.
fn strip_code_fence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return trimmed;
    };
    // Drop the info string (`json`) on the opening line.
    match body.split_once('\n') {
        Some((_, inner)) => inner.trim(),
        None => body.trim(),
    }
}

/// One answer of a [`ChatResponse`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ChatChoice {
    /// Position among the choices.
    #[serde(deserialize_with = "null_as_default")]
    pub index: u32,
    /// The message.
    #[serde(deserialize_with = "null_as_default")]
    pub message: ChatMessage,
    /// Why generation stopped.
    #[serde(deserialize_with = "finish_reason")]
    pub finish_reason: Option<FinishReason>,
    /// Every other field (`logprobs`, ...), kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// One frame of a streaming chat completion.
///
/// Fakes build them with the constructors:
///
/// ```
/// use llama_swap_client::{ChatChunk, ChatDelta, FinishReason, ToolCallDelta};
///
/// let chunks = [
///     ChatChunk::delta("demo", ChatDelta::text("Checking")),
///     ChatChunk::delta("demo", ChatDelta::tool_call(ToolCallDelta::start(0, "call_1", "get_weather"))),
///     ChatChunk::delta("demo", ChatDelta::tool_call(ToolCallDelta::arguments(0, r#"{"city":"Oslo"}"#))),
///     ChatChunk::finish("demo", FinishReason::ToolCalls),
/// ];
/// let resp = llama_swap_client::ChatResponse::from_chunks(chunks);
/// assert_eq!(resp.tool_calls()[0].function.arguments, r#"{"city":"Oslo"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ChatChunk {
    /// Completion id (some servers omit it).
    #[serde(deserialize_with = "null_as_default")]
    pub id: String,
    /// Usually `chat.completion.chunk`.
    #[serde(deserialize_with = "null_as_default")]
    pub object: String,
    /// Unix seconds.
    #[serde(deserialize_with = "null_as_default")]
    pub created: u64,
    /// The model that answered.
    #[serde(deserialize_with = "null_as_default")]
    pub model: String,
    /// Deltas, one per choice (empty in a usage-only final frame).
    #[serde(deserialize_with = "null_as_default")]
    pub choices: Vec<ChunkChoice>,
    /// Token accounting, usually only in the last frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// llama.cpp's speed report, usually in the last frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
    /// Every other field, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ChatChunk {
    /// A chunk of `model` with one delta for choice 0.
    pub fn delta(model: impl Into<String>, delta: ChatDelta) -> ChatChunk {
        ChatChunk {
            object: "chat.completion.chunk".to_owned(),
            model: model.into(),
            choices: vec![ChunkChoice {
                index: 0,
                delta,
                finish_reason: None,
                extra: Map::new(),
            }],
            ..ChatChunk::default()
        }
    }

    /// The last chunk of choice 0: an empty delta and the finish reason.
    pub fn finish(model: impl Into<String>, reason: FinishReason) -> ChatChunk {
        let mut chunk = ChatChunk::delta(model, ChatDelta::default());
        chunk.choices[0].finish_reason = Some(reason);
        chunk
    }

    /// A usage-only chunk (no choices).
    pub fn usage_only(model: impl Into<String>, usage: Usage) -> ChatChunk {
        ChatChunk {
            object: "chat.completion.chunk".to_owned(),
            model: model.into(),
            usage: Some(usage),
            ..ChatChunk::default()
        }
    }

    /// Sets the completion id.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<String>) -> ChatChunk {
        self.id = id.into();
        self
    }

    /// The first choice's content delta, if any.
    pub fn content(&self) -> Option<&str> {
        self.choices.first()?.delta.content.as_deref()
    }

    /// The first choice's reasoning delta, if any.
    pub fn reasoning(&self) -> Option<&str> {
        self.choices.first()?.delta.reasoning_content.as_deref()
    }

    /// The first finish reason any choice carries.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.choices.iter().find_map(|c| c.finish_reason.as_ref())
    }
}

/// One choice's part of a [`ChatChunk`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ChunkChoice {
    /// Which choice this delta extends.
    #[serde(deserialize_with = "null_as_default")]
    pub index: u32,
    /// What is new.
    #[serde(deserialize_with = "null_as_default")]
    pub delta: ChatDelta,
    /// Set on the last frame of a choice.
    #[serde(deserialize_with = "finish_reason")]
    pub finish_reason: Option<FinishReason>,
    /// Every other field (`logprobs`, ...), kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// The new part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(from = "DeltaWire")]
#[non_exhaustive]
pub struct ChatDelta {
    /// Sent on the first frame.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// New text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// New reasoning text (llama.cpp `reasoning_content`, vLLM `reasoning`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// New refusal text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Pieces of tool calls, merged by `index`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCallDelta>,
    /// Every other field, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct DeltaWire {
    role: Option<Role>,
    content: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    refusal: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    tool_calls: Vec<ToolCallDelta>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl From<DeltaWire> for ChatDelta {
    fn from(w: DeltaWire) -> ChatDelta {
        ChatDelta {
            role: w.role,
            content: w.content,
            reasoning_content: pick_reasoning(w.reasoning_content, w.reasoning),
            refusal: w.refusal,
            tool_calls: w.tool_calls,
            extra: w.extra,
        }
    }
}

impl ChatDelta {
    /// A delta of new text.
    pub fn text(text: impl Into<String>) -> ChatDelta {
        ChatDelta {
            content: Some(text.into()),
            ..ChatDelta::default()
        }
    }

    /// A delta of new reasoning text.
    pub fn reasoning(text: impl Into<String>) -> ChatDelta {
        ChatDelta {
            reasoning_content: Some(text.into()),
            ..ChatDelta::default()
        }
    }

    /// A delta with one tool-call piece.
    pub fn tool_call(piece: ToolCallDelta) -> ChatDelta {
        ChatDelta {
            tool_calls: vec![piece],
            ..ChatDelta::default()
        }
    }

    /// Sets the role (sent on a choice's first frame).
    #[must_use]
    pub fn with_role(mut self, role: Role) -> ChatDelta {
        self.role = Some(role);
        self
    }
}

/// A piece of a tool call in a stream.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ToolCallDelta {
    /// Which tool call this piece extends.
    #[serde(deserialize_with = "null_as_default")]
    pub index: u32,
    /// Sent with the first piece.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Sent with the first piece.
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name and argument text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function: Option<FunctionCallDelta>,
}

impl ToolCallDelta {
    /// The first piece of call `index`: its id and function name.
    pub fn start(index: u32, id: impl Into<String>, name: impl Into<String>) -> ToolCallDelta {
        ToolCallDelta {
            index,
            id: Some(id.into()),
            kind: Some("function".to_owned()),
            function: Some(FunctionCallDelta {
                name: Some(name.into()),
                arguments: None,
            }),
        }
    }

    /// A later piece of call `index`: more argument text.
    pub fn arguments(index: u32, text: impl Into<String>) -> ToolCallDelta {
        ToolCallDelta {
            index,
            function: Some(FunctionCallDelta {
                name: None,
                arguments: Some(text.into()),
            }),
            ..ToolCallDelta::default()
        }
    }
}

/// The function part of a tool-call piece.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct FunctionCallDelta {
    /// Sent with the first piece.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Argument text to append.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn chunk_tolerates_missing_ids_empty_finish_reason_and_empty_usage() {
        let chunk: ChatChunk = serde_json::from_str(
            r#"{"choices":[{"delta":{"content":"x","tool_calls":null},"finish_reason":""}],"usage":{}}"#,
        )
        .unwrap();
        assert_eq!(chunk.id, "");
        assert_eq!(chunk.content(), Some("x"));
        assert_eq!(chunk.finish_reason(), None);
        assert_eq!(chunk.usage, Some(Usage::default()));
    }

    #[test]
    fn chunk_keeps_timings_and_unknown_fields() {
        let wire = json!({"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": {"content": "x", "annotations": []}, "finish_reason": "stop", "logprobs": null}],
            "timings": {"predicted_n": 2}, "system_fingerprint": "b123"});
        let chunk: ChatChunk = serde_json::from_value(wire.clone()).unwrap();
        assert_eq!(chunk.timings.as_ref().unwrap().predicted_n, Some(2));
        assert_eq!(chunk.extra["system_fingerprint"], "b123");
        assert_eq!(chunk.choices[0].extra["logprobs"], Value::Null);
        assert_eq!(chunk.choices[0].delta.extra["annotations"], json!([]));
        assert_eq!(serde_json::to_value(&chunk).unwrap(), wire);
    }

    #[test]
    fn unknown_finish_reason_and_role_are_kept() {
        let chunk: ChatChunk = serde_json::from_str(
            r#"{"choices":[{"index":0,"delta":{"role":"narrator"},"finish_reason":"eos"}]}"#,
        )
        .unwrap();
        assert_eq!(
            chunk.finish_reason(),
            Some(&FinishReason::Other("eos".into()))
        );
        assert_eq!(
            chunk.choices[0].delta.role,
            Some(Role::Other("narrator".into()))
        );
    }

    #[test]
    fn vllm_reasoning_field_reads_as_reasoning_content_even_next_to_the_old_name() {
        let chunk: ChatChunk =
            serde_json::from_str(r#"{"choices":[{"delta":{"reasoning":"hmm"}}]}"#).unwrap();
        assert_eq!(chunk.reasoning(), Some("hmm"));
        let both: ChatChunk = serde_json::from_str(
            r#"{"choices":[{"delta":{"reasoning":"hmm","reasoning_content":"hmm"}}]}"#,
        )
        .unwrap();
        assert_eq!(both.reasoning(), Some("hmm"));
    }

    #[test]
    fn response_with_null_content_and_tool_calls_parses_and_keeps_extras() {
        let resp: ChatResponse = serde_json::from_str(
            r#"{"id":"c1","choices":[{"index":0,"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4},
            "timings":{"prompt_n":3},"system_fingerprint":"fp"}"#,
        )
        .unwrap();
        assert_eq!(resp.text(), "");
        assert_eq!(resp.tool_calls()[0].function.name, "f");
        assert_eq!(resp.finish_reason(), Some(&FinishReason::ToolCalls));
        assert_eq!(resp.usage.as_ref().unwrap().total_tokens, 4);
        assert_eq!(resp.timings.as_ref().unwrap().prompt_n, Some(3));
        assert_eq!(resp.extra["system_fingerprint"], "fp");
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Verdict {
        ok: bool,
    }

    #[test]
    fn parse_reads_plain_and_fenced_json() {
        for text in [
            r#"{"ok": true}"#,
            "```json\n{\"ok\": true}\n```",
            "  ```\n{\"ok\": true}```  ",
        ] {
            let resp = ChatResponse::new("m", ChatMessage::assistant(text), None);
            assert_eq!(
                resp.parse::<Verdict>().unwrap(),
                Verdict { ok: true },
                "{text}"
            );
        }
    }

    #[test]
    fn parse_mismatch_and_refusal_are_typed_errors() {
        let resp = ChatResponse::new("m", ChatMessage::assistant(r#"{"ok": "yes"}"#), None);
        match resp.parse::<Verdict>() {
            Err(Error::Decode { what, raw, .. }) => {
                assert_eq!(what, DecodeTarget::StructuredOutput);
                assert_eq!(raw, r#"{"ok": "yes"}"#);
            }
            other => panic!("expected a decode error, got {other:?}"),
        }
        let mut refused = ChatMessage::assistant("");
        refused.refusal = Some("I can't help with that".into());
        let resp = ChatResponse::new("m", refused, None);
        assert!(matches!(
            resp.parse::<Verdict>(),
            Err(Error::Refusal { .. })
        ));
    }
}
