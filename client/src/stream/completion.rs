//! Streaming text completions (`POST /v1/completions` with `stream: true`).

use std::collections::BTreeMap;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::{Stream, StreamExt};
use http::HeaderMap;
use serde_json::Value;

use super::proxy::ProxyEvent;
use super::reader::{self, BoxItems, Kind};
use crate::error::Error;
use crate::transport::Deadlines;
use crate::types::{CompletionChoice, CompletionChunk, CompletionResponse};

/// One item of a completion stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
// Chunks are the common case; boxing them would cost an allocation per frame.
#[allow(clippy::large_enum_variant)]
pub enum CompletionEvent {
    /// Model output: the new text of each choice.
    Chunk(CompletionChunk),
    /// The proxy's own progress report. Never model content.
    Proxy(ProxyEvent),
}

/// A streaming text completion: `Stream<Item = Result<CompletionEvent, Error>>`,
/// with the same end, error and truncation rules as a
/// [`ChatStream`](super::ChatStream).
#[must_use = "a stream does nothing unless polled; dropping it cancels the request"]
pub struct CompletionStream {
    inner: BoxItems<CompletionEvent>,
    headers: HeaderMap,
}

impl std::fmt::Debug for CompletionStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionStream").finish_non_exhaustive()
    }
}

impl Stream for CompletionStream {
    type Item = Result<CompletionEvent, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

struct CompletionKind;

impl Kind for CompletionKind {
    type Item = CompletionEvent;

    fn proxy(event: ProxyEvent) -> CompletionEvent {
        CompletionEvent::Proxy(event)
    }

    fn frame(
        value: Value,
        _event: Option<&str>,
    ) -> Result<(CompletionEvent, bool), serde_json::Error> {
        let chunk: CompletionChunk = serde_json::from_value(value)?;
        let finished = chunk.choices.iter().any(|c| c.finish_reason.is_some());
        Ok((CompletionEvent::Chunk(chunk), finished))
    }

    fn whole_body(value: Value) -> Result<Vec<CompletionEvent>, serde_json::Error> {
        Ok(vec![CompletionEvent::Chunk(serde_json::from_value(value)?)])
    }
}

impl CompletionStream {
    pub(crate) fn new(
        response: reqwest::Response,
        deadlines: Deadlines,
        limit: usize,
    ) -> CompletionStream {
        let (headers, inner) = reader::response_items::<CompletionKind>(response, deadlines, limit);
        CompletionStream { inner, headers }
    }

    /// A stream of these items, for in-process fakes.
    pub fn from_stream<S>(items: S) -> CompletionStream
    where
        S: Stream<Item = Result<CompletionEvent, Error>> + Send + 'static,
    {
        CompletionStream {
            inner: Box::pin(items),
            headers: HeaderMap::new(),
        }
    }

    /// The response headers (empty for a stream that did not come from HTTP).
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// Reads the stream to its end and joins the text of each choice into the
    /// response a non-streaming call would have returned. Proxy events are skipped.
    ///
    /// # Errors
    ///
    /// The first error the stream yields.
    pub async fn collect(mut self) -> Result<CompletionResponse, Error> {
        let mut response = CompletionResponse::default();
        let mut choices: BTreeMap<u32, CompletionChoice> = BTreeMap::new();
        while let Some(item) = self.next().await {
            let CompletionEvent::Chunk(chunk) = item? else {
                continue;
            };
            if response.id.is_empty() {
                response.id = chunk.id;
            }
            if response.model.is_empty() {
                response.model = chunk.model;
            }
            if response.created == 0 {
                response.created = chunk.created;
            }
            if chunk.usage.is_some() {
                response.usage = chunk.usage;
            }
            if chunk.timings.is_some() {
                response.timings = chunk.timings;
            }
            response.extra.extend(chunk.extra);
            for piece in chunk.choices {
                let acc = choices
                    .entry(piece.index)
                    .or_insert_with(|| CompletionChoice {
                        index: piece.index,
                        ..CompletionChoice::default()
                    });
                acc.text.push_str(&piece.text);
                if piece.finish_reason.is_some() {
                    acc.finish_reason = piece.finish_reason;
                }
                acc.extra.extend(piece.extra);
            }
        }
        response.object = "text_completion".to_owned();
        response.choices = choices.into_values().collect();
        Ok(response)
    }
}
