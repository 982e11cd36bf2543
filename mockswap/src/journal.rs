//! The journal: every request the mock received, in arrival order.
//!
//! Requests are recorded when they arrive (before the gate and before any fault), so a
//! request that is later held, failed or reset is still in the journal. Health polls
//! (`GET /health`) and the admin API (`/__mockswap/...`) are not recorded: a supervisor
//! polls health many times a second and would drown the requests a test is about.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method};
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::priority::{PriorityHeader, PriorityJson};
use crate::queue_timeout::QueueTimeoutHeader;

/// One request as the mock received it.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// Sequence number, starting at 1, in arrival order; never reused (not even after
    /// the journal is cleared).
    pub seq: u64,
    /// When it arrived, measured on the tokio clock from the moment the mock started
    /// (so paused-clock tests see exact values).
    pub received: Duration,
    /// When it arrived, in milliseconds since the Unix epoch (wall clock).
    pub received_unix_ms: u64,
    /// The HTTP method.
    pub method: Method,
    /// The path as sent (for `/upstream/<model>/...` requests, the full path).
    pub path: String,
    /// The query string without `?`, if any.
    pub query: Option<String>,
    /// Every header line; names are lowercase, and a repeated name keeps all its values
    /// in the order they were sent.
    pub headers: HeaderMap,
    /// The raw request body.
    pub body: Bytes,
    /// The body parsed as JSON, when it is JSON.
    pub json: Option<Value>,
    /// The model the request names (body `model`, `?model=`, or the `/upstream/<model>/`
    /// path segment).
    pub model: Option<String>,
    /// Whether the body asked for a stream (`"stream": true`).
    pub stream: bool,
    /// The `X-Priority` header, as sent.
    pub priority: PriorityHeader,
    /// The `X-Queue-Timeout` header, as sent.
    pub queue_timeout: QueueTimeoutHeader,
    /// The position (0-based) of this request in the dispatch order, once it passed the
    /// gate; `None` while it is held or when it never reached dispatch (rejected early).
    pub dispatched: Option<usize>,
    /// Whether this was a websocket upgrade (then echoed), not a plain request.
    pub websocket: bool,
}

impl RecordedRequest {
    /// A blank `POST /v1/chat/completions` entry for unit tests.
    #[cfg(test)]
    pub(crate) fn for_tests() -> Self {
        Self {
            seq: 0,
            received: Duration::ZERO,
            received_unix_ms: 0,
            method: Method::POST,
            path: "/v1/chat/completions".into(),
            query: None,
            headers: HeaderMap::new(),
            body: Bytes::new(),
            json: None,
            model: None,
            stream: false,
            priority: PriorityHeader::Absent,
            queue_timeout: QueueTimeoutHeader::Absent,
            dispatched: None,
            websocket: false,
        }
    }

    /// Every value of one header (name case-insensitive), lossily decoded, in sent order.
    pub fn header_values(&self, name: &str) -> Vec<String> {
        self.headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    }

    /// The endpoint path: for `/upstream/<model>/<rest>` requests `/<rest>`, else the
    /// path as sent.
    pub fn endpoint_path(&self) -> &str {
        let Some(rest) = self.path.strip_prefix("/upstream/") else {
            return &self.path;
        };
        match rest.find('/') {
            Some(slash) => &rest[slash..],
            None => "/",
        }
    }

    /// The body as text (lossily decoded).
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The JSON form served by `GET /__mockswap/requests` (see the crate README).
    pub fn to_json(&self) -> Value {
        let headers: Vec<Value> = self
            .headers
            .iter()
            .map(|(name, value)| {
                json!({
                    "name": name.as_str(),
                    "value": String::from_utf8_lossy(value.as_bytes()),
                })
            })
            .collect();
        json!({
            "seq": self.seq,
            "received_ms": self.received.as_secs_f64() * 1000.0,
            "received_unix_ms": self.received_unix_ms,
            "method": self.method.as_str(),
            "path": self.path,
            "query": self.query,
            "model": self.model,
            "stream": self.stream,
            "headers": headers,
            "priority": PriorityJson::from_headers(&self.headers),
            "queue_timeout": self.queue_timeout.to_json(&self.headers),
            "body": self.body_text(),
            "json": self.json,
            "dispatched": self.dispatched,
            "websocket": self.websocket,
        })
    }
}

#[derive(Debug, Default)]
struct Inner {
    entries: Vec<RecordedRequest>,
    next_seq: u64,
    dispatch_order: Vec<u64>,
}

/// The shared journal. A std mutex is enough: every critical section is a push or a
/// clone and never crosses an `.await`.
#[derive(Debug)]
pub(crate) struct Journal {
    inner: Mutex<Inner>,
    /// Keep at most this many entries (the oldest go first); `None` keeps everything.
    limit: Option<usize>,
    /// Total number of requests recorded since start (not reset by `clear`), so waiters
    /// can wait for "n more" without racing a clear.
    recorded: watch::Sender<u64>,
}

impl Journal {
    pub(crate) fn new(limit: Option<usize>) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            limit,
            recorded: watch::Sender::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock cannot leave the journal half-written (every
        // section is a single push or clone), so a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records a request and returns its sequence number. `seq` and `dispatched` of
    /// `request` are overwritten.
    pub(crate) fn record(&self, mut request: RecordedRequest) -> u64 {
        let seq = {
            let mut inner = self.lock();
            inner.next_seq += 1;
            let seq = inner.next_seq;
            request.seq = seq;
            request.dispatched = None;
            inner.entries.push(request);
            if let Some(limit) = self.limit
                && inner.entries.len() > limit
            {
                let excess = inner.entries.len() - limit;
                inner.entries.drain(..excess);
            }
            seq
        };
        self.recorded.send_modify(|n| *n += 1);
        seq
    }

    /// Notes that request `seq` passed the gate, in this order.
    pub(crate) fn dispatched(&self, seq: u64) {
        let mut inner = self.lock();
        let position = inner.dispatch_order.len();
        inner.dispatch_order.push(seq);
        if let Some(limit) = self.limit
            && inner.dispatch_order.len() > limit
        {
            let excess = inner.dispatch_order.len() - limit;
            inner.dispatch_order.drain(..excess);
        }
        if let Some(entry) = inner.entries.iter_mut().rev().find(|e| e.seq == seq) {
            entry.dispatched = Some(position);
        }
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().entries.clone()
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub(crate) fn dispatch_order(&self) -> Vec<u64> {
        self.lock().dispatch_order.clone()
    }

    pub(crate) fn clear(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.dispatch_order.clear();
    }

    /// The sequence number of the last request recorded (0 before the first).
    pub(crate) fn last_seq(&self) -> u64 {
        self.lock().next_seq
    }

    /// A receiver that changes whenever a request is recorded.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.recorded.subscribe()
    }

    /// Waits until the journal holds at least `n` requests (it may have been cleared in
    /// between; the current length is what counts).
    pub(crate) async fn wait_for_len(&self, n: usize) {
        let mut rx = self.recorded.subscribe();
        // The length is read under the lock after each change notification, so a clear
        // racing with this wait is seen as a shorter journal, never as a missed wake-up.
        let _ = rx.wait_for(|_| self.len() >= n).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> RecordedRequest {
        RecordedRequest::for_tests()
    }

    #[test]
    fn limited_journal_keeps_the_newest_entries() {
        let journal = Journal::new(Some(2));
        for _ in 0..5 {
            let seq = journal.record(request());
            journal.dispatched(seq);
        }
        let seqs: Vec<u64> = journal.requests().iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [4, 5]);
        assert_eq!(journal.dispatch_order(), [4, 5]);
    }
}
