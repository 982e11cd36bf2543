//! The loading-state answer to a streaming chat request (`StreamShape::loading_state`):
//! like the proxy with `sendLoadingState`, a `200 text/event-stream` at once, a
//! `waiting` frame, a `queued` frame whenever the request's place at the gate changes,
//! then `loading` and `ready` once released, then the model's own stream. What goes
//! wrong after the 200 (a fault status, a scripted error, the mock stopping) arrives as
//! one `{"error": ...}` frame and `[DONE]`.
//!
//! No task is spawned: the wait is a future polled by the body, so a client that goes
//! away drops it, which takes the request off the gate.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::stream;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::BodyExt as _;
use serde_json::Value;
use tokio::sync::watch;

use super::served::Served;
use crate::body::MockBody;
use crate::envelope::ApiError;
use crate::gate::Permit;
use crate::stream::{StreamShape, plan};
use crate::wire::{LoadingStatus, SseEvent, loading_frame};

type Pass = Pin<Box<dyn Future<Output = Option<Permit>> + Send>>;

struct Waiting {
    served: Served,
    pass: Pass,
    order: watch::Receiver<Arc<Vec<u64>>>,
    shown: Option<usize>,
    shape: StreamShape,
}

enum Stage {
    Start(Box<Waiting>),
    Waiting(Box<Waiting>),
    Relaying(MockBody),
    Done,
}

type Item = Result<Bytes, io::Error>;

/// Renders frames with the stream shape's framing (line endings, keep-alives), without
/// its delays: the proxy sends its frames as soon as it has them.
fn render(events: &[SseEvent], shape: &StreamShape) -> Bytes {
    let undelayed = shape
        .clone()
        .time_to_first_token(Duration::ZERO)
        .tokens_per_second(0.0);
    let mut out = BytesMut::new();
    for step in plan(events, &undelayed) {
        out.extend_from_slice(&step.bytes);
    }
    out.freeze()
}

/// The `{"error": ...}` frame and `[DONE]` for a response that is not a success.
async fn error_frames(response: Response<MockBody>, shape: &StreamShape) -> Bytes {
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map(|c| c.to_bytes())
        .unwrap_or_default();
    let payload = match serde_json::from_slice::<Value>(&body) {
        Ok(json) if json.get("error").is_some() => json,
        _ => crate::envelope::envelope(
            &format!(
                "the upstream answered {status}: {}",
                String::from_utf8_lossy(&body).trim()
            ),
            crate::envelope::error_type_for(status),
            "upstream_error",
        ),
    };
    render(
        &[SseEvent::raw(payload.to_string()), SseEvent::done()],
        shape,
    )
}

async fn step(stage: Stage) -> Option<(Item, Stage)> {
    match stage {
        Stage::Start(w) => {
            let frame = loading_frame(
                &w.served.model,
                w.served.request.seq,
                LoadingStatus::Waiting,
            );
            let bytes = render(&[frame], &w.shape);
            Some((Ok(bytes), Stage::Waiting(w)))
        }
        Stage::Waiting(mut w) => loop {
            tokio::select! {
                permit = &mut w.pass => return Some(released(*w, permit).await),
                changed = w.order.changed() => {
                    if changed.is_err() {
                        // The gate is gone (the mock is stopping); the pass says how.
                        let permit = (&mut w.pass).await;
                        return Some(released(*w, permit).await);
                    }
                    let seq = w.served.request.seq;
                    let position = w.order.borrow_and_update().iter().position(|s| *s == seq);
                    if let Some(position) = position.map(|p| p + 1)
                        && w.shown != Some(position)
                    {
                        w.shown = Some(position);
                        let frame = loading_frame(&w.served.model, seq, LoadingStatus::Queued(position));
                        return Some((Ok(render(&[frame], &w.shape)), Stage::Waiting(w)));
                    }
                }
            }
        },
        Stage::Relaying(mut body) => match body.frame().await? {
            Ok(frame) => match frame.into_data() {
                Ok(data) => Some((Ok(data), Stage::Relaying(body))),
                // Trailers: nothing the client reads; keep relaying.
                Err(_) => Some((Ok(Bytes::new()), Stage::Relaying(body))),
            },
            // Faults that cut the stream cut this one too.
            Err(err) => Some((Err(err), Stage::Done)),
        },
        Stage::Done => None,
    }
}

/// The request passed the gate (or the mock is stopping): serve it and report.
async fn released(w: Waiting, permit: Option<Permit>) -> (Item, Stage) {
    let Waiting { served, shape, .. } = w;
    let Some(permit) = permit else {
        let response = ApiError::ShuttingDown.into_response();
        return (Ok(error_frames(response, &shape).await), Stage::Done);
    };
    let shared = Arc::clone(&served.shared);
    let (model, seq, received) = (
        served.model.clone(),
        served.request.seq,
        served.request.received,
    );
    let response = served.after_gate(permit).await;
    if response.status() != StatusCode::OK {
        return (Ok(error_frames(response, &shape).await), Stage::Done);
    }
    let waited = shared.started.elapsed().saturating_sub(received);
    let waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX);
    let frames = [
        loading_frame(&model, seq, LoadingStatus::Loading),
        loading_frame(&model, seq, LoadingStatus::Ready { waited_ms }),
    ];
    (
        Ok(render(&frames, &shape)),
        Stage::Relaying(response.into_body()),
    )
}

/// Answers a streaming chat request with the loading-state stream.
pub(crate) fn respond(served: Served, priority: i32) -> Response<MockBody> {
    let gate = served.shared.state.gate.clone();
    let seq = served.request.seq;
    let shape = served.shared.settings.shape.clone();
    let order = gate.watch_order();
    let pass: Pass = Box::pin(async move { gate.pass(seq, priority).await });
    let waiting = Waiting {
        served,
        pass,
        order,
        shown: None,
        shape,
    };
    let body = stream::unfold(Stage::Start(Box::new(waiting)), step);
    let mut response = Response::new(MockBody::stream(Box::pin(body)));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
