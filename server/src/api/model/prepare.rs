//! Preparing a model request before it is scheduled: which model it names
//! (local, or a peer's), its body read, renamed and filtered, and the
//! outbound request the proxy will send once the router grants it.
//!
//! Nothing here waits for the router; [`super::call`] does that.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Redirect, Response};
use http::{Method, header};
use hyper::upgrade::OnUpgrade;
use percent_encoding::percent_decode_str;

use super::body::{GuardedBody, declared_length, read_body};
use super::extract::RequestModel;
use super::names::{rename, rename_upstream};
use super::peer::{self, BodyRequest, PeerForward};
use super::record;
use super::upstream_path::split_upstream_path;
use super::websockets::take_websocket;
use crate::api::error::{ApiError, NotLoadedReason};
use crate::api::front::client_ip;
use crate::api::state::{AppState, ModelEntry};
use crate::names::{Lead, PeerRoute};
use crate::priority::KeyIndex;
use crate::proxy::{Outbound, OutboundBody};
use crate::selection::Reservation;

/// The path prefix of the loading-state-capable endpoint.
const CHAT_COMPLETIONS: &str = "/v1/chat/completions";

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
    pub(super) model: Arc<ModelEntry>,
    pub(super) outbound: Outbound,
    /// Stream the loading state while it waits.
    pub(super) loading: bool,
    /// A selector's hold on the chosen target, kept until the response ends.
    pub(super) hold: Option<Reservation>,
    /// The selector that chose the model, for the activity record.
    pub(super) selector: Option<String>,
    /// The client's side of a websocket handshake.
    pub(super) upgrade: Option<OnUpgrade>,
}

impl Forward {
    /// Moves the request out of its box, freeing the box.
    pub(super) fn unboxed(forward: Box<Self>) -> Self {
        *forward
    }
}

pub(super) async fn by_body(state: &AppState, request: Request) -> Result<Prepared, ApiError> {
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
    let unknown = |error: ApiError| {
        record::record_unknown_model(state, &parts, forward_path(parts.uri.path()), &error);
        error
    };
    let renamed = rename(state, &found.name).await.map_err(unknown)?;
    let key = parts.extensions.get::<KeyIndex>().copied();
    let routed = local_or_peer(state, &renamed.name, key).map_err(unknown)?;
    let model = match routed {
        Ok(model) => model,
        Err(route) => {
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
        }
    };
    // A pinned or selected name goes upstream in place of the client's.
    let upstream_name = model
        .config
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
            .config
            .filters
            .apply(&renamed.name, bytes)
            .map_err(|source| ApiError::FilterFailed {
                model: model.config.id.clone(),
                source,
            })?
    } else {
        bytes
    };
    let path = forward_path(parts.uri.path());
    let loading = model.config.send_loading_state
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
        body_limit: state.inner.body_limits.max_bytes,
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

pub(super) async fn by_path(state: &AppState, request: Request) -> Result<Prepared, ApiError> {
    refuse_when_draining(state)?;
    let client_ip = client_ip(&request);
    let (parts, body) = request.into_parts();
    let (model, rest) = {
        let path = parts.uri.path();
        let tail = rename_upstream(state, path.strip_prefix("/upstream/").unwrap_or_default())?;
        let tail = tail.as_ref();
        let names = &state.inner.names;
        let target = split_upstream_path(tail, |name| {
            names.target(name).map(|lead| names.canonical_name(lead))
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
        let key = parts.extensions.get::<KeyIndex>().copied();
        let model = match local_or_peer(state, &target.model, key)? {
            Ok(model) => model,
            Err(route) => {
                let rest = target.rest.to_owned();
                let forward = Box::pin(peer::by_path(state, route, parts, body, &rest)).await?;
                return Ok(Prepared::Peer(Box::new(forward)));
            }
        };
        // Static assets a browser asks for must not start (or swap in) a model.
        if let Ok(rest) = percent_decode_str(target.rest).decode_utf8()
            && state.inner.ignore_paths.matches(&rest)
            && !state.model_ready(&model.config.id).await
        {
            return Err(ApiError::NotLoaded {
                model: model.config.id.clone(),
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
    let loading = model.config.send_loading_state
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
        body_limit: state.inner.body_limits.max_bytes,
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

pub(super) fn refuse_when_draining(state: &AppState) -> Result<(), ApiError> {
    if state.inner.draining.is_cancelled() {
        Err(ApiError::ShuttingDown)
    } else {
        Ok(())
    }
}

/// The local model `name` (an ID or alias) names, else the peer model it
/// names (see [`crate::names`]: local names win over bare peer names).
///
/// # Errors
///
/// 404 when it names neither, or a model the request's API `key` may not
/// use (answered the same, so its existence is not revealed).
fn local_or_peer<'s>(
    state: &'s AppState,
    name: &str,
    key: Option<KeyIndex>,
) -> Result<Result<Arc<ModelEntry>, PeerRoute<'s>>, ApiError> {
    let not_found = || ApiError::ModelNotFound {
        model: name.to_owned(),
    };
    let rules = &state.inner.key_rules;
    match state.inner.names.target(name) {
        Some(Lead::Model { id, .. }) => state
            .inner
            .models
            .get(id)
            .filter(|entry| rules.allows_model(key, &entry.config))
            .cloned()
            .map(Ok)
            .ok_or_else(not_found),
        Some(Lead::Peer(route)) => {
            let peers = state.inner.names.peers();
            let allowed = match route {
                PeerRoute::Peer { peer, model } => peers
                    .peer_id(peer)
                    .is_some_and(|id| rules.allows_peer_model(key, id, model)),
                PeerRoute::Pool { model, peers: pool } => pool.iter().any(|&peer| {
                    peers
                        .peer_id(peer)
                        .is_some_and(|id| rules.allows_peer_model(key, id, model))
                }),
            };
            if allowed {
                Ok(Err(route))
            } else {
                Err(not_found())
            }
        }
        Some(Lead::Selector { .. }) | None => Err(not_found()),
    }
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
}
