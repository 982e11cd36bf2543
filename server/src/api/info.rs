//! Status and control endpoints: `/v1/models`, `/running`, `/health`,
//! `/api/queue` and unloading.

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::dispatch::route_error;
use super::error::ApiError;
use super::state::AppState;
use crate::router::ModelState;

/// `GET /health`: open even when API keys are configured.
pub(crate) async fn health() -> &'static str {
    "OK"
}

/// `GET /v1/models`: configured, listed models (and aliases when
/// `includeAliasesInList`), sorted by ID, with whether each is loaded.
pub(crate) async fn models(State(state): State<AppState>) -> Json<Value> {
    let loaded: BTreeSet<String> = state
        .inner
        .router
        .running()
        .await
        .into_iter()
        .map(|m| m.model)
        .collect();
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let mut rows: Vec<(String, Value)> = Vec::new();
    for model in state.inner.models.values().filter(|m| !m.unlisted) {
        let status = if loaded.contains(&model.id) {
            "loaded"
        } else {
            "unloaded"
        };
        let mut row = json!({
            "id": model.id,
            "object": "model",
            "created": created,
            "owned_by": "llama-swap",
            "status": {"value": status},
        });
        if let Some(name) = &model.name {
            row["name"] = json!(name);
        }
        if let Some(description) = &model.description {
            row["description"] = json!(description);
        }
        if let Some(metadata) = &model.metadata {
            row["meta"] = json!({"llamaswap": metadata});
        }
        if state.inner.include_aliases_in_list {
            for alias in &model.aliases {
                let mut alias_row = row.clone();
                alias_row["id"] = json!(alias);
                rows.push((alias.clone(), alias_row));
            }
        }
        rows.push((model.id.clone(), row));
    }
    rows.sort_by(|a, b| a.0.cmp(&b.0));
    Json(json!({
        "object": "list",
        "data": rows.into_iter().map(|(_, row)| row).collect::<Vec<_>>(),
    }))
}

/// `GET /running`: every model that is not stopped, sorted by ID.
pub(crate) async fn running(State(state): State<AppState>) -> Json<Value> {
    let running: Vec<Value> = state
        .inner
        .router
        .running()
        .await
        .into_iter()
        .map(|m| {
            let entry = state.inner.models.get(&m.model);
            json!({
                "model": m.model,
                "state": state_name(m.state),
                "proxy": entry.map(|e| e.proxy.as_str()),
                "ttl": entry.and_then(|e| e.ttl).map(|t| t.as_secs()).unwrap_or(0),
                "name": entry.and_then(|e| e.name.as_deref()).unwrap_or_default(),
                "description": entry.and_then(|e| e.description.as_deref()).unwrap_or_default(),
            })
        })
        .collect();
    Json(json!({ "running": running }))
}

fn state_name(state: ModelState) -> &'static str {
    match state {
        ModelState::Starting => "starting",
        ModelState::Ready => "ready",
        ModelState::Stopping => "stopping",
        #[allow(unreachable_patterns)]
        _ => "stopped",
    }
}

/// `GET /api/queue`: every waiting request in position order.
pub(crate) async fn queue(State(state): State<AppState>) -> Json<Value> {
    let queue: Vec<Value> = state
        .inner
        .router
        .queue()
        .await
        .into_iter()
        .map(|e| {
            json!({
                "model": e.model,
                "requested_priority": e.requested_priority,
                "capped_priority": e.capped_priority,
                "effective_priority": e.effective_priority,
                "aged": e.aged,
                "position": e.position,
                "waited_ms": u64::try_from(e.waited.as_millis()).unwrap_or(u64::MAX),
            })
        })
        .collect();
    Json(json!({ "queue": queue }))
}

/// `POST /api/models/unload`: stops every model; answers once they are stopped.
pub(crate) async fn unload_all(State(state): State<AppState>) -> Response {
    match state.inner.router.unload(None).await {
        Ok(()) => Json(json!({"msg": "ok"})).into_response(),
        Err(error) => route_error(error).into_response(),
    }
}

/// `GET /unload` (llama-swap's older form): stops every model.
pub(crate) async fn unload_all_text(State(state): State<AppState>) -> Response {
    match state.inner.router.unload(None).await {
        Ok(()) => "OK".into_response(),
        Err(error) => route_error(error).into_response(),
    }
}

/// `POST /api/models/unload/<model>`: stops one model (ID or alias).
pub(crate) async fn unload_one(
    State(state): State<AppState>,
    Path(model): Path<String>,
) -> Response {
    let Some(id) = state.inner.router.resolve(&model) else {
        return ApiError::ModelNotFound { model }.into_response();
    };
    match state.inner.router.unload(Some(vec![id])).await {
        Ok(()) => "OK".into_response(),
        Err(error) => route_error(error).into_response(),
    }
}
