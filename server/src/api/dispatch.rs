//! Requests that go to a model: the body/query-model endpoints and
//! `/upstream/<model>/<path>`.
//!
//! Both paths parse `X-Priority` once into a [`Priority`] (trust caps applied),
//! submit to the router, wait for the grant (or stream the loading state while
//! waiting), then forward through the proxy with the lease moved into the
//! response body.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::response::{IntoResponse, Redirect, Response};
use http::{Method, header};
use hyper::upgrade::OnUpgrade;
use percent_encoding::percent_decode_str;
use tokio_util::task::task_tracker::TaskTrackerToken;
use tracing::Instrument;

use super::body::{GuardedBody, declared_length, read_body};
use super::error::{ApiError, NotLoadedReason};
use super::extract::RequestModel;
use super::loading::{LoadingTarget, Progress, loading_response};
use super::names::{hold_until_body_ends, rename, rename_upstream};
use super::peer::{self, BodyRequest, PeerForward};
use super::request_id::REQUEST_ID_HEADER;
use super::state::{AppState, ModelEntry};
use super::upstream_path::split_upstream_path;
use super::websockets::{self, take_websocket};
use crate::activity::Tracked;
use crate::metrics::RequestOutcome;
use crate::names::Reservation;
use crate::peers::{PeerRoute, qualified_name};
use crate::priority::{HeaderPriority, KeyIndex, Priority};
use crate::proxy::{Outbound, OutboundBody, SendError};
use crate::router::{Lease, ModelState, Submit, Ticket, WaitStatus};

/// The path prefix of the loading-state-capable endpoint.
const CHAT_COMPLETIONS: &str = "/v1/chat/completions";

/// A model-dispatched endpoint: the model comes from the body, form or query.
pub(crate) async fn model_endpoint(State(state): State<AppState>, request: Request) -> Response {
    let call = Call::begin(&state, &request);
    let prepared = by_body(&state, request).await;
    call.run(state, prepared).await
}

/// `/upstream/<model>/<path>`: the longest model prefix of the path; the body
/// streams through unread.
pub(crate) async fn upstream_endpoint(State(state): State<AppState>, request: Request) -> Response {
    let call = Call::begin(&state, &request);
    let prepared = by_path(&state, request).await;
    call.run(state, prepared).await
}

/// What a model endpoint found in a request before scheduling it.
pub(super) enum Prepared {
    /// A request for a local model, ready to be sent once granted (boxed: it
    /// moves through several futures and may wait long).
    Forward(Box<Forward>),
    /// A request for a peer model, forwarded without scheduling.
    Peer(Box<PeerForward>),
    /// Not a model request after all (a redirect): answered as is.
    Answer(Response),
}

/// A request for a local model, ready to be sent once granted.
pub(super) struct Forward {
    model: Arc<ModelEntry>,
    outbound: Outbound,
    /// Stream the loading state while it waits.
    loading: bool,
    /// A selector's hold on the chosen target, kept until the response ends.
    hold: Option<Reservation>,
    /// The selector that chose the model, for the activity record.
    selector: Option<String>,
    /// The client's side of a websocket handshake.
    upgrade: Option<OnUpgrade>,
}

impl Forward {
    /// Moves the request out of its box, freeing the box.
    fn unboxed(forward: Box<Self>) -> Self {
        *forward
    }
}

async fn by_body(state: &AppState, request: Request) -> Result<Prepared, ApiError> {
    refuse_when_draining(state)?;
    let client_ip = client_ip(&request);
    let (mut parts, body) = request.into_parts();
    let bytes = read_body(&parts.headers, body, &state.inner.body_limits).await?;
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let found = RequestModel::extract(content_type, parts.uri.query(), &bytes)?;
    let upgrade = take_websocket(&mut parts);
    let renamed = rename(state, &found.name).await?;
    let Some(model) = local_model(state, &renamed.name) else {
        let route =
            state
                .inner
                .peers
                .resolve(&renamed.name)
                .ok_or_else(|| ApiError::ModelNotFound {
                    model: renamed.name.clone(),
                })?;
        let path = forward_path(parts.uri.path()).to_owned();
        let request = BodyRequest {
            parts,
            found,
            bytes,
            renamed,
            path,
            upgrade,
        };
        // Boxed: the rare path's state would otherwise enlarge every request's.
        let forward = Box::pin(peer::by_body(state, route, request)).await?;
        return Ok(Prepared::Peer(Box::new(forward)));
    };
    // A pinned or selected name goes upstream in place of the client's.
    let upstream_name = model
        .use_model_name
        .as_deref()
        .or(renamed.changed.then_some(renamed.name.as_str()));
    let bytes = match upstream_name {
        Some(name) => found.rewrite(bytes, name),
        None => bytes,
    };
    // Body filters see the name asked for (after profiles and selectors):
    // `setParamsByID` keys on it.
    let bytes = if found.json_body {
        model
            .filters
            .apply(&renamed.name, bytes)
            .map_err(|source| ApiError::FilterFailed {
                model: model.id.clone(),
                source,
            })?
    } else {
        bytes
    };
    let path = forward_path(parts.uri.path());
    let loading = model.send_loading_state
        && found.stream
        && upgrade.is_none()
        && path.starts_with(CHAT_COMPLETIONS);
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
        websocket: upgrade.is_some(),
        set_headers: http::HeaderMap::new(),
    };
    Ok(Prepared::Forward(Box::new(Forward {
        model,
        outbound,
        loading,
        hold: renamed.hold,
        selector: renamed.selector,
        upgrade,
    })))
}

async fn by_path(state: &AppState, request: Request) -> Result<Prepared, ApiError> {
    refuse_when_draining(state)?;
    let client_ip = client_ip(&request);
    let (parts, body) = request.into_parts();
    let (model, rest) = {
        let path = parts.uri.path();
        let tail = rename_upstream(state, path.strip_prefix("/upstream/").unwrap_or_default())?;
        let tail = tail.as_ref();
        let router = &state.inner.router;
        let peers = &state.inner.peers;
        let target = split_upstream_path(tail, |name| {
            router
                .resolve(name)
                .or_else(|| peers.resolve(name).map(|route| route_name(state, route)))
        })
        .ok_or_else(|| ApiError::ModelNotFound {
            model: tail.split('/').next().unwrap_or_default().to_owned(),
        })?;
        if target.rest.is_empty() {
            // `/upstream/<model>` → `/upstream/<model>/`, like a directory.
            let location = with_query(&format!("/upstream/{}/", target.prefix), parts.uri.query());
            let redirect = Redirect::permanent(&location).into_response();
            return Ok(Prepared::Answer(with_status_for_method(
                redirect,
                &parts.method,
            )));
        }
        let Some(model) = local_model(state, &target.model) else {
            let route = peers
                .resolve(&target.model)
                .ok_or_else(|| ApiError::ModelNotFound {
                    model: target.model.clone(),
                })?;
            let rest = target.rest.to_owned();
            let forward = Box::pin(peer::by_path(state, route, parts, body, &rest)).await?;
            return Ok(Prepared::Peer(Box::new(forward)));
        };
        // Static assets a browser asks for must not start (or swap in) a model.
        if let Ok(rest) = percent_decode_str(target.rest).decode_utf8()
            && state.inner.ignore_paths.matches(&rest)
            && !model_ready(state, &model.id).await
        {
            return Err(ApiError::NotLoaded {
                model: model.id.clone(),
                why: NotLoadedReason::IgnoredPath,
            });
        }
        (model, target.rest.to_owned())
    };
    passthrough(state, parts, body, model, &rest, client_ip)
}

/// A request forwarded with its path after the model's prefix (`rest`, still
/// percent-encoded as the client sent it) and its body streamed through
/// unread: `/upstream/<model>/...` and `/comfyui/...`.
pub(super) fn passthrough(
    state: &AppState,
    mut parts: http::request::Parts,
    body: Body,
    model: Arc<ModelEntry>,
    rest: &str,
    client_ip: Option<std::net::IpAddr>,
) -> Result<Prepared, ApiError> {
    let limits = &state.inner.body_limits;
    let limit = limits.max_bytes;
    if declared_length(&parts.headers).is_some_and(|len| len > limit) {
        return Err(ApiError::BodyTooLarge { limit });
    }
    let upgrade = take_websocket(&mut parts);
    let stream = parts.uri.query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "stream" && v == "true")
    });
    let loading = model.send_loading_state
        && stream
        && upgrade.is_none()
        && rest.starts_with(CHAT_COMPLETIONS);
    let path_and_query = with_query(rest, parts.uri.query());
    // Credentials were checked and removed by the auth layer.
    let headers = parts.headers;
    let outbound = Outbound {
        method: parts.method,
        path_and_query,
        headers,
        body: OutboundBody::Streaming(Body::new(GuardedBody::new(body, limits))),
        client_ip,
        body_limit: state.inner.max_body_bytes,
        websocket: upgrade.is_some(),
        set_headers: http::HeaderMap::new(),
    };
    Ok(Prepared::Forward(Box::new(Forward {
        model,
        outbound,
        loading,
        hold: None,
        selector: None,
        upgrade,
    })))
}

/// One model request from its arrival: its priority, parsed once, and the
/// record of how it ends.
pub(super) struct Call {
    priority: Priority,
    outcome: RequestOutcome,
}

impl Call {
    /// Parses `X-Priority` (counting a bad one), applies the trust caps of the
    /// API key the auth layer found, and starts the outcome record.
    pub(super) fn begin(state: &AppState, request: &Request) -> Self {
        let header = HeaderPriority::from_headers(request.headers());
        if header.is_malformed() {
            tracing::debug!(?header, "malformed X-Priority served at 0");
        }
        state.inner.metrics.header(header);
        let key = request.extensions().get::<KeyIndex>().copied();
        Self {
            priority: state.inner.trust.cap(header.value(), key),
            outcome: state.inner.metrics.request(header.value()),
        }
    }

    /// Serves what the endpoint prepared; a request refused before scheduling
    /// (bad input, unknown model) or answered without a model is recorded so.
    pub(super) async fn run(
        self,
        state: AppState,
        prepared: Result<Prepared, ApiError>,
    ) -> Response {
        match prepared {
            Ok(Prepared::Forward(mut forward)) => {
                let hold = forward.hold.take();
                let upgrade = forward.upgrade.take();
                let model = Arc::clone(&forward.model);
                if model.ignore_websockets
                    && let Some(client) = upgrade
                {
                    drop(hold);
                    let Forward { outbound, .. } = Forward::unboxed(forward);
                    return Box::pin(websockets::serve_ignored(
                        state,
                        model,
                        outbound,
                        client,
                        self.outcome,
                    ))
                    .await;
                }
                match self.serve(state.clone(), forward).await {
                    Ok(response) => {
                        let response = hold_until_body_ends(response, hold);
                        match upgrade {
                            Some(client) => websockets::open(&state, &model, response, client),
                            None => response,
                        }
                    }
                    Err(error) => error.into_response(),
                }
            }
            Ok(Prepared::Peer(mut forward)) => {
                let hold = forward.hold.take();
                match Box::pin(peer::serve(&state, self.priority, self.outcome, *forward)).await {
                    Ok(response) => hold_until_body_ends(response, hold),
                    Err(error) => error.into_response(),
                }
            }
            Ok(Prepared::Answer(response)) => {
                self.outcome.discard();
                response
            }
            // The client went away mid-upload: nobody reads this answer.
            Err(error @ ApiError::BodyIncomplete) => {
                self.outcome.cancelled();
                error.into_response()
            }
            Err(error) => {
                self.outcome.rejected(error.kind().code);
                error.into_response()
            }
        }
    }

    /// Submits the request, waits for its turn and forwards it.
    async fn serve(self, state: AppState, forward: Box<Forward>) -> Result<Response, ApiError> {
        let Self { priority, outcome } = self;
        // Unboxed here, so the box is freed before the wait.
        let Forward {
            model,
            outbound,
            loading,
            selector,
            hold: _,
            upgrade: _,
        } = Forward::unboxed(forward);
        // Counted until the response body ends, so a drain can wait for it.
        let token = state.track();
        let mut tracked = begin_activity(&state, &model.id, &outbound, priority);
        if let Some(selector) = selector {
            tracked.selector(selector);
        }
        let mut pending = Box::new(Pending {
            outbound,
            tracked,
            outcome,
            token,
        });
        if let Err(error) = wait_for_gate(&state).await {
            return Err(pending.refused(error));
        }
        if priority.is_capped() {
            state.inner.metrics.capped();
            tracing::debug!(
                model = %model.id,
                requested = priority.requested(),
                capped = priority.capped(),
                "X-Priority capped"
            );
        }
        // A ready model with nothing waiting: granted without the router's round trip.
        let turn = match state.inner.router.try_fast(&model.id, priority) {
            Some(lease) => {
                pending.admitted(lease.id().0, lease.effective_priority());
                Turn::Granted(lease)
            }
            None => match Self::submit(&state, &model, priority, &mut pending, loading).await {
                Ok(Queued::Turn(turn)) => turn,
                Ok(Queued::Loading(target, status, ticket)) => {
                    let work = async move {
                        grant_and_forward(&state, &model, pending, Turn::Waiting(ticket)).await
                    }
                    .in_current_span();
                    return Ok(loading_response(target, status, describe, work));
                }
                Err(error) => return Err(pending.refused(error)),
            },
        };
        // One call site: each would take its own room in this future.
        grant_and_forward(&state, &model, pending, turn).await
    }

    /// Submits to the router; a request that must wait gets its own copy of
    /// its headers and, when it asked for the loading state, what streaming it
    /// needs.
    async fn submit(
        state: &AppState,
        model: &ModelEntry,
        priority: Priority,
        pending: &mut Pending,
        loading: bool,
    ) -> Result<Queued, ApiError> {
        let submitted = state
            .inner
            .router
            .submit(Submit {
                model: model.id.clone(),
                priority,
            })
            .await;
        let ticket = submitted?;
        pending.admitted(ticket.id().0, ticket.effective_priority());
        let status = ticket.status();
        let granted_at_once = matches!(*status.borrow(), WaitStatus::Granted);
        if granted_at_once {
            return Ok(Queued::Turn(Turn::Waiting(ticket)));
        }
        // It may wait long, beside thousands of others: its own copy of the
        // headers lets the connection's read buffer go.
        let headers = std::mem::take(&mut pending.outbound.headers);
        pending.outbound.headers = detached(headers);
        if !loading {
            return Ok(Queued::Turn(Turn::Waiting(ticket)));
        }
        let target = LoadingTarget {
            model: model.id.clone(),
            request_id: pending
                .outbound
                .headers
                .get(REQUEST_ID_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned(),
        };
        Ok(Queued::Loading(target, status, ticket))
    }
}

/// A request the router admitted: its turn, or, for a request that streams
/// the loading state while it waits, what the stream needs.
enum Queued {
    Turn(Turn),
    Loading(
        LoadingTarget,
        tokio::sync::watch::Receiver<WaitStatus>,
        Ticket,
    ),
}

/// What a request carries from its admission to its answer. Boxed once, so
/// that the futures waiting with it (there may be thousands) hold a pointer
/// rather than each its own copy of a few hundred bytes.
struct Pending {
    outbound: Outbound,
    tracked: Tracked,
    outcome: RequestOutcome,
    /// Counted until the response body ends, so a drain can wait for it.
    token: TaskTrackerToken,
}

impl Pending {
    /// Records the router's admission: the request's sequence number and
    /// effective priority.
    fn admitted(&mut self, seq: u64, effective_priority: i32) {
        self.outcome.set_priority(effective_priority);
        self.tracked.admitted(seq, effective_priority);
        tracing::Span::current().record("seq", seq);
    }

    /// Records a refusal before the request was admitted.
    fn refused(mut self: Box<Self>, error: ApiError) -> ApiError {
        self.outcome.rejected(error.kind().code);
        self.tracked.failed(error.status(), error.kind().code);
        error
    }
}

/// The same headers, each value copied out of the buffer it was parsed from.
///
/// hyper parses a request's header values as slices of the connection's read
/// buffer (8 KiB or more), so a request that keeps its headers keeps that buffer
/// alive, and the connection allocates a second one for its next read. A
/// request about to wait for its turn is worth the copy (a few hundred bytes);
/// one granted at once is not.
fn detached(headers: http::HeaderMap) -> http::HeaderMap {
    let mut owned = http::HeaderMap::with_capacity(headers.len());
    let mut last = None;
    for (name, value) in headers {
        // `None`: another value of the previous name.
        if let Some(name) = name {
            last = Some(name);
        }
        let Some(name) = &last else { continue };
        let mut copy =
            http::HeaderValue::from_bytes(value.as_bytes()).unwrap_or_else(|_| value.clone());
        copy.set_sensitive(value.is_sensitive());
        owned.append(name.clone(), copy);
    }
    owned
}

/// Where a request stands when it is forwarded: waiting for its grant, or
/// granted already (the router's fast path).
enum Turn {
    Waiting(Ticket),
    Granted(Lease),
}

/// Starts the activity record of a request for `model` (see [`crate::activity`]).
fn begin_activity(
    state: &AppState,
    model: &str,
    outbound: &Outbound,
    priority: Priority,
) -> Tracked {
    let request_id = outbound
        .headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    state
        .inner
        .activity
        .begin(model, &outbound.path_and_query, request_id, priority)
}

/// Records how a request that was admitted ended.
fn record(outcome: RequestOutcome, result: &Result<Response, ApiError>) {
    match result {
        Ok(_) => outcome.served(),
        Err(ApiError::BodyIncomplete) => outcome.cancelled(),
        Err(error) => outcome.error(error.kind().code),
    }
}

/// Waits for the grant and forwards. When the upstream turns out to be gone
/// before the request reached it (it crashed and the router had not heard yet),
/// the lease hands the request back to the router once, which grants it again
/// when the model runs again.
async fn grant_and_forward(
    state: &AppState,
    model: &ModelEntry,
    pending: Box<Pending>,
    turn: Turn,
) -> Result<Response, ApiError> {
    let lease = match turn {
        Turn::Waiting(ticket) => wait_for_grant(state, ticket).await,
        Turn::Granted(lease) => {
            let metrics = &state.inner.metrics;
            metrics.granted(&model.id, lease.effective_priority(), Duration::ZERO);
            Ok(lease)
        }
    };
    let Pending {
        outbound,
        mut tracked,
        outcome,
        token,
    } = *pending;
    let result = match lease {
        Ok(lease) => {
            tracked.granted();
            // A reload while it waited may have given the model a new
            // definition (address, filters, timeouts): the grant is for it.
            let latest = state.latest_model(&model.id);
            let model = latest.as_deref().unwrap_or(model);
            // Boxed so that a request waiting for its grant does not carry the
            // larger state of the forwarding stage.
            Box::pin(forward_granted(state, model, outbound, lease, token)).await
        }
        Err(error) => Err(error),
    };
    let result = match result {
        // The record ends with the response body.
        Ok(response) => Ok(tracked.respond(response)),
        Err(error) => {
            tracked.failed(error.status(), error.kind().code);
            Err(error)
        }
    };
    record(outcome, &result);
    result
}

/// Forwards a granted request; see [`grant_and_forward`].
async fn forward_granted(
    state: &AppState,
    model: &ModelEntry,
    outbound: Outbound,
    lease: Lease,
    token: TaskTrackerToken,
) -> Result<Response, ApiError> {
    let proxy = &model.client;
    match proxy
        .send(&model.id, &model.proxy, outbound, (lease, token))
        .await
    {
        Ok(response) => Ok(response),
        Err(SendError {
            unsent: Some((outbound, (lease, token))),
            ..
        }) => {
            tracing::info!(model = %model.id, "the upstream refused the request before it reached it; handing it back to the router");
            let lease = wait_for_grant(state, lease.refused()).await?;
            let latest = state.latest_model(&model.id);
            let model = latest.as_deref().unwrap_or(model);
            Ok(model
                .client
                .forward(&model.id, &model.proxy, outbound, (lease, token))
                .await?)
        }
        Err(failed) => Err(failed.error.into()),
    }
}

/// True when the router has `model` ready (not starting, not stopping).
pub(crate) async fn model_ready(state: &AppState, model: &str) -> bool {
    state
        .inner
        .router
        .running()
        .await
        .iter()
        .any(|m| m.model == model && m.state == ModelState::Ready)
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
        granted = ticket.granted() => granted.map_err(ApiError::from),
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
        WaitStatus::Admitted | WaitStatus::Granted => None,
    }
}

pub(super) fn refuse_when_draining(state: &AppState) -> Result<(), ApiError> {
    if state.inner.draining.is_cancelled() {
        Err(ApiError::ShuttingDown)
    } else {
        Ok(())
    }
}

/// The local model `name` (an ID or alias) names; local names win over peers.
fn local_model(state: &AppState, name: &str) -> Option<Arc<ModelEntry>> {
    state
        .inner
        .router
        .resolve(name)
        .and_then(|id| state.inner.models.get(&id).cloned())
}

/// The name a peer route goes by (`peer/model`, or a pool's bare name).
fn route_name(state: &AppState, route: PeerRoute<'_>) -> String {
    match route {
        PeerRoute::Peer { peer, model } => state
            .inner
            .peers
            .get(peer)
            .map_or_else(String::new, |p| qualified_name(&p.config.id, model)),
        PeerRoute::Pool { model, .. } => model.to_owned(),
    }
}

pub(super) fn client_ip(request: &Request) -> Option<std::net::IpAddr> {
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

pub(super) fn with_query(path: &str, query: Option<&str>) -> String {
    match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    }
}

/// 301 for GET/HEAD, 308 for other methods (so the method and body are kept).
pub(super) fn with_status_for_method(mut response: Response, method: &Method) -> Response {
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

    #[test]
    fn detached_headers_keep_every_value_but_not_the_parse_buffer() {
        // Values sliced out of one buffer, as hyper parses them.
        let buffer = bytes::Bytes::from_static(b"application/jsonBearer xfirstsecond");
        let slice = |a: usize, b: usize| {
            http::HeaderValue::from_maybe_shared(buffer.slice(a..b)).expect("valid value")
        };
        let mut headers = http::HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, slice(0, 16));
        let mut secret = slice(16, 24);
        secret.set_sensitive(true);
        headers.insert(header::AUTHORIZATION, secret);
        headers.append("x-tag", slice(24, 29));
        headers.append("x-tag", slice(29, 35));

        let owned = detached(headers.clone());

        assert_eq!(owned, headers);
        let tags: Vec<_> = owned.get_all("x-tag").iter().collect();
        assert_eq!(tags, ["first", "second"]);
        assert!(owned[header::AUTHORIZATION].is_sensitive());
        let range = buffer.as_ptr_range();
        for value in owned.values() {
            assert!(
                !range.contains(&value.as_bytes().as_ptr()),
                "{value:?} still points into the parse buffer"
            );
        }
    }
}
