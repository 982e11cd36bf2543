//! What the activity record of a model request is told about its client,
//! and the record kept of a request refused for naming an unknown model.

use std::sync::Arc;

use crate::activity::Tracked;
use crate::api::error::ApiError;
use crate::api::front::request_id;
use crate::api::state::AppState;
use crate::priority::{HeaderPriority, KeyIndex};

/// Keeps a history row for a `POST` naming a model this server does not
/// serve (or the request's key may not use), as llama-swap keeps one for its
/// 404: the name asked for, the 404 and its message. Any other refusal keeps
/// none (as llama-swap's, which records only requests it could route or
/// name a model for).
pub(super) fn record_unknown_model(
    state: &AppState,
    parts: &http::request::Parts,
    path: &str,
    error: &ApiError,
) {
    let ApiError::ModelNotFound { model } = error else {
        return;
    };
    if parts.method != http::Method::POST {
        return;
    }
    let key = parts.extensions.get::<KeyIndex>().copied();
    let header = HeaderPriority::from_headers(&parts.headers);
    let priority = state.inner.trust.cap(header.value(), key);
    let request_id = request_id::of(&parts.headers);
    let mut tracked = state
        .inner
        .activity
        .begin(model, path, request_id, priority);
    describe_client(state, &mut tracked, &parts.headers, key);
    tracked.refused(error.status(), error.kind().code, error.to_string().into());
}

/// Names the request's API key (never the key itself) and its session in
/// its activity record.
pub(super) fn describe_client(
    state: &AppState,
    tracked: &mut Tracked,
    headers: &http::HeaderMap,
    key: Option<KeyIndex>,
) {
    if let Some(name) = key.and_then(|key| state.inner.key_rules.name(key)) {
        tracked.api_key(Arc::clone(name));
    }
    if let Some(session) = state
        .inner
        .session_headers
        .iter()
        .find_map(|name| headers.get(name)?.to_str().ok())
    {
        tracked.session(session);
    }
}
