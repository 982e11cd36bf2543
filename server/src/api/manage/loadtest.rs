//! `POST /api/loadtest`: the web UI's load test, run by the server.
//!
//! A browser keeps at most six HTTP/1.1 connections to one server, and the
//! page's event stream holds one: requests a page sends beyond that wait in
//! the browser, in the order they were sent, and never reach the priority
//! queue. So the page sends the plan here, and the server makes the requests
//! itself, all at once, in the plan's order, each through the same front
//! layer and model endpoint as a client's (request id, access line, history
//! row; the caller's API key and its priority cap). What happens to each is
//! streamed back as server-sent events on the one connection:
//!
//! ```text
//! data: {"event":"start","requests":3}
//! data: {"event":"sent","index":0,"ms":0}
//! data: {"event":"queued","index":2,"position":1,"ms":3}
//! data: {"event":"first","index":0,"ms":41}
//! data: {"event":"done","index":0,"ms":95,"status":200,"tokens":8,"error":null,"request_id":"..."}
//! data: {"event":"end","ms":402}
//! ```
//!
//! Nothing is spawned: the requests are driven by the response body itself,
//! so a page that closes the stream (Stop, or leaving) drops them, which
//! withdraws the waiting ones and cuts the running ones like any client that
//! goes away.

use std::pin::Pin;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, StreamExt};
use http::{HeaderValue, StatusCode, header};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::api::error::ApiError;
use crate::api::front::front_on_behalf;
use crate::api::model::model_endpoint;
use crate::api::state::AppState;
use crate::priority::KeyIndex;

/// Most requests one run may make.
pub(crate) const MAX_REQUESTS: usize = 256;
/// Longest prompt.
const MAX_PROMPT: usize = 8 * 1024;
/// Largest plan body.
const MAX_PLAN_BYTES: usize = 64 * 1024;
/// Most of an error answer's body read for its message.
const MAX_ERROR_BYTES: usize = 16 * 1024;

/// What the page asks for.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Plan {
    /// The requests, in the order they are sent.
    requests: Vec<Planned>,
    /// The user message of every request (each gets its index appended).
    prompt: String,
    /// `max_tokens` of every request (default 64).
    #[serde(default)]
    max_tokens: Option<u32>,
    /// Sent as `X-Session-ID`, so the history groups the run's requests.
    #[serde(default)]
    session: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Planned {
    model: String,
    /// The `X-Priority` header; none sends none (Normal).
    #[serde(default)]
    priority: Option<i32>,
}

fn bad(param: &'static str, message: impl Into<String>) -> Response {
    ApiError::BadParameter {
        param,
        message: message.into(),
    }
    .into_response()
}

/// Starts a run and streams its events.
pub(crate) async fn loadtest(State(state): State<AppState>, request: Request) -> Response {
    let key = request.extensions().get::<KeyIndex>().copied();
    let Ok(body) = axum::body::to_bytes(request.into_body(), MAX_PLAN_BYTES).await else {
        return bad(
            "body",
            format!("the plan must be a JSON object of at most {MAX_PLAN_BYTES} bytes"),
        );
    };
    let plan: Plan = match serde_json::from_slice(&body) {
        Ok(plan) => plan,
        Err(error) => {
            return bad(
                "body",
                format!(
                    "the plan is not valid: {error}; send {{\"requests\": [{{\"model\": \"m\", \"priority\": 10}}], \"prompt\": \"...\"}}"
                ),
            );
        }
    };
    if plan.requests.is_empty() || plan.requests.len() > MAX_REQUESTS {
        return bad(
            "requests",
            format!("a run makes 1 to {MAX_REQUESTS} requests"),
        );
    }
    if plan.prompt.len() > MAX_PROMPT {
        return bad(
            "prompt",
            format!("the prompt may be at most {MAX_PROMPT} bytes"),
        );
    }
    if let Some(index) = plan.requests.iter().position(|r| r.model.trim().is_empty()) {
        return bad("requests", format!("request {index} names no model"));
    }
    let session = plan
        .session
        .as_deref()
        .and_then(|s| HeaderValue::from_str(s).ok());
    let max_tokens = plan.max_tokens.unwrap_or(64).clamp(1, 32_768);
    let started = Instant::now();
    let (events, received) = mpsc::unbounded_channel::<Value>();
    let total = plan.requests.len();
    let runs = FuturesUnordered::new();
    for (index, planned) in plan.requests.into_iter().enumerate() {
        let call = Call {
            state: state.clone(),
            index,
            model: planned.model,
            priority: planned.priority,
            prompt: format!("{} (#{index})", plan.prompt),
            max_tokens,
            key,
            session: session.clone(),
            started,
            events: events.clone(),
        };
        runs.push(Box::pin(call.run()) as Pin<Box<dyn Future<Output = ()> + Send>>);
    }
    drop(events);
    let first = json!({"event": "start", "requests": total});
    let stream = futures_util::stream::unfold(
        Drive {
            runs,
            received,
            first: Some(first),
            ended: false,
            started,
        },
        Drive::next,
    );
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    *response.status_mut() = StatusCode::OK;
    response
}

/// The response body's state: the requests still running and their events.
struct Drive {
    runs: FuturesUnordered<Pin<Box<dyn Future<Output = ()> + Send>>>,
    received: mpsc::UnboundedReceiver<Value>,
    first: Option<Value>,
    ended: bool,
    started: Instant,
}

impl Drive {
    /// The next SSE frame: an event of a request, while driving them all.
    async fn next(mut self) -> Option<(Result<Bytes, std::convert::Infallible>, Self)> {
        if let Some(first) = self.first.take() {
            return Some((Ok(frame(&first)), self));
        }
        loop {
            if let Ok(event) = self.received.try_recv() {
                return Some((Ok(frame(&event)), self));
            }
            if self.runs.is_empty() {
                if self.ended {
                    return None;
                }
                self.ended = true;
                let end = json!({"event": "end", "ms": ms(self.started)});
                return Some((Ok(frame(&end)), self));
            }
            tokio::select! {
                biased;
                Some(event) = self.received.recv() => return Some((Ok(frame(&event)), self)),
                Some(()) = self.runs.next() => {}
            }
        }
    }
}

fn frame(event: &Value) -> Bytes {
    Bytes::from(format!("data: {event}\n\n"))
}

fn ms(since: Instant) -> u64 {
    u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// One request of a run.
struct Call {
    state: AppState,
    index: usize,
    model: String,
    priority: Option<i32>,
    prompt: String,
    max_tokens: u32,
    key: Option<KeyIndex>,
    session: Option<HeaderValue>,
    started: Instant,
    events: mpsc::UnboundedSender<Value>,
}

impl Call {
    fn say(&self, mut event: Value) {
        event["index"] = json!(self.index);
        event["ms"] = json!(ms(self.started));
        // The page went away: the run is being dropped anyway.
        let _ = self.events.send(event);
    }

    fn request(&self) -> Request {
        let body = json!({
            "model": self.model,
            "messages": [{"role": "user", "content": self.prompt}],
            "stream": true,
            "max_tokens": self.max_tokens,
        });
        let mut request = Request::new(Body::from(body.to_string()));
        *request.method_mut() = http::Method::POST;
        *request.uri_mut() = http::Uri::from_static("/v1/chat/completions");
        let headers = request.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_static("text/event-stream"),
        );
        if let Some(priority) = self.priority {
            headers.insert(
                crate::priority::PRIORITY_HEADER,
                HeaderValue::from(priority),
            );
        }
        if let Some(session) = &self.session {
            headers.insert("x-session-id", session.clone());
        }
        if let Some(key) = self.key {
            request.extensions_mut().insert(key);
        }
        request
    }

    async fn run(self) {
        self.say(json!({"event": "sent"}));
        let response = front_on_behalf(self.state.clone(), self.request(), |state, request| {
            model_endpoint(State(state), request)
        })
        .await;
        let status = response.status();
        let request_id = response
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let (tokens, error) = if status.is_success() {
            self.read_stream(response.into_body()).await
        } else {
            (0, Some(error_message(response.into_body()).await))
        };
        self.say(json!({
            "event": "done",
            "status": status.as_u16(),
            "tokens": tokens,
            "error": error,
            "request_id": request_id,
        }));
    }

    /// Reads the answer's SSE frames: the proxy's queue frames, the first
    /// token, the tokens, an error frame. Returns (tokens, error).
    async fn read_stream(&self, body: Body) -> (u64, Option<String>) {
        let mut stream = body.into_data_stream();
        let mut buffer: Vec<u8> = Vec::new();
        let mut tokens = 0u64;
        let mut error = None;
        let mut position = None;
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(e) => {
                    error = Some(format!("the answer broke off: {e}"));
                    break;
                }
            };
            buffer.extend_from_slice(&chunk);
            while let Some(end) = find_blank_line(&buffer) {
                let block: Vec<u8> = buffer.drain(..end).collect();
                for line in block.split(|b| *b == b'\n') {
                    let Some(data) = line.strip_prefix(b"data:") else {
                        continue;
                    };
                    let Ok(frame) = serde_json::from_slice::<Value>(data.trim_ascii()) else {
                        continue;
                    };
                    if let Some(status) = frame.get("llamaswap") {
                        let at = status.get("position").and_then(Value::as_u64);
                        if status.get("status").and_then(Value::as_str) == Some("queued")
                            && at != position
                        {
                            position = at;
                            self.say(json!({"event": "queued", "position": at}));
                        }
                        continue;
                    }
                    if let Some(e) = frame.get("error") {
                        error = Some(
                            e.get("message")
                                .and_then(Value::as_str)
                                .map_or_else(|| e.to_string(), str::to_owned),
                        );
                        continue;
                    }
                    let delta = &frame["choices"][0]["delta"];
                    let said = ["content", "reasoning_content", "reasoning"]
                        .iter()
                        .any(|k| {
                            delta
                                .get(*k)
                                .and_then(Value::as_str)
                                .is_some_and(|t| !t.is_empty())
                        });
                    if said {
                        if tokens == 0 {
                            self.say(json!({"event": "first"}));
                        }
                        tokens += 1;
                    }
                }
            }
        }
        (tokens, error)
    }
}

/// The end of the first SSE block (after its blank line), LF or CRLF.
fn find_blank_line(buffer: &[u8]) -> Option<usize> {
    let lf = buffer.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The message of an error answer (the envelope's, else its text).
async fn error_message(body: Body) -> String {
    let bytes = tokio::time::timeout(
        Duration::from_secs(10),
        axum::body::to_bytes(body, MAX_ERROR_BYTES),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .unwrap_or_default();
    serde_json::from_slice::<Value>(&bytes)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| String::from_utf8_lossy(&bytes).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::find_blank_line;

    #[test]
    fn a_block_ends_after_its_blank_line_whichever_line_ends_it_uses() {
        assert_eq!(find_blank_line(b"data: a\n\ndata: b"), Some(9));
        assert_eq!(find_blank_line(b"data: a\r\n\r\nx"), Some(11));
        assert_eq!(find_blank_line(b"data: a\n"), None);
    }
}
