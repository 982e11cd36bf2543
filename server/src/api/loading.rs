//! The `sendLoadingState` stream: an immediate `200 text/event-stream` for a
//! streaming chat request that has to wait, carrying progress until the real
//! upstream stream takes over in the same response.
//!
//! Two kinds of progress frame are sent, so both kinds of client understand them:
//! - llama-swap's: `{"choices":[{"delta":{"reasoning_content":"..."}}]}` text that
//!   chat UIs show as "thinking";
//! - typed: `{"object":"proxy.status","status":"queued","position":N,"model":"X"}`
//!   and `{"object":"proxy.status","status":"loading","model":"X"}`, for programs
//!   (the position can go up when higher-priority work arrives).
//!
//! No task is spawned: the work (waiting for the grant, then forwarding) is a
//! future polled by the body itself, so a client that goes away drops it, which
//! cancels the wait (or releases the lease) at once.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, BodyDataStream};
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt;
use http::{HeaderValue, StatusCode, header};
use http_body_util::BodyExt;
use tokio::sync::watch;
use tokio::time::{Instant, Interval, MissedTickBehavior};

use super::error::ApiError;

/// How often a `.` keeps the stream (and the user) alive while nothing changes.
const TICK: Duration = Duration::from_secs(1);
/// How much of an upstream error body is relayed into the stream.
const ERROR_BODY_LIMIT: usize = 64 * 1024;

/// What a waiting request is doing, as shown to the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// In the ranked queue at this 1-based position.
    Queued(usize),
    /// Waiting for the model to start.
    Loading,
}

type Work = Pin<Box<dyn Future<Output = Result<Response, ApiError>> + Send>>;

/// Builds the loading-state response.
///
/// `status` reports the request's progress through `describe` (`None` = nothing
/// to show, e.g. granted); `work` waits for the grant and forwards the request,
/// resolving to the upstream's response (or the error to report in-band).
pub fn loading_response<S, W>(
    model: String,
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
    let state = State::Start(Box::new(Waiting {
        model,
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

struct Waiting<S> {
    model: String,
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
            let mut out = reasoning_frame(
                &w.model,
                &format!("━━━━━\nllama-swap loading model: {}\n", w.model),
            );
            let current = (w.describe)(&w.status.borrow_and_update());
            if let Some(progress) = current {
                out.extend_from_slice(&progress_frames(&w.model, progress));
                w.shown = Some(progress);
            }
            Some((Ok(Bytes::from(out)), State::Waiting(w)))
        }
        State::Waiting(mut w) => loop {
            tokio::select! {
                result = &mut w.work => {
                    return Some(finish(&w.model, w.started, result).await);
                }
                changed = w.status.changed() => {
                    if changed.is_err() {
                        // The sender is gone; the work future reports the outcome.
                        let result = (&mut w.work).await;
                        return Some(finish(&w.model, w.started, result).await);
                    }
                    let progress = (w.describe)(&w.status.borrow_and_update());
                    if let Some(progress) = progress.filter(|p| Some(*p) != w.shown) {
                        w.shown = Some(progress);
                        let frames = progress_frames(&w.model, progress);
                        return Some((Ok(Bytes::from(frames)), State::Waiting(w)));
                    }
                }
                _ = w.interval.tick() => {
                    let frame = reasoning_frame(&w.model, ".");
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
    model: &str,
    started: Instant,
    result: Result<Response, ApiError>,
) -> (Item, State<S>) {
    match result {
        Ok(response) if response.status().is_success() => {
            let elapsed = started.elapsed().as_secs_f64();
            let done = reasoning_frame(model, &format!("\nDone! ({elapsed:.2}s)\n━━━━━\n \n"));
            (
                Ok(Bytes::from(done)),
                State::Relaying(response.into_body().into_data_stream()),
            )
        }
        Ok(response) => (Ok(upstream_error_frames(response).await), State::Done),
        Err(error) => (Ok(error.sse_frames()), State::Done),
    }
}

/// An upstream that answered with an error status after the stream began: its
/// body goes into one `data:` frame (as JSON when it is JSON), then `[DONE]`.
async fn upstream_error_frames(response: Response) -> Bytes {
    let status = response.status();
    let body = http_body_util::Limited::new(response.into_body(), ERROR_BODY_LIMIT)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let payload = match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(json) if json.get("error").is_some() => json,
        _ => serde_json::json!({"error": {
            "message": format!(
                "the upstream answered {status}: {}",
                String::from_utf8_lossy(&body).trim()
            ),
            "type": "upstream_error",
            "code": upstream_code(status),
        }}),
    };
    Bytes::from(format!("data: {payload}\n\ndata: [DONE]\n\n"))
}

fn upstream_code(status: StatusCode) -> &'static str {
    if status.is_client_error() {
        "invalid_request_error"
    } else {
        "upstream_error"
    }
}

fn reasoning_frame(model: &str, text: &str) -> Vec<u8> {
    let chunk = serde_json::json!({
        "object": "chat.completion.chunk",
        "model": model,
        "choices": [{"index": 0, "delta": {"reasoning_content": text}, "finish_reason": null}],
    });
    format!("data: {chunk}\n\n").into_bytes()
}

fn progress_frames(model: &str, progress: Progress) -> Vec<u8> {
    let (status, text) = match progress {
        Progress::Queued(position) => (
            serde_json::json!({"object": "proxy.status", "status": "queued", "position": position, "model": model}),
            format!("\nQueue position: #{position} "),
        ),
        Progress::Loading => (
            serde_json::json!({"object": "proxy.status", "status": "loading", "model": model}),
            "\nLoading... ".to_owned(),
        ),
    };
    let mut out = format!("data: {status}\n\n").into_bytes();
    out.extend_from_slice(&reasoning_frame(model, &text));
    out
}

#[cfg(test)]
mod tests;
