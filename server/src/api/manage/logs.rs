//! Logs over HTTP, as llama-swap serves them: `/logs` (the combined history:
//! the proxy's own log and every model's output, in the order written),
//! `/logs/stream` (the same, live), `/logs/stream/proxy`,
//! `/logs/stream/upstream` (every model's output) and `/logs/stream/<model>`
//! (ID or alias). Streams send the history first unless `?no-history`, then
//! live lines until the client leaves or the server drains. Any other id is
//! 400 `unknown_log`. Proxy lines are sent as written (`[INFO] ...`); model
//! output as `[model] line` where models mix (`/logs`, `/logs/stream`,
//! `/logs/stream/upstream`), and as written on one model's own stream, as
//! llama-swap sends it.

use axum::body::Body;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode, header};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::sync::CancellationToken;

use super::params::{PathParam, QueryParams};
use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::logging::PROXY_LOG_ID;
use crate::upstream::SharedLine;

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

/// Where a line comes from, which decides how it is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    Proxy,
    /// Every model's output, each line named by its model.
    Upstream,
    /// One model's own output.
    Model,
}

fn render(line: &SharedLine, source: Source) -> String {
    match source {
        Source::Proxy | Source::Model => format!("{}\n", line.text),
        Source::Upstream => format!("[{}] {}\n", line.model, line.text),
    }
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

/// A live feed and the last `seq` already sent from its history.
struct Feed {
    live: broadcast::Receiver<SharedLine>,
    source: Source,
    after: Option<u64>,
}

/// The history and live feeds of the combined log (`proxy` and/or upstream).
fn combined(
    state: &AppState,
    proxy: bool,
    upstream: bool,
) -> (Vec<(SharedLine, Source)>, Vec<Feed>) {
    let mut history = Vec::new();
    let mut feeds = Vec::new();
    if proxy && let Some(log) = &state.inner.proxy_log {
        let sub = log.subscribe();
        history.extend(sub.history.into_iter().map(|l| (l, Source::Proxy)));
        feeds.push(Feed {
            live: sub.live,
            source: Source::Proxy,
            after: None,
        });
    }
    if upstream && let Some(supervisor) = &state.inner.supervisor {
        let hub = supervisor.logs();
        // Subscribe before copying the history so no line falls in between;
        // lines in both are dropped from the live side by sequence number.
        let live = hub.subscribe_all();
        let lines = hub.history_all();
        let after = lines.last().map(|l| l.seq);
        history.extend(lines.into_iter().map(|l| (l, Source::Upstream)));
        feeds.push(Feed {
            live,
            source: Source::Upstream,
            after,
        });
    }
    history.sort_by_key(|(l, _)| l.seq);
    (history, feeds)
}

/// `GET /logs`: the combined history, oldest first. A browser (`Accept:
/// text/html`) is sent to the UI, as llama-swap does.
pub(crate) async fn history(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let wants_html = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/html"));
    if wants_html {
        return (
            StatusCode::FOUND,
            [(header::LOCATION, HeaderValue::from_static("/ui/"))],
        )
            .into_response();
    }
    let (lines, _) = combined(&state, true, true);
    let chunks = Chunks { lines, next: 0 };
    text_response(Body::from_stream(futures_util::stream::iter(
        chunks.map(Ok::<_, std::convert::Infallible>),
    )))
}

/// Most bytes of history rendered into one chunk of a response: the history
/// is rendered as the client reads it, so a reader holds the shared lines and
/// one chunk, never a rendered copy of the whole history.
const CHUNK_BYTES: usize = 16 * 1024;

/// A history rendered chunk by chunk.
struct Chunks {
    lines: Vec<(SharedLine, Source)>,
    next: usize,
}

impl Iterator for Chunks {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        let mut chunk = String::new();
        while let Some((line, source)) = self.lines.get(self.next) {
            if !chunk.is_empty() && chunk.len() + line.text.len() > CHUNK_BYTES {
                break;
            }
            chunk.push_str(&render(line, *source));
            self.next += 1;
        }
        if self.next == self.lines.len() {
            // Sent: nothing of the history is kept for the rest of the stream.
            self.lines = Vec::new();
            self.next = 0;
        }
        (!chunk.is_empty()).then(|| Bytes::from(chunk))
    }
}

/// `GET /logs/stream`: the combined log, live.
pub(crate) async fn stream_all(
    State(state): State<AppState>,
    QueryParams(query): QueryParams<StreamQuery>,
) -> Response {
    let (history, feeds) = combined(&state, true, true);
    follow(&query, history, feeds, state.inner.streams.clone())
}

/// `GET /logs/stream/<id>`: `proxy`, `upstream`, or one model (ID or alias);
/// a model outside the request's key's `models` is answered as an unknown
/// log.
pub(crate) async fn stream_one(
    State(state): State<AppState>,
    key: Option<axum::Extension<crate::priority::KeyIndex>>,
    PathParam(id): PathParam,
    QueryParams(query): QueryParams<StreamQuery>,
) -> Response {
    let draining = state.inner.streams.clone();
    match id.as_str() {
        PROXY_LOG_ID => {
            let (history, feeds) = combined(&state, true, false);
            return follow(&query, history, feeds, draining);
        }
        "upstream" => {
            let (history, feeds) = combined(&state, false, true);
            return follow(&query, history, feeds, draining);
        }
        _ => {}
    }
    if !super::info::may_use(&state, key.map(|k| k.0), &id) {
        return ApiError::UnknownLog { id }.into_response();
    }
    let subscription = state.inner.router.resolve(&id).and_then(|model| {
        state
            .inner
            .supervisor
            .as_ref()
            .and_then(|s| s.logs().subscribe(&model))
    });
    match subscription {
        Some(sub) => {
            let history = sub
                .history
                .into_iter()
                .map(|l| (l, Source::Model))
                .collect();
            let feed = Feed {
                live: sub.live,
                source: Source::Model,
                after: None,
            };
            follow(&query, history, vec![feed], draining)
        }
        None => ApiError::UnknownLog { id }.into_response(),
    }
}

/// The stream's state: the history not yet sent, then the live feeds.
struct Following {
    history: Chunks,
    feeds: Vec<Feed>,
    draining: CancellationToken,
}

fn follow(
    query: &StreamQuery,
    history: Vec<(SharedLine, Source)>,
    feeds: Vec<Feed>,
    draining: CancellationToken,
) -> Response {
    let lines = if query.with_history() {
        history
    } else {
        Vec::new()
    };
    let state = Following {
        history: Chunks { lines, next: 0 },
        feeds,
        draining,
    };
    let stream = futures_util::stream::unfold(state, |mut f| async move {
        if let Some(chunk) = f.history.next() {
            return Some((Ok::<_, std::convert::Infallible>(chunk), f));
        }
        loop {
            let (index, received) = tokio::select! {
                () = f.draining.cancelled() => return None,
                got = next_line(&mut f.feeds) => got?,
            };
            let feed = &f.feeds[index];
            match received {
                Ok(line) if feed.after.is_some_and(|after| line.seq <= after) => {}
                Ok(line) => {
                    let text = render(&line, feed.source);
                    return Some((Ok(Bytes::from(text)), f));
                }
                Err(RecvError::Lagged(n)) => {
                    let note = format!("--- {n} lines dropped: this reader fell behind ---\n");
                    return Some((Ok(Bytes::from(note)), f));
                }
                Err(RecvError::Closed) => {
                    f.feeds.remove(index);
                }
            }
        }
    });
    text_response(Body::from_stream(stream))
}

/// The next item of whichever feed has one; `None` when no feed is left.
async fn next_line(feeds: &mut [Feed]) -> Option<(usize, Result<SharedLine, RecvError>)> {
    match feeds {
        [] => None,
        [only] => Some((0, only.live.recv().await)),
        [first, second, ..] => Some(tokio::select! {
            got = first.live.recv() => (0, got),
            got = second.live.recv() => (1, got),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::{LogLimits, LogRing, LogStream};
    use http_body_util::BodyExt;

    /// 2 000 lines of 1 KiB each, as the proxy's log may hold them.
    fn big_history() -> Vec<(SharedLine, Source)> {
        let ring = LogRing::with_limits(
            "proxy",
            LogLimits {
                lines: 2000,
                bytes: 4 << 20,
            },
        );
        for i in 0..2000 {
            ring.record(LogStream::Stdout, format!("{i:04} {}", "x".repeat(1019)));
        }
        ring.history()
            .into_iter()
            .map(|l| (l, Source::Proxy))
            .collect()
    }

    #[tokio::test]
    async fn a_stream_sends_its_history_in_bounded_chunks_rendered_as_it_is_read() {
        let history = big_history();
        let expected: String = history.iter().map(|(l, s)| render(l, *s)).collect();
        let query = StreamQuery { no_history: None };
        let draining = CancellationToken::new();
        let mut body = follow(&query, history, Vec::new(), draining.clone()).into_body();
        let mut received = String::new();
        let mut chunks = 0;
        while received.len() < expected.len() {
            let frame = body.frame().await.unwrap().unwrap().into_data().unwrap();
            // One chunk, never the whole history (2 MiB) at once.
            assert!(frame.len() <= CHUNK_BYTES + 1100, "{} bytes", frame.len());
            received.push_str(std::str::from_utf8(&frame).unwrap());
            chunks += 1;
        }
        assert_eq!(received, expected);
        assert!(chunks > 100, "{chunks} chunks");
        drop(body);
    }

    #[test]
    fn the_history_of_logs_is_rendered_in_chunks_that_end_on_a_line() {
        let history = big_history();
        let expected: String = history.iter().map(|(l, s)| render(l, *s)).collect();
        let chunks: Vec<Bytes> = Chunks {
            lines: history,
            next: 0,
        }
        .collect();
        assert!(
            chunks
                .iter()
                .all(|c| c.len() <= CHUNK_BYTES + 1100 && c.ends_with(b"\n"))
        );
        let joined: Vec<u8> = chunks.concat();
        assert_eq!(joined, expected.as_bytes());
    }
}
