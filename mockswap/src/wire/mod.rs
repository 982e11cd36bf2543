//! The wire shapes mockswap answers with: OpenAI chat/completions/embeddings/models,
//! llama.cpp `/completion`, `/infill` and `/rerank`, and Anthropic `/v1/messages`.
//!
//! Everything is deterministic: ids derive from the journal sequence number, `created`
//! is a fixed instant, and the default content echoes the model and the last user
//! message. These are mockswap's own types on purpose (see the crate docs): they must not
//! share a serde bug with the client crate.
//!
//! This file only names the parts; each part imports its siblings directly:
//!
//! | module | what it holds |
//! |---|---|
//! | `shape` | the building blocks: `Answer`, `Ids`, tokens, usage, `SseEvent` |
//! | `request` | reading a request: `Api`, the echo's source, the prompt size |
//! | `chat`, `anthropic` | chat completions and Anthropic messages, whole and streamed |
//! | `complete` | whole responses of every API, embeddings, rerank, the model list |
//! | `sse` | streamed responses of every API, the proxy's loading frames |
//! | `media` | images, speech, voices and transcriptions: small deterministic fakes |

mod anthropic;
mod chat;
mod complete;
mod media;
mod request;
mod shape;
mod sse;

pub(crate) use anthropic::error_body as anthropic_error_body;
pub(crate) use complete::{complete, model_list};
pub(crate) use media::{speech, transcription, upload};
pub(crate) use request::{Api, echo_source, echo_text};
pub(crate) use shape::{Answer, Ids, SseEvent};
pub(crate) use sse::{LoadingStatus, loading_frame, stream_events};
