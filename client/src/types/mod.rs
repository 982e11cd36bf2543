//! Wire types for the OpenAI-compatible API and the proxy's management API.
//!
//! Deserialisation is lenient on purpose: llama.cpp, vLLM and the proxy's own loading
//! frames omit or vary fields, so missing fields take defaults, `null` lists become
//! empty, unknown fields are ignored, `finish_reason: ""` reads as no reason and
//! `usage: {}` is accepted. Request types keep an `extra` map for vendor parameters.

mod chat;
mod completion;
mod embeddings;
mod models;

pub use chat::{
    ChatChoice, ChatChunk, ChatDelta, ChatMessage, ChatRequest, ChatResponse, ChunkChoice,
    FinishReason, FunctionCall, FunctionCallDelta, MessageContent, Role, ToolCall, ToolCallDelta,
    Usage,
};
pub use completion::{CompletionChoice, CompletionRequest, CompletionResponse, Prompt};
pub use embeddings::{Embedding, EmbeddingInput, EmbeddingsRequest, EmbeddingsResponse};
pub use models::{ModelInfo, ModelList, RunningModel, RunningModels};

use serde::{Deserialize, Deserializer};

/// Reads `null` as the type's default (vLLM sends `"tool_calls": null`, for example).
pub(crate) fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
