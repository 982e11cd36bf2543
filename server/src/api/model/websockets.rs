//! Websocket handshakes on model routes.
//!
//! A handshake to a model is scheduled like any request: it may start the
//! model, waits its turn, and its lease lives in the byte pipe the proxy
//! splices after the upstream's `101`, so the model counts as busy (nothing
//! evicts it, its TTL does not run) until the socket closes. With
//! `compat.ignoreWebsockets` the scheduler is bypassed instead: the model must
//! already be ready (409 otherwise), nothing is counted, and a swap may stop
//! the model under the open socket, which then closes.
//!
//! Pipes run on the state's in-flight tracker and end when the server starts
//! draining for a shutdown (which would otherwise wait for sockets that never
//! close by themselves). A reload keeps them: the socket's lease keeps its
//! model running. A model the reload changed or removed stops once its last
//! socket closes, which the reload bounds: its sockets close after its
//! `unloadTimeout`, as requests for the new definition wait for them. An
//! operator's `POST /api/inflight/{id}/cancel` closes the socket (its lease
//! goes back, its row says `cancelled`).

use std::sync::Arc;

use axum::response::{IntoResponse, Response};
use http::request::Parts;
use hyper::upgrade::OnUpgrade;

use super::cancel::websocket_cancel;
use super::names::hold_until_body_ends;
use crate::api::error::{ApiError, NotLoadedReason};
use crate::api::front::scopes::KeyPermit;
use crate::api::state::{AppState, ModelEntry};
use crate::metrics::RequestOutcome;
use crate::proxy::{Outbound, is_websocket_upgrade, splice};

/// The client's side of a websocket handshake, when the request is one.
pub(super) fn take_websocket(parts: &mut Parts) -> Option<OnUpgrade> {
    if !is_websocket_upgrade(&parts.method, &parts.headers) {
        return None;
    }
    parts.extensions.remove::<OnUpgrade>()
}

/// Completes a handshake the upstream accepted: the pipe holds `response`'s
/// body (and the lease in it) until the socket closes, or until an operator
/// cancels its request.
pub(super) fn open(
    state: &AppState,
    model: &ModelEntry,
    mut response: Response,
    client: OnUpgrade,
) -> Response {
    let cancelled = websocket_cancel(&mut response);
    splice(
        response,
        client,
        &state.inner.inflight,
        state.inner.draining.clone(),
        cancelled,
        Some((model.retired.clone(), model.config.unload_timeout)),
        &model.config.id,
    )
}

/// A handshake to a model with `compat.ignoreWebsockets`: forwarded only when
/// the model is ready, without asking the scheduler.
pub(super) async fn serve_ignored(
    state: AppState,
    model: Arc<ModelEntry>,
    outbound: Outbound,
    client: OnUpgrade,
    outcome: RequestOutcome,
    permit: Option<KeyPermit>,
) -> Response {
    // The model may stop right after this check; the socket then closes with
    // it, which is what ignoring websockets trades for never blocking a swap.
    if !state.model_ready(&model.config.id).await {
        let error = ApiError::NotLoaded {
            model: model.config.id.clone(),
            why: NotLoadedReason::IgnoredWebsocket,
        };
        outcome.rejected(error.kind().code);
        return error.into_response();
    }
    let token = state.track();
    match model
        .client
        .forward(&model.config.id, &model.config.proxy, outbound, token)
        .await
    {
        Ok(response) => {
            outcome.served();
            // The key's count goes with the socket (its pipe holds the body).
            let response = hold_until_body_ends(response, permit);
            open(&state, &model, response, client)
        }
        Err(error) => {
            let error = ApiError::from(error);
            outcome.error(error.kind().code);
            error.into_response()
        }
    }
}
