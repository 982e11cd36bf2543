//! The model request path: everything a request for a model passes after the
//! [front layer](super::front), in the order it passes it.
//!
//! 1. [`extract`]: the model name, from the JSON body, the multipart or
//!    url-encoded form, or `?model=`; [`upstream_path`] for `/upstream/<model>/...`.
//! 2. [`names`]: the active profile's pin, then a selector.
//! 3. [`prepare`]: the local model (or the [`peer`] that serves the name),
//!    the body read within its [limits](body) and filtered, the outbound
//!    request built. [`comfyui`] prepares `/comfyui/...` the same way.
//! 4. [`call`]: the priority parsed once, the request submitted to the router
//!    (or granted on its fast path), the wait (streaming the [`loading`]
//!    state when asked), then the proxy with the lease moved into the
//!    response body. A websocket handshake continues in [`websockets`].
//! 5. [`cancel`]: an operator's cancel ends the wait, or cuts the body.
//!
//! [`record`] tells a request's activity record who sent it, and keeps the
//! record of a request refused for naming a model that is not served.

pub(super) mod body;
pub(super) mod call;
pub(super) mod cancel;
pub(super) mod comfyui;
pub(super) mod extract;
pub(super) mod loading;
pub(super) mod names;
pub(super) mod peer;
pub(super) mod prepare;
pub(super) mod queue_wait;
pub(super) mod record;
pub(super) mod upstream_path;
pub(super) mod websockets;

use axum::extract::{Request, State};
use axum::response::Response;

use crate::api::state::AppState;
use call::Call;

/// A model-dispatched endpoint: the model comes from the body, form or query.
pub(crate) async fn model_endpoint(State(state): State<AppState>, request: Request) -> Response {
    let call = Call::begin(&state, &request);
    let prepared = prepare::by_body(&state, request).await;
    call.run(state, prepared).await
}

/// `/upstream/<model>/<path>`: the longest model prefix of the path; the body
/// streams through unread.
pub(crate) async fn upstream_endpoint(State(state): State<AppState>, request: Request) -> Response {
    let call = Call::begin(&state, &request);
    let prepared = prepare::by_path(&state, request).await;
    call.run(state, prepared).await
}
