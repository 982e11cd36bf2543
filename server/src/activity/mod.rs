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
//! The cost on the proxy path, for a request whose model was seen before: the
//! model ID is one shared `Arc<str>` per model; the finished row reuses the
//! oldest row's allocation once the ring is full; the in-flight entry is one
//! `Arc` holding copies of the id, path and headers (the headers' values are
//! shared `Bytes`), entered in the in-flight table when the router admits the
//! request and removed when its record ends, its grant and answer set in
//! place. Shared state is short critical sections of the in-flight table
//! (into it, out of it, at its grant and at its answer), one of
//! the ring (which also holds what a reload may change: its size and the
//! history database), and read locks of the model names and of the capture
//! buffer (replaced when a reload changes `captureBuffer`). The
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

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::time::Duration;

use compact_str::CompactString;
use futures_util::task::AtomicWaker;
use tokio::sync::{broadcast, watch};

use crate::capture::{Captures, Recorder};
use crate::priority::Priority;
use crate::store::{ActivityQuery, ActivityStats, History, Page, Sqlite, StatsBuilder, StoreError};

// The unit tests and the activity bench build a metered body directly.
pub use meter::MeteredBody;
pub(crate) use tracked::Tracked;
pub(crate) use usage::Usage;
pub use usage::UsageScanner;
// The row lives in the store, below this module; most of the crate names it from here.
pub(crate) use crate::store::Finished;

/// Finished requests kept by default (llama-swap's `metricsMaxInMemory`).
pub(crate) const DEFAULT_CAPACITY: usize = 1000;

/// Slots of the finished feed; a subscriber further behind loses rows (and is told).
const FEED_CAPACITY: usize = 256;

/// Model IDs kept shared; past this many (reloads that keep renaming models),
/// a record gets its own copy of the name.
const MAX_MODELS: usize = 1024;

/// A request in flight: listed from its admission (while it waits for its
/// model) until its record ends, for the `inflight` event and
/// `POST /api/inflight/{id}/cancel`. What does not change while it runs is
/// plain; what does (its grant, its answer's headers and bytes, a cancel) is
/// read through methods.
#[derive(Debug)]
#[non_exhaustive]
pub struct InFlight {
    /// Its number in the table (llama-swap's in-flight `id`), increasing
    /// from 1 in the order requests were listed.
    pub id: u64,
    /// The request's `X-Request-Id`.
    pub request_id: CompactString,
    /// The router's sequence number, when the router admitted it.
    pub seq: Option<u64>,
    /// The model ID.
    pub model: Arc<str>,
    /// The path forwarded upstream, without the query.
    pub path: CompactString,
    /// The request's method.
    pub method: http::Method,
    /// The address of the connection it came on (the `inflight` event's
    /// `remote_ip` prefers the forwarding headers, as llama-swap's does).
    pub remote_ip: Option<IpAddr>,
    /// The client's headers (rendered with secrets redacted).
    pub req_headers: http::HeaderMap,
    /// The parsed `X-Priority`.
    pub requested_priority: i32,
    /// After trust caps.
    pub capped_priority: i32,
    /// What ranks it, when the router admitted it.
    pub effective_priority: Option<i32>,
    /// When it arrived, milliseconds since the Unix epoch.
    pub time_ms: u64,
    /// The name of the API key it came with.
    pub api_key: Option<Arc<str>>,
    /// The session its client named.
    pub session_id: Option<CompactString>,
    /// The selector that chose its model.
    pub selector: Option<String>,
    live: Live,
}

/// The parts of an in-flight entry that change while it runs.
#[derive(Debug, Default)]
struct Live {
    /// When it was granted its model (ms since the epoch); 0 while it waits.
    granted_ms: AtomicU64,
    queue_ms: AtomicU64,
    resp_bytes: AtomicU64,
    resp_headers: OnceLock<http::HeaderMap>,
    cancelled: AtomicBool,
    /// Whoever waits on the request now: its handler while it waits for
    /// the grant or the upstream's answer, then its response body.
    waker: AtomicWaker,
}

impl InFlight {
    /// When it was granted its model (ms since the epoch); `None` while it waits.
    pub fn granted_ms(&self) -> Option<u64> {
        Some(self.live.granted_ms.load(Ordering::Acquire)).filter(|ms| *ms != 0)
    }

    /// How long it waited for its grant, once granted.
    pub fn queue_ms(&self) -> Option<u64> {
        self.granted_ms()
            .map(|_| self.live.queue_ms.load(Ordering::Relaxed))
    }

    /// Bytes of the response body sent so far.
    pub fn resp_bytes(&self) -> u64 {
        self.live.resp_bytes.load(Ordering::Relaxed)
    }

    /// The response's headers, once the upstream answered.
    pub fn resp_headers(&self) -> Option<&http::HeaderMap> {
        self.live.resp_headers.get()
    }

    /// Counts `n` more bytes of the response body sent.
    pub fn sent(&self, n: usize) {
        let n = u64::try_from(n).unwrap_or(u64::MAX);
        self.live.resp_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Whether an operator cancelled it.
    pub fn is_cancelled(&self) -> bool {
        self.live.cancelled.load(Ordering::Acquire)
    }

    /// Tells whoever serves the request to stop.
    pub fn cancel(&self) {
        self.live.cancelled.store(true, Ordering::Release);
        self.live.waker.wake();
    }

    /// Ready once the request is cancelled; registers `cx`'s waker
    /// otherwise (one waiter at a time: the last one registered is woken).
    pub fn poll_cancelled(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.is_cancelled() {
            return std::task::Poll::Ready(());
        }
        self.live.waker.register(cx.waker());
        // A cancel between the check and the registration woke nobody.
        if self.is_cancelled() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    }

    /// Resolves once the request is cancelled.
    pub async fn cancelled(&self) {
        std::future::poll_fn(|cx| self.poll_cancelled(cx)).await;
    }
}

/// The activity of one served configuration. Shared by the handlers (which
/// record) and the event streams (which observe).
#[derive(Debug)]
pub struct Activity {
    /// Requests admitted and not ended, by [`InFlight::id`].
    in_flight: Mutex<BTreeMap<u64, Arc<InFlight>>>,
    next_key: AtomicU64,
    finished: Mutex<Ring>,
    feed: broadcast::Sender<Arc<Finished>>,
    /// [`Feed`]s alive: the feed is sent to only when there is one.
    listeners: Arc<AtomicUsize>,
    /// Bumped whenever `in_flight` changes while a receiver exists.
    changes: watch::Sender<u64>,
    /// One shared name per model, so a record's model costs no copy.
    models: RwLock<HashSet<Arc<str>>>,
    /// Where captures of finished requests are kept (`None`: captures off);
    /// replaced when a reload changes `captureBuffer`.
    captures: RwLock<Option<Arc<Captures>>>,
    /// Where each API key's finished requests and tokens are counted (`None`: nowhere).
    key_totals: Option<Arc<crate::metrics::Metrics>>,
}

/// The finished rows, oldest first, the id of the next one, and what a
/// reload may change: how many rows are kept and where they go beyond.
#[derive(Debug)]
struct Ring {
    rows: VecDeque<Arc<Finished>>,
    next_id: u64,
    /// The time of the last row: a row is never recorded before it, so
    /// times rise with the ids (the history's time filters rely on it).
    last_ms: u64,
    /// Rows kept (`metricsMaxInMemory`).
    capacity: usize,
    /// Where finished rows are kept beyond the ring (`store.path`).
    history: Arc<History>,
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
        *self
            .captures
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner) = captures;
        self
    }

    /// The capture buffer, when captures are on.
    pub fn captures(&self) -> Option<Arc<Captures>> {
        read(&self.captures).clone()
    }

    /// A recorder for a request's capture ([`Captures::recorder`]); `None`
    /// when captures are off.
    pub(crate) fn recorder(
        &self,
        path: &str,
        headers: &http::HeaderMap,
        body: Option<&bytes::Bytes>,
    ) -> Option<Recorder> {
        let captures = read(&self.captures);
        Some(captures.as_ref()?.recorder(path, headers, body))
    }

    /// Applies a reloaded configuration's settings in place, so that the
    /// requests in flight, the finished rows and the feeds carry on:
    /// `capacity` rows are kept from now on (the newest that fit of those
    /// kept already); a `capture_budget` (bytes) other than the buffer's
    /// starts a new buffer (0: captures off; the old buffer's captures are
    /// dropped); `history`, when given, receives the rows from now on (ids
    /// go on from the greater of this ring's next and the history's).
    pub fn reconfigure(
        &self,
        capacity: usize,
        capture_budget: usize,
        history: Option<Arc<History>>,
    ) {
        {
            let mut ring = lock(&self.finished);
            ring.capacity = capacity;
            let excess = ring.rows.len().saturating_sub(capacity);
            ring.rows.drain(..excess);
            if let Some(history) = history {
                ring.next_id = ring.next_id.max(history.next_id());
                ring.last_ms = ring.last_ms.max(history.last_ms());
                ring.history = history;
            }
        }
        let budget = self.captures().map_or(0, |c| c.budget());
        if budget != capture_budget {
            let fresh = Captures::new(capture_budget);
            *self
                .captures
                .write()
                .unwrap_or_else(PoisonError::into_inner) = fresh;
        }
    }

    /// Sets each row's `has_capture` to whether its capture is kept, once
    /// the captures handed over before the call are stored.
    pub async fn overlay_captures<'a>(&self, rows: impl IntoIterator<Item = &'a mut Finished>) {
        let captures = self.captures();
        if let Some(captures) = &captures {
            captures.caught_up().await;
        }
        for row in rows {
            row.has_capture = captures.as_ref().is_some_and(|c| c.contains(row.id));
        }
    }

    /// Keeps the `capacity` most recent finished requests, and hands every
    /// finished row to `history` too; ids go on from the last one it kept.
    pub fn with_history(capacity: usize, history: Arc<History>) -> Self {
        let next_id = history.next_id();
        let last_ms = history.last_ms();
        Self {
            in_flight: Mutex::new(BTreeMap::new()),
            next_key: AtomicU64::new(1),
            finished: Mutex::new(Ring {
                rows: VecDeque::with_capacity(capacity.min(DEFAULT_CAPACITY)),
                next_id,
                last_ms,
                capacity,
                history,
            }),
            feed: broadcast::channel(FEED_CAPACITY).0,
            listeners: Arc::new(AtomicUsize::new(0)),
            changes: watch::channel(0).0,
            models: RwLock::new(HashSet::new()),
            captures: RwLock::new(None),
            key_totals: None,
        }
    }

    /// Counts each finished request of an API key, and its tokens, by the
    /// key's name in `metrics` (`llamaswap_key_requests_total`, `llamaswap_key_tokens_total`).
    #[must_use]
    pub fn with_key_totals(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.key_totals = Some(metrics);
        self
    }

    /// Where finished rows are kept (and queried) now.
    pub fn history(&self) -> Arc<History> {
        Arc::clone(&lock(&self.finished).history)
    }

    /// One page of rows: from the history's database when there is one, else
    /// from the ring.
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database cannot be read.
    pub(crate) async fn page(&self, query: ActivityQuery) -> Result<Page<Finished>, StoreError> {
        let asked = self
            .on_database(|db| {
                let query = query.clone();
                async move { db.page(query).await }
            })
            .await;
        if let Some(answer) = asked {
            return answer;
        }
        let rows = self.recent(usize::MAX);
        let page = query.page_of(&rows);
        Ok(Page {
            data: page.data.into_iter().map(|r| (*r).clone()).collect(),
            page: page.page,
            limit: page.limit,
            total: page.total,
            total_pages: page.total_pages,
        })
    }

    /// `query` on the database the history is kept in (`None` without one),
    /// run again on the new one when a reload closed it meanwhile.
    async fn on_database<T, Answer>(
        &self,
        query: impl Fn(Arc<Sqlite>) -> Answer,
    ) -> Option<Result<T, StoreError>>
    where
        Answer: std::future::Future<Output = Result<T, StoreError>>,
    {
        loop {
            let history = self.history();
            let db = Arc::clone(history.database()?);
            match query(db).await {
                // Closed by a reload: ask where rows are kept now (a server
                // stopping closes it without a new one: that is the answer).
                Err(StoreError::Closed { .. }) if !Arc::ptr_eq(&history, &self.history()) => {}
                answer => return Some(answer),
            }
        }
    }

    /// Totals and histograms of `model` (or every model): from the history's
    /// database when there is one, else from the ring.
    ///
    /// # Errors
    ///
    /// [`StoreError::Query`] when the database cannot be read.
    pub(crate) async fn stats(&self, model: Option<String>) -> Result<ActivityStats, StoreError> {
        let asked = self
            .on_database(|db| {
                let model = model.clone();
                async move { db.stats(model).await }
            })
            .await;
        if let Some(answer) = asked {
            return answer;
        }
        let mut builder = StatsBuilder::default();
        for row in self.recent(usize::MAX) {
            if model.as_deref().is_none_or(|m| *row.model == *m) {
                builder.add(&row);
            }
        }
        Ok(builder.finish())
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

    /// The requests in flight (waiting for their model or holding it), in
    /// the order they were listed.
    pub fn in_flight(&self) -> Vec<Arc<InFlight>> {
        lock(&self.in_flight).values().cloned().collect()
    }

    /// The first `limit` requests in flight, in the order they were listed,
    /// and how many there are.
    pub fn in_flight_first(&self, limit: usize) -> (Vec<Arc<InFlight>>, usize) {
        let table = lock(&self.in_flight);
        (table.values().take(limit).cloned().collect(), table.len())
    }

    /// Asks the request in flight numbered `id` to stop (see
    /// [`InFlight::cancel`]); false when no such request is in flight.
    pub fn cancel(&self, id: u64) -> bool {
        let entry = lock(&self.in_flight).get(&id).cloned();
        entry.is_some_and(|entry| {
            entry.cancel();
            true
        })
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

    /// A number for the next entry of the table.
    fn next_id(&self) -> u64 {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }

    fn enter(&self, entry: Arc<InFlight>) {
        let mut table = lock(&self.in_flight);
        table.insert(entry.id, entry);
        let watched = self.watched();
        drop(table);
        if watched {
            self.changes.send_modify(|g| *g += 1);
        }
    }

    fn leave(&self, id: u64) {
        let mut table = lock(&self.in_flight);
        table.remove(&id);
        let watched = self.watched();
        drop(table);
        if watched {
            self.changes.send_modify(|g| *g += 1);
        }
    }

    /// An entry of the table changed in place (granted, answered).
    fn touched(&self) {
        // Read under the table's lock like `enter` and `leave`, so a reader
        // that subscribes meanwhile sees the change one way or the other.
        let watched = {
            let _table = lock(&self.in_flight);
            self.watched()
        };
        if watched {
            self.changes.send_modify(|g| *g += 1);
        }
    }

    /// Whether anyone watches the in-flight table. Read under its lock, like
    /// the reader's [`in_flight`](Self::in_flight) after subscribing: a
    /// receiver either is counted here or reads the table after this change.
    fn watched(&self) -> bool {
        self.changes.receiver_count() > 0
    }

    /// Counts a finished request in its key's totals (every request its
    /// key made, whether it keeps a row or not).
    pub(super) fn finish_unmetered(&self, row: &Finished) {
        if let (Some(metrics), Some(key)) = (&self.key_totals, &row.api_key) {
            let ok = row.error.is_none() && row.status < 400;
            metrics.key_finished(key, ok, row.prompt_tokens, row.completion_tokens);
        }
    }

    /// Keeps `row` (and its capture) as the next id, and counts it.
    pub(super) fn finish(&self, mut row: Finished, capture: Option<Recorder>) {
        self.finish_unmetered(&row);
        let mut ring = lock(&self.finished);
        row.id = ring.next_id;
        ring.next_id += 1;
        // A request that ended a moment before the last one recorded (on
        // another thread), or a clock set back, is recorded at the last
        // one's time.
        row.time_ms = row.time_ms.max(ring.last_ms);
        ring.last_ms = row.time_ms;
        // Handed over below, once the ring's lock is released; queries check
        // whether it is still kept.
        row.has_capture = capture.as_ref().is_some_and(|c| !c.overflowed());
        let id = row.id;
        let capture = move || {
            if let Some(recorder) = capture
                && let Some(captures) = read(&self.captures).as_ref()
            {
                captures.submit(id, recorder);
            }
        };
        let listening = self.listeners.load(Ordering::Relaxed) > 0;
        // Handed to the database under the ring's lock (a send that never
        // waits): the writer gets the rows in the ids' order, and the
        // database needs no reference of its own here.
        if ring.capacity == 0 {
            let db = ring.history.database();
            if listening || db.is_some() {
                let row = Arc::new(row);
                if listening {
                    let _ = self.feed.send(Arc::clone(&row));
                }
                if let Some(db) = db {
                    db.record(row);
                }
            }
            drop(ring);
            capture();
            return;
        }
        let row = if ring.rows.len() >= ring.capacity {
            recycle(ring.rows.pop_front(), row)
        } else {
            Arc::new(row)
        };
        if listening {
            // Sent under the ring's lock, so the feed's order is the ids'.
            let _ = self.feed.send(Arc::clone(&row));
        }
        if let Some(db) = ring.history.database() {
            db.record(Arc::clone(&row));
        }
        ring.rows.push_back(row);
        drop(ring);
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

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
