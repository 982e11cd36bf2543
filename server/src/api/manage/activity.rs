//! `GET /api/activity` (the most recent finished requests) and
//! `POST /api/models/load/<model>` (start a model without sending it work).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use http::HeaderMap;
use serde_json::json;

use crate::activity::Finished;
use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::priority::{HeaderPriority, KeyIndex};
use crate::router::Submit;

/// Rows answered when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;

/// Query of `GET /api/activity`.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ActivityQuery {
    limit: Option<usize>,
    model: Option<String>,
}

/// `GET /api/activity[?limit=N][&model=ID]`: `{"activity": [...]}`, newest first.
pub(crate) async fn recent(
    State(state): State<AppState>,
    Query(query): Query<ActivityQuery>,
) -> Response {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    let model = match query
        .model
        .as_deref()
        .map(|m| state.inner.router.resolve(m))
    {
        Some(None) => {
            return ApiError::ModelNotFound {
                model: query.model.unwrap_or_default(),
            }
            .into_response();
        }
        Some(Some(id)) => Some(id),
        None => None,
    };
    let rows: Vec<_> = state
        .inner
        .activity
        .recent(usize::MAX)
        .into_iter()
        .rev()
        .filter(|row| model.as_deref().is_none_or(|m| *row.model == *m))
        .take(limit)
        .collect();
    let rows: Vec<&Finished> = rows.iter().map(|row| &**row).collect();
    Json(json!({ "activity": rows })).into_response()
}

/// `POST /api/models/load/<model>`: makes the model ready like a request for
/// it would (it queues behind other work at the request's `X-Priority`, and
/// swaps what must go), holds nothing once it is ready, and answers
/// `{"msg":"ok"}` then. Leaving early withdraws the load.
pub(crate) async fn load(
    State(state): State<AppState>,
    Path(model): Path<String>,
    key: Option<axum::Extension<KeyIndex>>,
    headers: HeaderMap,
) -> Response {
    let Some(id) = state.inner.router.resolve(&model) else {
        if state.inner.peers.resolve(&model).is_some() {
            return ApiError::PeerModel { model }.into_response();
        }
        return ApiError::ModelNotFound { model }.into_response();
    };
    let requested = HeaderPriority::from_headers(&headers).value();
    let priority = state.inner.trust.cap(requested, key.map(|k| k.0));
    let result = async {
        wait_for_gate(&state).await?;
        let ticket = state
            .inner
            .router
            .submit(Submit {
                model: id.clone(),
                priority,
            })
            .await
            .map_err(ApiError::from)?;
        tokio::select! {
            biased;
            () = state.inner.draining.cancelled() => Err(ApiError::ShuttingDown),
            granted = ticket.granted() => granted.map(drop).map_err(ApiError::from),
        }
    }
    .await;
    match result {
        Ok(()) => {
            tracing::info!(model = %id, "loaded on request");
            Json(json!({"msg": "ok"})).into_response()
        }
        Err(error) => error.into_response(),
    }
}

/// After a reload, waits until the previous configuration's upstreams are gone.
async fn wait_for_gate(state: &AppState) -> Result<(), ApiError> {
    if state.inner.draining.is_cancelled() {
        return Err(ApiError::ShuttingDown);
    }
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
