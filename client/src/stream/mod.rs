//! Streaming responses: typed items over SSE.
//!
//! | type | what it yields |
//! |---|---|
//! | [`ChatStream`] | [`StreamEvent`]s: raw [`ChatChunk`]s and [`ProxyEvent`]s |
//! | [`ChatEvents`] | semantic [`ChatEvent`]s (text, reasoning, whole tool calls, usage, done), from [`ChatStream::events`] |
//! | [`EventAssembler`] | the same assembly for a runtime that feeds chunks itself |
//! | [`CompletionStream`] | [`CompletionEvent`]s of `POST /v1/completions` |
//!
//! A [`ChatStream`] can be built from any `futures::Stream` of stream events,
//! chunks, semantic events or raw SSE bytes, so an in-process fake provider returns
//! exactly what the real client returns.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::HeaderMap;
use serde_json::Value;

use crate::client::DEFAULT_MAX_EVENT_BYTES;
use crate::error::Error;
use crate::transport::Deadlines;
use crate::types::{ChatChunk, ChatResponse};

mod assemble;
mod completion;
mod events;
mod proxy;
pub(crate) mod reader;
#[cfg(test)]
mod tests;

pub use completion::{CompletionEvent, CompletionStream};
pub use events::{ChatEvent, ChatEvents, EventAssembler};
pub use proxy::{ProxyEvent, ProxyStatus};

use assemble::{Aggregate, response_as_chunk};
use reader::{BoxItems, Kind, StreamSource};

/// One item of a chat stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
// Chunks are the common case; boxing them would cost an allocation per frame.
#[allow(clippy::large_enum_variant)]
pub enum StreamEvent {
    /// Model output (including a model's reasoning).
    Chunk(ChatChunk),
    /// The proxy's own progress report (queue position, loading, ready). Never
    /// model content.
    Proxy(ProxyEvent),
}

/// A streaming chat completion: `Stream<Item = Result<StreamEvent, Error>>`.
///
/// From the network, the stream ends (`None`) after `[DONE]`. An `{"error": ...}`
/// frame yields [`Error::InStream`] and ends it; a body that ends with neither
/// `[DONE]` nor a finish reason yields [`Error::Truncated`]; a gap longer than the
/// idle timeout yields [`Error::Timeout`]. A frame that is not valid JSON yields
/// [`Error::Decode`] and the stream goes on.
#[must_use = "a stream does nothing unless polled; dropping it cancels the request"]
pub struct ChatStream {
    inner: BoxItems<StreamEvent>,
    headers: HeaderMap,
}

impl std::fmt::Debug for ChatStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatStream").finish_non_exhaustive()
    }
}

impl Stream for ChatStream {
    type Item = Result<StreamEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

/// Chat frames: chunks, finished by a finish reason.
struct ChatKind;

impl Kind for ChatKind {
    type Item = StreamEvent;

    fn proxy(event: ProxyEvent) -> StreamEvent {
        StreamEvent::Proxy(event)
    }

    fn frame(value: Value, _event: Option<&str>) -> Result<(StreamEvent, bool), serde_json::Error> {
        let chunk: ChatChunk = serde_json::from_value(value)?;
        let finished = chunk.finish_reason().is_some();
        Ok((StreamEvent::Chunk(chunk), finished))
    }

    fn whole_body(value: Value) -> Result<Vec<StreamEvent>, serde_json::Error> {
        let response: ChatResponse = serde_json::from_value(value)?;
        Ok(vec![StreamEvent::Chunk(response_as_chunk(response))])
    }
}

impl ChatStream {
    pub(crate) fn new(
        response: reqwest::Response,
        deadlines: Deadlines,
        limit: usize,
    ) -> ChatStream {
        let (headers, inner) = reader::response_items::<ChatKind>(response, deadlines, limit);
        ChatStream { inner, headers }
    }

    /// A stream of these items, for in-process fakes and decorators.
    ///
    /// ```
    /// use futures_util::stream;
    /// use llama_swap_client::{ChatChunk, ChatDelta, ChatStream, FinishReason, ProxyEvent, ProxyStatus, StreamEvent};
    ///
    /// # tokio_test_block_on(async {
    /// let stream = ChatStream::from_stream(stream::iter([
    ///     Ok(StreamEvent::Proxy(ProxyEvent::new(ProxyStatus::Queued { position: 1 }))),
    ///     Ok(StreamEvent::Chunk(ChatChunk::delta("m", ChatDelta::text("hi")))),
    ///     Ok(StreamEvent::Chunk(ChatChunk::finish("m", FinishReason::Stop))),
    /// ]));
    /// assert_eq!(stream.collect().await.unwrap().text(), "hi");
    /// # });
    /// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
    /// #     tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    /// # }
    /// ```
    pub fn from_stream<S>(items: S) -> ChatStream
    where
        S: Stream<Item = Result<StreamEvent, Error>> + Send + 'static,
    {
        ChatStream {
            inner: Box::pin(items),
            headers: HeaderMap::new(),
        }
    }

    /// A stream of these chunks.
    pub fn from_chunks<I>(chunks: I) -> ChatStream
    where
        I: IntoIterator<Item = ChatChunk>,
        I::IntoIter: Send + 'static,
    {
        ChatStream::from_stream(futures_util::stream::iter(
            chunks.into_iter().map(|c| Ok(StreamEvent::Chunk(c))),
        ))
    }

    /// A stream that carries these semantic events (the inverse of
    /// [`ChatStream::events`]): text and reasoning become content deltas, tool calls
    /// become tool-call deltas, [`ChatEvent::Done`] becomes the finish reason and
    /// ends the stream. A [`ChatEvent::ToolCallFinished`] without a
    /// [`ChatEvent::ToolCallStarted`] before it carries the whole call.
    pub fn from_events<S>(events: S) -> ChatStream
    where
        S: Stream<Item = Result<ChatEvent, Error>> + Send + 'static,
    {
        ChatStream::from_stream(events::to_stream_events(events))
    }

    /// A stream decoded from raw SSE bytes (a recorded body, for example), with the
    /// same rules as a network stream: `[DONE]`, error frames, proxy frames and
    /// truncation.
    pub fn from_sse<S>(bytes: S) -> ChatStream
    where
        S: Stream<Item = Result<Bytes, Error>> + Send + 'static,
    {
        let source = StreamSource(Box::pin(bytes));
        ChatStream {
            inner: reader::sse_items::<ChatKind, _>(source, DEFAULT_MAX_EVENT_BYTES, None),
            headers: HeaderMap::new(),
        }
    }

    /// The response headers (empty for a stream that did not come from HTTP).
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// The proxy's request id (`X-Request-Id` of the response), if it sent one.
    pub fn request_id(&self) -> Option<&str> {
        self.headers
            .get(crate::error::REQUEST_ID_HEADER)
            .and_then(|v| v.to_str().ok())
    }

    /// The semantic events of this stream: text and reasoning deltas, tool calls
    /// (started, argument pieces, finished with parsed arguments), usage, proxy
    /// status and done. See [`ChatEvents`].
    pub fn events(self) -> ChatEvents {
        ChatEvents::new(self)
    }

    /// Reads the stream to its end and assembles the response a non-streaming call
    /// would have returned: content, reasoning and tool calls concatenated per
    /// choice, the last finish reason and usage. Proxy events are skipped; a
    /// model's reasoning is kept.
    ///
    /// # Errors
    ///
    /// The first error the stream yields.
    pub async fn collect(mut self) -> Result<ChatResponse, Error> {
        let mut acc = Aggregate::default();
        while let Some(item) = self.next().await {
            match item? {
                StreamEvent::Chunk(chunk) => acc.add(chunk),
                StreamEvent::Proxy(_) => {}
            }
        }
        Ok(acc.response())
    }
}
