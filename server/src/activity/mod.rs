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

mod decode;
mod meter;
mod tracked;
mod usage;

use std::borrow::Cow;
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};
use std::time::Duration;

use compact_str::CompactString;
use serde::{Serialize, Serializer};
use tokio::sync::{broadcast, watch};

use crate::capture::{Captures, Recorder};
use crate::priority::Priority;
use crate::store::History;

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

/// One finished request, as `GET /api/metrics/activity`, `GET /api/activity`
/// and the `activity` event show it: llama-swap's row (`id`, `timestamp`,
/// `model`, `req_path`, `resp_content_type`, `resp_status_code`, `tokens`,
/// `duration_ms`, `has_capture`, `error_msg`, `metadata`) and this server's
/// fields beside it (see [`Finished::serialize`] for the names).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Finished {
    /// Position in the order requests finished (increasing from 1, and on
    /// across restarts when the history is kept in a database).
    pub id: u64,
    /// The request's `X-Request-Id` (the client's or a generated one).
    pub request_id: CompactString,
    /// The router's sequence number (`seq` in logs and queue events), once admitted.
    pub seq: Option<u64>,
    /// When the request arrived, milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The model ID.
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
    /// The response's `Content-Type` (shared between rows: few distinct values).
    pub content_type: Option<Arc<str>>,
    /// The error code (docs/ERRORS.md) when the proxy answered an error itself,
    /// `client_closed` when the client left, `upstream_failed` when the upstream
    /// failed mid-response, `cancelled` when an operator cancelled it.
    pub error: Option<Cow<'static, str>>,
    /// What went wrong, in words: the upstream's error message for a failed
    /// answer (llama-swap's `error_msg`), or why the body could not be read.
    pub error_msg: Option<Box<str>>,
    /// From admission to the grant; `None` if never granted.
    pub queue_ms: Option<u64>,
    /// From arrival to the end of the response body (or the upstream's own
    /// time when it reports a longer one, as llama-swap counts it).
    pub duration_ms: u64,
    /// The response was an event stream.
    pub stream: bool,
    /// Prompt tokens the upstream reported.
    pub prompt_tokens: Option<u64>,
    /// Generated tokens the upstream reported.
    pub completion_tokens: Option<u64>,
    /// Prompt tokens the upstream served from its cache.
    pub cached_tokens: Option<u64>,
    /// Tokens drafted by speculative decoding.
    pub draft_tokens: Option<u64>,
    /// Drafted tokens accepted.
    pub draft_accepted: Option<u64>,
    /// Prompt processing speed the upstream reported.
    pub prompt_per_second: Option<f64>,
    /// Generation speed: the upstream's own figure (llama.cpp `timings`,
    /// vLLM `metrics`), else generated tokens over the time from the grant to
    /// the end of the body.
    pub tokens_per_second: Option<f64>,
    /// The selector that chose the model, when the request named one.
    pub selector: Option<String>,
    /// The name of the API key the request came with (never the key).
    pub api_key: Option<Arc<str>>,
    /// The session the client named in one of `ui.activity.session_id`'s headers.
    pub session_id: Option<CompactString>,
    /// A capture of the request and response was kept (see `GET /api/captures/{id}`).
    pub has_capture: bool,
}

impl Serialize for Finished {
    /// llama-swap's row, then this server's fields:
    ///
    /// ```json
    /// {"id":1,"timestamp":"2026-12-02T06:48:02.123Z","model":"m1",
    ///  "req_path":"/v1/chat/completions","resp_content_type":"application/json",
    ///  "resp_status_code":200,
    ///  "tokens":{"cache_tokens":-1,"draft_tokens":-1,"draft_acc_tokens":-1,
    ///            "input_tokens":1,"output_tokens":2,"prompt_per_second":-1,
    ///            "tokens_per_second":56.1},
    ///  "duration_ms":35,"has_capture":true,"error_msg":"...",
    ///  "metadata":{"fifo_priority":"0","selector":"fast"},
    ///  "request_id":"8ea5","seq":0,"requested_priority":0,"capped_priority":0,
    ///  "effective_priority":0,"queue_ms":19,"stream":false,"error":null,
    ///  "api_key":null,"session_id":null}
    /// ```
    ///
    /// As in llama-swap, a token figure the upstream did not report is `-1`
    /// (`0` for the input and output counts); `error_msg` is left out when
    /// there is none, `metadata` when it would be empty.
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("id", &self.id)?;
        map.serialize_entry("timestamp", &Rfc3339(self.time_ms))?;
        map.serialize_entry("model", &*self.model)?;
        map.serialize_entry("req_path", self.path.as_str())?;
        map.serialize_entry(
            "resp_content_type",
            self.content_type.as_deref().unwrap_or_default(),
        )?;
        map.serialize_entry("resp_status_code", &self.status)?;
        map.serialize_entry("tokens", &Tokens(self))?;
        map.serialize_entry("duration_ms", &self.duration_ms)?;
        map.serialize_entry("has_capture", &self.has_capture)?;
        if let Some(message) = &self.error_msg {
            map.serialize_entry("error_msg", message)?;
        }
        if self.effective_priority.is_some() || self.selector.is_some() {
            map.serialize_entry("metadata", &Metadata(self))?;
        }
        map.serialize_entry("request_id", self.request_id.as_str())?;
        map.serialize_entry("seq", &self.seq)?;
        map.serialize_entry("requested_priority", &self.requested_priority)?;
        map.serialize_entry("capped_priority", &self.capped_priority)?;
        map.serialize_entry("effective_priority", &self.effective_priority)?;
        map.serialize_entry("queue_ms", &self.queue_ms)?;
        map.serialize_entry("stream", &self.stream)?;
        map.serialize_entry("error", &self.error)?;
        map.serialize_entry("api_key", &self.api_key.as_deref())?;
        map.serialize_entry("session_id", &self.session_id.as_deref())?;
        map.end()
    }
}

/// A time as RFC 3339 in UTC, with milliseconds when there are any.
struct Rfc3339(u64);

impl Serialize for Rfc3339 {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let ms = i64::try_from(self.0).unwrap_or(i64::MAX);
        match jiff::Timestamp::from_millisecond(ms) {
            Ok(at) => serializer.collect_str(&at),
            Err(_) => serializer.serialize_str(""),
        }
    }
}

/// llama-swap's `tokens` object.
struct Tokens<'a>(&'a Finished);

impl Serialize for Tokens<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let row = self.0;
        let count = |n: Option<u64>| n.map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let mut map = serializer.serialize_map(Some(7))?;
        map.serialize_entry("cache_tokens", &count(row.cached_tokens))?;
        map.serialize_entry("draft_tokens", &count(row.draft_tokens))?;
        map.serialize_entry("draft_acc_tokens", &count(row.draft_accepted))?;
        map.serialize_entry("input_tokens", &row.prompt_tokens.unwrap_or(0))?;
        map.serialize_entry("output_tokens", &row.completion_tokens.unwrap_or(0))?;
        map.serialize_entry("prompt_per_second", &row.prompt_per_second.unwrap_or(-1.0))?;
        map.serialize_entry("tokens_per_second", &row.tokens_per_second.unwrap_or(-1.0))?;
        map.end()
    }
}

/// llama-swap's `metadata`: the priority that ranked the request (its
/// `fifo_priority`) and the selector that chose the model.
struct Metadata<'a>(&'a Finished);

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(None)?;
        if let Some(priority) = self.0.effective_priority {
            map.serialize_entry("fifo_priority", &priority.to_string())?;
        }
        if let Some(selector) = &self.0.selector {
            map.serialize_entry("selector", selector)?;
        }
        map.end()
    }
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
    /// Where finished rows are kept beyond the ring.
    history: Arc<History>,
    /// Where captures of finished requests are kept (`None`: captures off).
    captures: Option<Arc<Captures>>,
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
    /// Keeps the `capacity` most recent finished requests, in memory only.
    pub fn new(capacity: usize) -> Self {
        Self::with_history(capacity, Arc::new(History::in_memory()))
    }

    /// Keeps the captures of finished requests in `captures` (`None`: off).
    #[must_use]
    pub fn with_captures(mut self, captures: Option<Arc<Captures>>) -> Self {
        self.captures = captures;
        self
    }

    /// The capture buffer, when captures are on.
    pub fn captures(&self) -> Option<&Arc<Captures>> {
        self.captures.as_ref()
    }

    /// Sets each row's `has_capture` to whether its capture is kept, once
    /// the captures handed over before the call are stored.
    pub async fn overlay_captures<'a>(&self, rows: impl IntoIterator<Item = &'a mut Finished>) {
        if let Some(captures) = &self.captures {
            captures.caught_up().await;
        }
        for row in rows {
            row.has_capture = self.captures.as_ref().is_some_and(|c| c.contains(row.id));
        }
    }

    /// Keeps the `capacity` most recent finished requests, and hands every
    /// finished row to `history` too; ids go on from the last one it kept.
    pub fn with_history(capacity: usize, history: Arc<History>) -> Self {
        let next_id = history.next_id();
        Self {
            capacity,
            in_flight: Mutex::new(BTreeMap::new()),
            next_key: AtomicU64::new(0),
            finished: Mutex::new(Ring {
                rows: VecDeque::with_capacity(capacity.min(DEFAULT_CAPACITY)),
                next_id,
            }),
            feed: broadcast::channel(FEED_CAPACITY).0,
            listeners: Arc::new(AtomicUsize::new(0)),
            changes: watch::channel(0).0,
            models: RwLock::new(HashSet::new()),
            history,
            captures: None,
        }
    }

    /// Where finished rows are kept (and queried).
    pub fn history(&self) -> &History {
        &self.history
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
        let model = self.shared(model);
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

    /// The shared copy of `model` (a model ID, or another value many rows
    /// repeat, such as a content type).
    pub(crate) fn shared(&self, model: &str) -> Arc<str> {
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

    fn finish(&self, mut row: Finished, capture: Option<Box<Recorder>>) {
        let capture = capture.and_then(|c| Some((self.captures.as_ref()?, c)));
        let db = self.history.database();
        let mut ring = lock(&self.finished);
        row.id = ring.next_id;
        ring.next_id += 1;
        // Handed over below, once the ring's lock is released; queries check
        // whether it is still kept.
        row.has_capture = capture.as_ref().is_some_and(|(_, c)| !c.overflowed());
        let id = row.id;
        let capture = move || {
            if let Some((captures, recorder)) = capture {
                captures.submit(id, recorder);
            }
        };
        let listening = self.listeners.load(Ordering::Relaxed) > 0;
        if self.capacity == 0 {
            if listening || db.is_some() {
                let row = Arc::new(row);
                if listening {
                    let _ = self.feed.send(Arc::clone(&row));
                }
                drop(ring);
                if let Some(db) = db {
                    db.record(row);
                }
            }
            capture();
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
        let kept = db.map(|_| Arc::clone(&row));
        ring.rows.push_back(row);
        drop(ring);
        if let (Some(db), Some(row)) = (db, kept) {
            db.record(row);
        }
        capture();
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
