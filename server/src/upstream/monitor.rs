//! Watching a ready model and pacing its restarts (pure: time is passed in).
//!
//! - **Health monitoring** (`healthCheckInterval`, off by default): a ready
//!   model's check endpoint is polled that often, each poll bounded by the
//!   interval; after `healthCheckFailures` (default 3) failed or hung polls in
//!   a row the model is unhealthy: the router is told it is gone (it grants it
//!   nothing more; its waiters keep their places and start it again), and it
//!   is stopped with its `unloadTimeout` as the grace, which ends the requests
//!   forwarded to it (502, or an error frame in a stream).
//! - **Crash-loop backoff**: a start that fails (the process exits or does not
//!   pass its health check in time) counts as a failure of every model; for a
//!   monitored model, so does a ready process that exits by itself or turns
//!   unhealthy (an unmonitored one keeps llama-swap's restart on the next
//!   request). After `n` failures within `restartWindow` the next start waits
//!   until `1 s × 2^(n-1)` (at most 60 s) after the last one, whoever asks for
//!   it, so waiting requests never respawn a crashing model faster than that.
//!   At `maxRestarts` failures within the window the model is *failed*: every
//!   start is refused at once (503 `model_failed`, with the last lines of its
//!   output) until the window has passed since the last failure or an
//!   explicit load clears it. A monitored model retries a failed start itself,
//!   for the same waiters, until then; an unmonitored one answers its waiters
//!   with the start's error.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

/// The first backoff after a failure.
pub(crate) const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The longest backoff between two starts.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// `healthCheckFailures` when not set.
pub(crate) const DEFAULT_HEALTH_CHECK_FAILURES: u32 = 3;
/// `maxRestarts` when not set.
pub(crate) const DEFAULT_MAX_RESTARTS: u32 = 5;
/// `restartWindow` when not set.
pub(crate) const DEFAULT_RESTART_WINDOW: Duration = Duration::from_secs(300);

/// How a model's process is watched once ready and restarted when it fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Monitor {
    /// `healthCheckInterval`: how often a ready model's check endpoint is
    /// polled (each poll bounded by it); `None`: not watched.
    pub interval: Option<Duration>,
    /// `healthCheckFailures`: failed polls in a row that make it unhealthy.
    pub failures: u32,
    /// The grace of the stop of an unhealthy process (`unloadTimeout`).
    pub stop_grace: Duration,
    /// `maxRestarts`: failures within `restart_window` that make it failed.
    pub max_restarts: u32,
    /// `restartWindow`: how far back failures count, and how long a failed
    /// model refuses starts after its last failure.
    pub restart_window: Duration,
}

impl Default for Monitor {
    fn default() -> Self {
        Self {
            interval: None,
            failures: DEFAULT_HEALTH_CHECK_FAILURES,
            stop_grace: crate::scheduler::DEFAULT_UNLOAD_TIMEOUT,
            max_restarts: DEFAULT_MAX_RESTARTS,
            restart_window: DEFAULT_RESTART_WINDOW,
        }
    }
}

impl Monitor {
    /// Polls a ready model's check endpoint every `interval` (`None`: off).
    #[must_use]
    pub fn interval(mut self, interval: Option<Duration>) -> Self {
        self.interval = interval.filter(|i| !i.is_zero());
        self
    }

    /// Failed polls in a row that make a model unhealthy (at least 1).
    #[must_use]
    pub fn failures(mut self, failures: u32) -> Self {
        self.failures = failures.max(1);
        self
    }

    /// The grace of the stop of an unhealthy process.
    #[must_use]
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// Failures within `window` that make a model failed (at least 1).
    #[must_use]
    pub fn restarts(mut self, max_restarts: u32, window: Duration) -> Self {
        self.max_restarts = max_restarts.max(1);
        self.restart_window = window;
        self
    }
}

/// What a start must do first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Gate {
    /// Start now.
    Go,
    /// Start at this instant, not before (backoff).
    At(Instant),
    /// Refuse: the model is failed.
    Failed {
        /// Failures within the window.
        failures: u32,
        /// The last lines of its output.
        last_output: String,
    },
}

/// A failed model as `/running`, `/api/events` and `/metrics` show it: why,
/// and from when a new request starts it again.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Failed {
    /// What the last failure was, one line (`upstream exited during start: ...`).
    pub reason: String,
    /// The last lines of the model's output at its last failure (its `env`
    /// values blanked out).
    pub last_output: String,
    /// Failures within the window.
    pub failures: u32,
    /// `restartWindow`.
    pub window: Duration,
    /// When the last failure happened, ms since the Unix epoch.
    pub failed_at_ms: u64,
    /// From when a new request starts the model again (`failed_at_ms` plus
    /// the window), ms since the Unix epoch; an explicit load clears it
    /// before.
    pub retry_at_ms: u64,
}

/// One failure as it is recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct Incident {
    /// What happened, one line.
    pub(crate) reason: String,
    /// The process's last output lines.
    pub(crate) last_output: String,
    /// When, ms since the Unix epoch (shown; the window counts on `Instant`s).
    pub(crate) at_ms: u64,
}

/// The failures of one model, owned by its task.
#[derive(Debug, Default)]
pub(crate) struct Restarts {
    /// When each failure within the window happened, oldest first.
    failures: VecDeque<Instant>,
    /// Set once `max_restarts` failures fell within the window.
    failed: bool,
    /// The last failure, quoted while failed.
    last: Incident,
}

impl Restarts {
    /// Records `failure` at `now`; `true` when it is the one that makes the
    /// model failed.
    pub(crate) fn record(&mut self, now: Instant, monitor: &Monitor, failure: Incident) -> bool {
        self.prune(now, monitor);
        self.failures.push_back(now);
        self.last = failure;
        let was = self.failed;
        if self.failures.len() >= monitor.max_restarts as usize {
            self.failed = true;
        }
        self.failed && !was
    }

    /// The failed state as shown, as of `now`; `None` when not failed.
    pub(crate) fn shown(&mut self, now: Instant, monitor: &Monitor) -> Option<Arc<Failed>> {
        self.prune(now, monitor);
        if !self.failed {
            return None;
        }
        let window_ms = u64::try_from(monitor.restart_window.as_millis()).unwrap_or(u64::MAX);
        Some(Arc::new(Failed {
            reason: self.last.reason.clone(),
            last_output: self.last.last_output.clone(),
            failures: u32::try_from(self.failures.len()).unwrap_or(u32::MAX),
            window: monitor.restart_window,
            failed_at_ms: self.last.at_ms,
            retry_at_ms: self.last.at_ms.saturating_add(window_ms),
        }))
    }

    /// When a failed model stops being failed (its window has passed since
    /// the last failure); `None` when it is not failed.
    pub(crate) fn failed_until(&self, monitor: &Monitor) -> Option<Instant> {
        if !self.failed {
            return None;
        }
        self.failures
            .back()
            .map(|&last| last + monitor.restart_window)
    }

    /// Forgets every failure (an explicit load).
    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }

    /// Whether the model is failed now.
    #[cfg(test)]
    fn is_failed(&mut self, now: Instant, monitor: &Monitor) -> bool {
        self.prune(now, monitor);
        self.failed
    }

    /// What a start asked for at `now` must do.
    pub(crate) fn gate(&mut self, now: Instant, monitor: &Monitor) -> Gate {
        self.prune(now, monitor);
        if self.failed {
            return Gate::Failed {
                failures: u32::try_from(self.failures.len()).unwrap_or(u32::MAX),
                last_output: self.last.last_output.clone(),
            };
        }
        match self.failures.back() {
            None => Gate::Go,
            Some(&last) => {
                let at = last + backoff(self.failures.len());
                if at > now { Gate::At(at) } else { Gate::Go }
            }
        }
    }

    /// Drops failures older than the window; a failed model whose last
    /// failure is that old is failed no more.
    fn prune(&mut self, now: Instant, monitor: &Monitor) {
        let window = monitor.restart_window;
        if self.failed {
            if self
                .failures
                .back()
                .is_some_and(|&last| now.saturating_duration_since(last) >= window)
            {
                self.clear();
            }
            return;
        }
        while self
            .failures
            .front()
            .is_some_and(|&first| now.saturating_duration_since(first) >= window)
        {
            self.failures.pop_front();
        }
    }
}

/// The wait before the next start after `n` failures: none for 0, then
/// 1 s, 2 s, 4 s, ... at most [`MAX_BACKOFF`].
pub(crate) fn backoff(n: usize) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    let doublings = u32::try_from(n - 1).unwrap_or(u32::MAX).min(16);
    FIRST_BACKOFF
        .saturating_mul(1 << doublings)
        .min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn said(output: &str) -> Incident {
        Incident {
            reason: "exited".into(),
            last_output: output.into(),
            at_ms: 1_000,
        }
    }

    fn monitor() -> Monitor {
        Monitor::default().restarts(3, Duration::from_secs(100))
    }

    #[test]
    fn backoff_doubles_from_one_second_up_to_a_minute() {
        let s = Duration::from_secs;
        let waits: Vec<Duration> = (0..9).map(backoff).collect();
        assert_eq!(
            waits,
            [s(0), s(1), s(2), s(4), s(8), s(16), s(32), s(60), s(60)]
        );
        assert_eq!(backoff(usize::MAX), MAX_BACKOFF);
    }

    #[tokio::test(start_paused = true)]
    async fn each_failure_delays_the_next_start_and_max_restarts_fails_the_model() {
        let m = monitor();
        let mut r = Restarts::default();
        let t0 = Instant::now();
        assert_eq!(r.gate(t0, &m), Gate::Go);
        r.record(t0, &m, said("boom 1"));
        assert_eq!(r.gate(t0, &m), Gate::At(t0 + Duration::from_secs(1)));
        assert_eq!(r.gate(t0 + Duration::from_secs(1), &m), Gate::Go);
        let t1 = t0 + Duration::from_secs(1);
        r.record(t1, &m, said("boom 2"));
        assert_eq!(r.gate(t1, &m), Gate::At(t1 + Duration::from_secs(2)));
        let t2 = t1 + Duration::from_secs(2);
        assert!(r.record(t2, &m, said("boom 3")));
        assert_eq!(
            r.gate(t2, &m),
            Gate::Failed {
                failures: 3,
                last_output: "boom 3".into()
            }
        );
        let shown = r.shown(t2, &m).expect("failed");
        assert_eq!(
            (
                shown.failures,
                shown.last_output.as_str(),
                shown.retry_at_ms
            ),
            (3, "boom 3", 101_000)
        );
        assert_eq!(r.failed_until(&m), Some(t2 + Duration::from_secs(100)));
        // Still failed just before the window since the last failure ends.
        assert!(r.is_failed(t2 + Duration::from_secs(99), &m));
        assert_eq!(r.shown(t2 + Duration::from_secs(100), &m), None);
        assert_eq!(r.gate(t2 + Duration::from_secs(100), &m), Gate::Go);
    }

    #[tokio::test(start_paused = true)]
    async fn failures_older_than_the_window_no_longer_count_and_a_load_clears() {
        let m = monitor();
        let mut r = Restarts::default();
        let t0 = Instant::now();
        r.record(t0, &m, Incident::default());
        r.record(t0 + Duration::from_secs(60), &m, Incident::default());
        // The first one left the window: two failures then one, not three.
        r.record(t0 + Duration::from_secs(120), &m, Incident::default());
        assert!(!r.is_failed(t0 + Duration::from_secs(120), &m));
        r.record(t0 + Duration::from_secs(121), &m, Incident::default());
        assert!(r.is_failed(t0 + Duration::from_secs(121), &m));
        r.clear();
        assert_eq!(r.gate(t0 + Duration::from_secs(121), &m), Gate::Go);
    }
}
