//! Profiles and selectors on the management surface: `GET /api/profiles`,
//! `PUT /api/profiles/active`, and the selector and pin rows of `/v1/models`.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::config::SelectorStrategy;
use crate::names::Lead;
use crate::router::{ModelState, RunningModel};

/// `GET /api/profiles`: `{"active": name or null, "profiles": [{id, description,
/// pins}]}`, profiles sorted by name; a disabling pin shows as `""`.
pub(crate) async fn list_profiles(State(state): State<AppState>) -> Json<Value> {
    let names = &state.inner.selection;
    let mut profiles: Vec<Value> = names
        .profiles()
        .iter()
        .map(|p| {
            let pins: Map<String, Value> = p
                .pins
                .iter()
                .map(|pin| (pin.name.clone(), json!(pin.target.as_deref().unwrap_or(""))))
                .collect();
            json!({
                "id": p.name,
                "description": p.description.as_deref().unwrap_or(""),
                "pins": pins,
            })
        })
        .collect();
    profiles.sort_by(|a, b| a["id"].as_str().cmp(&b["id"].as_str()));
    Json(json!({
        "active": names.active().map(|p| p.name.as_str()),
        "profiles": profiles,
    }))
}

/// `PUT /api/profiles/active` with `{"name": "<profile>"}`, or `null` (or `""`)
/// to turn profiles off. Answers `{"active": ...}`.
pub(crate) async fn set_active_profile(State(state): State<AppState>, body: Bytes) -> Response {
    let parsed: Result<Map<String, Value>, _> = serde_json::from_slice(&body);
    let name = match parsed {
        Err(_) => Err("the body must be a JSON object such as {\"name\": \"coding\"}"),
        Ok(object) => match object.get("name") {
            None => {
                Err("the body has no \"name\"; send {\"name\": \"<profile>\"} or {\"name\": null}")
            }
            Some(Value::Null) => Ok(None),
            Some(Value::String(name)) => Ok(Some(name.clone())),
            Some(_) => Err("\"name\" must be a profile name (a string) or null"),
        },
    };
    let name = match name {
        Ok(name) => name,
        Err(what) => return ApiError::BadProfileRequest { what }.into_response(),
    };
    let names = &state.inner.selection;
    match names.set_active(name.as_deref()) {
        Ok(changed) => {
            let active = names.active().map(|p| p.name.clone());
            if changed {
                tracing::info!(
                    profile = active.as_deref().unwrap_or("(none)"),
                    "active profile changed"
                );
            }
            Json(json!({ "active": active })).into_response()
        }
        Err(unknown) => ApiError::ProfileNotFound { name: unknown.name }.into_response(),
    }
}

/// The `/v1/models` rows of listed selectors and of the active profile's pins
/// (those with a target that do not shadow a model, alias or selector name).
/// `created` and the row shape follow the model rows.
pub(crate) fn listing_rows(state: &AppState, running: &[RunningModel], created: u64) -> Vec<Value> {
    let inner = &state.inner;
    let live = |model: &str| {
        running.iter().any(|r| {
            r.model == model && matches!(r.state, ModelState::Ready | ModelState::Starting)
        })
    };
    let mut rows = Vec::new();
    for selector in inner.selection.selectors() {
        if selector.unlisted {
            continue;
        }
        // A pin selector is loaded when its one target is; the others when any is.
        let loaded = match selector.strategy {
            SelectorStrategy::Pin => selector.target_ids.first().is_some_and(|m| live(m)),
            _ => selector.target_ids.iter().any(|m| live(m)),
        };
        let mut meta = match &selector.metadata {
            Some(Value::Object(metadata)) => metadata.clone(),
            _ => Map::new(),
        };
        meta.insert("type".into(), json!("selector"));
        meta.insert("strategy".into(), json!(selector.strategy.as_str()));
        meta.insert("targets".into(), json!(selector.targets));
        if selector.strategy == SelectorStrategy::Spillover {
            meta.insert("spillover".into(), json!(selector.spillover));
        }
        let mut row = row(&selector.id, loaded, created, meta);
        if let Some(name) = &selector.name {
            row["name"] = json!(name.trim());
        }
        if let Some(description) = &selector.description {
            row["description"] = json!(description.trim());
        }
        rows.push(row);
    }
    if let Some(profile) = inner.selection.active() {
        for pin in &profile.pins {
            // A pin spelled like a model, alias or selector has that row.
            let shadows = matches!(
                inner.names.lead(&pin.name),
                Some(Lead::Model { .. } | Lead::Selector { .. })
            );
            if pin.target.is_none() || shadows {
                continue;
            }
            let mut meta = Map::new();
            meta.insert("type".into(), json!("profile"));
            rows.push(row(&pin.name, false, created, meta));
        }
    }
    rows
}

fn row(id: &str, loaded: bool, created: u64, meta: Map<String, Value>) -> Value {
    json!({
        "id": id,
        "object": "model",
        "created": created,
        "owned_by": "llama-swap",
        "status": {"value": if loaded { "loaded" } else { "unloaded" }},
        "meta": {"llamaswap": meta},
    })
}
