//! Status and control endpoints: `/v1/models`, `/running`, `/health`,
//! `/wol-health`, `/api/queue`, unloading, and llama-swap's redirects of `/`
//! and `/upstream` to the web UI.

use std::collections::BTreeSet;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use serde_json::{Map, Value, json};

use super::events::payload::{FailureRow, failed_models, key_names};
use super::params::PathParam;
use crate::api::error::ApiError;
use crate::api::state::{AppState, ModelEntry};

/// `GET /api/version`: `{"version", "commit", "build_date"}`, as llama-swap.
pub(crate) async fn version() -> axum::Json<crate::version::BuildInfo> {
    axum::Json(crate::version::BUILD)
}

/// `GET /api/hardware`: llama-swap's hardware snapshot (schema 1); 503 when
/// the host cannot be read.
pub(crate) async fn hardware() -> axum::response::Response {
    hardware_answer(crate::hardware::snapshot().await)
}

/// The answer to `GET /api/hardware` for what detection found (`None`: not
/// even the host's memory could be read).
fn hardware_answer(snapshot: Option<&crate::hardware::Snapshot>) -> axum::response::Response {
    use axum::response::IntoResponse;
    match snapshot {
        Some(snapshot) => axum::Json(snapshot).into_response(),
        None => ApiError::HardwareUnavailable.into_response(),
    }
}

/// `GET /api/performance[?after=<RFC 3339>]`: the host and GPU samples of
/// the last hour (taken every `performance.every`; one taken now when none
/// was yet), those after `after` only when given, as llama-swap answers: `{"enabled":true,"sys_stats",
/// "gpu_stats"}`; 503 `{"enabled":false}` with `performance.disabled`; 400
/// naming `after` when it is not an RFC 3339 time.
pub(crate) async fn performance(
    State(state): State<AppState>,
    axum::extract::RawQuery(query): axum::extract::RawQuery,
) -> Response {
    let Some(system) = &state.inner.system else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"enabled": false})),
        )
            .into_response();
    };
    let after = form_urlencoded::parse(query.as_deref().unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "after")
        .map(|(_, value)| value.into_owned())
        .filter(|value| !value.is_empty());
    let after_ms = match after.map(|text| text.parse::<jiff::Timestamp>()) {
        None => None,
        Some(Ok(at)) => Some(u64::try_from(at.as_millisecond()).unwrap_or(0)),
        Some(Err(_)) => {
            return ApiError::BadParameter {
                param: "after",
                message: "invalid 'after' timestamp, use RFC3339 format".to_owned(),
            }
            .into_response();
        }
    };
    if system.nothing_recorded() {
        // Asked before the first tick: the host as it is now.
        system.record().await;
    }
    Json(system.performance(after_ms)).into_response()
}

/// `GET /health` and `GET /wol-health`: open even when API keys are configured.
pub(crate) async fn health() -> &'static str {
    "OK"
}

/// `GET /`: the web UI, as llama-swap sends it (302).
pub(crate) async fn root_redirect() -> Response {
    found("/ui")
}

/// `GET /upstream`: the UI's model page, as llama-swap sends it (302).
pub(crate) async fn upstream_redirect() -> Response {
    found("/ui/models")
}

/// A `302 Found` to `location`.
fn found(location: &'static str) -> Response {
    (
        StatusCode::FOUND,
        [(header::LOCATION, HeaderValue::from_static(location))],
    )
        .into_response()
}

/// `GET /v1/models`: configured, listed models (and aliases when
/// `includeAliasesInList`), selectors, pins and peer models, sorted by ID, with whether each is loaded and
/// llama-swap's `meta.llamaswap` (the model's `metadata` plus `type` and
/// `aliases`, or for an alias row `type: alias` and its `modelID`). A request
/// with an `Origin` gets it back in `Access-Control-Allow-Origin`, so browser
/// pages on other origins can read the listing.
pub(crate) async fn models(
    State(state): State<AppState>,
    key: Option<axum::Extension<crate::priority::KeyIndex>>,
    headers: HeaderMap,
) -> Response {
    let key = key.map(|k| k.0);
    let running = state.inner.router.running().await;
    let loaded: BTreeSet<&str> = running.iter().map(|m| m.model.as_str()).collect();
    let failed = failed_models(&state);
    let created = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default();
    let mut rows: Vec<Value> = Vec::new();
    for model in state.inner.models.values().filter(|m| !m.config.unlisted) {
        let status = if loaded.contains(model.config.id.as_str()) {
            "loaded"
        } else {
            "unloaded"
        };
        let failed = failed.contains_key(&model.config.id);
        let mut internal = Map::new();
        internal.insert("type".into(), json!("model"));
        if !model.config.aliases.is_empty() {
            internal.insert("aliases".into(), json!(model.config.aliases));
        }
        rows.push(model_row(
            &model.config.id,
            model,
            status,
            failed,
            created,
            internal,
        ));
        if state.inner.include_aliases_in_list {
            for alias in model.config.aliases.iter().filter(|a| !a.trim().is_empty()) {
                let mut internal = Map::new();
                internal.insert("type".into(), json!("alias"));
                internal.insert("modelID".into(), json!(model.config.id));
                rows.push(model_row(alias, model, status, failed, created, internal));
            }
        }
    }
    rows.extend(super::profiles::listing_rows(&state, &running, created));
    rows.extend(peer_rows(&state, created));
    // A key with `models` sees only what it may use.
    rows.retain(|row| {
        row["id"]
            .as_str()
            .is_some_and(|id| may_use(&state, key, id))
    });
    rows.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    let mut response = Json(json!({"object": "list", "data": rows})).into_response();
    if let Some(origin) = headers.get(header::ORIGIN) {
        response
            .headers_mut()
            .insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
    }
    response
}

/// One `/v1/models` row: OpenAI's fields, llama-swap's `name`, `description`
/// and `status` (with `failed: true` for a failed model, as llama.cpp's
/// router says it), and `meta.llamaswap` = the model's metadata with
/// `internal` (type, aliases, ...) on top.
fn model_row(
    id: &str,
    model: &ModelEntry,
    status: &str,
    failed: bool,
    created: u64,
    internal: Map<String, Value>,
) -> Value {
    let mut row = json!({
        "id": id,
        "object": "model",
        "created": created,
        "owned_by": "llama-swap",
        "status": {"value": status},
    });
    if failed {
        row["status"]["failed"] = json!(true);
    }
    if let Some(name) = model
        .config
        .name
        .as_deref()
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        row["name"] = json!(name);
    }
    if let Some(description) = model
        .config
        .description
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        row["description"] = json!(description);
    }
    let mut meta = match &model.config.metadata {
        Some(Value::Object(metadata)) => metadata.clone(),
        _ => Map::new(),
    };
    meta.extend(internal);
    row["meta"] = json!({"llamaswap": meta});
    if let Some(capabilities) = &model.config.capabilities {
        capabilities.render_into(&mut row);
    }
    row
}

/// `GET /running`: every model that is not stopped (sleeping and failed ones
/// included; a failed one with its `failure`), sorted by ID, with its command, upstream address, TTL (seconds,
/// 0 = never), name and description; under the memory router also each
/// model's `gpus` (ids) and `memory` (bytes held on each), and a top-level
/// `gpus` list with each GPU's `memory`, `reserve`, `used` and `free` bytes.
pub(crate) async fn running(State(state): State<AppState>) -> Json<Value> {
    let failed = failed_models(&state);
    let row = |model: &str, state_name: &str| {
        let entry = state.inner.models.get(model);
        let mut row = json!({
            "model": model,
            "state": state_name,
            "cmd": entry.map(|e| e.config.cmd.as_str()).unwrap_or_default(),
            "proxy": entry.map(|e| e.config.proxy.as_str()),
            "ttl": entry.and_then(|e| e.config.ttl).map(|t| t.as_secs()).unwrap_or(0),
            "name": entry.and_then(|e| e.config.name.as_deref()).unwrap_or_default(),
            "description": entry.and_then(|e| e.config.description.as_deref()).unwrap_or_default(),
        });
        if let Some(failure) = failed.get(model) {
            // Failed wins: its starts are refused whatever the router tries.
            row["state"] = json!("failed");
            row["failure"] = json!(FailureRow::from(failure.as_ref()));
        }
        row
    };
    let mut running: Vec<Value> = Vec::new();
    let mut listed = BTreeSet::new();
    for m in state.inner.router.running().await {
        let mut shown = row(&m.model, m.state.as_str());
        if !m.gpus.is_empty() {
            shown["gpus"] = json!(m.gpus);
            shown["memory"] = json!(m.memory);
        }
        if let Some(measured) = m.memory_measured {
            shown["memory_measured"] = json!(measured);
        }
        listed.insert(m.model);
        running.push(shown);
    }
    // A failed model has no process, and is listed all the same.
    for model in failed.keys().filter(|m| !listed.contains(*m)) {
        running.push(row(model, "failed"));
    }
    running.sort_by(|a, b| a["model"].as_str().cmp(&b["model"].as_str()));
    let gpus = state.inner.router.gpus().await;
    if gpus.is_empty() {
        return Json(json!({ "running": running }));
    }
    let gpus: Vec<Value> = gpus
        .iter()
        .map(|g| {
            json!({
                "id": g.id,
                "memory": g.memory,
                "reserve": g.reserve,
                "used": g.used,
                "free": g.free,
            })
        })
        .collect();
    Json(json!({ "running": running, "gpus": gpus }))
}

/// `GET /api/queue`: every waiting request in position order, with the name
/// of its API key (`api_key`, never the key).
pub(crate) async fn queue(State(state): State<AppState>) -> Json<Value> {
    let waiting = state.inner.router.queue().await;
    let keys = key_names(&state.inner.activity.in_flight());
    let queue: Vec<Value> = waiting
        .into_iter()
        .map(|e| {
            json!({
                "api_key": keys.get(&e.id.0).map(|name| &**name),
                "model": e.model,
                "requested_priority": e.requested_priority,
                "capped_priority": e.capped_priority,
                "effective_priority": e.effective_priority,
                "aged": e.aged,
                "position": e.position,
                "reason": e.reason.as_str(),
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
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// `GET /unload` (llama-swap's older form): stops every model.
pub(crate) async fn unload_all_text(State(state): State<AppState>) -> Response {
    match state.inner.router.unload(None).await {
        Ok(()) => "OK".into_response(),
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// Whether a request with `key` may use the model, alias or peer model
/// `name`; selectors and profile pins only with access to every model.
pub(crate) fn may_use(
    state: &AppState,
    key: Option<crate::priority::KeyIndex>,
    name: &str,
) -> bool {
    let rules = &state.inner.key_rules;
    let names = &state.inner.names;
    match names.target(name) {
        Some(crate::names::Lead::Model { id, .. }) => state
            .inner
            .models
            .get(id)
            .is_some_and(|m| rules.allows_model(key, &m.config)),
        Some(crate::names::Lead::Peer(crate::names::PeerRoute::Peer { peer, model })) => names
            .peers()
            .peer_id(peer)
            .is_some_and(|p| rules.allows_peer_model(key, p, model)),
        Some(crate::names::Lead::Peer(crate::names::PeerRoute::Pool { model, peers })) => {
            peers.iter().any(|&peer| {
                names
                    .peers()
                    .peer_id(peer)
                    .is_some_and(|p| rules.allows_peer_model(key, p, model))
            })
        }
        Some(crate::names::Lead::Selector { .. }) | None => rules.allows_everything(key),
    }
}

/// `POST /api/models/unload/<model>`: stops one model (ID or alias).
pub(crate) async fn unload_one(
    State(state): State<AppState>,
    key: Option<axum::Extension<crate::priority::KeyIndex>>,
    PathParam(model): PathParam,
) -> Response {
    if !may_use(&state, key.map(|k| k.0), &model) {
        return ApiError::ModelNotFound { model }.into_response();
    }
    let Some(id) = state.inner.router.resolve(&model) else {
        if let Some(crate::names::Lead::Peer(_)) = state.inner.names.target(&model) {
            return ApiError::PeerModel { model }.into_response();
        }
        return ApiError::ModelNotFound { model }.into_response();
    };
    match state.inner.router.unload(Some(vec![id])).await {
        Ok(()) => "OK".into_response(),
        Err(error) => ApiError::from(error).into_response(),
    }
}

/// The `/v1/models` rows of peer models, as llama-swap lists them: every
/// `<peer>/<model>`, named `<peer>: <model>`, always `unloaded` (this server
/// does not know), with `meta.llamaswap` `{"type": "peer", "peerID"}`.
fn peer_rows(state: &AppState, created: u64) -> Vec<serde_json::Value> {
    let peers = &state.inner.peers;
    state
        .inner
        .names
        .peers()
        .qualified()
        .filter_map(|(name, index, model)| {
            let peer = peers.get(index)?;
            Some(serde_json::json!({
                "id": name,
                "object": "model",
                "created": created,
                "owned_by": "llama-swap",
                "name": format!("{}: {model}", peer.config.id),
                "status": {"value": "unloaded"},
                "meta": {"llamaswap": {"type": "peer", "peerID": peer.config.id}},
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn hardware_that_cannot_be_read_is_a_503_naming_it() {
        let response = super::hardware_answer(None);
        assert_eq!(response.status(), http::StatusCode::SERVICE_UNAVAILABLE);
        let body = axum::body::to_bytes(response.into_body(), 1 << 16)
            .await
            .expect("a body");
        let json: serde_json::Value = serde_json::from_slice(&body).expect("JSON");
        assert_eq!(json["error"]["code"], "hardware_unavailable", "{json}");
        assert_eq!(json["error"]["type"], "server_error", "{json}");
    }
}
