//! Messages API wire types.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value, json};

use crate::types::null_as_default;

/// A `POST /v1/messages` request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct MessagesRequest {
    /// The model (or alias) the proxy routes by.
    pub model: String,
    /// Upper bound on generated tokens (required by the API).
    pub max_tokens: u32,
    /// The conversation.
    pub messages: Vec<Message>,
    /// System instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<SystemPrompt>,
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling mass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Top-k sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_k: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop_sequences: Vec<String>,
    /// The tools the model may use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    /// Whether and which tool the model must use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Set by the SDK: `true` for streaming calls, absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// Any other body field (`metadata`, `thinking`, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl MessagesRequest {
    /// A request for `model` with a token limit and the conversation.
    pub fn new(
        model: impl Into<String>,
        max_tokens: u32,
        messages: Vec<Message>,
    ) -> MessagesRequest {
        MessagesRequest {
            model: model.into(),
            max_tokens,
            messages,
            system: None,
            temperature: None,
            top_p: None,
            top_k: None,
            stop_sequences: Vec::new(),
            tools: Vec::new(),
            tool_choice: None,
            stream: None,
            extra: Map::new(),
        }
    }

    /// Sets plain-text system instructions.
    #[must_use]
    pub fn system(mut self, text: impl Into<String>) -> MessagesRequest {
        self.system = Some(SystemPrompt::Text(text.into()));
        self
    }

    /// Adds a tool.
    #[must_use]
    pub fn tool(mut self, tool: Tool) -> MessagesRequest {
        self.tools.push(tool);
        self
    }

    /// Sets the tool choice.
    #[must_use]
    pub fn tool_choice(mut self, choice: ToolChoice) -> MessagesRequest {
        self.tool_choice = Some(choice);
        self
    }

    /// Sets any other body field.
    #[must_use]
    pub fn extra(mut self, key: impl Into<String>, value: impl Into<Value>) -> MessagesRequest {
        self.extra.insert(key.into(), value.into());
        self
    }
}

/// System instructions: text or content blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SystemPrompt {
    /// Plain text.
    Text(String),
    /// Blocks (with `cache_control`, for example).
    Blocks(Vec<ContentBlock>),
}

/// Who wrote a message.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum MessageRole {
    /// The person (tool results are user messages too).
    #[default]
    User,
    /// The model.
    Assistant,
    /// Any other role string.
    Other(String),
}

impl Serialize for MessageRole {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            MessageRole::User => "user",
            MessageRole::Assistant => "assistant",
            MessageRole::Other(other) => other,
        })
    }
}

impl<'de> Deserialize<'de> for MessageRole {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(match text.as_str() {
            "user" => MessageRole::User,
            "assistant" => MessageRole::Assistant,
            _ => MessageRole::Other(text),
        })
    }
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Message {
    /// Who wrote it.
    pub role: MessageRole,
    /// What it says.
    pub content: MessageBody,
}

impl Message {
    /// A user message with text.
    pub fn user(text: impl Into<String>) -> Message {
        Message {
            role: MessageRole::User,
            content: MessageBody::Text(text.into()),
        }
    }

    /// An assistant message with text.
    pub fn assistant(text: impl Into<String>) -> Message {
        Message {
            role: MessageRole::Assistant,
            content: MessageBody::Text(text.into()),
        }
    }

    /// A message of content blocks (an assistant turn that used tools, or a user
    /// turn carrying tool results).
    pub fn blocks(role: MessageRole, blocks: Vec<ContentBlock>) -> Message {
        Message {
            role,
            content: MessageBody::Blocks(blocks),
        }
    }

    /// A user message answering the tool use `tool_use_id`.
    pub fn tool_result(tool_use_id: impl Into<String>, content: impl Into<String>) -> Message {
        Message::blocks(
            MessageRole::User,
            vec![ContentBlock::ToolResult {
                tool_use_id: tool_use_id.into(),
                content: Value::String(content.into()),
                is_error: None,
            }],
        )
    }
}

/// A message's content: text or blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageBody {
    /// Plain text.
    Text(String),
    /// Content blocks.
    Blocks(Vec<ContentBlock>),
}

/// One content block.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ContentBlock {
    /// `{"type": "text", "text": ...}`.
    Text {
        /// The text.
        text: String,
    },
    /// `{"type": "tool_use", "id", "name", "input"}`: the model calls a tool.
    ToolUse {
        /// The use's id, echoed by the result.
        id: String,
        /// The tool's name.
        name: String,
        /// The arguments.
        input: Value,
    },
    /// `{"type": "tool_result", "tool_use_id", "content", "is_error"}`.
    ToolResult {
        /// The tool use it answers.
        tool_use_id: String,
        /// Text or blocks.
        content: Value,
        /// Whether the tool failed.
        is_error: Option<bool>,
    },
    /// `{"type": "thinking", "thinking", "signature"}`.
    Thinking {
        /// The reasoning text.
        thinking: String,
        /// The signature, when the server sends one.
        signature: Option<String>,
    },
    /// Any other block (images, documents, ...), kept as received.
    Other(Value),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text { text: text.into() }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let value = match self {
            ContentBlock::Text { text } => json!({"type": "text", "text": text}),
            ContentBlock::ToolUse { id, name, input } => {
                json!({"type": "tool_use", "id": id, "name": name, "input": input})
            }
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => {
                let mut v =
                    json!({"type": "tool_result", "tool_use_id": tool_use_id, "content": content});
                if let Some(flag) = is_error {
                    v["is_error"] = Value::Bool(*flag);
                }
                v
            }
            ContentBlock::Thinking {
                thinking,
                signature,
            } => {
                let mut v = json!({"type": "thinking", "thinking": thinking});
                if let Some(sig) = signature {
                    v["signature"] = Value::String(sig.clone());
                }
                v
            }
            ContentBlock::Other(value) => return value.serialize(s),
        };
        value.serialize(s)
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        Ok(typed_block(&value).unwrap_or(ContentBlock::Other(value)))
    }
}

fn typed_block(value: &Value) -> Option<ContentBlock> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    Some(match value.get("type")?.as_str()? {
        "text" => ContentBlock::Text {
            text: text("text")?,
        },
        "tool_use" => ContentBlock::ToolUse {
            id: text("id").unwrap_or_default(),
            name: text("name")?,
            input: value.get("input").cloned().unwrap_or_else(|| json!({})),
        },
        "tool_result" => ContentBlock::ToolResult {
            tool_use_id: text("tool_use_id")?,
            content: value.get("content").cloned().unwrap_or(Value::Null),
            is_error: value.get("is_error").and_then(Value::as_bool),
        },
        "thinking" => ContentBlock::Thinking {
            thinking: text("thinking")?,
            signature: text("signature"),
        },
        _ => return None,
    })
}

/// A tool the model may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Tool {
    /// Its name.
    pub name: String,
    /// What it does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON schema of its input object.
    pub input_schema: Value,
    /// Any other field (`cache_control`, ...).
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl Tool {
    /// A tool with a description and an input schema.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Tool {
        Tool {
            name: name.into(),
            description: Some(description.into()),
            input_schema,
            extra: Map::new(),
        }
    }
}

/// Whether and which tool the model must use.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// Some tool must be used.
    Any,
    /// This tool must be used.
    Tool(String),
    /// No tool use.
    None,
    /// Any other value, sent as is.
    Other(Value),
}

impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Auto => json!({"type": "auto"}).serialize(s),
            ToolChoice::Any => json!({"type": "any"}).serialize(s),
            ToolChoice::Tool(name) => json!({"type": "tool", "name": name}).serialize(s),
            ToolChoice::None => json!({"type": "none"}).serialize(s),
            ToolChoice::Other(value) => value.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        let only_type = value.as_object().is_some_and(|o| o.len() == 1);
        Ok(
            match (value.get("type").and_then(Value::as_str), only_type) {
                (Some("auto"), true) => ToolChoice::Auto,
                (Some("any"), true) => ToolChoice::Any,
                (Some("none"), true) => ToolChoice::None,
                (Some("tool"), _) => match value.get("name").and_then(Value::as_str) {
                    Some(name) if value.as_object().is_some_and(|o| o.len() == 2) => {
                        ToolChoice::Tool(name.to_owned())
                    }
                    _ => ToolChoice::Other(value),
                },
                _ => ToolChoice::Other(value),
            },
        )
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StopReason {
    /// A natural end.
    EndTurn,
    /// The token limit.
    MaxTokens,
    /// A stop sequence.
    StopSequence,
    /// The model used a tool.
    ToolUse,
    /// A long turn paused.
    PauseTurn,
    /// The model refused.
    Refusal,
    /// Anything else.
    Other(String),
}

impl StopReason {
    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::MaxTokens => "max_tokens",
            StopReason::StopSequence => "stop_sequence",
            StopReason::ToolUse => "tool_use",
            StopReason::PauseTurn => "pause_turn",
            StopReason::Refusal => "refusal",
            StopReason::Other(s) => s,
        }
    }
}

impl Serialize for StopReason {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(match text.as_str() {
            "end_turn" => StopReason::EndTurn,
            "max_tokens" => StopReason::MaxTokens,
            "stop_sequence" => StopReason::StopSequence,
            "tool_use" => StopReason::ToolUse,
            "pause_turn" => StopReason::PauseTurn,
            "refusal" => StopReason::Refusal,
            _ => StopReason::Other(text),
        })
    }
}

/// Token accounting of a message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct Usage {
    /// Prompt tokens.
    #[serde(deserialize_with = "null_as_default")]
    pub input_tokens: u64,
    /// Generated tokens.
    #[serde(deserialize_with = "null_as_default")]
    pub output_tokens: u64,
    /// Prompt tokens written to the cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_creation_input_tokens: Option<u64>,
    /// Prompt tokens read from the cache.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_read_input_tokens: Option<u64>,
    /// Every other field, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

/// A complete message from the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct MessagesResponse {
    /// The message id.
    #[serde(deserialize_with = "null_as_default")]
    pub id: String,
    /// Usually `message`.
    #[serde(rename = "type", deserialize_with = "null_as_default")]
    pub kind: String,
    /// Usually `assistant`.
    #[serde(deserialize_with = "null_as_default")]
    pub role: MessageRole,
    /// The content blocks.
    #[serde(deserialize_with = "null_as_default")]
    pub content: Vec<ContentBlock>,
    /// The model that answered.
    #[serde(deserialize_with = "null_as_default")]
    pub model: String,
    /// Why generation stopped.
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that matched.
    pub stop_sequence: Option<String>,
    /// Token accounting.
    #[serde(deserialize_with = "null_as_default")]
    pub usage: Usage,
    /// Every other field, kept as received.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl MessagesResponse {
    /// The text of every text block, joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The tool uses, as `(id, name, input)`.
    pub fn tool_uses(&self) -> Vec<(&str, &str, &Value)> {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::ToolUse { id, name, input } => {
                    Some((id.as_str(), name.as_str(), input))
                }
                _ => None,
            })
            .collect()
    }
}

/// A piece of a content block in a stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BlockDelta {
    /// `text_delta`.
    Text(String),
    /// `input_json_delta`: more of a tool use's input JSON.
    InputJson(String),
    /// `thinking_delta`.
    Thinking(String),
    /// `signature_delta`.
    Signature(String),
    /// Any other delta, kept as received.
    Other(Value),
}

impl BlockDelta {
    pub(super) fn from_value(value: Value) -> BlockDelta {
        let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
        let typed = match value.get("type").and_then(Value::as_str) {
            Some("text_delta") => text("text").map(BlockDelta::Text),
            Some("input_json_delta") => text("partial_json").map(BlockDelta::InputJson),
            Some("thinking_delta") => text("thinking").map(BlockDelta::Thinking),
            Some("signature_delta") => text("signature").map(BlockDelta::Signature),
            _ => None,
        };
        typed.unwrap_or(BlockDelta::Other(value))
    }
}

/// The top-level changes of a `message_delta` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(default)]
#[non_exhaustive]
pub struct MessageDelta {
    /// Why generation stopped.
    pub stop_reason: Option<StopReason>,
    /// The stop sequence that matched.
    pub stop_sequence: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_serialises_anthropic_shape() {
        let req = MessagesRequest::new(
            "m",
            64,
            vec![
                Message::user("Time?"),
                Message::blocks(
                    MessageRole::Assistant,
                    vec![ContentBlock::ToolUse {
                        id: "tu1".into(),
                        name: "now".into(),
                        input: json!({}),
                    }],
                ),
                Message::tool_result("tu1", "12:00"),
            ],
        )
        .system("Be brief.")
        .tool(Tool::new("now", "The time", json!({"type": "object"})))
        .tool_choice(ToolChoice::Auto);
        assert_eq!(
            serde_json::to_value(&req).unwrap(),
            json!({"model": "m", "max_tokens": 64, "system": "Be brief.",
                "messages": [
                    {"role": "user", "content": "Time?"},
                    {"role": "assistant", "content": [{"type": "tool_use", "id": "tu1", "name": "now", "input": {}}]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1", "content": "12:00"}]}
                ],
                "tools": [{"name": "now", "description": "The time", "input_schema": {"type": "object"}}],
                "tool_choice": {"type": "auto"}})
        );
    }

    #[test]
    fn response_keeps_unknown_blocks_and_reads_tool_use() {
        let resp: MessagesResponse = serde_json::from_value(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
            "content": [{"type": "text", "text": "Let me check."},
                        {"type": "tool_use", "id": "tu", "name": "now", "input": {"tz": "UTC"}},
                        {"type": "server_tool_use", "id": "s"}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 5, "output_tokens": 7, "service_tier": "standard"}
        }))
        .unwrap();
        assert_eq!(resp.text(), "Let me check.");
        assert_eq!(resp.tool_uses(), vec![("tu", "now", &json!({"tz": "UTC"}))]);
        assert!(matches!(resp.content[2], ContentBlock::Other(_)));
        assert_eq!(resp.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(resp.usage.extra["service_tier"], "standard");
    }

    #[test]
    fn tool_choices_round_trip() {
        for (choice, wire) in [
            (ToolChoice::Auto, json!({"type": "auto"})),
            (ToolChoice::Any, json!({"type": "any"})),
            (ToolChoice::None, json!({"type": "none"})),
            (
                ToolChoice::Tool("f".into()),
                json!({"type": "tool", "name": "f"}),
            ),
            (
                ToolChoice::Other(json!({"type": "auto", "disable_parallel_tool_use": true})),
                json!({"type": "auto", "disable_parallel_tool_use": true}),
            ),
        ] {
            assert_eq!(serde_json::to_value(&choice).unwrap(), wire);
            assert_eq!(serde_json::from_value::<ToolChoice>(wire).unwrap(), choice);
        }
    }
}
