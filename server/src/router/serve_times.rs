//! Measured serve times per model, for the `Retry-After` of a full queue.
//!
//! Lives in the actor, not the pure scheduler: it reads the clock.

use std::collections::HashMap;
use std::time::Duration;

use tokio::time::Instant;

use crate::scheduler::RequestId;

/// Weight of the newest sample in the moving average.
const ALPHA: f64 = 0.2;
/// Shortest hint ever sent, and the hint before anything was measured.
const MIN_RETRY: Duration = Duration::from_secs(1);
/// Longest hint ever sent.
const MAX_RETRY: Duration = Duration::from_secs(3600);

/// Exponentially weighted moving average of serve durations, per model.
#[derive(Debug, Default)]
pub(super) struct ServeTimes {
    serving: HashMap<RequestId, (String, Instant)>,
    average: HashMap<String, f64>,
}

impl ServeTimes {
    pub(super) fn granted(&mut self, id: RequestId, model: &str) {
        self.serving.insert(id, (model.to_owned(), Instant::now()));
    }

    /// A granted request that ends without a sample (refused by its upstream).
    pub(super) fn forget(&mut self, id: RequestId) {
        self.serving.remove(&id);
    }

    pub(super) fn done(&mut self, id: RequestId) {
        let Some((model, started)) = self.serving.remove(&id) else {
            return;
        };
        let took = started.elapsed().as_secs_f64();
        let average = self.average.entry(model).or_insert(took);
        *average = ALPHA * took + (1.0 - ALPHA) * *average;
    }

    /// When a request refused now might get in: the average serve time times
    /// the requests ahead of it, divided by how many run at once; at least 1 s.
    pub(super) fn retry_after(&self, model: &str, waiting: usize, in_flight: usize) -> Duration {
        let Some(&average) = self.average.get(model) else {
            return MIN_RETRY;
        };
        let ahead = waiting as f64 + 1.0;
        let parallel = in_flight.max(1) as f64;
        let secs = (average * ahead / parallel).ceil();
        Duration::try_from_secs_f64(secs)
            .unwrap_or(MAX_RETRY)
            .clamp(MIN_RETRY, MAX_RETRY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn retry_after_grows_with_the_queue_and_measured_service_time() {
        let mut times = ServeTimes::default();
        assert_eq!(times.retry_after("a", 5, 1), MIN_RETRY);
        times.granted(RequestId(1), "a");
        tokio::time::advance(Duration::from_secs(4)).await;
        times.done(RequestId(1));
        // 4 s per request, 2 waiting + this one, one at a time.
        assert_eq!(times.retry_after("a", 2, 1), Duration::from_secs(12));
        // Two served at once halve it.
        assert_eq!(times.retry_after("a", 2, 2), Duration::from_secs(6));
        // Another model has no measurement yet.
        assert_eq!(times.retry_after("b", 2, 1), MIN_RETRY);
    }

    #[tokio::test(start_paused = true)]
    async fn short_services_still_hint_at_least_one_second() {
        let mut times = ServeTimes::default();
        times.granted(RequestId(1), "a");
        tokio::time::advance(Duration::from_millis(10)).await;
        times.done(RequestId(1));
        assert_eq!(times.retry_after("a", 0, 1), MIN_RETRY);
    }
}
