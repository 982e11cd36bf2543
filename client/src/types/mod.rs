//! Wire types for the OpenAI-compatible API and the proxy's management API.
//!
//! Deserialisation is lenient on purpose: llama.cpp, vLLM and the proxy's own loading
//! frames omit or vary fields, so missing fields take defaults, `null` lists become
//! empty, `finish_reason: ""` reads as no reason and `usage: {}` is accepted. Nothing
//! the server sends is lost: responses, chunks, choices, messages and usage keep
//! every field the SDK does not model in an `extra` map, and llama.cpp's `timings`
//! are typed. Request types keep an `extra` map for vendor parameters.
//!
//! | module | what it holds |
//! |---|---|
//! | `chat` | [`ChatRequest`], [`ChatMessage`], [`Role`] |
//! | `content` | [`MessageContent`] and its typed parts ([`ContentPart`]: text, image, audio) |
//! | `tools` | [`Tool`], [`ToolChoice`], [`ToolCall`], [`ResponseFormat`] |
//! | `response` | [`ChatResponse`], [`ChatChunk`] and their parts, [`FinishReason`] |
//! | `usage` | [`Usage`] with its details, llama.cpp [`Timings`] |
//! | `completion`, `embeddings`, `models` | the other endpoints |

mod chat;
mod completion;
mod content;
mod embeddings;
mod models;
mod response;
mod tools;
mod usage;

pub use chat::{ChatMessage, ChatRequest, Role};
pub use completion::{
    CompletionChoice, CompletionChunk, CompletionRequest, CompletionResponse, Prompt,
};
pub use content::{ContentPart, ImageDetail, ImageUrl, InputAudio, MessageContent};
pub use embeddings::{Embedding, EmbeddingInput, EmbeddingsRequest, EmbeddingsResponse};
pub use models::{ModelInfo, ModelList, RunningModel, RunningModels};
pub use response::{
    ChatChoice, ChatChunk, ChatDelta, ChatResponse, ChunkChoice, FinishReason, FunctionCallDelta,
    ToolCallDelta,
};
pub use tools::{
    FunctionCall, FunctionDefinition, JsonSchemaFormat, ResponseFormat, Tool, ToolCall, ToolChoice,
};
pub use usage::{CompletionTokensDetails, PromptTokensDetails, Timings, Usage};

use serde::{Deserialize, Deserializer};

/// Reads `null` as the type's default (vLLM sends `"tool_calls": null`, for example).
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Picks the reasoning text of a message or delta: llama.cpp and older vLLM send
/// `reasoning_content`, newer vLLM sends `reasoning`, some servers send both (the
/// same text), so both are read and one is kept.
pub(crate) fn pick_reasoning(
    reasoning_content: Option<String>,
    reasoning: Option<String>,
) -> Option<String> {
    reasoning_content.or(reasoning)
}
