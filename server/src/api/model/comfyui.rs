//! `/comfyui/...`: ComfyUI's web UI and API through the fixed model
//! `comfyui_auto`, as llama-swap serves them.
//!
//! Only the root `/comfyui/` may start the model: a browser tab left open on
//! ComfyUI keeps asking for assets, API calls and its websocket, and none of
//! those may swap the model back in once it was unloaded (409 instead). The
//! prefix is stripped and the rest of the path forwarded as the client wrote
//! it (percent-escapes kept).

use axum::extract::{Request, State};
use axum::response::{IntoResponse, Redirect, Response};
use http::{Method, Uri};

use super::call::Call;
use super::prepare::{
    Prepared, passthrough, refuse_when_draining, with_query, with_status_for_method,
};
use crate::api::error::{ApiError, NotLoadedReason};
use crate::api::front::client_ip;
use crate::api::state::AppState;
use crate::config::COMFYUI_MODEL_ID;

/// The prefix stripped before forwarding.
const PREFIX: &str = "/comfyui";

/// `/comfyui` → `/comfyui/` (301 for GET and HEAD, 308 otherwise so the
/// method and body are kept), with the query.
pub(crate) async fn redirect(method: Method, uri: Uri) -> Response {
    let location = with_query("/comfyui/", uri.query());
    with_status_for_method(Redirect::permanent(&location).into_response(), &method)
}

/// `/comfyui/` and `/comfyui/<path>`.
pub(crate) async fn endpoint(State(state): State<AppState>, request: Request) -> Response {
    let call = Call::begin(&state, &request);
    let prepared = prepare(&state, request).await;
    call.run(state, prepared).await
}

async fn prepare(state: &AppState, request: Request) -> Result<Prepared, ApiError> {
    refuse_when_draining(state)?;
    let model = state
        .inner
        .models
        .get(COMFYUI_MODEL_ID)
        .filter(|entry| {
            let key = request
                .extensions()
                .get::<crate::priority::KeyIndex>()
                .copied();
            state.inner.key_rules.allows_model(key, &entry.config)
        })
        .cloned()
        .ok_or_else(|| ApiError::ModelNotFound {
            model: COMFYUI_MODEL_ID.to_owned(),
        })?;
    let client_ip = client_ip(&request);
    let (parts, body) = request.into_parts();
    let rest = parts
        .uri
        .path()
        .strip_prefix(PREFIX)
        .filter(|rest| rest.starts_with('/'))
        .unwrap_or("/")
        .to_owned();
    if rest != "/" && !state.model_ready(&model.config.id).await {
        return Err(ApiError::NotLoaded {
            model: model.config.id.clone(),
            why: NotLoadedReason::ComfyUiPath,
        });
    }
    passthrough(state, parts, body, model, &rest, client_ip)
}
