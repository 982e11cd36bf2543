//! Requests that go to a model: the body/query-model endpoints and
//! `/upstream/<model>/<path>`.
//!
//! Both paths parse `X-Priority`, submit to the router, wait for the grant (or
//! stream the loading state while waiting), then forward through the proxy with
//! the lease moved into the response body.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::{IntoResponse, Redirect, Response};
use bytes::Bytes;
use http::{HeaderMap, Method, header};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio_util::task::task_tracker::TaskTrackerToken;
use tracing::Instrument;

use super::error::ApiError;
use super::extract::RequestModel;
use super::loading::{LoadingTarget, Progress, loading_response};
use super::request_id::REQUEST_ID_HEADER;
use super::state::{AppState, ModelEntry};
use super::upstream_path::split_upstream_path;
use crate::metrics::RequestOutcome;
use crate::priority::HeaderPriority;
use crate::proxy::{Outbound, OutboundBody, SendError};
use crate::router::{Lease, ModelState, RouteError, Submit, Ticket, WaitStatus};
use crate::trust::KeyIndex;
use crate::upstream::ProcessState;

/// How long a crashed upstream may take to be noticed by the supervisor, and
/// then by the router, before a refused request is retried.
const EXIT_NOTICE: Duration = Duration::from_secs(1);

/// The path prefix of the loading-state-capable endpoint.
const CHAT_COMPLETIONS: &str = "/v1/chat/completions";

/// A model-dispatched endpoint: the model comes from the body, form or query.
pub(crate) async fn model_endpoint(State(state): State<AppState>, request: Request) -> Response {
    let mut outcome = Some(track_outcome(&state, request.headers()));
    let key = request.extensions().get::<KeyIndex>().copied();
    let result = dispatch_by_body(state, request, key, &mut outcome).await;
    settle_early(outcome, &result);
    match result {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn dispatch_by_body(
    state: AppState,
    request: Request,
    key: Option<KeyIndex>,
    outcome: &mut Option<RequestOutcome>,
) -> Result<Response, ApiError> {
    refuse_when_draining(&state)?;
    let client_ip = client_ip(&request);
    let (parts, body) = request.into_parts();
    let bytes = read_body(&parts.headers, body, state.inner.max_body_bytes).await?;
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let found = RequestModel::extract(content_type, parts.uri.query(), &bytes)?;
    let model = lookup(&state, &found.name)?;
    let bytes = match &model.use_model_name {
        Some(name) => found.rewrite(bytes, name),
        None => bytes,
    };
    // Body filters see the name the client asked for: `setParamsByID` keys on it.
    let bytes = if found.json_body {
        model
            .filters
            .apply(&found.name, bytes)
            .map_err(|source| ApiError::FilterFailed {
                model: model.id.clone(),
                source,
            })?
    } else {
        bytes
    };
    let path = forward_path(parts.uri.path());
    let loading = model.send_loading_state && found.stream && path.starts_with(CHAT_COMPLETIONS);
    let path_and_query = with_query(path, parts.uri.query());
    // Credentials were checked and removed by the auth layer.
    let headers = parts.headers;
    let outbound = Outbound {
        method: parts.method,
        path_and_query,
        headers,
        body: OutboundBody::Buffered(bytes),
        client_ip,
        body_limit: state.inner.max_body_bytes,
    };
    serve(state, model, outbound, loading, key, outcome).await
}

/// `/upstream/<model>/<path>`: the longest model prefix of the path; the body
/// streams through unread.
pub(crate) async fn upstream_endpoint(State(state): State<AppState>, request: Request) -> Response {
    let mut outcome = Some(track_outcome(&state, request.headers()));
    let key = request.extensions().get::<KeyIndex>().copied();
    let result = dispatch_by_path(state, request, key, &mut outcome).await;
    settle_early(outcome, &result);
    match result {
        Ok(response) => response,
        Err(error) => error.into_response(),
    }
}

async fn dispatch_by_path(
    state: AppState,
    request: Request,
    key: Option<KeyIndex>,
    outcome: &mut Option<RequestOutcome>,
) -> Result<Response, ApiError> {
    refuse_when_draining(&state)?;
    let client_ip = client_ip(&request);
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    let tail = path.strip_prefix("/upstream/").unwrap_or_default();
    let router = &state.inner.router;
    let target = split_upstream_path(tail, |name| router.resolve(name)).ok_or_else(|| {
        ApiError::ModelNotFound {
            model: tail.split('/').next().unwrap_or_default().to_owned(),
        }
    })?;
    if target.rest.is_empty() {
        // `/upstream/<model>` → `/upstream/<model>/`, like a directory.
        let location = with_query(&format!("/upstream/{}/", target.prefix), parts.uri.query());
        let redirect = Redirect::permanent(&location).into_response();
        return Ok(with_status_for_method(redirect, &parts.method));
    }
    let model = lookup(&state, &target.model)?;
    let limit = state.inner.max_body_bytes;
    if declared_length(&parts.headers).is_some_and(|len| len > limit) {
        return Err(ApiError::BodyTooLarge { limit });
    }
    let stream = parts.uri.query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "stream" && v == "true")
    });
    let loading = model.send_loading_state && stream && target.rest.starts_with(CHAT_COMPLETIONS);
    let path_and_query = with_query(target.rest, parts.uri.query());
    // Credentials were checked and removed by the auth layer.
    let headers = parts.headers;
    let outbound = Outbound {
        method: parts.method,
        path_and_query,
        headers,
        body: OutboundBody::Streaming(Body::new(Limited::new(body, limit))),
        client_ip,
        body_limit: state.inner.max_body_bytes,
    };
    serve(state, model, outbound, loading, key, outcome).await
}

/// Submits the request, waits for its turn and forwards it.
async fn serve(
    state: AppState,
    model: Arc<ModelEntry>,
    outbound: Outbound,
    loading: bool,
    key: Option<KeyIndex>,
    outcome: &mut Option<RequestOutcome>,
) -> Result<Response, ApiError> {
    // Counted until the response body ends, so a drain can wait for it.
    let token = state.track();
    let priority = HeaderPriority::from_headers(&outbound.headers);
    if priority.is_malformed() {
        tracing::debug!(model = %model.id, ?priority, "malformed X-Priority served at 0");
    }
    let mut outcome = outcome
        .take()
        .unwrap_or_else(|| state.inner.metrics.request(priority.value()));
    if let Err(error) = wait_for_gate(&state).await {
        outcome.rejected(error.kind().code);
        return Err(error);
    }
    let requested = priority.value();
    let capped = state.inner.trust.cap(requested, key);
    if capped != requested {
        state.inner.metrics.capped();
        tracing::debug!(model = %model.id, requested, capped, "X-Priority capped");
    }
    let submitted = state
        .inner
        .router
        .submit_capped(
            Submit {
                model: model.id.clone(),
                priority: capped,
            },
            requested,
        )
        .await;
    let ticket = match submitted {
        Ok(ticket) => ticket,
        Err(error) => {
            let error = route_error(error);
            outcome.rejected(error.kind().code);
            return Err(error);
        }
    };
    outcome.set_priority(ticket.effective_priority());
    tracing::Span::current().record("seq", ticket.id().0);
    let status = ticket.status();
    let granted_at_once = matches!(*status.borrow(), WaitStatus::Granted);
    let priority = (requested, capped);
    if loading && !granted_at_once {
        let target = LoadingTarget {
            model: model.id.clone(),
            request_id: outbound
                .headers
                .get(REQUEST_ID_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned(),
        };
        let work = async move {
            let result = grant_and_forward(&state, &model, outbound, ticket, token, priority).await;
            record(outcome, &result);
            result
        }
        .in_current_span();
        return Ok(loading_response(target, status, describe, work));
    }
    let result = grant_and_forward(&state, &model, outbound, ticket, token, priority).await;
    record(outcome, &result);
    result
}

/// Starts the outcome record of a model request, counting a bad `X-Priority`.
fn track_outcome(state: &AppState, headers: &HeaderMap) -> RequestOutcome {
    let priority = HeaderPriority::from_headers(headers);
    state.inner.metrics.header(priority);
    state.inner.metrics.request(priority.value())
}

/// A request that ended before it reached the router: refused (bad input,
/// unknown model), or redirected (not a model request after all).
fn settle_early(outcome: Option<RequestOutcome>, result: &Result<Response, ApiError>) {
    if let Some(outcome) = outcome {
        match result {
            Ok(_) => outcome.discard(),
            Err(error) => outcome.rejected(error.kind().code),
        }
    }
}

/// Records how a request that was admitted ended.
fn record(outcome: RequestOutcome, result: &Result<Response, ApiError>) {
    match result {
        Ok(_) => outcome.served(),
        Err(error) => outcome.error(error.kind().code),
    }
}

/// Waits for the grant and forwards. When the upstream turns out to be gone
/// before the request reached it (it crashed and the router had not heard yet),
/// the request is scheduled once more, which starts the model again.
async fn grant_and_forward(
    state: &AppState,
    model: &ModelEntry,
    outbound: Outbound,
    ticket: Ticket,
    token: TaskTrackerToken,
    priority: (i32, i32),
) -> Result<Response, ApiError> {
    let lease = wait_for_grant(state, ticket).await?;
    // Boxed so that a request waiting for its grant (there may be thousands)
    // does not carry the larger state of the forwarding stage (~1.4 KB).
    Box::pin(forward_granted(
        state, model, outbound, lease, token, priority,
    ))
    .await
}

/// Forwards a granted request; see [`grant_and_forward`]. `priority` is
/// (requested, capped), for the one resubmission.
async fn forward_granted(
    state: &AppState,
    model: &ModelEntry,
    outbound: Outbound,
    lease: Lease,
    token: TaskTrackerToken,
    (requested, capped): (i32, i32),
) -> Result<Response, ApiError> {
    let proxy = &state.inner.proxy;
    match proxy
        .send(&model.id, &model.proxy, outbound, (lease, token))
        .await
    {
        Ok(response) => Ok(response),
        Err(SendError {
            unsent: Some((outbound, (lease, token))),
            error,
        }) => {
            drop(lease);
            if !upstream_exited(state, &model.id).await {
                return Err(error);
            }
            tracing::info!(model = %model.id, "the upstream exited before the request reached it; scheduling it again");
            let ticket = state
                .inner
                .router
                .submit_capped(
                    Submit {
                        model: model.id.clone(),
                        priority: capped,
                    },
                    requested,
                )
                .await
                .map_err(route_error)?;
            let lease = wait_for_grant(state, ticket).await?;
            proxy
                .forward(&model.id, &model.proxy, outbound, (lease, token))
                .await
        }
        Err(failed) => Err(failed.error),
    }
}

/// True when `model`'s process has exited (so a refused connection means a
/// crash, not a misconfigured upstream). Also waits, briefly, until the router
/// has processed that exit, so a new submit starts the model instead of being
/// granted the dead process.
async fn upstream_exited(state: &AppState, model: &str) -> bool {
    let Some(mut status) = state
        .inner
        .supervisor
        .as_ref()
        .and_then(|s| s.watch_status(model))
    else {
        return false;
    };
    // The refusal can arrive before the supervisor has reaped the process.
    let exited = tokio::time::timeout(
        EXIT_NOTICE,
        status.wait_for(|s| s.state != ProcessState::Ready),
    )
    .await
    .is_ok_and(|changed| changed.is_ok());
    if !exited {
        return false;
    }
    let deadline = tokio::time::Instant::now() + EXIT_NOTICE;
    while tokio::time::Instant::now() < deadline {
        let ready = state
            .inner
            .router
            .running()
            .await
            .iter()
            .any(|m| m.model == model && m.state == ModelState::Ready);
        if !ready {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    true
}

/// After a reload, waits until the previous configuration's upstreams are gone.
async fn wait_for_gate(state: &AppState) -> Result<(), ApiError> {
    let Some(gate) = &state.inner.gate else {
        return Ok(());
    };
    let mut gate = gate.clone();
    tokio::select! {
        biased;
        () = state.inner.draining.cancelled() => Err(ApiError::ShuttingDown),
        opened = gate.wait_for(|open| *open) => opened.map(drop).map_err(|_| ApiError::ShuttingDown),
    }
}

/// Waits for the grant; a server that starts draining answers 503 instead.
/// Dropping this future (the client went away) drops the ticket, which
/// withdraws the request before it can cause a model load.
async fn wait_for_grant(state: &AppState, ticket: Ticket) -> Result<Lease, ApiError> {
    let admitted = tokio::time::Instant::now();
    let (model, priority) = (ticket.model().to_owned(), ticket.effective_priority());
    let lease = tokio::select! {
        biased;
        () = state.inner.draining.cancelled() => Err(ApiError::ShuttingDown),
        granted = ticket.granted() => granted.map_err(route_error),
    }?;
    state
        .inner
        .metrics
        .granted(&model, priority, admitted.elapsed());
    Ok(lease)
}

fn describe(status: &WaitStatus) -> Option<Progress> {
    match status {
        WaitStatus::Queued { position } => Some(Progress::Queued(*position)),
        WaitStatus::Starting => Some(Progress::Loading),
        _ => None,
    }
}

/// Maps a scheduling outcome to its HTTP error (docs/ERRORS.md).
pub(crate) fn route_error(error: RouteError) -> ApiError {
    match error {
        RouteError::UnknownModel { model } => ApiError::ModelNotFound { model },
        RouteError::ConcurrencyLimit { model, retry_after } => {
            ApiError::ConcurrencyLimit { model, retry_after }
        }
        RouteError::PriorityNotSupported { priority } => {
            ApiError::PriorityNotSupported { priority }
        }
        RouteError::QueueFull {
            model,
            waiting,
            retry_after,
        } => ApiError::QueueFull {
            model,
            waiting,
            retry_after,
        },
        RouteError::StartFailed(source) => ApiError::StartFailed {
            model: launch_model(&source),
            source,
        },
        RouteError::Unloaded { model } => ApiError::ModelUnloaded { model },
        RouteError::ShuttingDown => ApiError::ShuttingDown,
        #[allow(unreachable_patterns)]
        _ => ApiError::Internal {
            what: "unexpected scheduling outcome",
        },
    }
}

fn launch_model(error: &crate::router::LaunchError) -> String {
    use crate::router::LaunchError;
    match error {
        LaunchError::UnknownModel { model }
        | LaunchError::SpawnFailed { model, .. }
        | LaunchError::ExitedDuringStart { model, .. }
        | LaunchError::HealthCheckTimeout { model, .. }
        | LaunchError::Aborted { model } => model.clone(),
        #[allow(unreachable_patterns)]
        _ => String::new(),
    }
}

fn refuse_when_draining(state: &AppState) -> Result<(), ApiError> {
    if state.inner.draining.is_cancelled() {
        Err(ApiError::ShuttingDown)
    } else {
        Ok(())
    }
}

fn lookup(state: &AppState, name: &str) -> Result<Arc<ModelEntry>, ApiError> {
    state
        .inner
        .router
        .resolve(name)
        .and_then(|id| state.inner.models.get(&id).cloned())
        .ok_or_else(|| ApiError::ModelNotFound {
            model: name.to_owned(),
        })
}

/// Reads the whole body, refusing more than `limit` bytes.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    if declared_length(headers).is_some_and(|len| len > limit) {
        return Err(ApiError::BodyTooLarge { limit });
    }
    match Limited::new(body, limit).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
            Err(ApiError::BodyTooLarge { limit })
        }
        Err(error) => {
            tracing::debug!(%error, "reading the request body failed");
            Err(ApiError::Internal {
                what: "the request body could not be read",
            })
        }
    }
}

fn declared_length(headers: &HeaderMap) -> Option<usize> {
    headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
}

fn client_ip(request: &Request) -> Option<std::net::IpAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
}

/// The path sent upstream: llama-swap's versionless `/v/...` aliases and the
/// `/audioapi` prefix are stripped.
fn forward_path(path: &str) -> &str {
    if let Some(rest) = path.strip_prefix("/v/") {
        // "/v/chat/completions" → "/chat/completions"
        &path[path.len() - rest.len() - 1..]
    } else if let Some(rest) = path.strip_prefix("/audioapi") {
        rest
    } else {
        path
    }
}

fn with_query(path: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    }
}

/// 301 for GET/HEAD, 308 for other methods (so the method and body are kept).
fn with_status_for_method(mut response: Response, method: &Method) -> Response {
    *response.status_mut() = if matches!(*method, Method::GET | Method::HEAD) {
        http::StatusCode::MOVED_PERMANENTLY
    } else {
        http::StatusCode::PERMANENT_REDIRECT
    };
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versionless_and_audioapi_prefixes_are_stripped() {
        assert_eq!(forward_path("/v/chat/completions"), "/chat/completions");
        assert_eq!(forward_path("/audioapi/v1/tasks/run"), "/v1/tasks/run");
        assert_eq!(forward_path("/v1/chat/completions"), "/v1/chat/completions");
    }
}
