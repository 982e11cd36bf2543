//! `GET /api/activity` (the most recent finished requests), llama-swap's
//! `GET /api/metrics/activity` and `GET /api/metrics/stats` (the history), and
//! `POST /api/models/load/<model>` (start a model without sending it work).

use axum::Json;
use axum::extract::{RawQuery, State};
use axum::response::{IntoResponse, Response};
use http::HeaderMap;
use serde_json::json;

use super::params::{PathParam, QueryParams};
use crate::activity::Finished;
use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::priority::{HeaderPriority, KeyIndex};
use crate::router::Submit;
use crate::store::QueryError;

/// Rows answered when `limit` is not given.
const DEFAULT_LIMIT: usize = 100;

/// Query of `GET /api/activity`, as sent: `limit` is read below, so that a
/// bad one is a 400 naming it.
#[derive(Debug, serde::Deserialize)]
pub(crate) struct ActivityQuery {
    limit: Option<String>,
    model: Option<String>,
}

/// `GET /api/activity[?limit=N][&model=ID]`: `{"activity": [...]}`, newest
/// first; a `limit` that is not a count is 400 `invalid_parameter`.
pub(crate) async fn recent(
    State(state): State<AppState>,
    query: Result<QueryParams<ActivityQuery>, ApiError>,
) -> Response {
    let query = match query {
        Ok(QueryParams(query)) => query,
        Err(error) => return error.into_response(),
    };
    let limit = match query.limit.as_deref().map(str::trim) {
        None | Some("") => DEFAULT_LIMIT,
        Some(text) => match text.parse::<usize>() {
            Ok(limit) => limit,
            Err(_) => {
                return ApiError::BadParameter {
                    param: "limit",
                    message: format!("limit must be a count of rows, not {text:?}"),
                }
                .into_response();
            }
        },
    };
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
    let mut rows: Vec<Finished> = rows.iter().map(|row| (**row).clone()).collect();
    state.inner.activity.overlay_captures(rows.iter_mut()).await;
    Json(json!({ "activity": rows })).into_response()
}

/// `GET /api/metrics/activity`: llama-swap's paged history (`model`
/// repeated, `start`/`end` RFC 3339, `min_id`/`max_id`, `limit` 1-999 default
/// 25, `page`, `sort`, `order`; ours: `band`, `key`), as `{"data", "page",
/// "limit", "total", "total_pages"}`; a bad parameter is a 400 naming it.
pub(crate) async fn history(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let bands = state.inner.metrics.bands();
    let query = match crate::store::ActivityQuery::parse(query.as_deref(), &bands) {
        Ok(query) => query,
        Err(QueryError { param, message }) => {
            return ApiError::BadParameter { param, message }.into_response();
        }
    };
    let activity = &state.inner.activity;
    match activity.page(query).await {
        Ok(mut page) => {
            activity.overlay_captures(page.data.iter_mut()).await;
            Json(page).into_response()
        }
        Err(error) => {
            tracing::error!(%error, "activity query failed");
            ApiError::HistoryUnavailable.into_response()
        }
    }
}

/// `GET /api/metrics/stats[?model=ID]`: totals and prompt/generation speed
/// histograms of the kept history, of one model or of all.
pub(crate) async fn stats(State(state): State<AppState>, RawQuery(query): RawQuery) -> Response {
    let model = form_urlencoded::parse(query.as_deref().unwrap_or("").as_bytes())
        .find(|(k, _)| k == "model")
        .map(|(_, v)| v.trim().to_owned())
        .filter(|m| !m.is_empty());
    let activity = &state.inner.activity;
    match activity.stats(model).await {
        Ok(stats) => Json(stats).into_response(),
        Err(error) => {
            tracing::error!(%error, "activity stats failed");
            ApiError::HistoryUnavailable.into_response()
        }
    }
}

/// `GET /api/captures/{id}`: the request and response of activity row `id`
/// (llama-swap's shape: headers by canonical name, bodies in base64); 400
/// for an id that is not a 64-bit integer, 404 when no capture of it is
/// kept (a negative id included, as in llama-swap).
pub(crate) async fn capture(
    State(state): State<AppState>,
    id: Result<PathParam, ApiError>,
) -> Response {
    let Some(asked) = id.ok().and_then(|PathParam(id)| id.parse::<i64>().ok()) else {
        return ApiError::BadParameter {
            param: "id",
            message: "invalid capture ID".to_owned(),
        }
        .into_response();
    };
    let Some(captures) = state.inner.activity.captures() else {
        return ApiError::CaptureNotFound {
            id: asked,
            off: true,
        }
        .into_response();
    };
    let Ok(id) = u64::try_from(asked) else {
        return ApiError::CaptureNotFound {
            id: asked,
            off: false,
        }
        .into_response();
    };
    captures.caught_up().await;
    match captures.get(id) {
        Some(capture) => Json(capture).into_response(),
        None => ApiError::CaptureNotFound {
            id: asked,
            off: false,
        }
        .into_response(),
    }
}

/// `POST /api/inflight/{id}/cancel`: tells the request in flight numbered
/// `id` (the `inflight` event's `id`) to stop, and answers `{"msg":"ok"}`;
/// 404 when no such request is in flight (400 `invalid_parameter` for an id
/// that does not decode). A waiting request leaves the queue
/// and answers 503 `cancelled`; a running one is cut (see
/// `api::model::cancel`). Its `remove` follows on the event stream once it
/// has ended.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    id: Result<PathParam, ApiError>,
) -> Response {
    let Ok(PathParam(id)) = id else {
        return ApiError::BadParameter {
            param: "id",
            message: "the in-flight request ID is not valid UTF-8".to_owned(),
        }
        .into_response();
    };
    let found = id
        .parse::<u64>()
        .is_ok_and(|n| state.inner.activity.cancel(n));
    if !found {
        return ApiError::InFlightNotFound { id }.into_response();
    }
    tracing::info!(id = %id, "in-flight request cancelled by an operator");
    Json(json!({"msg": "ok"})).into_response()
}

/// `POST /api/models/load/<model>`: makes the model ready like a request for
/// it would (it queues behind other work at the request's `X-Priority`, and
/// swaps what must go), holds nothing once it is ready, and answers
/// `{"msg":"ok"}` then. Leaving early withdraws the load.
pub(crate) async fn load(
    State(state): State<AppState>,
    PathParam(model): PathParam,
    key: Option<axum::Extension<KeyIndex>>,
    headers: HeaderMap,
) -> Response {
    if !super::info::may_use(&state, key.as_ref().map(|k| k.0), &model) {
        return ApiError::ModelNotFound { model }.into_response();
    }
    let Some(id) = state.inner.router.resolve(&model) else {
        if let Some(crate::names::Lead::Peer(_)) = state.inner.names.target(&model) {
            return ApiError::PeerModel { model }.into_response();
        }
        return ApiError::ModelNotFound { model }.into_response();
    };
    // An explicit load starts a failed model again, without backoff.
    if let Some(supervisor) = &state.inner.supervisor {
        supervisor.clear_failures(&id).await;
    }
    let requested = HeaderPriority::from_headers(&headers).value();
    let priority = state.inner.trust.cap(requested, key.map(|k| k.0));
    let result = async {
        if state.inner.draining.is_cancelled() {
            return Err(ApiError::ShuttingDown);
        }
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
