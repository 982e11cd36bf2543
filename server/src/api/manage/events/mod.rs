//! `GET /api/events`: a live Server-Sent Events stream of everything the UI
//! shows, for the page and for scripts.
//!
//! Every event uses llama-swap's envelope, so its consumers read ours:
//! `event: message` and `data: {"type": T, "data": "<JSON of the payload>"}`.
//!
//! | `type` | payload | when |
//! |---|---|---|
//! | `uiConfig` | `{"activity": {"session_id": [header]}, "version", "bands": [{"name", "from"}]}` (llama-swap's `ui` section, then ours) | once, first |
//! | `profileChanged` | `{"active": name or null, "profiles": [{"id", "description", "pins"}]}` (as `GET /api/profiles`) | at connect and when the active profile changes |
//! | `modelStatus` | every model, selector and peer model: `id`, `kind` (`model`, `selector`, `peer`), `name`, `description`, `state` (`stopped`, `starting`, `ready`, `stopping`, `sleeping`, `failed`; a selector's is its warmest target's; a peer model's is `unknown`), a failed model's `failure` (`reason`, `last_output`, `failures`, `window_s`, `failed_at_ms`, `retry_at_ms`: from then a new request starts it again; an explicit load clears it before), `unlisted`, `peerID` (a peer model's peer), `aliases`, llama-swap's `capabilities` (as `/v1/models` renders them; left out when none) and `context_length` (left out when not said), `waiting`, `in_flight` (for a peer model: this server's requests to it), and a selector's `strategy` and `targets` | at connect and when any of it changes (a model entering or leaving `failed` too) |
//! | `queue` | `{"total", "queue": [{"seq", "model", "requested_priority", "capped_priority", "effective_priority", "band", "aged", "position", "reason", "api_key", "waited_ms"}]}` (first 500; `reason` is `"slots full"` or `"swap"`; `api_key` is the name of the request's API key, never the key, or `null`) | at connect and when a request joins, leaves, moves or starts waiting for another reason |
//! | `inflight` | llama-swap's operations: `{"operation": "snapshot", "requests": [entry]}`, `{"operation": "upsert", "request": entry}`, `{"operation": "remove", "id"}`, each with `total` (requests in flight; the first 500 by arrival are followed). An entry is llama-swap's (`id`, `timestamp`, `model`, `req_path`, `method`, `req_headers` and `resp_headers` with secrets `[REDACTED]`, `remote_ip` (the first `X-Forwarded-For` hop, else `X-Real-IP`, else the connection's address, as llama-swap), `resp_bytes`, `elapsed_ms`, `metadata` with `fifo_priority` and `selector`) and ours: `state` (`queued` while it waits for its model, then `running`), `request_id`, `seq`, `requested_priority`, `capped_priority`, `effective_priority`, `band`, `time_ms`, `granted_ms`, `queue_ms`, `api_key`, `session_id`, `connection_ip` (the connection's address, whatever the headers say) | a snapshot at connect; an upsert when a request is admitted, granted, answers its headers, or its `resp_bytes` grew (at most every 250 ms); a remove when it ends |
//! | `activity` | one finished request ([`crate::activity::Finished`]) | the recent ones at connect, then each as it finishes |
//! | `logData` | `{"source": "upstream", "model", "stream", "seq", "data"}` for a model's output, `{"source": "proxy", "model", "seq", "data"}` for the proxy's log (`model`: the configured model its `model=` field names, or `null`); one line, with its newline | the last lines of both at connect, in the order they were written, then each line |
//!
//! Snapshots of the router are taken when its change counter moves, at most
//! every [`THROTTLE`] per subscriber and once for all subscribers
//! (`SnapshotCache`); a state event is sent only when it differs
//! from the last one sent. Nothing is queued for a subscriber: state events
//! are computed when it is ready to read, the history sent at connect is the
//! shared rows and lines, each encoded when it is read, and the activity and
//! log feeds are bounded broadcast channels that drop (with a note) for a
//! reader that falls behind — a slow browser never slows the proxy, and one
//! that stops reading holds no copy of anything. A comment line every
//! [`KEEPALIVE`] keeps idle connections open. The stream ends when the server
//! drains (shutdown or reload); the page reconnects.
//!
//! To show more of a model or a waiting request (a slot limit, a peer's
//! share), add a field to `ModelRow` or `QueuePlace` in [`payload`]: the
//! diffing compares whole rows, so nothing else needs to change.

pub(crate) mod payload;
mod snapshot;

pub(crate) use snapshot::SnapshotCache;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::State;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderValue, header};
use tokio::sync::{broadcast, watch};
use tokio::time::{Instant, Interval, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use self::payload::{
    INFLIGHT_ROWS, InFlightEntry, InFlightEvent, InFlightVersion, ModelRow, QueueEvent, frame,
};
use crate::activity::{Feed, Finished, InFlight};
use crate::api::state::AppState;
use crate::upstream::SharedLine;

/// Shortest time between two snapshots for one subscriber.
pub(crate) const THROTTLE: Duration = Duration::from_millis(50);
/// How often an idle stream sends a comment line.
pub(crate) const KEEPALIVE: Duration = Duration::from_secs(15);
/// Log lines sent at connect (the newest ones).
const LOG_HISTORY: usize = 1000;
/// How often a running request's `resp_bytes` is sent again while it grows
/// (llama-swap's interval).
pub(crate) const INFLIGHT_BYTES: Duration = Duration::from_millis(250);

/// `GET /api/events`.
pub(crate) async fn events(State(state): State<AppState>) -> Response {
    let subscriber = Subscriber::connect(state).await;
    let stream = futures_util::stream::unfold(subscriber, |mut s| async move {
        s.next()
            .await
            .map(|bytes| (Ok::<_, std::convert::Infallible>(bytes), s))
    });
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        http::HeaderName::from_static("x-accel-buffering"),
        HeaderValue::from_static("no"),
    );
    response
}

/// What was last sent, to send only changes.
#[derive(Default)]
struct Sent {
    models: Option<Vec<ModelRow>>,
    queue: Option<QueueEvent>,
    /// The in-flight entries sent (the first [`INFLIGHT_ROWS`]), by id;
    /// `None` before the first snapshot.
    in_flight: Option<BTreeMap<u64, InFlightVersion>>,
}

impl Sent {
    /// Whether a request sent as in flight is running (its bytes may grow).
    fn any_running(&self) -> bool {
        self.in_flight
            .as_ref()
            .is_some_and(|sent| sent.values().any(|v| v.running()))
    }
}

/// A piece of the history sent at connect, encoded only when the subscriber
/// is ready to read it: a subscriber holds the shared rows and lines, never
/// an encoded copy of the whole history.
enum Backlog {
    Activity(Arc<Finished>),
    /// A log line; `true` for the proxy's own log.
    Log(bool, SharedLine),
}

struct Subscriber {
    state: AppState,
    pending: VecDeque<Bytes>,
    backlog: VecDeque<Backlog>,
    router_changes: watch::Receiver<u64>,
    router_open: bool,
    activity_changes: watch::Receiver<u64>,
    finished: Feed,
    /// Rows up to this id were sent with the history.
    finished_after: u64,
    logs: Option<broadcast::Receiver<SharedLine>>,
    /// The proxy's own log, live (its history is taken with the subscription).
    proxy_logs: Option<broadcast::Receiver<SharedLine>>,
    /// Switches of the active profile.
    profile: watch::Receiver<Option<usize>>,
    /// Models entering or leaving the failed state (none without a supervisor).
    failed: Option<watch::Receiver<BTreeMap<String, Arc<crate::upstream::Failed>>>>,
    /// Lines up to this `seq` were sent with the history.
    logs_after: Option<u64>,
    sent: Sent,
    dirty: bool,
    next_snapshot: Instant,
    keepalive: Interval,
    /// Wakes the stream to send the bytes of running requests.
    bytes_tick: Interval,
    draining: CancellationToken,
}

impl Subscriber {
    /// Subscribes to every feed first, then copies the histories, so that
    /// nothing falls in between (the overlap is dropped by id and `seq`).
    async fn connect(state: AppState) -> Self {
        let inner = &state.inner;
        let router_changes = inner.router.changes();
        let activity_changes = inner.activity.changes();
        let finished = inner.activity.subscribe();
        let logs = inner.supervisor.as_ref().map(|s| s.logs().subscribe_all());
        let failed = inner.supervisor.as_ref().map(|s| s.watch_failed());
        let mut profile = inner.selection.watch_active();
        profile.mark_unchanged();
        let mut keepalive = tokio::time::interval_at(Instant::now() + KEEPALIVE, KEEPALIVE);
        keepalive.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut bytes_tick = tokio::time::interval(INFLIGHT_BYTES);
        bytes_tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut subscriber = Self {
            pending: VecDeque::new(),
            backlog: VecDeque::new(),
            router_changes,
            router_open: true,
            activity_changes,
            finished,
            finished_after: 0,
            logs,
            proxy_logs: None,
            profile,
            failed,
            logs_after: None,
            sent: Sent::default(),
            dirty: false,
            next_snapshot: Instant::now(),
            keepalive,
            bytes_tick,
            draining: inner.streams.clone(),
            state,
        };
        subscriber
            .pending
            .push_back(frame("uiConfig", &payload::ui_config(&subscriber.state)));
        subscriber.pending.push_back(frame(
            "profileChanged",
            &payload::profiles(&subscriber.state),
        ));
        subscriber.snapshot().await;
        subscriber.history();
        subscriber
    }

    fn history(&mut self) {
        let inner = &self.state.inner;
        for row in inner.activity.recent(usize::MAX) {
            self.finished_after = row.id;
            self.backlog.push_back(Backlog::Activity(row));
        }
        // (is the proxy's, line): both kinds merged in the order they were written.
        let mut lines: Vec<(bool, SharedLine)> = Vec::new();
        if let Some(supervisor) = &inner.supervisor {
            let upstream = supervisor.logs().history_all();
            self.logs_after = upstream.last().map(|l| l.seq);
            lines.extend(upstream.into_iter().map(|l| (false, l)));
        }
        if let Some(log) = &inner.proxy_log {
            let subscription = log.subscribe();
            self.proxy_logs = Some(subscription.live);
            lines.extend(subscription.history.into_iter().map(|l| (true, l)));
        }
        lines.sort_by_key(|(_, l)| l.seq);
        let skip = lines.len().saturating_sub(LOG_HISTORY);
        self.backlog.extend(
            lines
                .into_iter()
                .skip(skip)
                .map(|(proxy, line)| Backlog::Log(proxy, line)),
        );
    }

    /// After this subscriber fell `skipped` rows behind the activity feed:
    /// queues the rows it missed from the in-memory history, in order, and
    /// says how many are gone when the history no longer holds them all.
    /// Called from [`Self::wait`], which runs only once both queues are empty.
    fn catch_up_activity(&mut self, skipped: u64) {
        let missed: Vec<_> = self
            .state
            .inner
            .activity
            .recent(usize::MAX)
            .into_iter()
            .filter(|row| row.id > self.finished_after)
            .collect();
        let lost = missed.first().map_or(skipped, |row| {
            row.id.saturating_sub(self.finished_after + 1)
        });
        tracing::debug!(
            skipped,
            lost,
            "an event subscriber fell behind the activity feed"
        );
        self.state.inner.metrics.subscriber_lagged("activity");
        if lost > 0 {
            self.pending.push_back(payload::activity_dropped(lost));
        }
        // Queued as the shared rows, serialized one at a time as the reader
        // takes them: what a slow reader holds is references into the
        // history, not copies. Nothing live is read before they are sent.
        for row in missed {
            self.finished_after = row.id;
            self.backlog.push_back(Backlog::Activity(row));
        }
    }

    /// The next chunk to send; `None` ends the stream. The history goes out
    /// before anything live is read.
    async fn next(&mut self) -> Option<Bytes> {
        loop {
            if let Some(bytes) = self.pending.pop_front() {
                return Some(bytes);
            }
            if let Some(item) = self.backlog.pop_front() {
                return Some(match item {
                    Backlog::Activity(row) => frame("activity", &*row),
                    Backlog::Log(true, line) => payload::proxy_line(&self.state, &line),
                    Backlog::Log(false, line) => payload::log_line(&line),
                });
            }
            self.wait().await?;
        }
    }

    /// Waits for something to send and queues it; `None` when the stream ends.
    async fn wait(&mut self) -> Option<()> {
        let watching = !self.dirty;
        let running = watching && self.sent.any_running();
        tokio::select! {
            biased;
            () = self.draining.cancelled() => return None,
            () = tokio::time::sleep_until(self.next_snapshot), if self.dirty => {
                self.snapshot().await;
            }
            changed = self.router_changes.changed(), if watching && self.router_open => {
                // Once the router has ended, its state no longer changes.
                self.router_open = changed.is_ok();
                self.dirty = true;
            }
            changed = self.activity_changes.changed(), if watching => {
                if changed.is_err() {
                    return None;
                }
                self.dirty = true;
            }
            received = self.finished.recv() => match received {
                Ok(row) if row.id <= self.finished_after => {}
                Ok(row) => {
                    self.finished_after = row.id;
                    self.pending.push_back(frame("activity", &*row));
                }
                Err(broadcast::error::RecvError::Lagged(n)) => self.catch_up_activity(n),
                Err(broadcast::error::RecvError::Closed) => return None,
            },
            received = recv_log(self.logs.as_mut()) => match received {
                Ok(line) if self.logs_after.is_some_and(|after| line.seq <= after) => {}
                Ok(line) => self.pending.push_back(payload::log_line(&line)),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.state.inner.metrics.subscriber_lagged("log");
                    self.pending.push_back(payload::log_dropped(n));
                }
                Err(broadcast::error::RecvError::Closed) => self.logs = None,
            },
            received = recv_log(self.proxy_logs.as_mut()) => match received {
                Ok(line) => self.pending.push_back(payload::proxy_line(&self.state, &line)),
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    self.state.inner.metrics.subscriber_lagged("log");
                    self.pending.push_back(payload::log_dropped(n));
                }
                Err(broadcast::error::RecvError::Closed) => self.proxy_logs = None,
            },
            changed = self.profile.changed() => {
                if changed.is_err() {
                    return None;
                }
                self.profile.borrow_and_update();
                self.pending.push_back(frame("profileChanged", &payload::profiles(&self.state)));
                // Followed by the models' status, changed or not, as llama-swap's.
                self.sent.models = None;
                self.dirty = true;
            }
            changed = failed_changed(self.failed.as_mut()), if watching => {
                if changed.is_err() {
                    self.failed = None;
                }
                self.dirty = true;
            }
            _ = self.bytes_tick.tick(), if running => self.dirty = true,
            _ = self.keepalive.tick() => self.pending.push_back(Bytes::from_static(b": keepalive\n\n")),
        }
        Some(())
    }

    /// Takes the router and in-flight snapshots and queues what changed.
    async fn snapshot(&mut self) {
        self.dirty = false;
        self.next_snapshot = Instant::now() + THROTTLE;
        // Marked seen before reading, so a change during the read wakes us again.
        let seen = *self.router_changes.borrow_and_update();
        self.activity_changes.borrow_and_update();
        if let Some(failed) = self.failed.as_mut() {
            failed.borrow_and_update();
        }
        let inner = &self.state.inner;
        let snapshot = inner.snapshots.at_least(seen, &inner.router).await;
        let in_flight = inner.activity.in_flight();
        let models = payload::model_rows(&self.state, &snapshot, &in_flight);
        if self.sent.models.as_ref() != Some(&models) {
            self.pending.push_back(frame("modelStatus", &models));
            self.sent.models = Some(models);
        }
        let queue = QueueEvent::new(&self.state, &snapshot, &in_flight);
        if !self.sent.queue.as_ref().is_some_and(|q| q.same_as(&queue)) {
            self.pending.push_back(frame("queue", &queue));
            self.sent.queue = Some(queue);
        }
        self.in_flight_changes(&in_flight);
    }

    /// Queues llama-swap's `inflight` operations for what changed since the
    /// last ones: a `snapshot` first, then an `upsert` for each request new
    /// or changed, a `remove` for each gone.
    fn in_flight_changes(&mut self, in_flight: &[Arc<InFlight>]) {
        let total = in_flight.len();
        let shown = &in_flight[..total.min(INFLIGHT_ROWS)];
        let now_ms = unix_ms();
        let versions: BTreeMap<u64, InFlightVersion> = shown
            .iter()
            .map(|e| (e.id, InFlightVersion::of(e)))
            .collect();
        let Some(sent) = self.sent.in_flight.take() else {
            let entries: Vec<InFlightEntry<'_>> = shown
                .iter()
                .map(|e| InFlightEntry::new(&self.state, e, now_ms))
                .collect();
            self.pending
                .push_back(frame("inflight", &InFlightEvent::Snapshot(&entries, total)));
            self.sent.in_flight = Some(versions);
            return;
        };
        for id in sent.keys().filter(|id| !versions.contains_key(id)) {
            self.pending
                .push_back(frame("inflight", &InFlightEvent::Remove(*id, total)));
        }
        for entry in shown {
            if sent.get(&entry.id) != versions.get(&entry.id) {
                let entry = InFlightEntry::new(&self.state, entry, now_ms);
                self.pending
                    .push_back(frame("inflight", &InFlightEvent::Upsert(&entry, total)));
            }
        }
        self.sent.in_flight = Some(versions);
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A change of the failed models; never without a supervisor.
async fn failed_changed(
    failed: Option<&mut watch::Receiver<BTreeMap<String, Arc<crate::upstream::Failed>>>>,
) -> Result<(), watch::error::RecvError> {
    match failed {
        Some(failed) => failed.changed().await,
        None => std::future::pending().await,
    }
}

async fn recv_log(
    logs: Option<&mut broadcast::Receiver<SharedLine>>,
) -> Result<SharedLine, broadcast::error::RecvError> {
    match logs {
        Some(logs) => logs.recv().await,
        None => std::future::pending().await,
    }
}
