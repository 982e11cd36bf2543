//! Routing: which paths exist, which methods they take, and what is journaled.

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use serde_json::json;

use super::extract::{query_param, recorded, upstream_target};
use super::respond::{health, models, text};
use super::shared::{ConnControl, Shared};
use super::{admin, model_request, sleep, websocket};
use crate::body::MockBody;
use crate::envelope::{ApiError, json_response};

/// Paths that carry a model and are answered like a model server (POST only).
const MODEL_PATHS: &[&str] = &[
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/embeddings",
    "/v1/messages",
    "/v1/rerank",
    "/v1/reranking",
    "/v1/responses",
    "/v1/audio/speech",
    "/v1/audio/transcriptions",
    "/v1/images/generations",
    "/v1/images/edits",
    "/completion",
    "/infill",
    "/rerank",
    "/reranking",
];

/// Answers one request.
pub(crate) async fn handle(
    shared: Arc<Shared>,
    conn: ConnControl,
    request: Request<Incoming>,
) -> Response<MockBody> {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    if let Some(answer) = sleep::status(&shared, &path) {
        return answer;
    }
    if path == "/__mockswap" || path.starts_with("/__mockswap/") {
        return match read_body(&shared, request, false).await {
            Ok((parts, body)) => match admin::wait(&shared, &parts).await {
                Ok(()) => admin::handle(&shared, &parts, &body),
                Err(err) => err.into_response(),
            },
            Err(err) => err.into_response(),
        };
    }
    if websocket::is_upgrade(&request) {
        return websocket::handle(&shared, request);
    }
    if path == "/health" {
        if shared.settings.journal_health {
            let (parts, body) = match read_body(&shared, request, true).await {
                Ok(read) => read,
                Err(err) => return err.into_response(),
            };
            record_plain(&shared, &parts, &body);
        }
        return only(&method, &path, &[Method::GET, Method::HEAD], "GET, HEAD")
            .map_or_else(ApiError::into_response, |()| health(&shared));
    }
    let upstream = upstream_target(&path);
    let (parts, body) = match read_body(&shared, request, true).await {
        Ok(read) => read,
        // A body over the limit was journaled (without its body) by read_body.
        Err(err) => return err.into_response(),
    };
    if let Some((model, rest)) = upstream {
        return model_request::handle(&shared, &conn, parts, body, Some((model, rest))).await;
    }
    // The voices of a speech model: GET (as kokoro and the playground ask) or POST.
    if path == "/v1/audio/voices" {
        if method != Method::GET && method != Method::POST {
            record_plain(&shared, &parts, &body);
            return method_not_allowed(&method, &path, "GET, POST");
        }
        return model_request::handle(&shared, &conn, parts, body, None).await;
    }
    if MODEL_PATHS.contains(&path.as_str()) {
        if method != Method::POST {
            record_plain(&shared, &parts, &body);
            return method_not_allowed(&method, &path, "POST");
        }
        return model_request::handle(&shared, &conn, parts, body, None).await;
    }
    record_plain(&shared, &parts, &body);
    if let Some(answer) = sleep::handle(&shared, &method, &path, parts.uri.query()).await {
        return answer;
    }
    match path.as_str() {
        "/v1/models" | "/models" => only(&method, &path, &[Method::GET], "GET")
            .map_or_else(ApiError::into_response, |()| models(&shared)),
        "/api/queue" => match only(&method, &path, &[Method::GET], "GET") {
            Ok(()) => queue(&shared).await,
            Err(err) => err.into_response(),
        },
        "/running" => only(&method, &path, &[Method::GET], "GET")
            .map_or_else(ApiError::into_response, |()| running(&shared)),
        "/unload" => {
            only(&method, &path, &[Method::GET], "GET").map_or_else(ApiError::into_response, |()| {
                shared.state.loaded().clear();
                text(StatusCode::OK, "OK")
            })
        }
        "/api/models/unload" => only(&method, &path, &[Method::POST], "POST").map_or_else(
            ApiError::into_response,
            |()| {
                shared.state.loaded().clear();
                json_response(StatusCode::OK, &json!({"msg": "ok"}))
            },
        ),
        _ => match path.strip_prefix("/api/models/unload/") {
            Some(model) if !model.is_empty() => {
                match only(&method, &path, &[Method::POST], "POST") {
                    Ok(()) => unload_one(&shared, model),
                    Err(err) => err.into_response(),
                }
            }
            _ => ApiError::NotFound { path }.into_response(),
        },
    }
}

fn only(
    method: &Method,
    path: &str,
    allowed: &[Method],
    allow: &'static str,
) -> Result<(), ApiError> {
    if allowed.contains(method) {
        Ok(())
    } else {
        Err(ApiError::MethodNotAllowed {
            method: method.clone(),
            path: path.to_owned(),
            allow,
        })
    }
}

fn method_not_allowed(method: &Method, path: &str, allow: &'static str) -> Response<MockBody> {
    ApiError::MethodNotAllowed {
        method: method.clone(),
        path: path.to_owned(),
        allow,
    }
    .into_response()
}

/// Reads the whole body, up to the limit. With `journal`, a body over the limit is
/// journaled (without its body) so a test still sees the request arrived.
async fn read_body(
    shared: &Shared,
    request: Request<Incoming>,
    journal: bool,
) -> Result<(http::request::Parts, Bytes), ApiError> {
    let (parts, body) = request.into_parts();
    let limit = shared.settings.body_limit;
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok((parts, collected.to_bytes())),
        Err(err) if err.is::<http_body_util::LengthLimitError>() => {
            if journal {
                record_plain(shared, &parts, &Bytes::new());
            }
            Err(ApiError::BodyTooLarge { limit })
        }
        Err(err) => Err(ApiError::BodyRead {
            reason: err.to_string(),
        }),
    }
}

/// Journals a request that is not a model request (no gate, no faults).
fn record_plain(shared: &Shared, parts: &http::request::Parts, body: &Bytes) -> u64 {
    let json = serde_json::from_slice(body).ok();
    let model = parts.uri.query().and_then(|q| query_param(q, "model"));
    let entry = recorded(shared.started.elapsed(), parts, body, json, model, false);
    shared.state.journal.record(entry)
}

/// `GET /api/queue` in the server's shape: the requests held at the gate, in the
/// order they will be released. The mock has no config floors, so the effective
/// priority is the requested one.
async fn queue(shared: &Shared) -> Response<MockBody> {
    let held = shared.state.gate.waiting().await;
    let journal = shared.state.journal.requests();
    let now = shared.started.elapsed();
    let queue: Vec<serde_json::Value> = held
        .iter()
        .enumerate()
        .map(|(i, (seq, priority))| {
            let entry = journal.iter().find(|r| r.seq == *seq);
            let waited = entry.map_or(std::time::Duration::ZERO, |r| {
                now.saturating_sub(r.received)
            });
            json!({
                "model": entry.and_then(|r| r.model.clone()),
                "requested_priority": priority,
                "effective_priority": priority,
                "position": i + 1,
                "waited_ms": u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
                "seq": seq,
            })
        })
        .collect();
    json_response(StatusCode::OK, &json!({"queue": queue}))
}

fn running(shared: &Shared) -> Response<MockBody> {
    let running: Vec<serde_json::Value> = shared
        .state
        .loaded()
        .iter()
        .map(|model| json!({"model": model, "state": "ready"}))
        .collect();
    json_response(StatusCode::OK, &json!({"running": running}))
}

fn unload_one(shared: &Shared, model: &str) -> Response<MockBody> {
    if let Some(models) = &shared.settings.models
        && !models.iter().any(|m| m == model)
    {
        return ApiError::ModelNotFound {
            model: model.to_owned(),
        }
        .into_response();
    }
    shared.state.loaded().remove(model);
    text(StatusCode::OK, "OK")
}
