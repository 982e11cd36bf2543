//! `GET /metrics`: every metric of [`crate::metrics`] in the OpenMetrics text
//! format. Queue and model-state gauges are refreshed from the router on each
//! scrape; counters and histograms are recorded where things happen.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};

use super::state::AppState;
use crate::metrics::CONTENT_TYPE;

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    let queue = state.inner.router.queue().await;
    let running = state.inner.router.running().await;
    let metrics = &state.inner.metrics;
    metrics.observe_router(&queue, &running);
    metrics.set_in_progress(state.inner.inflight.len());
    let mut response = metrics.encode().into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    response
}
