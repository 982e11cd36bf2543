//! The state machine shared by every streaming endpoint: bytes in, SSE events,
//! frames classified (end, keep-alive, error, proxy status, endpoint JSON), items out.
//!
//! Bytes are pulled from the response only when the caller asks for the next item
//! (no background task, no channel), so memory stays bounded and dropping the
//! stream closes the connection, which cancels the request.

use std::marker::PhantomData;
use std::pin::Pin;

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use http::HeaderMap;
use serde_json::Value;

use super::proxy::ProxyEvent;
use crate::error::{DecodeTarget, Error, ErrorEnvelope, StreamErrorFrame, request_id_of};
use crate::sse::{SseDecoder, SseEvent};
use crate::transport::{BodyLimit, Deadlines, read_body, until};

/// A boxed stream of one endpoint's items.
pub(crate) type BoxItems<T> = Pin<Box<dyn Stream<Item = Result<T, Error>> + Send>>;

/// What one streaming endpoint makes of its frames.
pub(crate) trait Kind: Send + 'static {
    /// One item of the stream.
    type Item: Send + 'static;

    /// The item for a proxy frame.
    fn proxy(event: ProxyEvent) -> Self::Item;

    /// The item for one JSON frame (with its SSE `event:` name), and whether it
    /// completes the answer (a finish reason, `message_stop`), after which the end
    /// of the body is a clean end rather than a truncation.
    fn frame(value: Value, event: Option<&str>) -> Result<(Self::Item, bool), serde_json::Error>;

    /// The items a whole JSON body stands for, when a server ignores `stream: true`.
    fn whole_body(value: Value) -> Result<Vec<Self::Item>, serde_json::Error>;
}

/// Where stream bytes come from; a seam so the state machine is testable without
/// sockets.
pub(crate) trait ByteSource: Send + 'static {
    /// The next piece, `Ok(None)` at the end of the body.
    fn next_piece(&mut self) -> impl Future<Output = Result<Option<Bytes>, Error>> + Send;
}

/// A response body read under the call's idle and total deadlines.
pub(crate) struct BodySource {
    pub(crate) response: reqwest::Response,
    pub(crate) deadlines: Deadlines,
}

impl ByteSource for BodySource {
    async fn next_piece(&mut self) -> Result<Option<Bytes>, Error> {
        until(self.deadlines.body_deadline(), self.response.chunk())
            .await?
            .map_err(|e| Error::Transport(Box::new(e)))
    }
}

/// Bytes from any stream (recorded bodies, in-process fakes).
pub(crate) struct StreamSource(pub(crate) BoxItems<Bytes>);

impl ByteSource for StreamSource {
    async fn next_piece(&mut self) -> Result<Option<Bytes>, Error> {
        self.0.next().await.transpose()
    }
}

/// The items of a streaming response: SSE, or one JSON body from a server that
/// ignored `stream: true`. Returns the response headers too.
pub(crate) fn response_items<K: Kind>(
    response: reqwest::Response,
    deadlines: Deadlines,
    limit: usize,
) -> (HeaderMap, BoxItems<K::Item>) {
    let headers = response.headers().clone();
    let request_id = request_id_of(&headers);
    if is_json(&headers) {
        let items = async move {
            let events = match read_body(response, &deadlines, BodyLimit::Fail(limit)).await {
                Ok(body) => whole_body_items::<K>(&body, request_id.as_deref()),
                Err(err) => vec![Err(err)],
            };
            futures_util::stream::iter(events)
        };
        return (
            headers,
            Box::pin(futures_util::stream::once(items).flatten()),
        );
    }
    let source = BodySource {
        response,
        deadlines,
    };
    (headers, sse_items::<K, _>(source, limit, request_id))
}

/// The items of an SSE body from `source`.
pub(crate) fn sse_items<K: Kind, S: ByteSource>(
    source: S,
    limit: usize,
    request_id: Option<String>,
) -> BoxItems<K::Item> {
    let state = SseState::<S, K> {
        source,
        decoder: SseDecoder::new(limit),
        eof: false,
        finished: false,
        complete: false,
        frames: 0,
        request_id,
        kind: PhantomData,
    };
    Box::pin(futures_util::stream::unfold(
        state,
        |mut state| async move {
            let item = state.next_item().await?;
            Some((item, state))
        },
    ))
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.trim_start().starts_with("application/json"))
}

fn whole_body_items<K: Kind>(body: &[u8], request_id: Option<&str>) -> Vec<Result<K::Item, Error>> {
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
        return vec![Err(in_stream(envelope, &raw, request_id))];
    }
    match K::whole_body(value) {
        Ok(items) => items.into_iter().map(Ok).collect(),
        Err(source) => vec![Err(decode_error(source))],
    }
}

pub(crate) fn in_stream(envelope: ErrorEnvelope, raw: &str, request_id: Option<&str>) -> Error {
    let mut frame = StreamErrorFrame::new(envelope).with_raw(raw);
    frame.request_id = request_id.map(str::to_owned);
    frame.into()
}

struct SseState<S, K> {
    source: S,
    decoder: SseDecoder,
    eof: bool,
    finished: bool,
    /// A frame completed the answer; the end of the body is then clean.
    complete: bool,
    /// Endpoint frames so far (proxy frames not counted).
    frames: usize,
    request_id: Option<String>,
    kind: PhantomData<fn() -> K>,
}

/// What one SSE event means.
enum Frame<T> {
    Skip,
    Done,
    Item(T),
    Fatal(Error),
    Recoverable(Error),
}

impl<S: ByteSource, K: Kind> SseState<S, K> {
    async fn next_item(&mut self) -> Option<Result<K::Item, Error>> {
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
                        self.finished = true;
                        return None;
                    }
                    Frame::Item(item) => return Some(Ok(item)),
                    Frame::Recoverable(err) => return Some(Err(err)),
                    Frame::Fatal(err) => {
                        self.finished = true;
                        return Some(Err(err));
                    }
                },
                Ok(None) if self.eof => {
                    self.finished = true;
                    if self.complete {
                        return None;
                    }
                    return Some(Err(Error::Truncated {
                        chunks: self.frames,
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

    fn interpret(&mut self, event: SseEvent) -> Frame<K::Item> {
        let data = event.data.trim();
        if data.is_empty() {
            return Frame::Skip;
        }
        if data == "[DONE]" {
            return Frame::Done;
        }
        let request_id = self.request_id.as_deref();
        match event.event.as_deref() {
            Some("ping" | "keepalive" | "keep-alive") => return Frame::Skip,
            Some("error") => {
                let envelope = serde_json::from_str::<Value>(data)
                    .ok()
                    .and_then(|v| ErrorEnvelope::from_json(&v))
                    .unwrap_or_else(|| ErrorEnvelope::new(data));
                return Frame::Fatal(in_stream(envelope, data, request_id));
            }
            _ => {}
        }
        let decode_error = |source| Error::Decode {
            what: DecodeTarget::StreamFrame,
            raw: data.to_owned(),
            source,
        };
        let value: Value = match serde_json::from_str(data) {
            Ok(v) => v,
            Err(source) => return Frame::Recoverable(decode_error(source)),
        };
        if let Some(envelope) = ErrorEnvelope::from_json(&value) {
            return Frame::Fatal(in_stream(envelope, data, request_id));
        }
        if let Some(proxy) = ProxyEvent::from_frame(&value) {
            return Frame::Item(K::proxy(proxy));
        }
        match K::frame(value, event.event.as_deref()) {
            Ok((item, complete)) => {
                self.frames += 1;
                self.complete |= complete;
                Frame::Item(item)
            }
            Err(source) => Frame::Recoverable(decode_error(source)),
        }
    }
}
