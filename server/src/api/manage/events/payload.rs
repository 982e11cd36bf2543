//! What the event stream says: the rows of each event type, built from router
//! and activity snapshots, and the SSE framing.

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use serde::{Serialize, Serializer};
use serde_json::json;

use super::snapshot::RouterSnapshot;
use crate::activity::InFlight;
use crate::api::state::AppState;
use crate::capture::redacted_headers;
use crate::router::ModelState;
use crate::upstream::{Failed, LogLine, LogStream};

/// Queue rows sent per `queue` event; `total` says how many there are.
pub(super) const QUEUE_ROWS: usize = 500;

/// One SSE event in llama-swap's envelope: `event: message` and a JSON object
/// whose `data` is the payload, itself JSON-encoded as a string.
pub(super) fn frame(kind: &str, data: &impl Serialize) -> Bytes {
    let data = serde_json::to_string(data).unwrap_or_else(|_| "null".to_owned());
    let envelope = json!({ "type": kind, "data": data });
    Bytes::from(format!("event: message\ndata: {envelope}\n\n"))
}

/// A model as the `modelStatus` event shows it (llama-swap's fields, plus
/// its kind, how many requests wait for it and hold it, and a selector's
/// strategy and targets).
///
/// The event is sent again whenever any row differs from the last one sent,
/// so a field added here (with `..ModelRow::default()` filling it for the
/// kinds of row that lack it) needs no other change to be diffed and sent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(super) struct ModelRow {
    id: String,
    /// `model`, `selector` or `peer`.
    kind: &'static str,
    name: String,
    description: String,
    state: &'static str,
    unlisted: bool,
    #[serde(rename = "peerID")]
    peer_id: String,
    aliases: Vec<String>,
    /// llama-swap's: what the model's `capabilities` say, as `/v1/models`
    /// renders them (`vision`, `function_calling`, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    capabilities: BTreeMap<String, bool>,
    /// llama-swap's: the `capabilities.context` length, when said.
    #[serde(skip_serializing_if = "is_zero")]
    context_length: u64,
    waiting: usize,
    in_flight: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    strategy: Option<&'static str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    targets: Vec<String>,
    /// Under the memory router: the GPUs the model is placed on, each with
    /// the bytes used and free on it.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    gpus: Vec<GpuRow>,
    /// Under the memory router: bytes the model holds on each of its GPUs
    /// (asleep, what its sleep mode keeps).
    #[serde(skip_serializing_if = "is_zero")]
    memory: u64,
    /// Under the memory router: the last measure of its process's GPU
    /// memory, bytes over all its GPUs (once one was taken).
    #[serde(skip_serializing_if = "Option::is_none")]
    memory_measured: Option<u64>,
    /// A failed model's (`state: "failed"`): why, and from when it is
    /// started again.
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<FailureRow>,
}

/// A failed model's `failure` in `/running` and `modelStatus`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct FailureRow {
    /// What the last failure was, one line.
    reason: String,
    /// The last lines of its output then (`env` values blanked out).
    last_output: String,
    /// Failures within the window.
    failures: u32,
    /// `restartWindow`, in seconds.
    window_s: u64,
    /// The last failure, ms since the Unix epoch.
    failed_at_ms: u64,
    /// From when a new request starts it again, ms since the Unix epoch
    /// (`POST /api/models/load/<model>` clears it before).
    retry_at_ms: u64,
}

impl From<&Failed> for FailureRow {
    fn from(failed: &Failed) -> Self {
        Self {
            reason: failed.reason.clone(),
            last_output: failed.last_output.clone(),
            failures: failed.failures,
            window_s: failed.window.as_secs(),
            failed_at_ms: failed.failed_at_ms,
            retry_at_ms: failed.retry_at_ms,
        }
    }
}

/// The models that are failed now (none without a supervisor).
pub(crate) fn failed_models(state: &AppState) -> BTreeMap<String, Arc<Failed>> {
    state
        .inner
        .supervisor
        .as_ref()
        .map(|s| s.failed())
        .unwrap_or_default()
}

/// One GPU a model is placed on, for the `modelStatus` event.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(super) struct GpuRow {
    id: u32,
    used: u64,
    free: u64,
}

/// Every configured model, sorted by ID, with its state.
pub(super) fn model_rows(
    state: &AppState,
    snapshot: &RouterSnapshot,
    in_flight: &[Arc<InFlight>],
) -> Vec<ModelRow> {
    let states: BTreeMap<&str, ModelState> = snapshot
        .running
        .iter()
        .map(|m| (m.model.as_str(), m.state))
        .collect();
    let placed: BTreeMap<&str, (Vec<GpuRow>, u64, Option<u64>)> = snapshot
        .running
        .iter()
        .filter(|m| !m.gpus.is_empty())
        .map(|m| {
            let gpus = m
                .gpus
                .iter()
                .map(|&id| {
                    let usage = snapshot.gpus.iter().find(|g| g.id == id);
                    GpuRow {
                        id,
                        used: usage.map_or(0, |g| g.used),
                        free: usage.map_or(0, |g| g.free),
                    }
                })
                .collect();
            (m.model.as_str(), (gpus, m.memory, m.memory_measured))
        })
        .collect();
    let mut waiting: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in &snapshot.queue {
        *waiting.entry(entry.model.as_str()).or_default() += 1;
    }
    let mut holding: BTreeMap<&str, usize> = BTreeMap::new();
    for entry in in_flight.iter().filter(|e| e.granted_ms().is_some()) {
        *holding.entry(&*entry.model).or_default() += 1;
    }
    let failed = failed_models(state);
    let models = state.inner.models.values().map(|m| ModelRow {
        id: m.config.id.clone(),
        kind: "model",
        name: m.config.name.clone().unwrap_or_default(),
        description: m.config.description.clone().unwrap_or_default(),
        // Failed wins: its starts are refused whatever the router tries.
        state: if failed.contains_key(&m.config.id) {
            "failed"
        } else {
            state_name(states.get(m.config.id.as_str()).copied())
        },
        failure: failed
            .get(&m.config.id)
            .map(|f| FailureRow::from(f.as_ref())),
        unlisted: m.config.unlisted,
        aliases: m.config.aliases.clone(),
        capabilities: capabilities(m.config.capabilities.as_ref()),
        context_length: m.config.capabilities.as_ref().map_or(0, |c| c.context),
        waiting: waiting
            .get(m.config.id.as_str())
            .copied()
            .unwrap_or_default(),
        in_flight: holding
            .get(m.config.id.as_str())
            .copied()
            .unwrap_or_default(),
        gpus: placed
            .get(m.config.id.as_str())
            .map(|(gpus, _, _)| gpus.clone())
            .unwrap_or_default(),
        memory: placed
            .get(m.config.id.as_str())
            .map_or(0, |(_, memory, _)| *memory),
        memory_measured: placed
            .get(m.config.id.as_str())
            .and_then(|(_, _, measured)| *measured),
        ..ModelRow::default()
    });
    // A selector is as warm as its warmest target.
    let selectors = state.inner.selection.selectors().map(|s| {
        let warmest = s
            .target_ids
            .iter()
            .filter_map(|id| states.get(id.as_str()).copied())
            .min_by_key(|state| match state {
                ModelState::Ready => 0,
                ModelState::Starting => 1,
                _ => 2,
            });
        ModelRow {
            id: s.id.clone(),
            kind: "selector",
            name: s.name.clone().unwrap_or_default(),
            description: s.description.clone().unwrap_or_default(),
            state: state_name(warmest),
            unlisted: s.unlisted,
            strategy: Some(s.strategy.as_str()),
            targets: s.targets.clone(),
            ..ModelRow::default()
        }
    });
    // A peer model's state lives on the peer; what is known here is how many
    // of this server's requests it holds.
    let peers = &state.inner.peers;
    let peer_rows = state
        .inner
        .names
        .peers()
        .qualified()
        .filter_map(|(name, index, model)| {
            let peer = peers.get(index)?;
            Some(ModelRow {
                id: name.to_owned(),
                kind: "peer",
                name: format!("{}: {model}", peer.config.id),
                description: String::new(),
                state: "unknown",
                unlisted: false,
                peer_id: peer.config.id.clone(),
                in_flight: holding.get(name).copied().unwrap_or_default(),
                ..ModelRow::default()
            })
        });
    models.chain(selectors).chain(peer_rows).collect()
}

/// The `profileChanged` event: the active profile (or `null`) and every
/// profile with its pins, as `GET /api/profiles` answers.
pub(super) fn profiles(state: &AppState) -> serde_json::Value {
    let names = &state.inner.selection;
    let profiles: Vec<serde_json::Value> = names
        .profiles()
        .iter()
        .map(|p| {
            let pins: serde_json::Map<String, serde_json::Value> = p
                .pins
                .iter()
                .map(|pin| (pin.name.clone(), json!(pin.target.as_deref().unwrap_or(""))))
                .collect();
            json!({
                "id": p.name,
                "description": p.description.as_deref().unwrap_or(""),
                "pins": pins,
            })
        })
        .collect();
    json!({
        "active": names.active().map(|p| p.name.as_str()),
        "profiles": profiles,
    })
}

/// The `capabilities` object `/v1/models` shows for `capabilities`.
fn capabilities(capabilities: Option<&crate::config::Capabilities>) -> BTreeMap<String, bool> {
    let Some(capabilities) = capabilities else {
        return BTreeMap::new();
    };
    let mut row = json!({});
    capabilities.render_into(&mut row);
    row.get("capabilities")
        .and_then(serde_json::Value::as_object)
        .map(|caps| {
            caps.iter()
                .filter_map(|(name, on)| Some((name.clone(), on.as_bool()?)))
                .collect()
        })
        .unwrap_or_default()
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn state_name(state: Option<ModelState>) -> &'static str {
    state.map_or("stopped", ModelState::as_str)
}

/// One waiting request, for the `queue` event: where it stands, and how long
/// it has waited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct QueueRow {
    #[serde(flatten)]
    place: QueuePlace,
    waited_ms: u64,
}

/// Everything about a waiting request but its wait (which grows all the
/// time): a `queue` event is sent again only when one of these changes, so a
/// field added here is diffed (and sent) with no other change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct QueuePlace {
    seq: u64,
    model: String,
    requested_priority: i32,
    capped_priority: i32,
    effective_priority: i32,
    band: String,
    aged: bool,
    position: usize,
    /// `"slots full"` or `"swap"` ([`crate::scheduler::WaitReason`]).
    reason: &'static str,
    /// The name of the API key it came with (never the key).
    #[serde(serialize_with = "shared_name")]
    api_key: Option<Arc<str>>,
}

/// A shared name as a JSON string (or `null`).
#[allow(clippy::ref_option)] // serde's serialize_with passes a reference
fn shared_name<S: Serializer>(name: &Option<Arc<str>>, serializer: S) -> Result<S::Ok, S::Error> {
    name.as_deref().serialize(serializer)
}

/// The `queue` event: the first [`QUEUE_ROWS`] waiting requests in position order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(super) struct QueueEvent {
    pub(super) total: usize,
    pub(super) queue: Vec<QueueRow>,
}

/// The API key name of each request in flight, by the router's sequence
/// number (the queue's `seq`).
pub(crate) fn key_names(in_flight: &[Arc<InFlight>]) -> BTreeMap<u64, Arc<str>> {
    in_flight
        .iter()
        .filter_map(|e| Some((e.seq?, Arc::clone(e.api_key.as_ref()?))))
        .collect()
}

impl QueueEvent {
    pub(super) fn new(
        state: &AppState,
        snapshot: &RouterSnapshot,
        in_flight: &[Arc<InFlight>],
    ) -> Self {
        let metrics = &state.inner.metrics;
        let queue = &snapshot.queue;
        let since = snapshot.taken.elapsed();
        let keys = key_names(in_flight);
        Self {
            total: queue.len(),
            queue: queue
                .iter()
                .take(QUEUE_ROWS)
                .map(|e| QueueRow {
                    place: QueuePlace {
                        seq: e.id.0,
                        model: e.model.clone(),
                        requested_priority: e.requested_priority,
                        capped_priority: e.capped_priority,
                        effective_priority: e.effective_priority,
                        band: metrics.band(e.effective_priority),
                        aged: e.aged,
                        position: e.position,
                        reason: e.reason.as_str(),
                        api_key: keys.get(&e.id.0).cloned(),
                    },
                    waited_ms: u64::try_from((e.waited + since).as_millis()).unwrap_or(u64::MAX),
                })
                .collect(),
        }
    }

    /// True when `other` has the same requests in the same places.
    pub(super) fn same_as(&self, other: &Self) -> bool {
        self.total == other.total
            && self.queue.len() == other.queue.len()
            && self
                .queue
                .iter()
                .zip(&other.queue)
                .all(|(a, b)| a.place == b.place)
    }
}

/// In-flight entries an `inflight` event follows at most (the oldest);
/// `total` says how many there are.
pub(super) const INFLIGHT_ROWS: usize = 500;

/// What of an in-flight entry, once sent, makes it worth an `upsert` again:
/// its grant, its answer's headers, the bytes sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct InFlightVersion {
    granted: bool,
    answered: bool,
    resp_bytes: u64,
}

impl InFlightVersion {
    pub(super) fn of(entry: &InFlight) -> Self {
        Self {
            granted: entry.granted_ms().is_some(),
            answered: entry.resp_headers().is_some(),
            resp_bytes: entry.resp_bytes(),
        }
    }

    /// Whether the request holds its model.
    pub(super) fn running(self) -> bool {
        self.granted
    }
}

/// llama-swap's `inflight` event, with `total` beside: `{"operation":
/// "snapshot","requests":[...]}`, `{"operation":"upsert","request":{...}}`
/// or `{"operation":"remove","id":"17"}`.
pub(super) enum InFlightEvent<'a> {
    Snapshot(&'a [InFlightEntry<'a>], usize),
    Upsert(&'a InFlightEntry<'a>, usize),
    Remove(u64, usize),
}

impl Serialize for InFlightEvent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = serializer.serialize_map(Some(3))?;
        match self {
            Self::Snapshot(requests, total) => {
                map.serialize_entry("operation", "snapshot")?;
                map.serialize_entry("requests", requests)?;
                map.serialize_entry("total", total)?;
            }
            Self::Upsert(request, total) => {
                map.serialize_entry("operation", "upsert")?;
                map.serialize_entry("request", request)?;
                map.serialize_entry("total", total)?;
            }
            Self::Remove(id, total) => {
                map.serialize_entry("operation", "remove")?;
                map.serialize_entry("id", &id.to_string())?;
                map.serialize_entry("total", total)?;
            }
        }
        map.end()
    }
}

/// One in-flight request as the event shows it: llama-swap's
/// `InflightRequestEntry` (`id`, `timestamp`, `model`, `req_path`, `method`,
/// `req_headers`, `remote_ip`, `resp_headers`, `resp_bytes`, `elapsed_ms`,
/// `metadata`), then this server's fields (`state`: `queued` or `running`,
/// `request_id`, `seq`, the three priorities, `band`, `time_ms`,
/// `granted_ms`, `queue_ms`, `api_key`, `session_id`, `connection_ip`).
pub(super) struct InFlightEntry<'a> {
    pub(super) entry: &'a InFlight,
    pub(super) band: String,
    /// Now, in ms since the Unix epoch (for `elapsed_ms`).
    pub(super) now_ms: u64,
}

impl<'a> InFlightEntry<'a> {
    pub(super) fn new(state: &AppState, entry: &'a InFlight, now_ms: u64) -> Self {
        let priority = entry.effective_priority.unwrap_or(entry.capped_priority);
        Self {
            entry,
            band: state.inner.metrics.band(priority),
            now_ms,
        }
    }
}

impl Serialize for InFlightEntry<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let e = self.entry;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("id", &e.id.to_string())?;
        map.serialize_entry("timestamp", &rfc3339(e.time_ms))?;
        map.serialize_entry("model", &*e.model)?;
        map.serialize_entry("req_path", e.path.as_str())?;
        map.serialize_entry("method", e.method.as_str())?;
        map.serialize_entry("req_headers", &redacted_headers(&e.req_headers))?;
        map.serialize_entry("remote_ip", &client_address(&e.req_headers, e.remote_ip))?;
        map.serialize_entry(
            "resp_headers",
            &e.resp_headers().map(redacted_headers).unwrap_or_default(),
        )?;
        map.serialize_entry("resp_bytes", &e.resp_bytes())?;
        map.serialize_entry("elapsed_ms", &self.now_ms.saturating_sub(e.time_ms))?;
        if e.effective_priority.is_some() || e.selector.is_some() {
            let mut metadata = BTreeMap::new();
            if let Some(priority) = e.effective_priority {
                metadata.insert("fifo_priority", priority.to_string());
            }
            if let Some(selector) = &e.selector {
                metadata.insert("selector", selector.clone());
            }
            map.serialize_entry("metadata", &metadata)?;
        }
        let granted = e.granted_ms();
        map.serialize_entry(
            "state",
            if granted.is_some() {
                "running"
            } else {
                "queued"
            },
        )?;
        map.serialize_entry("request_id", e.request_id.as_str())?;
        map.serialize_entry("seq", &e.seq)?;
        map.serialize_entry("requested_priority", &e.requested_priority)?;
        map.serialize_entry("capped_priority", &e.capped_priority)?;
        map.serialize_entry("effective_priority", &e.effective_priority)?;
        map.serialize_entry("band", &self.band)?;
        map.serialize_entry("time_ms", &e.time_ms)?;
        map.serialize_entry("granted_ms", &granted)?;
        map.serialize_entry("queue_ms", &e.queue_ms())?;
        map.serialize_entry("api_key", &e.api_key.as_deref())?;
        map.serialize_entry("session_id", &e.session_id.as_deref())?;
        map.serialize_entry(
            "connection_ip",
            &e.remote_ip.map(|ip| ip.to_string()).unwrap_or_default(),
        )?;
        map.end()
    }
}

/// llama-swap's `clientIP` (its `internal/server/log.go`): the first hop of
/// `X-Forwarded-For`, else `X-Real-IP`, else the connection's address. The
/// headers are taken as sent, as llama-swap takes them: this server has no
/// list of trusted proxies, and the value is only shown (`remote_ip`); the
/// connection's own address is beside it (`connection_ip`), and it alone
/// counts for the API-key attempt limit and the `X-Forwarded-For` sent on.
fn client_address(headers: &http::HeaderMap, connection: Option<std::net::IpAddr>) -> String {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
    };
    if let Some(forwarded) = header("x-forwarded-for") {
        let first = forwarded.split(',').next().unwrap_or_default();
        return first.trim().to_owned();
    }
    if let Some(real) = header("x-real-ip") {
        return real.trim().to_owned();
    }
    connection.map(|ip| ip.to_string()).unwrap_or_default()
}

/// A time in ms since the Unix epoch as RFC 3339 in UTC.
fn rfc3339(ms: u64) -> String {
    i64::try_from(ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|at| at.to_string())
        .unwrap_or_default()
}

/// The `uiConfig` event: what the page needs to know once: llama-swap's
/// `ui` section (`activity.session_id`, the headers naming a session, as
/// configured: trimmed, the first spelling of each name), this server's
/// version and the priority bands.
pub(super) fn ui_config(state: &AppState) -> serde_json::Value {
    let bands: Vec<serde_json::Value> = state
        .inner
        .metrics
        .bands()
        .iter()
        .map(|b| json!({"name": b.name, "from": b.from}))
        .collect();
    json!({
        "activity": {"session_id": &state.inner.session_header_names},
        "version": env!("CARGO_PKG_VERSION"),
        "bands": bands,
    })
}

/// A `logData` event for one upstream line.
pub(super) fn log_line(line: &LogLine) -> Bytes {
    let stream = match line.stream {
        LogStream::Stderr => "stderr",
        _ => "stdout",
    };
    frame(
        "logData",
        &json!({
            "source": "upstream",
            "model": &*line.model,
            "stream": stream,
            "seq": line.seq,
            "data": format!("{}\n", line.text),
        }),
    )
}

/// A `logData` event for one line of the proxy's own log; `model` is the
/// configured model its `model=` field names, if any (so a model's filter
/// shows the proxy's lines about it too).
pub(super) fn proxy_line(state: &AppState, line: &LogLine) -> Bytes {
    let model = named_model(&line.text).filter(|m| state.inner.models.contains_key(*m));
    frame(
        "logData",
        &json!({
            "source": "proxy",
            "model": model,
            "seq": line.seq,
            "data": format!("{}\n", line.text),
        }),
    )
}

/// The value of the first ` model=` field of a log line (quotes removed).
fn named_model(text: &str) -> Option<&str> {
    let start = text.find(" model=")? + " model=".len();
    let rest = &text[start..];
    let value = rest.split(' ').next().unwrap_or_default();
    let value = value.trim_matches('"');
    (!value.is_empty()).then_some(value)
}

/// A `logData` note that lines were dropped because this reader fell behind.
pub(super) fn log_dropped(n: u64) -> Bytes {
    frame(
        "logData",
        &json!({
            "source": "proxy",
            "data": format!("--- {n} log lines dropped: this reader fell behind ---\n"),
        }),
    )
}

/// A `logData` note that finished requests were not sent to this reader: it
/// fell behind further than the in-memory history reaches. The rows are in
/// `/api/metrics/activity` (when a store keeps them).
pub(super) fn activity_dropped(n: u64) -> Bytes {
    frame(
        "logData",
        &json!({
            "source": "proxy",
            "data": format!("--- {n} activity rows not sent: this reader fell behind; /api/metrics/activity has the history ---\n"),
        }),
    )
}

#[cfg(test)]
mod tests {
    use super::{QueueEvent, QueuePlace, QueueRow, client_address, named_model};

    #[test]
    fn the_remote_ip_prefers_the_forwarded_headers_as_llama_swap_does() {
        let connection = Some("127.0.0.1".parse().unwrap());
        let headers = |pairs: &[(&'static str, &'static str)]| {
            let mut map = http::HeaderMap::new();
            for (name, value) in pairs {
                map.append(*name, http::HeaderValue::from_static(value));
            }
            map
        };
        let both = headers(&[
            ("x-forwarded-for", " 203.0.113.9 , 10.0.0.1"),
            ("x-real-ip", "198.51.100.2"),
        ]);
        assert_eq!(client_address(&both, connection), "203.0.113.9");
        let real = headers(&[("x-real-ip", " 198.51.100.2 ")]);
        assert_eq!(client_address(&real, connection), "198.51.100.2");
        let none = headers(&[("x-forwarded-for", "")]);
        assert_eq!(client_address(&none, connection), "127.0.0.1");
        assert_eq!(client_address(&none, None), "");
    }

    fn row(position: usize, reason: &'static str, waited_ms: u64) -> QueueRow {
        QueueRow {
            place: QueuePlace {
                seq: 7,
                model: "a".to_owned(),
                requested_priority: 0,
                capped_priority: 0,
                effective_priority: 0,
                band: "normal".to_owned(),
                aged: false,
                position,
                reason,
                api_key: None,
            },
            waited_ms,
        }
    }

    fn event(rows: Vec<QueueRow>) -> QueueEvent {
        QueueEvent {
            total: rows.len(),
            queue: rows,
        }
    }

    #[test]
    fn a_queue_event_is_new_when_a_place_changes_not_when_only_the_wait_grows() {
        let first = event(vec![row(1, "swap", 10)]);
        assert!(first.same_as(&event(vec![row(1, "swap", 900)])));
        assert!(!first.same_as(&event(vec![row(2, "swap", 10)])));
        assert!(!first.same_as(&event(vec![row(1, "slots full", 10)])));
        assert!(!first.same_as(&event(vec![])));
        // The wait is sent beside the place, not inside it.
        let json = serde_json::to_value(row(1, "swap", 10)).unwrap();
        assert_eq!(json["waited_ms"], 10);
        assert_eq!(json["position"], 1);
        assert_eq!(json["reason"], "swap");
    }

    #[test]
    fn the_model_field_of_a_proxy_line_is_found_quoted_or_not() {
        assert_eq!(
            named_model("[INFO] swap: starting a model=qwen evicted=[]"),
            Some("qwen")
        );
        assert_eq!(
            named_model("[INFO] ready model=\"llama-8b\""),
            Some("llama-8b")
        );
        assert_eq!(
            named_model("[INFO] request path=/v1/models status=200"),
            None
        );
        assert_eq!(named_model("[WARN] x model="), None);
    }
}
