//! Upstream output over HTTP: `/logs` (history), `/logs/stream[/<model>]`
//! (history unless `?no-history`, then live lines until the client leaves or
//! the server drains).

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderValue, header};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::error::ApiError;
use super::state::AppState;
use crate::upstream::LogLine;

/// Query of the stream endpoints.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct StreamQuery {
    #[serde(rename = "no-history")]
    no_history: Option<String>,
}

impl StreamQuery {
    fn with_history(&self) -> bool {
        self.no_history.is_none()
    }
}

fn render(line: &LogLine) -> String {
    format!("[{}] {}\n", line.model, line.text)
}

fn text_response(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    headers.insert(
        http::HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    response
}

/// `GET /logs`: every model's recent output, oldest first.
pub(crate) async fn history(State(state): State<AppState>) -> Response {
    let lines: String = state
        .inner
        .supervisor
        .as_ref()
        .map(|s| s.logs().history_all().iter().map(render).collect())
        .unwrap_or_default();
    text_response(Body::from(lines))
}

/// `GET /logs/stream`: every model's output, live.
pub(crate) async fn stream_all(
    State(state): State<AppState>,
    Query(query): Query<StreamQuery>,
) -> Response {
    let Some(supervisor) = state.inner.supervisor.clone() else {
        return text_response(Body::empty());
    };
    let hub = supervisor.logs();
    // Subscribe before copying the history so no line falls in between; lines
    // in both are dropped from the live side by sequence number.
    let live = hub.subscribe_all();
    let history = hub.history_all();
    let after = history.last().map(|l| l.seq);
    let history = if query.with_history() {
        history
    } else {
        Vec::new()
    };
    follow(history, live, after, state.inner.draining.clone())
}

/// `GET /logs/stream/<model>`: one model's output (ID or alias), live.
pub(crate) async fn stream_one(
    State(state): State<AppState>,
    Path(model): Path<String>,
    Query(query): Query<StreamQuery>,
) -> Response {
    let supervisor = state.inner.supervisor.clone();
    let hub = supervisor.as_ref().map(|s| s.logs());
    let subscription = if model == "upstream" {
        None
    } else {
        state
            .inner
            .router
            .resolve(&model)
            .and_then(|id| hub.and_then(|hub| hub.subscribe(&id)))
    };
    match subscription {
        Some(sub) => {
            let history = if query.with_history() {
                sub.history
            } else {
                Vec::new()
            };
            follow(history, sub.live, None, state.inner.draining.clone())
        }
        // llama-swap's name for the combined upstream feed.
        None if model == "upstream" => stream_all(State(state), Query(query)).await,
        None => ApiError::ModelNotFound { model }.into_response(),
    }
}

struct Follow {
    live: broadcast::Receiver<LogLine>,
    after: Option<u64>,
    draining: CancellationToken,
}

fn follow(
    history: Vec<LogLine>,
    live: broadcast::Receiver<LogLine>,
    after: Option<u64>,
    draining: CancellationToken,
) -> Response {
    let first: String = history.iter().map(render).collect();
    let state = (
        Some(first),
        Follow {
            live,
            after,
            draining,
        },
    );
    let stream = futures_util::stream::unfold(state, |(first, mut f)| async move {
        if let Some(text) = first.filter(|t| !t.is_empty()) {
            return Some((
                Ok::<_, std::convert::Infallible>(Bytes::from(text)),
                (None, f),
            ));
        }
        loop {
            let received = tokio::select! {
                () = f.draining.cancelled() => return None,
                received = f.live.recv() => received,
            };
            match received {
                Ok(line) if f.after.is_some_and(|after| line.seq <= after) => {}
                Ok(line) => return Some((Ok(Bytes::from(render(&line))), (None, f))),
                Err(RecvError::Lagged(n)) => {
                    let note = format!("--- {n} lines dropped: this reader fell behind ---\n");
                    return Some((Ok(Bytes::from(note)), (None, f)));
                }
                Err(RecvError::Closed) => return None,
            }
        }
    });
    text_response(Body::from_stream(stream))
}
