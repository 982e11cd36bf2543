//! Rust SDK for llama-swap style model-swapping proxies, where every call can say how
//! urgent it is.
//!
//! A [`Priority`] travels with each call as the `X-Priority` header: `Elevated` sends
//! `10`, `Normal` sends nothing, `Low` sends `-10`. The proxy serves waiting requests
//! in priority order, so interactive work is not stuck behind batch jobs.
//!
//! # Modules
//!
//! | module | what it holds |
//! |---|---|
//! | [`priority`] | [`Priority`], [`PRIORITY_HEADER`], and the one function that writes the header |
//! | `client` | [`Client`] (cheap to clone) and [`ClientBuilder`] |
//! | `options` | [`CallOptions`] (per call), [`Timeouts`] (by phase), [`RetryPolicy`] |
//! | `endpoints` | chat (plain and streaming), completions, embeddings, models, running, unload, health, `/upstream` ([`UpstreamRequest`]) |
//! | [`stream`] | [`ChatStream`] (raw chunks and [`ProxyEvent`]s), [`ChatEvents`] (semantic [`ChatEvent`]s), [`EventAssembler`], [`CompletionStream`] |
//! | [`sse`] | the byte-level SSE decoder (chunk-boundary and UTF-8 safe, bounded) |
//! | [`types`] | lenient wire types: chat (tools, structured output, content parts), completions, embeddings, model lists |
//! | [`error`] | [`Error`] (with `is_retryable()`, `request_id()`), [`ApiError`], [`TimeoutPhase`], [`InvalidArgument`] |
//! | `provider` | [`ChatProvider`], the object-safe trait agent frameworks hold (chat, streaming chat, embeddings, models) |
//! | [`middleware`] | [`Middleware`] and [`Next`]: a hook around every HTTP attempt |
//! | [`anthropic`] | Anthropic's `/v1/messages`, plain and streaming |
//!
//! # Example
//!
//! ```no_run
//! use llama_swap_client::{CallOptions, ChatMessage, ChatRequest, Client, Priority, StreamEvent};
//! use futures_util::StreamExt;
//!
//! # async fn run() -> Result<(), llama_swap_client::Error> {
//! let client = Client::builder()
//!     .base_url("http://127.0.0.1:8080")
//!     .api_key("sk-local")
//!     .build()?;
//! let request = ChatRequest::new("qwen", vec![ChatMessage::user("Hello!")]);
//!
//! // A person is waiting: jump the queue.
//! let answer = client
//!     .chat(&request, &CallOptions::with_priority(Priority::Elevated))
//!     .await?;
//! println!("{}", answer.text());
//!
//! // Background work: stream it at low priority.
//! let mut stream = client
//!     .chat_stream(&request, &CallOptions::with_priority(Priority::Low))
//!     .await?;
//! while let Some(event) = stream.next().await {
//!     match event? {
//!         StreamEvent::Chunk(chunk) => print!("{}", chunk.content().unwrap_or_default()),
//!         StreamEvent::Proxy(proxy) => eprintln!("proxy: {:?}", proxy.status),
//!         _ => {}
//!     }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The crate README (its examples are doctested with the crate) covers
//! errors, retries and timeouts in more depth.

pub mod anthropic;
mod client;
mod endpoints;
pub mod error;
pub mod middleware;
mod options;
pub mod priority;
mod provider;
#[cfg(test)]
mod readme_tests;
mod retry;
mod retry_after;
pub mod sse;
pub mod stream;
#[cfg(feature = "tls")]
mod tls;
mod transport;
pub mod types;

pub use client::{Client, ClientBuilder, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_EVENT_BYTES};
pub use endpoints::UpstreamRequest;
pub use error::{
    ApiError, BoxError, DecodeTarget, Error, ErrorEnvelope, InvalidArgument, REQUEST_ID_HEADER,
    StreamErrorFrame, TimeoutPhase,
};
pub use middleware::{Middleware, Next};
pub use options::{CallOptions, QUEUE_TIMEOUT_HEADER, RetryPolicy, Timeouts};
pub use priority::{
    CustomPriority, PRIORITY_HEADER, ParsePriorityError, Priority, PriorityOutOfRange,
};
pub use provider::ChatProvider;
pub use stream::{
    ChatEvent, ChatEvents, ChatStream, CompletionEvent, CompletionStream, EventAssembler,
    ProxyEvent, ProxyStatus, StreamEvent,
};
pub use types::*;

/// The attribute that implements [`ChatProvider`] (and [`Middleware`]): re-exported so
/// an implementation needs no dependency of its own.
pub use async_trait::async_trait;
/// The `http` crate this one speaks (headers of errors, [`StatusCode`]).
pub use http;
/// HTTP status codes, as [`RetryPolicy::with_statuses`] and [`ApiError`] take them.
pub use http::StatusCode;

/// The README's examples, compiled and run as doctests.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
