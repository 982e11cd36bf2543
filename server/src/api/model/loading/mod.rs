//! The `sendLoadingState` stream: an immediate `200 text/event-stream` for a
//! streaming chat request that has to wait, carrying progress until the real
//! upstream stream takes over in the same response.
//!
//! Every frame injected here is a valid `chat.completion.chunk` (so the
//! official `openai` clients and async-openai iterate over it like any other
//! chunk): llama-swap's human text in `choices[0].delta.reasoning_content`,
//! which chat UIs show as "thinking", and the machine-readable state in a
//! top-level `llamaswap` object, the marker of a proxy frame:
//!
//! ```text
//! data: {"id":"llamaswap-<request id>","object":"chat.completion.chunk","created":1733000000,
//!        "model":"qwen","choices":[{"index":0,"delta":{"reasoning_content":"\nQueue position: #2 "},
//!        "finish_reason":null}],"llamaswap":{"status":"queued","model":"qwen","position":2}}
//! ```
//!
//! `status` is `waiting` (admitted, nothing to report yet), `queued` (with a
//! 1-based `position`, which can go up when higher-priority work arrives),
//! `loading` (the model is starting for this request) or `ready` (with
//! `waited_ms`; the last injected frame, right before the upstream's own
//! stream). An error after the 200 is one `data: {"error":{...}}` frame and
//! `data: [DONE]`, which the `openai` clients raise as their API error.
//!
//! No task is spawned: the work (waiting for the grant, then forwarding) is a
//! future polled by the body itself, so a client that goes away drops it, which
//! cancels the wait (or releases the lease) at once.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::{Body, BodyDataStream};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use crate::api::error::ApiError;

/// How often a `.` keeps the stream (and the user) alive while nothing changes.
const TICK: Duration = Duration::from_secs(1);
/// How much of an upstream error body is relayed into the stream.
const ERROR_BODY_LIMIT: usize = 64 * 1024;
/// llama-swap's rule line around the loading text.
const RULE: &str = "━━━━━";

/// What a waiting request is doing, as shown to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// In the ranked queue at this 1-based position.
    Queued(usize),
    /// Waiting for the model to start.
    Loading,
}

/// Whom a loading stream answers: names its frames.
#[derive(Debug, Clone)]
pub(crate) struct LoadingTarget {
    /// The model ID the request resolved to.
    pub model: String,
    /// The request's id (`X-Request-Id`); frames carry `llamaswap-<id>` as their `id`.
    pub request_id: String,
}

type Work = Pin<Box<dyn Future<Output = Result<Response, ApiError>> + Send>>;

/// Builds the loading-state response.
///
/// `status` reports the request's progress through `describe` (`None` =
/// nothing to report, e.g. admitted or granted); `work` waits for the grant and
/// forwards the request, resolving to the upstream's response (or the error
/// to report in-band).
pub(crate) fn loading_response<S, W>(
    target: LoadingTarget,
    status: watch::Receiver<S>,
    describe: fn(&S) -> Option<Progress>,
    work: W,
) -> Response
where
    S: Send + Sync + 'static,
    W: Future<Output = Result<Response, ApiError>> + Send + 'static,
{
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let state = State::Start(Box::new(Waiting {
        frames: Frames {
            id: format!("llamaswap-{}", target.request_id),
            created,
            model: target.model,
        },
        status,
        describe,
        work: Box::pin(work),
        interval,
        started: Instant::now(),
        shown: None,
    }));
    let stream = futures_util::stream::unfold(state, step);
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        http::HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    response
}

/// The state a frame reports in its `llamaswap` object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Waiting,
    Queued(usize),
    Loading,
    Ready { waited_ms: u64 },
}

impl From<Option<Progress>> for Status {
    fn from(progress: Option<Progress>) -> Self {
        match progress {
            None => Status::Waiting,
            Some(Progress::Queued(position)) => Status::Queued(position),
            Some(Progress::Loading) => Status::Loading,
        }
    }
}

/// Writes the injected frames of one stream.
struct Frames {
    id: String,
    created: u64,
    model: String,
}

impl Frames {
    /// One `data:` event: a chunk whose only content is `text` as reasoning,
    /// with `status` in the `llamaswap` extension object.
    fn frame(&self, text: &str, status: Status) -> Vec<u8> {
        let mut marker = json!({"status": "waiting", "model": self.model});
        match status {
            Status::Waiting => {}
            Status::Queued(position) => {
                marker["status"] = json!("queued");
                marker["position"] = json!(position);
            }
            Status::Loading => marker["status"] = json!("loading"),
            Status::Ready { waited_ms } => {
                marker["status"] = json!("ready");
                marker["waited_ms"] = json!(waited_ms);
            }
        }
        let chunk = json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "delta": {"reasoning_content": text}, "finish_reason": null}],
            "llamaswap": marker,
        });
        format!("data: {chunk}\n\n").into_bytes()
    }

    /// The frame announcing a change of progress, in llama-swap's words where
    /// it has some (a queue position) and a dot otherwise.
    fn progress(&self, progress: Option<Progress>) -> Vec<u8> {
        let text = match progress {
            Some(Progress::Queued(position)) => format!("\nQueue position: #{position} "),
            Some(Progress::Loading) | None => ".".to_owned(),
        };
        self.frame(&text, progress.into())
    }
}

struct Waiting<S> {
    frames: Frames,
    status: watch::Receiver<S>,
    describe: fn(&S) -> Option<Progress>,
    work: Work,
    interval: Interval,
    started: Instant,
    shown: Option<Progress>,
}

enum State<S> {
    Start(Box<Waiting<S>>),
    Waiting(Box<Waiting<S>>),
    Relaying(BodyDataStream),
    Done,
}

type Item = Result<Bytes, axum::Error>;

async fn step<S: Send + Sync + 'static>(state: State<S>) -> Option<(Item, State<S>)> {
    match state {
        State::Start(mut w) => {
            // Consume the first tick, which completes at once.
            w.interval.tick().await;
            let current = (w.describe)(&w.status.borrow_and_update());
            let text = format!("{RULE}\nllama-swap loading model: {}\n", w.frames.model);
            let mut out = w.frames.frame(&text, current.into());
            if let Some(progress @ Progress::Queued(_)) = current {
                out.extend_from_slice(&w.frames.progress(Some(progress)));
            }
            w.shown = current;
            Some((Ok(Bytes::from(out)), State::Waiting(w)))
        }
        State::Waiting(mut w) => loop {
            tokio::select! {
                result = &mut w.work => {
                    return Some(finish(&w.frames, w.started, result).await);
                }
                changed = w.status.changed() => {
                    if changed.is_err() {
                        // The sender is gone; the work future reports the outcome.
                        let result = (&mut w.work).await;
                        return Some(finish(&w.frames, w.started, result).await);
                    }
                    let progress = (w.describe)(&w.status.borrow_and_update());
                    // Back to "nothing to report" (granted) is not news: the
                    // work future finishes next.
                    if progress.is_some() && progress != w.shown {
                        w.shown = progress;
                        let frame = w.frames.progress(progress);
                        return Some((Ok(Bytes::from(frame)), State::Waiting(w)));
                    }
                }
                _ = w.interval.tick() => {
                    let frame = w.frames.frame(".", w.shown.into());
                    return Some((Ok(Bytes::from(frame)), State::Waiting(w)));
                }
            }
        },
        State::Relaying(mut body) => match body.next().await {
            Some(Ok(bytes)) => Some((Ok(bytes), State::Relaying(body))),
            // LeasedBody already turned upstream failures of an SSE stream into
            // an error frame; anything else failing is reported the same way.
            Some(Err(error)) => {
                tracing::info!(%error, "stream after loading state failed");
                Some((
                    Ok(ApiError::Internal {
                        what: "the response stream failed",
                    }
                    .sse_frames()),
                    State::Done,
                ))
            }
            None => None,
        },
        State::Done => None,
    }
}

async fn finish<S>(
    frames: &Frames,
    started: Instant,
    result: Result<Response, ApiError>,
) -> (Item, State<S>) {
    match result {
        Ok(response) if response.status().is_success() => {
            let waited = started.elapsed();
            let text = format!("\nDone! ({:.2}s)\n{RULE}\n \n", waited.as_secs_f64());
            let waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
            (
                Ok(Bytes::from(
                    frames.frame(&text, Status::Ready { waited_ms }),
                )),
                State::Relaying(response.into_body().into_data_stream()),
            )
        }
        Ok(response) => (Ok(upstream_error_frames(response).await), State::Done),
        Err(error) => (Ok(error.sse_frames()), State::Done),
    }
}

/// An upstream that answered with an error status after the stream began: its
/// body goes into one `data:` frame (as JSON when it holds an `error` object),
/// then `[DONE]`.
async fn upstream_error_frames(response: Response) -> Bytes {
    let status = response.status();
    let body = http_body_util::Limited::new(response.into_body(), ERROR_BODY_LIMIT)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let payload = match serde_json::from_slice::<Value>(&body) {
        Ok(json) if json.get("error").is_some_and(Value::is_object) => json,
        _ => json!({"error": {
            "message": format!(
                "the upstream answered {status}: {}",
                String::from_utf8_lossy(&body).trim()
            ),
            "type": crate::api::error::error_type_for(status),
            "code": "upstream_error",
        }}),
    };
    Bytes::from(format!("data: {payload}\n\ndata: [DONE]\n\n"))
}

#[cfg(test)]
mod tests;
