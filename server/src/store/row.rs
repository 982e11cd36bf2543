//! One finished request as the history keeps it and the API shows it. `activity`
//! records these rows and the store writes, queries and counts them; the row lives
//! here, below `activity`, so the store needs nothing from it.

use std::borrow::Cow;
use std::sync::Arc;

use compact_str::CompactString;
use serde::{Serialize, Serializer};

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
    /// When the request was recorded, milliseconds since the Unix epoch:
    /// as in llama-swap, once its response ended (or it failed); the
    /// `start` and `end` filters and the `time` sort read it (the
    /// in-flight entry's `time_ms` is the arrival).
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
    /// vLLM `metrics`), else, for a stream, generated tokens over the time
    /// from the grant to the end of the body (a whole answer has none).
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

impl Finished {
    /// Whether the upstream reported any usage (a token count or a speed):
    /// without any, every `tokens` figure is 0, as in llama-swap.
    pub(crate) fn reported_usage(&self) -> bool {
        self.prompt_tokens.is_some()
            || self.completion_tokens.is_some()
            || self.cached_tokens.is_some()
            || self.draft_tokens.is_some()
            || self.draft_accepted.is_some()
            || self.prompt_per_second.is_some()
            || self.tokens_per_second.is_some()
    }
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
    /// As in llama-swap, a row whose upstream reported no usage at all has
    /// every `tokens` figure `0`; once it reported some, a figure it did not
    /// report is `-1` (`0` for the input and output counts); `error_msg` is left out when
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
        // llama-swap leaves every figure 0 until it parsed some usage; once
        // it did, a figure the upstream did not report is -1.
        let (unreported, unmeasured) = if row.reported_usage() {
            (-1, -1.0)
        } else {
            (0, 0.0)
        };
        let count = |n: Option<u64>| n.map_or(unreported, |n| i64::try_from(n).unwrap_or(i64::MAX));
        let speed = |s: Option<f64>| s.unwrap_or(unmeasured);
        let mut map = serializer.serialize_map(Some(7))?;
        map.serialize_entry("cache_tokens", &count(row.cached_tokens))?;
        map.serialize_entry("draft_tokens", &count(row.draft_tokens))?;
        map.serialize_entry("draft_acc_tokens", &count(row.draft_accepted))?;
        map.serialize_entry("input_tokens", &row.prompt_tokens.unwrap_or(0))?;
        map.serialize_entry("output_tokens", &row.completion_tokens.unwrap_or(0))?;
        map.serialize_entry("prompt_per_second", &speed(row.prompt_per_second))?;
        map.serialize_entry("tokens_per_second", &speed(row.tokens_per_second))?;
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
