//! Turning chunks into a whole response, and a whole response into a chunk.

use std::collections::BTreeMap;

use crate::types::{
    ChatChoice, ChatChunk, ChatDelta, ChatMessage, ChatResponse, ChunkChoice, FinishReason,
    FunctionCallDelta, MessageContent, Role, ToolCall, ToolCallDelta, Usage,
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
        acc.finish()
    }
}

#[derive(Default)]
pub(super) struct Aggregate {
    id: String,
    created: u64,
    model: String,
    choices: BTreeMap<u32, ChoiceAggregate>,
    usage: Option<Usage>,
}

#[derive(Default)]
struct ChoiceAggregate {
    role: Option<Role>,
    content: Option<String>,
    reasoning: Option<String>,
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
        for choice in chunk.choices {
            let acc = self.choices.entry(choice.index).or_default();
            let delta = choice.delta;
            if delta.role.is_some() {
                acc.role = delta.role;
            }
            if let Some(text) = delta.content {
                acc.content.get_or_insert_with(String::new).push_str(&text);
            }
            if let Some(text) = delta.reasoning_content {
                acc.reasoning
                    .get_or_insert_with(String::new)
                    .push_str(&text);
            }
            for piece in delta.tool_calls {
                let call = acc.tool_calls.entry(piece.index).or_default();
                if let Some(id) = piece.id {
                    call.id = id;
                }
                if let Some(kind) = piece.kind {
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

    pub(super) fn finish(self) -> ChatResponse {
        let choices = self
            .choices
            .into_iter()
            .map(|(index, acc)| {
                let tool_calls: Vec<ToolCall> = acc
                    .tool_calls
                    .into_values()
                    .map(|mut call| {
                        if call.kind.is_empty() {
                            call.kind = "function".to_owned();
                        }
                        call
                    })
                    .collect();
                ChatChoice {
                    index,
                    message: ChatMessage {
                        role: acc.role.unwrap_or(Role::Assistant),
                        content: acc.content.map(MessageContent::Text),
                        reasoning_content: acc.reasoning,
                        tool_calls,
                        ..ChatMessage::default()
                    },
                    finish_reason: acc.finish_reason,
                }
            })
            .collect();
        ChatResponse {
            id: self.id,
            object: "chat.completion".to_owned(),
            created: self.created,
            model: self.model,
            choices,
            usage: self.usage,
        }
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
                    tool_calls,
                },
                finish_reason: choice.finish_reason,
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
    }
}
