//! `GET /metrics`: every metric of [`crate::metrics`] in the OpenMetrics text
//! format. Queue and model-state gauges are refreshed from the router on each
//! scrape; counters and histograms are recorded where things happen; the host
//! gauges llama-swap serves (CPU, memory, swap, load, network, GPU) are
//! sampled at most once per `performance.every`.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};

use crate::api::state::AppState;
use crate::metrics::CONTENT_TYPE;

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    let queue = state.inner.router.queue().await;
    let running = state.inner.router.running().await;
    let metrics = &state.inner.metrics;
    let failed = super::events::payload::failed_models(&state);
    metrics.observe_router(
        &queue,
        &running,
        &failed.keys().map(String::as_str).collect(),
    );
    metrics.observe_gpus(&state.inner.router.gpus().await, &running);
    metrics.set_in_progress(state.inner.inflight.len());
    let mut text = metrics.encode();
    // OpenMetrics ends with `# EOF`; the history's counters and the host
    // gauges go before it.
    if let Some(db) = state.inner.activity.history().database() {
        let end = text.rfind("# EOF").unwrap_or(text.len());
        text.insert_str(end, &db.encode_metrics());
    }
    if let Some(system) = &state.inner.system {
        let end = text.rfind("# EOF").unwrap_or(text.len());
        text.insert_str(end, &system.encode().await);
    }
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}
