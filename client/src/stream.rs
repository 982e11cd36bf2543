//! Streaming chat completions: typed events over SSE.
//!
//! [`ChatStream`] pulls bytes from the response only when the caller asks for the
//! next event (no background task, no channel), so memory stays bounded and
//! dropping the stream closes the connection, which cancels the request.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures_util::{Stream, StreamExt};
use serde_json::Value;

use crate::error::{DecodeTarget, Error, ErrorEnvelope, StreamErrorFrame};
use crate::sse::{SseDecoder, SseEvent};
use crate::transport::{BodyLimit, Deadlines, read_body, until};
use crate::types::{ChatChunk, ChatResponse};

/// One item of a chat stream.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamEvent {
    /// Model output.
    Chunk(ChatChunk),
    /// The proxy's own progress report (loading a model, queue position). Never
    /// model content.
    Proxy(ProxyStatus),
}

/// What the proxy says while a call waits for its model.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyStatus {
    /// Waiting in the queue. Positions can go up as well as down: higher-priority
    /// work that arrives later moves ahead.
    Queued {
        /// 1-based place in the queue.
        position: u32,
        /// The model waited for, when the frame names it.
        model: Option<String>,
    },
    /// The model is being started.
    Loading {
        /// The model being loaded, when the frame names it.
        model: Option<String>,
    },
    /// A typed status frame with a status this SDK does not know.
    Other {
        /// The `status` field.
        status: String,
        /// The `model` field, if any.
        model: Option<String>,
    },
    /// Free progress text from llama-swap's loading stream (its rule lines, dots and
    /// remarks; llama-swap types text out a few characters per frame).
    Message(String),
}

/// A streaming chat completion: `Stream<Item = Result<StreamEvent, Error>>`.
///
/// The stream ends (`None`) after `[DONE]`. An `{"error": ...}` frame yields
/// [`Error::InStream`] and ends it; a body that ends with neither `[DONE]` nor a
/// finish reason yields [`Error::Truncated`]; a gap longer than the idle timeout
/// yields [`Error::Timeout`]. A frame that is not valid JSON yields
/// [`Error::Decode`] and the stream goes on.
#[must_use = "a stream does nothing unless polled; dropping it cancels the request"]
pub struct ChatStream {
    inner: Pin<Box<dyn Stream<Item = Result<StreamEvent, Error>> + Send>>,
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

impl ChatStream {
    pub(crate) fn new(
        response: reqwest::Response,
        deadlines: Deadlines,
        limit: usize,
    ) -> ChatStream {
        if is_json(&response) {
            return ChatStream::from_json_body(response, deadlines, limit);
        }
        let source = BodySource {
            response,
            deadlines,
        };
        ChatStream::from_source(source, limit)
    }

    /// A server that ignores `stream: true` answers with one JSON body; it becomes
    /// one chunk holding every choice, so no content is lost.
    fn from_json_body(
        response: reqwest::Response,
        deadlines: Deadlines,
        limit: usize,
    ) -> ChatStream {
        let items = async move {
            let events = match read_body(response, &deadlines, BodyLimit::Fail(limit)).await {
                Ok(body) => json_body_events(&body),
                Err(err) => vec![Err(err)],
            };
            futures_util::stream::iter(events)
        };
        ChatStream {
            inner: Box::pin(futures_util::stream::once(items).flatten()),
        }
    }

    fn from_source<S: ByteSource>(source: S, limit: usize) -> ChatStream {
        let state = StreamState {
            source,
            decoder: SseDecoder::new(limit),
            eof: false,
            finished: false,
            saw_done: false,
            saw_finish: false,
            saw_typed_status: false,
            last_marked: None,
            chunks: 0,
        };
        let inner = futures_util::stream::unfold(state, |mut state| async move {
            let item = state.next_item().await?;
            Some((item, state))
        });
        ChatStream {
            inner: Box::pin(inner),
        }
    }

    /// Reads the stream to its end and assembles the response a non-streaming call
    /// would have returned: content, reasoning and tool calls concatenated per
    /// choice, the last finish reason and usage. Proxy status events are skipped.
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
        Ok(acc.finish())
    }
}

/// Where stream bytes come from; a seam so the state machine is testable without
/// sockets.
trait ByteSource: Send + 'static {
    /// The next piece, `Ok(None)` at the end of the body.
    fn next_piece(&mut self) -> impl Future<Output = Result<Option<bytes::Bytes>, Error>> + Send;
}

struct BodySource {
    response: reqwest::Response,
    deadlines: Deadlines,
}

impl ByteSource for BodySource {
    async fn next_piece(&mut self) -> Result<Option<bytes::Bytes>, Error> {
        until(self.deadlines.body_deadline(), self.response.chunk())
            .await?
            .map_err(Error::Transport)
    }
}

struct StreamState<S> {
    source: S,
    decoder: SseDecoder,
    eof: bool,
    finished: bool,
    saw_done: bool,
    saw_finish: bool,
    /// The server sends typed `proxy.status` frames.
    saw_typed_status: bool,
    /// The last state reported from a frame's `llamaswap` marker.
    last_marked: Option<ProxyStatus>,
    chunks: usize,
}

/// What one SSE event means.
enum Frame {
    Skip,
    Done,
    Event(StreamEvent),
    Fatal(Error),
    Recoverable(Error),
}

impl<S: ByteSource> StreamState<S> {
    async fn next_item(&mut self) -> Option<Result<StreamEvent, Error>> {
        loop {
            if self.finished {
                return None;
            }
            match self.decoder.next_event() {
                Err(too_large) => {
                    self.finished = true;
                    return Some(Err(Error::EventTooLarge {
                        limit: too_large.limit,
                    }));
                }
                Ok(Some(event)) => match self.interpret(event) {
                    Frame::Skip => continue,
                    Frame::Done => {
                        self.saw_done = true;
                        self.finished = true;
                        return None;
                    }
                    Frame::Event(ev) => return Some(Ok(ev)),
                    Frame::Recoverable(err) => return Some(Err(err)),
                    Frame::Fatal(err) => {
                        self.finished = true;
                        return Some(Err(err));
                    }
                },
                Ok(None) if self.eof => {
                    self.finished = true;
                    if self.saw_finish {
                        return None;
                    }
                    return Some(Err(Error::Truncated {
                        chunks: self.chunks,
                    }));
                }
                Ok(None) => match self.source.next_piece().await {
                    Ok(Some(piece)) => self.decoder.push(&piece),
                    Ok(None) => {
                        self.decoder.finish();
                        self.eof = true;
                    }
                    Err(err) => {
                        self.finished = true;
                        return Some(Err(err));
                    }
                },
            }
        }
    }

    fn interpret(&mut self, event: SseEvent) -> Frame {
        let data = event.data.trim();
        if data.is_empty() {
            return Frame::Skip;
        }
        if data == "[DONE]" {
            return Frame::Done;
        }
        match event.event.as_deref() {
            Some("ping" | "keepalive" | "keep-alive") => return Frame::Skip,
            Some("error") => {
                let envelope = serde_json::from_str::<Value>(data)
                    .ok()
                    .and_then(|v| ErrorEnvelope::from_json(&v))
                    .unwrap_or_else(|| ErrorEnvelope {
                        message: data.to_owned(),
                        ..ErrorEnvelope::default()
                    });
                return Frame::Fatal(in_stream(envelope, data));
            }
            _ => {}
        }
        let value: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(source) => {
                return Frame::Recoverable(Error::Decode {
                    what: DecodeTarget::StreamFrame,
                    raw: data.to_owned(),
                    source,
                });
            }
        };
        if let Some(envelope) = ErrorEnvelope::from_json(&value) {
            return Frame::Fatal(in_stream(envelope, data));
        }
        if let Some(marker) = value.get("llamaswap").filter(|m| m.is_object()) {
            self.saw_typed_status = true;
            let text = value
                .pointer("/choices/0/delta/reasoning_content")
                .and_then(Value::as_str)
                .unwrap_or_default();
            // Every injected frame carries the marker; only a change of state is
            // reported as one, the rest (dots, repeated text) stays text.
            let status = marked_status(marker).filter(|s| Some(s) != self.last_marked.as_ref());
            return Frame::Event(StreamEvent::Proxy(match status {
                Some(status) => {
                    self.last_marked = Some(status.clone());
                    status
                }
                None => ProxyStatus::Message(text.to_owned()),
            }));
        }
        if let Some(status) = typed_status(&value) {
            self.saw_typed_status = true;
            return Frame::Event(StreamEvent::Proxy(status));
        }
        if let Some(text) = loading_frame(&value) {
            // A server that sends typed frames repeats them as text for people; the
            // typed frame already reported the state, so the text stays text.
            let status = if self.saw_typed_status {
                ProxyStatus::Message(text)
            } else {
                parse_loading_text(&text)
            };
            return Frame::Event(StreamEvent::Proxy(status));
        }
        match serde_json::from_value::<ChatChunk>(value) {
            Ok(chunk) => {
                self.chunks += 1;
                if chunk.finish_reason().is_some() {
                    self.saw_finish = true;
                }
                Frame::Event(StreamEvent::Chunk(chunk))
            }
            Err(source) => Frame::Recoverable(Error::Decode {
                what: DecodeTarget::StreamFrame,
                raw: data.to_owned(),
                source,
            }),
        }
    }
}

fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.trim_start().starts_with("application/json"))
}

/// The events a complete JSON answer to a streaming request stands for.
fn json_body_events(body: &[u8]) -> Vec<Result<StreamEvent, Error>> {
    let raw = String::from_utf8_lossy(body);
    let decode_error = |source| Error::Decode {
        what: DecodeTarget::ResponseBody,
        raw: raw.clone().into_owned(),
        source,
    };
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(source) => return vec![Err(decode_error(source))],
    };
    if let Some(envelope) = ErrorEnvelope::from_json(&value) {
        return vec![Err(in_stream(envelope, &raw))];
    }
    let response: ChatResponse = match serde_json::from_value(value) {
        Ok(r) => r,
        Err(source) => return vec![Err(decode_error(source))],
    };
    vec![Ok(StreamEvent::Chunk(response_as_chunk(response)))]
}

fn in_stream(envelope: ErrorEnvelope, raw: &str) -> Error {
    Error::InStream(Box::new(StreamErrorFrame {
        envelope,
        raw: raw.to_owned(),
    }))
}

/// The state in a proxy frame's `llamaswap` object (queued with its position,
/// loading); `None` for the states this SDK has no variant for yet.
fn marked_status(marker: &Value) -> Option<ProxyStatus> {
    let model = marker
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match marker.get("status")?.as_str()? {
        "queued" => {
            let position = u32::try_from(marker.get("position")?.as_u64()?).ok()?;
            Some(ProxyStatus::Queued { position, model })
        }
        "loading" => Some(ProxyStatus::Loading { model }),
        _ => None,
    }
}

/// `{"object":"proxy.status","status":"queued","position":3,"model":"X"}`.
fn typed_status(value: &Value) -> Option<ProxyStatus> {
    if value.get("object")?.as_str()? != "proxy.status" {
        return None;
    }
    let model = value
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let status = value
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let position = value
        .get("position")
        .and_then(Value::as_u64)
        .and_then(|p| u32::try_from(p).ok());
    Some(match (status, position) {
        ("queued", Some(position)) => ProxyStatus::Queued { position, model },
        ("loading", _) => ProxyStatus::Loading { model },
        (other, _) => ProxyStatus::Other {
            status: other.to_owned(),
            model,
        },
    })
}

/// A loading frame: one choice whose delta holds only `reasoning_content`, no
/// finish reason, and no completion `id`. llama-swap sends
/// `{"choices":[{"delta":{"reasoning_content":"..."}}]}`; our server adds `object`
/// and `model` but no `id`. Model servers (llama.cpp, vLLM) always send an `id`,
/// which is how their reasoning stays model output.
fn loading_frame(value: &Value) -> Option<String> {
    let obj = value.as_object()?;
    if obj
        .get("id")
        .is_some_and(|id| id.as_str().is_none_or(|s| !s.is_empty()))
    {
        return None;
    }
    let [choice] = obj.get("choices")?.as_array()?.as_slice() else {
        return None;
    };
    let choice = choice.as_object()?;
    if choice.get("finish_reason").is_some_and(|f| !f.is_null()) {
        return None;
    }
    let delta = choice.get("delta")?.as_object()?;
    if delta.len() != 1 {
        return None;
    }
    Some(delta.get("reasoning_content")?.as_str()?.to_owned())
}

fn parse_loading_text(text: &str) -> ProxyStatus {
    let trimmed = text.trim();
    if let Some(rest) = trimmed.strip_prefix("Queue position: #")
        && let Ok(position) = rest.trim().parse::<u32>()
    {
        return ProxyStatus::Queued {
            position,
            model: None,
        };
    }
    if let Some(model) = trimmed.strip_prefix("llama-swap loading model: ") {
        return ProxyStatus::Loading {
            model: Some(model.trim().to_owned()),
        };
    }
    ProxyStatus::Message(text.to_owned())
}

mod assemble;
#[cfg(test)]
mod tests;

use assemble::{Aggregate, response_as_chunk};
