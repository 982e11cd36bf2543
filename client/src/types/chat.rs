//! Chat completions: request, response and stream chunk.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::null_as_default;

/// A `POST /v1/chat/completions` request.
///
/// ```
/// use llama_swap_client::{ChatMessage, ChatRequest};
///
/// let req = ChatRequest::new("qwen", vec![ChatMessage::user("hi")])
///     .max_tokens(64)
///     .extra("cache_prompt", true);
/// let json = serde_json::to_value(&req).unwrap();
/// assert_eq!(json["cache_prompt"], true);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[non_exhaustive]
pub struct ChatRequest {
    /// The model (or alias) the proxy routes by.
    pub model: String,
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Upper bound on generated tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// Sampling seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Tool definitions, passed through unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<Value>>,
    /// Tool choice, passed through unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    /// Set by the SDK: `true` for streaming calls, absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Stream options (for example `{"include_usage": true}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<Value>,
    /// Any other body field (vendor parameters such as `top_k` or `cache_prompt`).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl ChatRequest {
    /// A request for `model` with `messages` and nothing else set.
    pub fn new(model: impl Into<String>, messages: Vec<ChatMessage>) -> ChatRequest {
        ChatRequest {
            model: model.into(),
            messages,
            ..ChatRequest::default()
        }
    }

    /// Sets the sampling temperature.
    #[must_use]
    pub fn temperature(mut self, value: f64) -> ChatRequest {
        self.temperature = Some(value);
        self
    }

    /// Sets the token limit.
    #[must_use]
    pub fn max_tokens(mut self, value: u32) -> ChatRequest {
        self.max_tokens = Some(value);
        self
    }

    /// Sets any other body field.
    #[must_use]
    pub fn extra(mut self, key: impl Into<String>, value: impl Into<Value>) -> ChatRequest {
        self.extra.insert(key.into(), value.into());
        self
    }
}

/// Who wrote a message. Unknown roles are kept as [`Role::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Role {
    /// Instructions.
    System,
    /// Developer instructions (newer OpenAI name for system).
    Developer,
    /// The person.
    User,
    /// The model (the default when a response omits the role).
    #[default]
    Assistant,
    /// A tool result.
    Tool,
    /// Any other role string.
    Other(String),
}

impl Role {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            Role::System => "system",
            Role::Developer => "developer",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
            Role::Other(s) => s,
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Role {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Role {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = Option::<String>::deserialize(d)?.unwrap_or_default();
        Ok(match text.as_str() {
            "system" => Role::System,
            "developer" => Role::Developer,
            "user" => Role::User,
            "assistant" | "" => Role::Assistant,
            "tool" => Role::Tool,
            _ => Role::Other(text),
        })
    }
}

/// A message's content: plain text or a list of typed parts (images, audio, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Typed parts, passed through unchanged.
    Parts(Vec<Value>),
}

impl MessageContent {
    /// The text: the string itself, or the `text` of every text part joined.
    pub fn text(&self) -> String {
        match self {
            MessageContent::Text(t) => t.clone(),
            MessageContent::Parts(parts) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect(),
        }
    }
}

impl From<String> for MessageContent {
    fn from(text: String) -> Self {
        MessageContent::Text(text)
    }
}

impl From<&str> for MessageContent {
    fn from(text: &str) -> Self {
        MessageContent::Text(text.to_owned())
    }
}

/// One message of a conversation (request) or of an answer (response).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ChatMessage {
    /// Who wrote it.
    pub role: Role,
    /// What it says (`null` for a pure tool-call turn).
    pub content: Option<MessageContent>,
    /// Optional author name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Tool calls the assistant made.
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tool_calls: Vec<ToolCall>,
    /// The tool call a `tool` message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Reasoning text (llama.cpp `reasoning_content`, vLLM `reasoning`).
    #[serde(alias = "reasoning", skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
}

impl ChatMessage {
    /// A message with `role` and text `content`.
    pub fn new(role: Role, content: impl Into<MessageContent>) -> ChatMessage {
        ChatMessage {
            role,
            content: Some(content.into()),
            ..ChatMessage::default()
        }
    }

    /// A system message.
    pub fn system(content: impl Into<MessageContent>) -> ChatMessage {
        ChatMessage::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<MessageContent>) -> ChatMessage {
        ChatMessage::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<MessageContent>) -> ChatMessage {
        ChatMessage::new(Role::Assistant, content)
    }

    /// A tool result answering `tool_call_id`.
    pub fn tool(
        tool_call_id: impl Into<String>,
        content: impl Into<MessageContent>,
    ) -> ChatMessage {
        ChatMessage {
            tool_call_id: Some(tool_call_id.into()),
            ..ChatMessage::new(Role::Tool, content)
        }
    }

    /// The content as text (empty when there is none).
    pub fn text(&self) -> String {
        self.content
            .as_ref()
            .map(MessageContent::text)
            .unwrap_or_default()
    }
}

/// A complete tool call in a response message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ToolCall {
    /// The call's id, echoed by the tool result.
    #[serde(deserialize_with = "null_as_default")]
    pub id: String,
    /// Always `function` today.
    #[serde(rename = "type", deserialize_with = "null_as_default")]
    pub kind: String,
    /// The function and its JSON arguments.
    pub function: FunctionCall,
}

/// The function part of a tool call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct FunctionCall {
    /// Function name.
    #[serde(deserialize_with = "null_as_default")]
    pub name: String,
    /// Arguments as a JSON string.
    #[serde(deserialize_with = "null_as_default")]
    pub arguments: String,
}

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

pub(super) fn finish_reason<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<FinishReason>, D::Error> {
    Ok(Option::<String>::deserialize(d)?.and_then(FinishReason::from_wire))
}

/// Token accounting. Every field defaults to 0, so `usage: {}` is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct Usage {
    /// Tokens in the prompt.
    #[serde(deserialize_with = "null_as_default")]
    pub prompt_tokens: u64,
    /// Tokens generated.
    #[serde(deserialize_with = "null_as_default")]
    pub completion_tokens: u64,
    /// Their sum, as reported.
    #[serde(deserialize_with = "null_as_default")]
    pub total_tokens: u64,
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
    pub usage: Option<Usage>,
}

impl ChatResponse {
    /// The first choice's text (empty when there is none).
    pub fn text(&self) -> String {
        self.choices
            .first()
            .map(|c| c.message.text())
            .unwrap_or_default()
    }

    /// The first choice's finish reason.
    pub fn finish_reason(&self) -> Option<&FinishReason> {
        self.choices.first()?.finish_reason.as_ref()
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
}

/// One frame of a streaming chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ChatChunk {
    /// Completion id (llama-swap loading frames and some servers omit it).
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
    pub usage: Option<Usage>,
}

impl ChatChunk {
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
}

/// The new part of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct ChatDelta {
    /// Sent on the first frame.
    pub role: Option<Role>,
    /// New text.
    pub content: Option<String>,
    /// New reasoning text (llama.cpp `reasoning_content`, vLLM `reasoning`).
    #[serde(alias = "reasoning")]
    pub reasoning_content: Option<String>,
    /// Pieces of tool calls, merged by `index`.
    #[serde(
        deserialize_with = "null_as_default",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub tool_calls: Vec<ToolCallDelta>,
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
    pub id: Option<String>,
    /// Sent with the first piece.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    /// Name and argument text.
    pub function: Option<FunctionCallDelta>,
}

/// The function part of a tool-call piece.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct FunctionCallDelta {
    /// Sent with the first piece.
    pub name: Option<String>,
    /// Argument text to append.
    pub arguments: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_omits_unset_fields_and_flattens_extra() {
        let req = ChatRequest::new("m", vec![ChatMessage::user("hi")]).extra("top_k", 40);
        let json = serde_json::to_value(&req).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "top_k": 40
            })
        );
    }

    #[test]
    fn chunk_tolerates_missing_ids_empty_finish_reason_and_empty_usage() {
        let chunk: ChatChunk = serde_json::from_str(
            r#"{"choices":[{"delta":{"content":"x","tool_calls":null},"finish_reason":""}],"usage":{},"timings":{"n":1}}"#,
        )
        .unwrap();
        assert_eq!(chunk.id, "");
        assert_eq!(chunk.content(), Some("x"));
        assert_eq!(chunk.finish_reason(), None);
        assert_eq!(chunk.usage, Some(Usage::default()));
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
    fn vllm_reasoning_field_reads_as_reasoning_content() {
        let chunk: ChatChunk =
            serde_json::from_str(r#"{"choices":[{"delta":{"reasoning":"hmm"}}]}"#).unwrap();
        assert_eq!(chunk.reasoning(), Some("hmm"));
    }

    #[test]
    fn response_with_null_content_and_tool_calls_parses() {
        let resp: ChatResponse = serde_json::from_str(
            r#"{"id":"c1","choices":[{"index":0,"message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"t1","type":"function","function":{"name":"f","arguments":"{}"}}]},
            "finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#,
        )
        .unwrap();
        assert_eq!(resp.text(), "");
        assert_eq!(resp.choices[0].message.tool_calls[0].function.name, "f");
        assert_eq!(resp.finish_reason(), Some(&FinishReason::ToolCalls));
        assert_eq!(resp.usage.unwrap().total_tokens, 4);
    }

    #[test]
    fn content_parts_join_their_text() {
        let msg: ChatMessage = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}"#,
        )
        .unwrap();
        assert_eq!(msg.text(), "ab");
    }
}
