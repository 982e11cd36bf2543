//! Requests for peer models: forwarded at once, never scheduled here.
//!
//! The request goes to the peer as the client sent it, except that:
//! - the model in the body (JSON or multipart) or `?model=` becomes the
//!   peer's own name for it (`back/llama` → `llama`), then the peer's
//!   `filters` apply (`setParamsByID` keyed on the name asked for);
//! - `/upstream/<peer>/<model>/<path>` goes to the peer's
//!   `/upstream/<model>/<path>`, so with a llama-swap peer every path of the
//!   model (its web UI, `GET`s, websockets) is reached as on the peer itself;
//! - `X-Priority` carries this server's capped value (none when it is 0), so
//!   the peer ranks the front's callers by what this server allowed them;
//! - the peer's `apiKey`, when set, replaces `Authorization` and `x-api-key`
//!   (this server's own key was already removed by the auth layer);
//! - `X-Forwarded-*` and `Forwarded` are dropped and none is added, as
//!   llama-swap does for peers.
//!
//! The request counts in the peer's in-flight gauge and in the activity
//! table (under `<peer>/<model>`) until its response body ends.

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, request::Parts};
use hyper::upgrade::OnUpgrade;
use percent_encoding::{AsciiSet, CONTROLS, utf8_percent_encode};

use super::body::{GuardedBody, declared_length};
use super::extract::RequestModel;
use super::names::Renamed;
use super::websockets::take_websocket;
use crate::api::error::ApiError;
use crate::api::front::request_id;
use crate::api::front::scopes::KeyPermit;
use crate::api::state::AppState;
use crate::metrics::RequestOutcome;
use crate::names::{PeerRoute, qualified_name};
use crate::peers::{PickError, Picked};
use crate::priority::{PRIORITY_HEADER, Priority};
use crate::proxy::{Outbound, OutboundBody, ProxyError, splice};
use crate::selection::Reservation;

/// Characters of a model name escaped in an `/upstream/<model>/` path (`/`
/// is kept: peer model names may hold it, and the peer splits by longest match).
const PATH_ESCAPES: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'%');

/// Inbound forwarding headers a peer does not get (llama-swap drops them too).
const FORWARDING_HEADERS: [&str; 4] = [
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "forwarded",
];

/// A request for a peer, ready to send.
#[derive(Debug)]
pub(super) struct PeerForward {
    picked: Picked,
    outbound: Outbound,
    /// A selector's hold on its target, kept until the response ends.
    pub(super) hold: Option<Reservation>,
    /// The client's side of a websocket handshake, spliced to the peer's
    /// once it answers `101`.
    upgrade: Option<OnUpgrade>,
}

/// The parts of a body/query request `by_body` already worked out.
pub(super) struct BodyRequest {
    pub(super) parts: Parts,
    pub(super) found: RequestModel,
    pub(super) bytes: Bytes,
    pub(super) renamed: Renamed,
    pub(super) path: String,
    pub(super) upgrade: Option<OnUpgrade>,
}

/// Prepares a body/query request whose name leads to a peer.
///
/// # Errors
///
/// 400 `filter_failed` when the peer's filters cannot apply; 503
/// `shutting_down` for a route of a configuration being replaced.
pub(super) async fn by_body(
    state: &AppState,
    route: PeerRoute<'_>,
    request: BodyRequest,
) -> Result<PeerForward, ApiError> {
    let BodyRequest {
        parts,
        found,
        bytes,
        renamed,
        path,
        upgrade,
    } = request;
    let picked = pick(state, route).await?;
    let peer = state
        .inner
        .peers
        .get(picked.peer)
        .ok_or(ApiError::ShuttingDown)?;
    let bytes = if found.name == picked.model {
        bytes
    } else {
        found.rewrite(bytes, &picked.model)
    };
    let bytes = if found.json_body {
        peer.config
            .filters
            .apply(&renamed.name, bytes)
            .map_err(|source| ApiError::FilterFailed {
                model: qualified_name(&peer.config.id, &picked.model),
                source,
            })?
    } else {
        bytes
    };
    let query = parts
        .uri
        .query()
        .map(|q| rename_in_query(q, &found.name, &picked.model));
    let path_and_query = match query {
        Some(q) => format!("{path}?{q}"),
        None => path,
    };
    let mut outbound = outbound(
        state,
        parts,
        path_and_query,
        OutboundBody::Buffered(bytes),
        peer,
    );
    outbound.websocket = upgrade.is_some();
    Ok(PeerForward {
        picked,
        outbound,
        hold: renamed.hold,
        upgrade,
    })
}

/// Prepares `/upstream/<name>/<rest>` for the peer `route` leads to, its
/// body streamed through unread (or a websocket handshake).
///
/// # Errors
///
/// 413 `body_too_large` for a declared length over the limit.
pub(super) async fn by_path(
    state: &AppState,
    route: PeerRoute<'_>,
    mut parts: Parts,
    body: Body,
    rest: &str,
) -> Result<PeerForward, ApiError> {
    let limits = &state.inner.body_limits;
    if declared_length(&parts.headers).is_some_and(|len| len > limits.max_bytes) {
        return Err(ApiError::BodyTooLarge {
            limit: limits.max_bytes,
        });
    }
    let upgrade = take_websocket(&mut parts);
    let body = OutboundBody::Streaming(Body::new(GuardedBody::new(body, limits)));
    let picked = pick(state, route).await?;
    let peer = state
        .inner
        .peers
        .get(picked.peer)
        .ok_or(ApiError::ShuttingDown)?;
    let model = utf8_percent_encode(&picked.model, PATH_ESCAPES);
    let path_and_query = match parts.uri.query() {
        Some(q) => format!("/upstream/{model}{rest}?{q}"),
        None => format!("/upstream/{model}{rest}"),
    };
    let mut outbound = outbound(state, parts, path_and_query, body, peer);
    outbound.websocket = upgrade.is_some();
    Ok(PeerForward {
        picked,
        outbound,
        hold: None,
        upgrade,
    })
}

async fn pick(state: &AppState, route: PeerRoute<'_>) -> Result<Picked, ApiError> {
    state
        .inner
        .peers
        .pick(route)
        .await
        .map_err(|error| match error {
            PickError::Busy { peer, limit } => {
                tracing::warn!(%peer, limit, "peer at its concurrencyLimit: request refused");
                state.inner.metrics.peer_failed(&peer, "busy");
                ApiError::PeerBusy { peer, limit }
            }
            PickError::Gone => ApiError::ShuttingDown,
        })
}

fn outbound(
    state: &AppState,
    parts: Parts,
    path_and_query: String,
    body: OutboundBody,
    peer: &crate::peers::Peer,
) -> Outbound {
    let mut headers: HeaderMap = parts.headers;
    for name in FORWARDING_HEADERS {
        headers.remove(name);
    }
    Outbound {
        method: parts.method,
        path_and_query,
        headers,
        body,
        client_ip: None,
        body_limit: state.inner.body_limits.max_bytes,
        websocket: false,
        set_headers: crate::peers::credentials(&peer.config),
    }
}

/// `?model=<asked>` becomes `?model=<peer's name>`; other parameters stay.
fn rename_in_query(query: &str, asked: &str, model: &str) -> String {
    let names_it =
        form_urlencoded::parse(query.as_bytes()).any(|(k, v)| k == "model" && v == asked);
    if !names_it || asked == model {
        return query.to_owned();
    }
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (key, value) in form_urlencoded::parse(query.as_bytes()) {
        if key == "model" && value == asked {
            out.append_pair(&key, model);
        } else {
            out.append_pair(&key, &value);
        }
    }
    out.finish()
}

/// Forwards a prepared peer request with the caller's capped priority.
pub(super) async fn serve(
    state: &AppState,
    priority: Priority,
    key: Option<crate::priority::KeyIndex>,
    metered: bool,
    mut outcome: RequestOutcome,
    forward: PeerForward,
    permit: Option<KeyPermit>,
) -> Result<Response, ApiError> {
    let PeerForward {
        picked,
        mut outbound,
        hold: _,
        upgrade,
    } = forward;
    let Some(peer) = state.inner.peers.get(picked.peer) else {
        outcome.rejected("shutting_down");
        return Err(ApiError::ShuttingDown);
    };
    let id = &peer.config.id;
    let name = qualified_name(id, &picked.model);
    // Counted until the response body ends, so a drain waits for it.
    let token = state.track();
    let request_id = request_id::of(&outbound.headers);
    let mut tracked =
        state
            .inner
            .activity
            .begin(&name, &outbound.path_and_query, request_id, priority);
    super::call::describe_request(state, &mut tracked, &outbound, key);
    if !metered {
        tracked.unmetered();
    }
    if priority.is_capped() {
        state.inner.metrics.capped();
    }
    if priority.capped() != 0 {
        outbound
            .set_headers
            .insert(PRIORITY_HEADER, HeaderValue::from(priority.capped()));
    }
    outcome.set_priority(priority.capped());
    // Nothing waits here: the peer's own queue does the ranking.
    tracked.listed(&outbound.method, outbound.client_ip, &outbound.headers);
    tracked.granted();
    let entry = tracked.in_flight().cloned();
    tracing::debug!(peer = %id, model = %picked.model, priority = priority.capped(), "forwarding to peer");
    let forwarded =
        peer.client
            .forward(id, &peer.config.proxy, outbound, (picked.in_flight, token));
    let forwarded = tokio::select! {
        biased;
        () = cancelled(entry.as_ref()) => {
            // The request to the peer is dropped (its connection closed).
            let error = ApiError::Cancelled { id: entry.as_ref().map_or(0, |e| e.id) };
            tracked.failed(error.status(), error.kind().code);
            outcome.cancelled();
            return Err(error);
        }
        forwarded = forwarded => forwarded,
    };
    match forwarded {
        Ok(response) => {
            outcome.served();
            let response = super::cancel::cut_on_cancel(tracked.respond(response), entry);
            // The key's `maxConcurrent` count goes with the body, which a
            // websocket's pipe holds until the socket closes.
            let mut response = super::names::hold_until_body_ends(response, permit);
            // The pipe holds the body, and with it the in-flight count, until
            // the socket closes (or an operator cancels the request).
            Ok(match upgrade {
                Some(client) => {
                    let cancelled = super::cancel::websocket_cancel(&mut response);
                    splice(
                        response,
                        client,
                        &state.inner.inflight,
                        state.inner.draining.clone(),
                        cancelled,
                        None,
                        &name,
                    )
                }
                None => response,
            })
        }
        Err(error) => {
            match &error {
                ProxyError::Unreachable { .. } => {
                    state.inner.metrics.peer_failed(id, "unreachable");
                }
                ProxyError::Timeout { .. } => state.inner.metrics.peer_failed(id, "timeout"),
                _ => {}
            }
            tracing::warn!(peer = %id, model = %picked.model, %error, "peer request failed");
            let error = ApiError::from_peer(error, id, &name);
            match error {
                ApiError::BodyIncomplete => outcome.cancelled(),
                _ => outcome.error(error.kind().code),
            }
            tracked.failed(error.status(), error.kind().code);
            Err(error)
        }
    }
}

/// Resolves when the request is cancelled; never without an entry.
async fn cancelled(entry: Option<&std::sync::Arc<crate::activity::InFlight>>) {
    match entry {
        Some(entry) => entry.cancelled().await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_model_becomes_the_peers_name_and_the_rest_stays() {
        assert_eq!(
            rename_in_query("model=back%2Fllama&x=1", "back/llama", "llama"),
            "model=llama&x=1"
        );
        assert_eq!(rename_in_query("x=1", "back/llama", "llama"), "x=1");
        assert_eq!(
            rename_in_query("model=other", "back/llama", "llama"),
            "model=other"
        );
    }
}
