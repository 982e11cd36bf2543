//! Turning chunks into a whole response, and a whole response into a chunk.

use std::collections::BTreeMap;

use serde_json::Map;

use crate::types::{
    ChatChoice, ChatChunk, ChatDelta, ChatMessage, ChatResponse, ChunkChoice, FinishReason,
    FunctionCallDelta, MessageContent, Role, Timings, ToolCall, ToolCallDelta, Usage,
};

impl ChatResponse {
    /// Assembles streamed chunks into the response a non-streaming call returns:
    /// content, reasoning and tool-call pieces joined per choice, the last finish
    /// reason and usage. [`ChatStream::collect`](super::ChatStream::collect) uses the
    /// same rules.
    pub fn from_chunks(chunks: impl IntoIterator<Item = ChatChunk>) -> ChatResponse {
        let mut acc = Aggregate::default();
        for chunk in chunks {
            acc.add(chunk);
        }
        acc.response()
    }
}

/// The response so far, built chunk by chunk.
#[derive(Debug, Default, Clone)]
pub(super) struct Aggregate {
    id: String,
    created: u64,
    model: String,
    choices: BTreeMap<u32, ChoiceAggregate>,
    usage: Option<Usage>,
    timings: Option<Timings>,
    extra: Map<String, serde_json::Value>,
}

#[derive(Debug, Default, Clone)]
struct ChoiceAggregate {
    role: Option<Role>,
    content: Option<String>,
    reasoning: Option<String>,
    refusal: Option<String>,
    tool_calls: BTreeMap<u32, ToolCall>,
    finish_reason: Option<FinishReason>,
}

impl Aggregate {
    pub(super) fn add(&mut self, chunk: ChatChunk) {
        if self.id.is_empty() {
            self.id = chunk.id;
        }
        if self.model.is_empty() {
            self.model = chunk.model;
        }
        if self.created == 0 {
            self.created = chunk.created;
        }
        if chunk.usage.is_some() {
            self.usage = chunk.usage;
        }
        if chunk.timings.is_some() {
            self.timings = chunk.timings;
        }
        // Top-level extras (system_fingerprint, ...) are the same on every chunk;
        // the latest wins.
        self.extra.extend(chunk.extra);
        for choice in chunk.choices {
            let acc = self.choices.entry(choice.index).or_default();
            let delta = choice.delta;
            if delta.role.is_some() {
                acc.role = delta.role;
            }
            append(&mut acc.content, delta.content);
            append(&mut acc.reasoning, delta.reasoning_content);
            append(&mut acc.refusal, delta.refusal);
            for piece in delta.tool_calls {
                let call = acc.tool_calls.entry(piece.index).or_default();
                if let Some(id) = piece.id.filter(|id| !id.is_empty()) {
                    call.id = id;
                }
                if let Some(kind) = piece.kind.filter(|k| !k.is_empty()) {
                    call.kind = kind;
                }
                if let Some(function) = piece.function {
                    if let Some(name) = function.name {
                        call.function.name.push_str(&name);
                    }
                    if let Some(args) = function.arguments {
                        call.function.arguments.push_str(&args);
                    }
                }
            }
            if choice.finish_reason.is_some() {
                acc.finish_reason = choice.finish_reason;
            }
        }
    }

    /// The tool call `index` of `choice` as assembled so far.
    pub(super) fn tool_call(&self, choice: u32, index: u32) -> Option<ToolCall> {
        let mut call = self.choices.get(&choice)?.tool_calls.get(&index)?.clone();
        if call.kind.is_empty() {
            call.kind = "function".to_owned();
        }
        Some(call)
    }

    /// The finish reason of the lowest-numbered choice, if it has one.
    pub(super) fn first_finish_reason(&self) -> Option<FinishReason> {
        self.choices.values().next()?.finish_reason.clone()
    }

    pub(super) fn response(&self) -> ChatResponse {
        let choices = self
            .choices
            .iter()
            .map(|(index, acc)| ChatChoice {
                index: *index,
                message: message_of(acc),
                finish_reason: acc.finish_reason.clone(),
                extra: Map::new(),
            })
            .collect();
        ChatResponse {
            id: self.id.clone(),
            object: "chat.completion".to_owned(),
            created: self.created,
            model: self.model.clone(),
            choices,
            usage: self.usage.clone(),
            timings: self.timings.clone(),
            extra: self.extra.clone(),
        }
    }
}

fn append(acc: &mut Option<String>, piece: Option<String>) {
    if let Some(text) = piece {
        acc.get_or_insert_with(String::new).push_str(&text);
    }
}

fn message_of(acc: &ChoiceAggregate) -> ChatMessage {
    let tool_calls = acc
        .tool_calls
        .values()
        .cloned()
        .map(|mut call| {
            if call.kind.is_empty() {
                call.kind = "function".to_owned();
            }
            call
        })
        .collect();
    ChatMessage {
        role: acc.role.clone().unwrap_or(Role::Assistant),
        content: acc.content.clone().map(MessageContent::Text),
        reasoning_content: acc.reasoning.clone(),
        refusal: acc.refusal.clone(),
        tool_calls,
        ..ChatMessage::default()
    }
}

/// The chunk that carries a whole response (for servers that ignore `stream`).
pub(super) fn response_as_chunk(response: ChatResponse) -> ChatChunk {
    let choices = response
        .choices
        .into_iter()
        .map(|choice| {
            let message = choice.message;
            let tool_calls = (0u32..)
                .zip(message.tool_calls)
                .map(|(index, call)| ToolCallDelta {
                    index,
                    id: Some(call.id),
                    kind: Some(call.kind),
                    function: Some(FunctionCallDelta {
                        name: Some(call.function.name),
                        arguments: Some(call.function.arguments),
                    }),
                })
                .collect();
            ChunkChoice {
                index: choice.index,
                delta: ChatDelta {
                    role: Some(message.role),
                    content: message.content.map(|c| c.text()),
                    reasoning_content: message.reasoning_content,
                    refusal: message.refusal,
                    tool_calls,
                    extra: message.extra,
                },
                finish_reason: choice.finish_reason,
                extra: choice.extra,
            }
        })
        .collect();
    ChatChunk {
        id: response.id,
        object: "chat.completion.chunk".to_owned(),
        created: response.created,
        model: response.model,
        choices,
        usage: response.usage,
        timings: response.timings,
        extra: response.extra,
    }
}
