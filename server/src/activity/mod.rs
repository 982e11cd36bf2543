//! What requests did: the requests being served now and a bounded ring of the
//! most recent finished ones, with their priorities, queue wait, duration and
//! the token counts the upstream reported.
//!
//! | file | concern |
//! |---|---|
//! | `mod` | [`Activity`]: the in-flight table, the finished ring, live feeds |
//! | `tracked` | [`Tracked`]: one request's record, filled in as it goes, kept when it drops |
//! | `meter` | [`MeteredBody`]: the response body that scans usage and ends the record |
//! | `usage` | [`UsageScanner`]: `usage` / llama.cpp `timings` found in passing bytes |
//!
//! The cost on the proxy path is two short critical sections per request (into
//! and out of the in-flight table) plus one for the ring, and a scan of each
//! response chunk for two keys; nothing of the body is kept but an unfinished
//! last line (bounded). Observers never slow it: the finished feed is a
//! `broadcast` channel that drops for laggards, in-flight changes are a `watch`
//! generation read whenever the observer is ready.

mod meter;
mod tracked;
mod usage;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::{broadcast, watch};

use crate::priority::Priority;

pub use meter::MeteredBody;
pub use tracked::Tracked;
pub use usage::{Usage, UsageScanner};

/// Finished requests kept by default (llama-swap's `metricsMaxInMemory`).
pub const DEFAULT_CAPACITY: usize = 1000;

/// Slots of the finished feed; a subscriber further behind loses rows (and is told).
const FEED_CAPACITY: usize = 256;

/// One finished request, as `GET /api/activity` and the `activity` event show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Finished {
    /// Position in the order requests finished (increasing from 1).
    pub id: u64,
    /// The request's `X-Request-Id` (the client's or a generated one).
    pub request_id: String,
    /// The router's sequence number (`seq` in logs and queue events), once admitted.
    pub seq: Option<u64>,
    /// When the request arrived, milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The model ID.
    pub model: String,
    /// The path forwarded upstream, without the query.
    pub path: String,
    /// The parsed `X-Priority` (0 when absent or invalid).
    pub requested_priority: i32,
    /// The priority after trust caps.
    pub capped_priority: i32,
    /// What ranked it in the queue (with the model's floor); `None` if never admitted.
    pub effective_priority: Option<i32>,
    /// The HTTP status answered; 499 when the client left before any answer.
    pub status: u16,
    /// The error code (docs/ERRORS.md) when the proxy answered an error itself,
    /// `client_closed` when the client left, `upstream_failed` when the upstream
    /// failed mid-response.
    pub error: Option<&'static str>,
    /// From admission to the grant; `None` if never granted.
    pub queue_ms: Option<u64>,
    /// From arrival to the end of the response body.
    pub duration_ms: u64,
    /// The response was an event stream.
    pub stream: bool,
    /// Prompt tokens the upstream reported.
    pub prompt_tokens: Option<u64>,
    /// Generated tokens the upstream reported.
    pub completion_tokens: Option<u64>,
    /// Generation speed: the upstream's own figure (llama.cpp `timings`), else
    /// generated tokens over the time from the grant to the end of the body.
    pub tokens_per_second: Option<f64>,
    /// The selector that chose the model, when the request named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
}

/// A request holding its model right now, for the `inflight` event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct InFlight {
    /// The request's `X-Request-Id`.
    pub request_id: String,
    /// The router's sequence number.
    pub seq: Option<u64>,
    /// The model ID.
    pub model: String,
    /// The path forwarded upstream.
    pub path: String,
    /// The parsed `X-Priority`.
    pub requested_priority: i32,
    /// After trust caps.
    pub capped_priority: i32,
    /// What ranked it.
    pub effective_priority: Option<i32>,
    /// When it arrived, milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// When it was granted its model, milliseconds since the Unix epoch.
    pub granted_ms: u64,
    /// How long it waited for the grant.
    pub queue_ms: u64,
}

/// The activity of one served configuration. Shared by the handlers (which
/// record) and the event streams (which observe).
#[derive(Debug)]
pub struct Activity {
    capacity: usize,
    next_id: AtomicU64,
    /// Granted requests by tracking key.
    in_flight: Mutex<BTreeMap<u64, InFlight>>,
    next_key: AtomicU64,
    finished: Mutex<VecDeque<Arc<Finished>>>,
    feed: broadcast::Sender<Arc<Finished>>,
    /// Bumped whenever `in_flight` changes.
    changes: watch::Sender<u64>,
}

impl Default for Activity {
    fn default() -> Self {
        Self::new(DEFAULT_CAPACITY)
    }
}

impl Activity {
    /// Keeps the `capacity` most recent finished requests.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            next_id: AtomicU64::new(1),
            in_flight: Mutex::new(BTreeMap::new()),
            next_key: AtomicU64::new(0),
            finished: Mutex::new(VecDeque::with_capacity(capacity.min(DEFAULT_CAPACITY))),
            feed: broadcast::channel(FEED_CAPACITY).0,
            changes: watch::channel(0).0,
        }
    }

    /// Starts the record of a request for `model` with `priority` (see
    /// [`Tracked`] for the rest of its life).
    pub fn begin(
        self: &Arc<Self>,
        model: &str,
        path: &str,
        request_id: &str,
        priority: Priority,
    ) -> Tracked {
        Tracked::new(Arc::clone(self), model, path, request_id, priority)
    }

    /// The most recent finished requests, oldest first, at most `limit`.
    pub fn recent(&self, limit: usize) -> Vec<Arc<Finished>> {
        let ring = lock(&self.finished);
        let skip = ring.len().saturating_sub(limit);
        ring.iter().skip(skip).cloned().collect()
    }

    /// The requests holding a model now, in the order they were granted.
    pub fn in_flight(&self) -> Vec<InFlight> {
        lock(&self.in_flight).values().cloned().collect()
    }

    /// Finished requests as they finish.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Finished>> {
        self.feed.subscribe()
    }

    /// A generation counter bumped whenever [`in_flight`](Self::in_flight) changes.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn enter(&self, entry: InFlight) -> u64 {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        lock(&self.in_flight).insert(key, entry);
        self.changes.send_modify(|g| *g += 1);
        key
    }

    fn leave(&self, key: u64) {
        lock(&self.in_flight).remove(&key);
        self.changes.send_modify(|g| *g += 1);
    }

    fn finish(&self, mut row: Finished) {
        row.id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let row = Arc::new(row);
        if self.capacity > 0 {
            let mut ring = lock(&self.finished);
            if ring.len() >= self.capacity {
                ring.pop_front();
            }
            ring.push_back(Arc::clone(&row));
        }
        // No subscribers is the normal case without a browser open.
        let _ = self.feed.send(row);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a single insert, remove or copy: a panic cannot
    // leave the data half-changed.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
