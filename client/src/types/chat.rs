//! Chat completions: the request and its messages.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::content::{ContentPart, MessageContent};
use super::tools::{ResponseFormat, Tool, ToolCall, ToolChoice};
use super::{null_as_default, pick_reasoning};
use crate::error::Error;

/// A `POST /v1/chat/completions` request.
///
/// ```
/// use llama_swap_client::{ChatMessage, ChatRequest, Tool, ToolChoice};
/// use serde_json::json;
///
/// let req = ChatRequest::new("qwen", vec![ChatMessage::user("Weather in Oslo?")])
///     .max_tokens(64)
///     .tool(Tool::function(
///         "get_weather",
///         "Current weather for a city",
///         json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
///     ))
///     .tool_choice(ToolChoice::Auto)
///     .extra("cache_prompt", true);
/// let json = serde_json::to_value(&req).unwrap();
/// assert_eq!(json["tools"][0]["function"]["name"], "get_weather");
/// assert_eq!(json["tool_choice"], "auto");
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
    /// The tools the model may call (omitted when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// Whether and which tool the model must call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may call several tools in one turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// The shape of the answer: text, any JSON object, or JSON matching a schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// Set by the SDK: `true` for streaming calls, absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Stream options (for example `{"include_usage": true}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<Value>,
    /// Send the `reasoning_content` of earlier assistant messages back to the model.
    /// Default `false`: the SDK's endpoints strip it, because most reasoning models
    /// expect their old reasoning to be left out of the history (and it costs
    /// tokens). Never sent itself.
    #[serde(skip)]
    pub resend_reasoning: bool,
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

    /// Sets nucleus sampling: only the tokens making up the top `value` of probability
    /// mass are considered.
    #[must_use]
    pub fn top_p(mut self, value: f64) -> ChatRequest {
        self.top_p = Some(value);
        self
    }

    /// Sets the token limit.
    #[must_use]
    pub fn max_tokens(mut self, value: u32) -> ChatRequest {
        self.max_tokens = Some(value);
        self
    }

    /// Sets the sequences that stop generation (replacing any set before).
    #[must_use]
    pub fn stop<S: Into<String>>(mut self, sequences: impl IntoIterator<Item = S>) -> ChatRequest {
        self.stop = Some(sequences.into_iter().map(Into::into).collect());
        self
    }

    /// Sets the sampling seed, for reproducible answers where the server supports it.
    #[must_use]
    pub fn seed(mut self, seed: i64) -> ChatRequest {
        self.seed = Some(seed);
        self
    }

    /// Adds a tool the model may call.
    #[must_use]
    pub fn tool(mut self, tool: Tool) -> ChatRequest {
        self.tools.push(tool);
        self
    }

    /// Replaces the tools the model may call.
    #[must_use]
    pub fn tools(mut self, tools: impl IntoIterator<Item = Tool>) -> ChatRequest {
        self.tools = tools.into_iter().collect();
        self
    }

    /// Sets whether and which tool the model must call.
    #[must_use]
    pub fn tool_choice(mut self, choice: ToolChoice) -> ChatRequest {
        self.tool_choice = Some(choice);
        self
    }

    /// Sets whether the model may call several tools in one turn.
    #[must_use]
    pub fn parallel_tool_calls(mut self, allowed: bool) -> ChatRequest {
        self.parallel_tool_calls = Some(allowed);
        self
    }

    /// Sets the shape of the answer (see [`ChatResponse::parse`](crate::ChatResponse::parse)).
    #[must_use]
    pub fn response_format(mut self, format: ResponseFormat) -> ChatRequest {
        self.response_format = Some(format);
        self
    }

    /// Sends earlier reasoning back to the model (see [`ChatRequest::resend_reasoning`]).
    #[must_use]
    pub fn with_reasoning_resent(mut self, resend: bool) -> ChatRequest {
        self.resend_reasoning = resend;
        self
    }

    /// Sets any other body field.
    #[must_use]
    pub fn extra(mut self, key: impl Into<String>, value: impl Into<Value>) -> ChatRequest {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// The body the SDK sends: `stream` set as asked, and reasoning stripped from the
    /// history unless [`ChatRequest::resend_reasoning`] is set.
    pub(crate) fn wire_body(&self, stream: bool) -> Result<Vec<u8>, Error> {
        let mut request = self.clone();
        request.stream = stream.then_some(true);
        if !request.resend_reasoning {
            for message in &mut request.messages {
                message.reasoning_content = None;
            }
        }
        serde_json::to_vec(&request).map_err(Error::Encode)
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

/// One message of a conversation (request) or of an answer (response).
///
/// A runtime rebuilds its history from its own types with the constructors:
///
/// ```
/// use llama_swap_client::{ChatMessage, ToolCall};
/// use serde_json::json;
///
/// let call = ToolCall::function("call_1", "get_weather", json!({"city": "Oslo"}).to_string());
/// let history = vec![
///     ChatMessage::user("Weather in Oslo?"),
///     ChatMessage::assistant_tool_calls(vec![call]),
///     ChatMessage::tool("call_1", r#"{"celsius": 4}"#),
/// ];
/// let json = serde_json::to_value(&history).unwrap();
/// assert_eq!(json[1]["content"], serde_json::Value::Null);
/// assert_eq!(json[1]["tool_calls"][0]["function"]["arguments"], r#"{"city":"Oslo"}"#);
/// assert_eq!(json[2]["tool_call_id"], "call_1");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(from = "MessageWire")]
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
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The tool call a `tool` message answers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Reasoning text (llama.cpp `reasoning_content`, vLLM `reasoning`). Stripped
    /// from requests unless [`ChatRequest::resend_reasoning`] is set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// A refusal the model gave instead of content (OpenAI's `refusal`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Every other field, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// How a message arrives: both reasoning spellings are read (see
/// [`pick_reasoning`]).
#[derive(Deserialize, Default)]
#[serde(default)]
struct MessageWire {
    role: Role,
    content: Option<MessageContent>,
    name: Option<String>,
    #[serde(deserialize_with = "null_as_default")]
    tool_calls: Vec<ToolCall>,
    tool_call_id: Option<String>,
    reasoning_content: Option<String>,
    reasoning: Option<String>,
    refusal: Option<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl From<MessageWire> for ChatMessage {
    fn from(w: MessageWire) -> ChatMessage {
        ChatMessage {
            role: w.role,
            content: w.content,
            name: w.name,
            tool_calls: w.tool_calls,
            tool_call_id: w.tool_call_id,
            reasoning_content: pick_reasoning(w.reasoning_content, w.reasoning),
            refusal: w.refusal,
            extra: w.extra,
        }
    }
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

    /// A user message made of typed parts (text, images, audio).
    pub fn user_parts(parts: impl IntoIterator<Item = ContentPart>) -> ChatMessage {
        ChatMessage::new(
            Role::User,
            MessageContent::Parts(parts.into_iter().collect()),
        )
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<MessageContent>) -> ChatMessage {
        ChatMessage::new(Role::Assistant, content)
    }

    /// An assistant turn that only calls tools (`content: null`).
    pub fn assistant_tool_calls(calls: impl IntoIterator<Item = ToolCall>) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            tool_calls: calls.into_iter().collect(),
            ..ChatMessage::default()
        }
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

    /// A tool result whose content is `value` serialised as JSON.
    ///
    /// # Errors
    ///
    /// [`Error::Encode`] when `value` cannot be serialised.
    pub fn tool_json<T: Serialize + ?Sized>(
        tool_call_id: impl Into<String>,
        value: &T,
    ) -> Result<ChatMessage, Error> {
        let text = serde_json::to_string(value).map_err(Error::Encode)?;
        Ok(ChatMessage::tool(tool_call_id, text))
    }

    /// Sets the author name.
    #[must_use]
    pub fn with_name(mut self, name: impl Into<String>) -> ChatMessage {
        self.name = Some(name.into());
        self
    }

    /// Adds tool calls to the message (an assistant turn with text and calls).
    #[must_use]
    pub fn with_tool_calls(mut self, calls: impl IntoIterator<Item = ToolCall>) -> ChatMessage {
        self.tool_calls.extend(calls);
        self
    }

    /// Sets the reasoning text.
    #[must_use]
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> ChatMessage {
        self.reasoning_content = Some(reasoning.into());
        self
    }

    /// The content as text (empty when there is none).
    pub fn text(&self) -> String {
        self.content
            .as_ref()
            .map(MessageContent::text)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn request_omits_unset_fields_and_flattens_extra() {
        let req = ChatRequest::new("m", vec![ChatMessage::user("hi")]).extra("top_k", 40);
        let json = serde_json::to_value(&req).unwrap();
        assert_eq!(
            json,
            json!({
                "model": "m",
                "messages": [{"role": "user", "content": "hi"}],
                "top_k": 40
            })
        );
    }

    #[test]
    fn sampling_setters_write_top_p_stop_and_seed() {
        let req = ChatRequest::new("m", vec![ChatMessage::user("hi")])
            .top_p(0.9)
            .stop(["\n\n", "END"])
            .seed(42);
        let json = serde_json::to_value(&req).unwrap();
        assert_eq!(json["top_p"], 0.9);
        assert_eq!(json["stop"], json!(["\n\n", "END"]));
        assert_eq!(json["seed"], 42);
    }

    #[test]
    fn wire_body_strips_reasoning_from_history_unless_asked() {
        let history = vec![
            ChatMessage::user("q"),
            ChatMessage::assistant("a").with_reasoning("secret thoughts"),
        ];
        let req = ChatRequest::new("m", history);
        let sent: Value = serde_json::from_slice(&req.wire_body(false).unwrap()).unwrap();
        assert!(
            sent["messages"][1].get("reasoning_content").is_none(),
            "{sent}"
        );
        let kept: Value = serde_json::from_slice(
            &req.clone()
                .with_reasoning_resent(true)
                .wire_body(true)
                .unwrap(),
        )
        .unwrap();
        assert_eq!(kept["messages"][1]["reasoning_content"], "secret thoughts");
        assert_eq!(kept["stream"], true);
        assert!(kept.get("resend_reasoning").is_none());
    }

    #[test]
    fn message_reads_both_reasoning_spellings_and_keeps_unknown_fields() {
        let both: ChatMessage = serde_json::from_value(json!({
            "role": "assistant", "content": "x",
            "reasoning_content": "r", "reasoning": "r", "annotations": []
        }))
        .unwrap();
        assert_eq!(both.reasoning_content.as_deref(), Some("r"));
        assert_eq!(both.extra["annotations"], json!([]));
        let vllm: ChatMessage =
            serde_json::from_value(json!({"role": "assistant", "reasoning": "v"})).unwrap();
        assert_eq!(vllm.reasoning_content.as_deref(), Some("v"));
        let back = serde_json::to_value(&both).unwrap();
        assert_eq!(back["annotations"], json!([]));
        assert!(back.get("reasoning").is_none());
    }

    #[test]
    fn content_parts_join_their_text() {
        let msg: ChatMessage = serde_json::from_str(
            r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"b"}]}"#,
        )
        .unwrap();
        assert_eq!(msg.text(), "ab");
    }
}
