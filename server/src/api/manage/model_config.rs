//! `GET /api/models/config/{*model}`: one model's configuration as this
//! server resolved it (macros expanded, defaults filled in, aliases
//! resolved), for the web UI's model page. `env` shows the names only: their
//! values often hold tokens.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::params::PathParam;
use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::scheduler::Parallel;

/// The resolved configuration of a model (by ID or alias).
pub(crate) async fn model_config(
    State(state): State<AppState>,
    key: Option<axum::Extension<crate::priority::KeyIndex>>,
    PathParam(model): PathParam,
) -> Response {
    if !super::info::may_use(&state, key.map(|k| k.0), &model) {
        return ApiError::ModelNotFound { model }.into_response();
    }
    let Some(id) = state.inner.router.resolve(&model) else {
        if let Some(crate::names::Lead::Peer(_)) = state.inner.names.target(&model) {
            return ApiError::PeerModel { model }.into_response();
        }
        return ApiError::ModelNotFound { model }.into_response();
    };
    let Some(entry) = state.inner.models.get(&id) else {
        return ApiError::ModelNotFound { model }.into_response();
    };
    Json(describe(&entry.config)).into_response()
}

fn seconds(d: Option<std::time::Duration>) -> Value {
    d.map_or(Value::Null, |d| json!(d.as_secs_f64()))
}

/// The configuration's keys under their config.yaml names.
fn describe(c: &crate::config::ModelConfig) -> Value {
    let parallel = match c.parallel {
        Parallel::Unlimited => json!("unlimited"),
        Parallel::Limit(n) => json!(n.get()),
        Parallel::Auto => json!("auto"),
    };
    let t = &c.timeouts;
    let capabilities = c.capabilities.as_ref().map(|caps| {
        json!({
            "in": caps.input,
            "out": caps.output,
            "tools": caps.tools,
            "reranker": caps.reranker,
            "context": caps.context,
        })
    });
    json!({
        "id": c.id,
        "name": c.name,
        "description": c.description,
        "cmd": c.cmd,
        "cmdStop": c.cmd_stop,
        "proxy": c.proxy,
        "port": c.port,
        "aliases": c.aliases,
        "env": c.env.iter().map(|(name, _)| name).collect::<Vec<_>>(),
        "checkEndpoint": c.check_endpoint.as_deref().unwrap_or("none"),
        "ttl": seconds(c.ttl),
        "unloadTimeout": c.unload_timeout.as_secs_f64(),
        "maxQueueWait": seconds(c.max_queue_wait),
        "unlisted": c.unlisted,
        "useModelName": c.use_model_name,
        "concurrencyLimit": c.concurrency_limit,
        "parallel": parallel,
        "sendLoadingState": c.send_loading_state,
        "filters": {
            "stripParams": c.filters.strip_params().collect::<Vec<_>>(),
            "setParams": c.filters.set_params().collect::<Vec<_>>(),
            "setParamsByID": c.filters.by_id_names().collect::<Vec<_>>(),
        },
        "timeouts": {
            "connect": seconds(t.connect),
            "keepalive": seconds(t.keepalive),
            "responseHeader": seconds(t.response_header),
            "tlsHandshake": seconds(t.tls_handshake),
            "expectContinue": seconds(t.expect_continue),
            "idleConn": seconds(t.idle_conn),
            "bodyIdle": seconds(t.body_idle),
        },
        "capabilities": capabilities,
        "metadata": c.metadata,
        "compat": {"ignoreWebsockets": c.ignore_websockets},
    })
}
