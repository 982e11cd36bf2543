//! `GET /metrics`: Prometheus text with queue depth and wait time by priority
//! band, requests in flight and model states.
//!
//! Bands follow the client's tiers: effective priority above 0 is `elevated`,
//! 0 is `normal`, below 0 is `low`. Wait time is from admission to grant, for
//! requests that were granted; it is recorded with lock-free counters.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, header};

use super::state::AppState;
use crate::router::ModelState;

/// Upper bounds of the wait-time buckets, in seconds (a swap can take minutes).
const BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0, 120.0,
];

/// A priority band.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Band {
    Elevated,
    Normal,
    Low,
}

impl Band {
    const ALL: [Band; 3] = [Band::Elevated, Band::Normal, Band::Low];

    pub(crate) fn of(priority: i32) -> Self {
        match priority {
            p if p > 0 => Band::Elevated,
            0 => Band::Normal,
            _ => Band::Low,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Band::Elevated => "elevated",
            Band::Normal => "normal",
            Band::Low => "low",
        }
    }

    fn index(self) -> usize {
        match self {
            Band::Elevated => 0,
            Band::Normal => 1,
            Band::Low => 2,
        }
    }
}

#[derive(Debug, Default)]
struct Histogram {
    /// Cumulative counts per bucket bound (Prometheus `le` semantics).
    buckets: [AtomicU64; BUCKETS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

/// Wait-time histograms, one per band.
#[derive(Debug, Default)]
pub(crate) struct WaitMetrics {
    bands: [Histogram; 3],
}

impl WaitMetrics {
    /// Records that a request of `band` waited `waited` for its grant.
    pub(crate) fn observe(&self, band: Band, waited: Duration) {
        let h = &self.bands[band.index()];
        let secs = waited.as_secs_f64();
        for (bound, bucket) in BUCKETS.iter().zip(&h.buckets) {
            if secs <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        h.count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(waited.as_micros()).unwrap_or(u64::MAX);
        h.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String) {
        out.push_str("# HELP llamaswap_queue_wait_seconds Time from admission to grant of served requests.\n");
        out.push_str("# TYPE llamaswap_queue_wait_seconds histogram\n");
        for band in Band::ALL {
            let h = &self.bands[band.index()];
            let label = band.label();
            for (bound, bucket) in BUCKETS.iter().zip(&h.buckets) {
                let _ = writeln!(
                    out,
                    "llamaswap_queue_wait_seconds_bucket{{band=\"{label}\",le=\"{bound}\"}} {}",
                    bucket.load(Ordering::Relaxed)
                );
            }
            let count = h.count.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "llamaswap_queue_wait_seconds_bucket{{band=\"{label}\",le=\"+Inf\"}} {count}"
            );
            let sum = h.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(
                out,
                "llamaswap_queue_wait_seconds_sum{{band=\"{label}\"}} {sum}"
            );
            let _ = writeln!(
                out,
                "llamaswap_queue_wait_seconds_count{{band=\"{label}\"}} {count}"
            );
        }
    }
}

/// `GET /metrics`.
pub(crate) async fn metrics(State(state): State<AppState>) -> Response {
    let queue = state.inner.router.queue().await;
    let running = state.inner.router.running().await;
    let mut out = String::with_capacity(4096);

    out.push_str("# HELP llamaswap_queue_depth Requests waiting in the ranked queue.\n");
    out.push_str("# TYPE llamaswap_queue_depth gauge\n");
    for band in Band::ALL {
        let depth = queue
            .iter()
            .filter(|e| Band::of(e.effective_priority) == band)
            .count();
        let _ = writeln!(
            out,
            "llamaswap_queue_depth{{band=\"{}\"}} {depth}",
            band.label()
        );
    }
    out.push_str("# HELP llamaswap_queue_oldest_wait_seconds Longest current wait in the queue.\n");
    out.push_str("# TYPE llamaswap_queue_oldest_wait_seconds gauge\n");
    for band in Band::ALL {
        let oldest = queue
            .iter()
            .filter(|e| Band::of(e.effective_priority) == band)
            .map(|e| e.waited)
            .max()
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "llamaswap_queue_oldest_wait_seconds{{band=\"{}\"}} {}",
            band.label(),
            oldest.as_secs_f64()
        );
    }
    state.inner.waits.render(&mut out);

    out.push_str(
        "# HELP llamaswap_requests_in_progress Model requests admitted and not yet finished.\n",
    );
    out.push_str("# TYPE llamaswap_requests_in_progress gauge\n");
    let _ = writeln!(
        out,
        "llamaswap_requests_in_progress {}",
        state.inner.inflight.len()
    );

    out.push_str("# HELP llamaswap_model_state 1 for the state each non-stopped model is in.\n");
    out.push_str("# TYPE llamaswap_model_state gauge\n");
    for model in running {
        let state_label = match model.state {
            ModelState::Starting => "starting",
            ModelState::Ready => "ready",
            ModelState::Stopping => "stopping",
            #[allow(unreachable_patterns)]
            _ => continue,
        };
        let _ = writeln!(
            out,
            "llamaswap_model_state{{model=\"{}\",state=\"{state_label}\"}} 1",
            escape_label(&model.model)
        );
    }

    let mut response = out.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// Escapes a Prometheus label value.
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bands_split_at_zero() {
        assert_eq!(Band::of(10), Band::Elevated);
        assert_eq!(Band::of(0), Band::Normal);
        assert_eq!(Band::of(-10), Band::Low);
    }

    #[test]
    fn histogram_counts_are_cumulative_per_band() {
        let metrics = WaitMetrics::default();
        metrics.observe(Band::Low, Duration::from_millis(3));
        metrics.observe(Band::Low, Duration::from_secs(3));
        metrics.observe(Band::Elevated, Duration::from_millis(40));
        let mut out = String::new();
        metrics.render(&mut out);
        assert!(
            out.contains("llamaswap_queue_wait_seconds_bucket{band=\"low\",le=\"0.005\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("llamaswap_queue_wait_seconds_bucket{band=\"low\",le=\"5\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("llamaswap_queue_wait_seconds_bucket{band=\"low\",le=\"2.5\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("llamaswap_queue_wait_seconds_count{band=\"low\"} 2\n"),
            "{out}"
        );
        assert!(
            out.contains("llamaswap_queue_wait_seconds_count{band=\"elevated\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("llamaswap_queue_wait_seconds_count{band=\"normal\"} 0\n"),
            "{out}"
        );
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }
}
