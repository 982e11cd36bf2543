//! What requests did: the requests being served now and a bounded ring of the
//! most recent finished ones, with their priorities, queue wait, duration and
//! the token counts the upstream reported.
//!
//! | file | concern |
//! |---|---|
//! | `mod` | [`Activity`]: the in-flight table, the finished ring, live feeds |
//! | `tracked` | [`Tracked`]: one request's record, filled in as it goes, kept when it drops |
//! | `meter` | [`meter::MeteredBody`]: the response body that scans usage and ends the record |
//! | `usage` | [`UsageScanner`]: `usage` / llama.cpp `timings` found in passing bytes |
//!
//! The cost on the proxy path, for a request whose id and path are short
//! (inline strings, up to 24 bytes) and whose model was seen before, is no
//! heap allocation once the ring is full (the oldest row's allocation is
//! reused): the model ID is one shared `Arc<str>` per model, the id and path
//! are copied once and moved from the in-flight entry into the finished row.
//! Shared state is two short critical sections of the in-flight table (into
//! and out of it), one of the ring, and a read lock of the model names. The
//! response is scanned for two keys; nothing of the body is kept but an
//! unfinished last line (bounded). Observers never slow it, and cost nothing
//! when there are none: the finished feed is a `broadcast` channel that drops
//! for laggards and is sent to only while a [`Feed`] exists; in-flight changes
//! are a `watch` generation bumped only while a receiver exists (a later one
//! reads the table itself).

mod meter;
mod tracked;
mod usage;

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use compact_str::CompactString;
use serde::{Serialize, Serializer};
use tokio::sync::{broadcast, watch};

use crate::priority::Priority;

// The unit tests and the activity bench build a metered body directly.
#[cfg(any(test, feature = "bench"))]
pub use meter::MeteredBody;
pub use tracked::Tracked;
pub use usage::{Usage, UsageScanner};

/// Finished requests kept by default (llama-swap's `metricsMaxInMemory`).
pub const DEFAULT_CAPACITY: usize = 1000;

/// Slots of the finished feed; a subscriber further behind loses rows (and is told).
const FEED_CAPACITY: usize = 256;

/// Model IDs kept shared; past this many (reloads that keep renaming models),
/// a record gets its own copy of the name.
const MAX_MODELS: usize = 1024;

/// One finished request, as `GET /api/activity` and the `activity` event show it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Finished {
    /// Position in the order requests finished (increasing from 1).
    pub id: u64,
    /// The request's `X-Request-Id` (the client's or a generated one).
    pub request_id: CompactString,
    /// The router's sequence number (`seq` in logs and queue events), once admitted.
    pub seq: Option<u64>,
    /// When the request arrived, milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The model ID.
    #[serde(serialize_with = "as_str")]
    pub model: Arc<str>,
    /// The path forwarded upstream, without the query.
    pub path: CompactString,
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
    pub request_id: CompactString,
    /// The router's sequence number.
    pub seq: Option<u64>,
    /// The model ID.
    #[serde(serialize_with = "as_str")]
    pub model: Arc<str>,
    /// The path forwarded upstream.
    pub path: CompactString,
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
    /// Granted requests by tracking key.
    in_flight: Mutex<BTreeMap<u64, InFlight>>,
    next_key: AtomicU64,
    finished: Mutex<Ring>,
    feed: broadcast::Sender<Arc<Finished>>,
    /// [`Feed`]s alive: the feed is sent to only when there is one.
    listeners: Arc<AtomicUsize>,
    /// Bumped whenever `in_flight` changes while a receiver exists.
    changes: watch::Sender<u64>,
    /// One shared name per model, so a record's model costs no copy.
    models: RwLock<HashSet<Arc<str>>>,
}

/// The finished rows, oldest first, and the id of the next one.
#[derive(Debug)]
struct Ring {
    rows: VecDeque<Arc<Finished>>,
    next_id: u64,
}

/// Finished requests as they finish; see [`Activity::subscribe`].
#[derive(Debug)]
pub struct Feed {
    rows: broadcast::Receiver<Arc<Finished>>,
    listeners: Arc<AtomicUsize>,
}

impl Feed {
    /// The next row; [`broadcast::error::RecvError::Lagged`] when rows were
    /// dropped because this feed fell behind. Cancel-safe.
    pub async fn recv(&mut self) -> Result<Arc<Finished>, broadcast::error::RecvError> {
        self.rows.recv().await
    }

    /// The next row if one is waiting.
    pub fn try_recv(&mut self) -> Result<Arc<Finished>, broadcast::error::TryRecvError> {
        self.rows.try_recv()
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.listeners.fetch_sub(1, Ordering::Relaxed);
    }
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
            in_flight: Mutex::new(BTreeMap::new()),
            next_key: AtomicU64::new(0),
            finished: Mutex::new(Ring {
                rows: VecDeque::with_capacity(capacity.min(DEFAULT_CAPACITY)),
                next_id: 1,
            }),
            feed: broadcast::channel(FEED_CAPACITY).0,
            listeners: Arc::new(AtomicUsize::new(0)),
            changes: watch::channel(0).0,
            models: RwLock::new(HashSet::new()),
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
        let model = self.model(model);
        Tracked::new(Arc::clone(self), model, path, request_id, priority)
    }

    /// The most recent finished requests, oldest first, at most `limit`.
    pub fn recent(&self, limit: usize) -> Vec<Arc<Finished>> {
        let ring = lock(&self.finished);
        let skip = ring.rows.len().saturating_sub(limit);
        ring.rows.iter().skip(skip).cloned().collect()
    }

    /// The requests holding a model now, in the order they were granted.
    pub fn in_flight(&self) -> Vec<InFlight> {
        lock(&self.in_flight).values().cloned().collect()
    }

    /// Finished requests as they finish, from now on (the earlier ones are in
    /// [`recent`](Self::recent): a row finishing meanwhile may be in both,
    /// never in neither, when this is called first).
    pub fn subscribe(&self) -> Feed {
        let rows = self.feed.subscribe();
        // Counted after the receiver exists and before the caller reads the
        // ring: `finish` reads the count under the ring's lock, so a row is
        // either sent to this feed or already in the ring when it is read.
        self.listeners.fetch_add(1, Ordering::Relaxed);
        Feed {
            rows,
            listeners: Arc::clone(&self.listeners),
        }
    }

    /// A generation counter bumped whenever [`in_flight`](Self::in_flight)
    /// changes. Only changes after this call bump it: the state before is what
    /// [`in_flight`](Self::in_flight) reads.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The shared name of `model`.
    fn model(&self, model: &str) -> Arc<str> {
        if let Some(shared) = read(&self.models).get(model) {
            return Arc::clone(shared);
        }
        let mut models = self.models.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(shared) = models.get(model) {
            return Arc::clone(shared);
        }
        let shared: Arc<str> = Arc::from(model);
        if models.len() < MAX_MODELS {
            models.insert(Arc::clone(&shared));
        }
        shared
    }

    fn enter(&self, entry: InFlight) -> u64 {
        let key = self.next_key.fetch_add(1, Ordering::Relaxed);
        let mut table = lock(&self.in_flight);
        table.insert(key, entry);
        let watched = self.watched();
        drop(table);
        if watched {
            self.changes.send_modify(|g| *g += 1);
        }
        key
    }

    /// Takes the entry out of the table (its strings go into the finished row).
    fn leave(&self, key: u64) -> Option<InFlight> {
        let mut table = lock(&self.in_flight);
        let entry = table.remove(&key);
        let watched = self.watched();
        drop(table);
        if watched {
            self.changes.send_modify(|g| *g += 1);
        }
        entry
    }

    /// Whether anyone watches the in-flight table. Read under its lock, like
    /// the reader's [`in_flight`](Self::in_flight) after subscribing: a
    /// receiver either is counted here or reads the table after this change.
    fn watched(&self) -> bool {
        self.changes.receiver_count() > 0
    }

    fn finish(&self, mut row: Finished) {
        let mut ring = lock(&self.finished);
        row.id = ring.next_id;
        ring.next_id += 1;
        let listening = self.listeners.load(Ordering::Relaxed) > 0;
        if self.capacity == 0 {
            if listening {
                let _ = self.feed.send(Arc::new(row));
            }
            return;
        }
        let row = if ring.rows.len() >= self.capacity {
            recycle(ring.rows.pop_front(), row)
        } else {
            Arc::new(row)
        };
        if listening {
            // Sent under the ring's lock, so the feed's order is the ids'.
            let _ = self.feed.send(Arc::clone(&row));
        }
        ring.rows.push_back(row);
    }
}

/// `row` in the allocation of the evicted `oldest` when nobody else holds it.
fn recycle(oldest: Option<Arc<Finished>>, row: Finished) -> Arc<Finished> {
    match oldest {
        Some(mut oldest) => match Arc::get_mut(&mut oldest) {
            Some(slot) => {
                *slot = row;
                oldest
            }
            None => Arc::new(row),
        },
        None => Arc::new(row),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is a single insert, remove or copy: a panic cannot
    // leave the data half-changed.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    // Written only by single inserts, like the mutexes above.
    lock.read().unwrap_or_else(PoisonError::into_inner)
}

fn as_str<S: Serializer>(value: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(value)
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
