//! A model request after the gate, to the last byte: latency, faults, the scripted or
//! echoed reply, and stream shaping.

use std::future;
use std::sync::Arc;

use http::{HeaderName, HeaderValue, Response, StatusCode, header};
use serde_json::Value;

use super::shared::{ConnControl, Crash, Shared};
use crate::body::MockBody;
use crate::envelope::{ApiError, envelope, error_type_for, json_response};
use crate::fault::Fault;
use crate::gate::Permit;
use crate::journal::RecordedRequest;
use crate::reply::ReplyKind;
use crate::stream::{StreamEnd, plan, play};
use crate::wire::{self, Answer, Api, Ids, SseEvent};

/// Frames a `--crash-mid-stream` response sends before the crash.
const FRAMES_BEFORE_CRASH: usize = 2;

/// A model request that passed validation, ready to be answered once the gate lets it
/// through.
pub(crate) struct Served {
    pub(crate) shared: Arc<Shared>,
    pub(crate) conn: ConnControl,
    pub(crate) request: RecordedRequest,
    pub(crate) model: String,
    pub(crate) endpoint: String,
    pub(crate) api: Api,
    pub(crate) json: Option<Value>,
    pub(crate) stream: bool,
}

impl Served {
    /// Latency, faults, then the scripted or echoed reply.
    pub(crate) async fn after_gate(self, permit: Permit) -> Response<MockBody> {
        let Self {
            shared,
            conn,
            request,
            model,
            endpoint,
            api,
            json,
            stream,
        } = self;
        let shared = &*shared;
        let conn = &conn;
        let seq = request.seq;
        shared.state.journal.dispatched(seq);
        shared.state.loaded().insert(model.clone());
        let stop = shared.life.shutdown.clone();

        if !shared.settings.latency.is_zero() {
            tokio::select! {
                () = tokio::time::sleep(shared.settings.latency) => {}
                () = stop.cancelled() => return ApiError::ShuttingDown.into_response(),
            }
        }

        let fault = shared.state.faults.take(&request);
        let mut stream_fault = None;
        match fault {
            Some(Fault::Status {
                status,
                body,
                headers,
            }) => {
                let response = status_response(status, body, &headers);
                return response
                    .map(|b| b.with_guard(permit).with_guard(shared.completion_guard()));
            }
            Some(Fault::Delay(delay)) => {
                tokio::select! {
                    () = tokio::time::sleep(delay) => {}
                    () = stop.cancelled() => return ApiError::ShuttingDown.into_response(),
                }
            }
            Some(Fault::Hang) => {
                stop.cancelled().await;
                return ApiError::ShuttingDown.into_response();
            }
            Some(Fault::ResetBeforeHeaders) => {
                conn.reset();
                // The connection (and this future with it) is dropped by its task.
                return future::pending().await;
            }
            Some(Fault::StallAfterHeaders) => {
                let body = play(Vec::new(), StreamEnd::Stall, stop, Box::new(|| {}));
                let mut response = Response::new(MockBody::stream(body).with_guard(permit));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(if stream {
                        "text/event-stream"
                    } else {
                        "application/json"
                    }),
                );
                return response;
            }
            Some(other) => stream_fault = Some(other),
            None => {}
        }

        let reply = shared.state.replies.reply_for(&request);
        let ids = Ids { model: &model, seq };
        // A transcription's echo says what was uploaded.
        let upload = (api == Api::Transcription).then(|| {
            let kind = request
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok());
            wire::upload(&request.body, kind)
        });
        let answer = match reply.kind {
            ReplyKind::Json(value) => Err(json_response(reply.status, &value)),
            ReplyKind::Error {
                message,
                kind,
                code,
            } => Err(error_reply(api, reply.status, &message, kind, code)),
            ReplyKind::Frames(frames) => {
                let mut events: Vec<SseEvent> = frames.into_iter().map(SseEvent::raw).collect();
                if shared.settings.shape.done {
                    events.push(SseEvent::done());
                }
                Err(sse_response(
                    shared,
                    reply.status,
                    events,
                    stream_fault.take(),
                ))
            }
            ReplyKind::Text(text) => Ok(Answer::text(text)),
            ReplyKind::ToolCalls { content, calls } => Ok(Answer {
                text: content,
                tool_calls: calls,
            }),
            // `resolve` has already picked one element of a sequence.
            ReplyKind::Echo | ReplyKind::Sequence(_) => Ok(Answer::text(wire::echo_text(
                &model,
                &upload.as_ref().map_or_else(
                    || wire::echo_source(api, json.as_ref()),
                    |u| u.heard.clone(),
                ),
            ))),
        };
        let mut response = match answer {
            Err(response) => response,
            Ok(answer) if api == Api::Speech => {
                let voice = json
                    .as_ref()
                    .and_then(|b| b.get("voice"))
                    .and_then(Value::as_str)
                    .unwrap_or("alloy");
                audio_response(wire::speech(&answer.text, voice))
            }
            Ok(answer) if upload.as_ref().is_some_and(|u| u.text_format) => {
                let mut response = Response::new(MockBody::full(answer.text));
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/plain; charset=utf-8"),
                );
                response
            }
            Ok(answer) if api == Api::Transcription => json_response(
                reply.status,
                &wire::transcription(
                    &answer.text,
                    upload.as_ref().and_then(|u| u.language.as_deref()),
                ),
            ),
            Ok(answer) if stream && api.streams() => {
                let mut events = wire::stream_events(
                    api,
                    ids,
                    &answer,
                    json.as_ref(),
                    shared.settings.shape.usage,
                );
                if api.sends_done() && shared.settings.shape.done {
                    events.push(SseEvent::done());
                }
                sse_response(shared, reply.status, events, stream_fault.take())
            }
            Ok(answer) => json_response(
                reply.status,
                &wire::complete(api, ids, &answer, json.as_ref(), &endpoint),
            ),
        };
        *response.status_mut() = reply.status;
        for (name, value) in &reply.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                response.headers_mut().append(name, value);
            }
        }
        response.map(|b| b.with_guard(permit).with_guard(shared.completion_guard()))
    }
}

/// A WAV answer (speech).
fn audio_response(wav: Vec<u8>) -> Response<MockBody> {
    let mut response = Response::new(MockBody::full(wav));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("audio/wav"));
    response
}

/// A scripted error: the OpenAI-style envelope, or Anthropic's error body on
/// `/v1/messages`.
fn error_reply(
    api: Api,
    status: StatusCode,
    message: &str,
    kind: Option<String>,
    code: Option<String>,
) -> Response<MockBody> {
    let body = if api == Api::Messages {
        let mut body = wire::anthropic_error_body(status, message);
        if let Some(kind) = kind {
            body["error"]["type"] = Value::String(kind);
        }
        body
    } else {
        envelope(
            message,
            kind.as_deref().unwrap_or(error_type_for(status)),
            code.as_deref().unwrap_or("scripted_error"),
        )
    };
    json_response(status, &body)
}

fn status_response(
    status: StatusCode,
    body: Option<Value>,
    headers: &[(String, String)],
) -> Response<MockBody> {
    let mut response = match body {
        Some(Value::String(text)) => {
            let mut r = Response::new(MockBody::full(text));
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            r
        }
        Some(value) => json_response(status, &value),
        None => {
            let reason = status.canonical_reason().unwrap_or("error");
            json_response(
                status,
                &envelope(
                    &format!("mockswap injected fault: {reason}"),
                    error_type_for(status),
                    "injected_fault",
                ),
            )
        }
    };
    *response.status_mut() = status;
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
    response
}

/// Applies a stream fault (or the mid-stream crash) to the events and plays them.
fn sse_response(
    shared: &Shared,
    status: StatusCode,
    mut events: Vec<SseEvent>,
    fault: Option<Fault>,
) -> Response<MockBody> {
    let mut end = StreamEnd::Finish;
    match fault {
        Some(Fault::TruncateAfter(n)) => events.truncate(n),
        Some(Fault::DisconnectAfter(n)) => {
            events.truncate(n);
            end = StreamEnd::Abort;
        }
        Some(Fault::StallAfter(n)) => {
            events.truncate(n);
            end = StreamEnd::Stall;
        }
        Some(Fault::ErrorFrame { after, message }) => {
            events.truncate(after);
            let error = envelope(&message, "server_error", "upstream_error");
            events.push(SseEvent::raw(error.to_string()));
            events.push(SseEvent::done());
        }
        Some(Fault::MalformedFrame { at }) => {
            let at = at.min(events.len());
            events.insert(
                at,
                SseEvent::raw("{\"choices\": [{\"delta\": {\"content\": ".to_owned()),
            );
        }
        _ => {}
    }
    if shared.life.take_mid_stream_crash() {
        events.truncate(FRAMES_BEFORE_CRASH);
        end = StreamEnd::Crash;
    }
    let life = shared.life.clone();
    let steps = plan(&events, &shared.settings.shape);
    let body = play(
        steps,
        end,
        shared.life.shutdown.clone(),
        Box::new(move || life.crash(Crash::MidStream)),
    );
    let mut response = Response::new(MockBody::stream(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
