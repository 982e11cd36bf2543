//! One request's activity record, filled in as the request goes and kept
//! (in the finished ring) when it is dropped.

use std::borrow::Cow;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use compact_str::CompactString;
use http::StatusCode;
use tokio::time::Instant;

use crate::capture::Recorder;
use crate::priority::Priority;

use super::{Activity, Finished, InFlight, Live, Usage, millis};

/// The record of one model request.
///
/// Created by [`Activity::begin`] when the request's model is known; told when
/// it is admitted, granted and answered; moved into the response body
/// ([`super::meter::MeteredBody`], which `Tracked::respond` wraps the response in) so that
/// the record ends with the body. Dropping it
/// ends the record: a request dropped before any answer is recorded as 499
/// `client_closed`, one dropped mid-body keeps its status and gets
/// `client_closed` unless it completed.
#[derive(Debug)]
pub struct Tracked {
    activity: Arc<Activity>,
    row: Finished,
    arrived: Instant,
    admitted: Option<Instant>,
    granted: Option<Instant>,
    /// Its entry in the in-flight table, once listed.
    in_flight: Option<Arc<InFlight>>,
    answered: bool,
    completed: bool,
    /// The upstream's own time for the request, when it said.
    upstream_ms: Option<u64>,
    /// It ends as a history row (see [`Tracked::unmetered`]).
    metered: bool,
    /// The capture being collected, when captures are on.
    pub(super) capture: Option<Recorder>,
}

impl Tracked {
    pub(super) fn new(
        activity: Arc<Activity>,
        model: Arc<str>,
        path: &str,
        request_id: &str,
        priority: Priority,
    ) -> Self {
        let path = path.split('?').next().unwrap_or_default();
        Self {
            activity,
            row: Finished {
                id: 0,
                request_id: CompactString::new(request_id),
                seq: None,
                time_ms: unix_millis(),
                model,
                path: CompactString::new(path),
                requested_priority: priority.requested(),
                capped_priority: priority.capped(),
                effective_priority: None,
                status: 0,
                ..Finished::default()
            },
            arrived: Instant::now(),
            admitted: None,
            granted: None,
            in_flight: None,
            answered: false,
            completed: false,
            upstream_ms: None,
            metered: true,
            capture: None,
        }
    }

    /// A selector chose its model (llama-swap's `selector` metadata).
    pub fn selector(&mut self, selector: String) {
        self.row.selector = Some(selector);
    }

    /// The router admitted it as `seq`, ranking it at `effective`.
    pub fn admitted(&mut self, seq: u64, effective: i32) {
        self.row.seq = Some(seq);
        self.row.effective_priority = Some(effective);
        self.admitted.get_or_insert_with(Instant::now);
    }

    /// Lists it in flight (see [`InFlight`]) with what the client sent:
    /// `method`, its address and `headers`. Listed once; the entry leaves
    /// the table when the record ends.
    pub fn listed(
        &mut self,
        method: &http::Method,
        remote_ip: Option<IpAddr>,
        headers: &http::HeaderMap,
    ) {
        if self.in_flight.is_some() {
            return;
        }
        let entry = self.entry(method, remote_ip, headers);
        self.activity.enter(Arc::clone(&entry));
        self.in_flight = Some(entry);
    }

    fn entry(
        &self,
        method: &http::Method,
        remote_ip: Option<IpAddr>,
        headers: &http::HeaderMap,
    ) -> Arc<InFlight> {
        let row = &self.row;
        Arc::new(InFlight {
            id: self.activity.next_id(),
            request_id: row.request_id.clone(),
            seq: row.seq,
            model: Arc::clone(&row.model),
            path: row.path.clone(),
            method: method.clone(),
            remote_ip,
            req_headers: headers.clone(),
            requested_priority: row.requested_priority,
            capped_priority: row.capped_priority,
            effective_priority: row.effective_priority,
            time_ms: row.time_ms,
            api_key: row.api_key.clone(),
            session_id: row.session_id.clone(),
            selector: row.selector.clone(),
            live: Live::default(),
        })
    }

    /// Its entry in the in-flight table, once listed.
    pub fn in_flight(&self) -> Option<&Arc<InFlight>> {
        self.in_flight.as_ref()
    }

    /// It holds its model now (it shows as running until the record ends).
    /// A second grant (sent again after an upstream crash) keeps the first
    /// wait. A request not listed yet is listed without its client's details.
    pub fn granted(&mut self) {
        if self.granted.is_some() {
            return;
        }
        let now = Instant::now();
        let since = self.admitted.unwrap_or(self.arrived);
        let queue_ms = millis(now.saturating_duration_since(since));
        self.granted = Some(now);
        self.row.queue_ms.get_or_insert(queue_ms);
        let granted_ms = self.row.time_ms + millis(now.saturating_duration_since(self.arrived));
        let grant = |entry: &InFlight| {
            entry.live.queue_ms.store(queue_ms, Ordering::Relaxed);
            // At least 1: 0 means "waiting".
            entry
                .live
                .granted_ms
                .store(granted_ms.max(1), Ordering::Release);
        };
        match &self.in_flight {
            Some(entry) => {
                grant(entry);
                self.activity.touched();
            }
            None => {
                let entry = self.entry(&http::Method::POST, None, &http::HeaderMap::new());
                grant(&entry);
                self.activity.enter(Arc::clone(&entry));
                self.in_flight = Some(entry);
            }
        }
    }

    /// The response's headers are known (shown in flight until the end).
    pub(super) fn response_headers(&mut self, headers: &http::HeaderMap) {
        if let Some(entry) = &self.in_flight
            && entry.live.resp_headers.set(headers.clone()).is_ok()
        {
            self.activity.touched();
        }
    }

    /// The name of the API key the request came with (never the key itself).
    pub fn api_key(&mut self, name: Arc<str>) {
        self.row.api_key = Some(name);
    }

    /// Starts the capture of the request (its `headers` and, when it was
    /// read whole, its `body`), when captures are on.
    pub fn capture_request(&mut self, headers: &http::HeaderMap, body: Option<&bytes::Bytes>) {
        self.capture = self.activity.recorder(&self.row.path, headers, body);
    }

    /// The session the client named (`ui.activity.session_id`'s headers).
    pub fn session(&mut self, id: &str) {
        self.row.session_id = Some(CompactString::new(id));
    }

    /// The response's content type, shared between rows.
    pub(super) fn content_type(&mut self, value: &str) {
        self.row.content_type = Some(self.activity.shared(value));
    }

    /// It leaves no history row (nor capture) when it ends, as llama-swap
    /// keeps none for it (see `api::paths::is_metered`): it is listed in
    /// flight while it runs, and its key's totals count it.
    pub fn unmetered(&mut self) {
        self.metered = false;
    }

    /// The answer's status line is ready; `stream` for an event stream.
    pub fn answered(&mut self, status: StatusCode, stream: bool) {
        self.row.status = status.as_u16();
        self.row.stream = stream;
        self.answered = true;
    }

    /// The proxy answered an error of its own (`code` from docs/ERRORS.md).
    pub fn failed(&mut self, status: StatusCode, code: &'static str) {
        self.row.status = status.as_u16();
        self.row.error = Some(Cow::Borrowed(code));
        self.answered = true;
        self.completed = true;
    }

    /// The proxy refused the request with an error of its own (`code` from
    /// docs/ERRORS.md) whose `message` the row keeps as its `error_msg`.
    pub fn refused(&mut self, status: StatusCode, code: &'static str, message: Box<str>) {
        self.failed(status, code);
        self.error_message(message);
    }

    /// The upstream's body failed after the status was sent.
    pub(super) fn broke(&mut self) {
        self.row
            .error
            .get_or_insert(Cow::Borrowed("upstream_failed"));
        self.completed = true;
    }

    /// The status answered so far (0 before any).
    pub(super) fn status(&self) -> u16 {
        self.row.status
    }

    /// What went wrong, in words (llama-swap's `error_msg`).
    pub(super) fn error_message(&mut self, message: Box<str>) {
        self.row.error_msg.get_or_insert(message);
    }

    /// The body ended normally; `usage` is what the upstream reported in it.
    pub(super) fn completed(&mut self, usage: Usage) {
        self.completed = true;
        self.upstream_ms = usage.upstream_ms;
        let row = &mut self.row;
        row.prompt_tokens = usage.prompt_tokens;
        row.completion_tokens = usage.completion_tokens;
        row.cached_tokens = usage.cached_tokens;
        row.draft_tokens = usage.draft_tokens;
        row.draft_accepted = usage.draft_accepted;
        row.prompt_per_second = usage.prompt_per_second;
        // Without the upstream's own figure, a stream's: the tokens over the
        // time since the grant. A whole answer's time holds the prompt's too,
        // so it gets none (llama-swap's -1).
        let streamed = self.row.stream;
        self.row.tokens_per_second = usage.tokens_per_second.or_else(|| {
            if !streamed {
                return None;
            }
            let tokens = usage.completion_tokens?;
            let since = self.granted?;
            let secs = since.elapsed().as_secs_f64();
            // Precision loss past 2^53 tokens is not a concern.
            #[allow(clippy::cast_precision_loss)]
            let tokens = tokens as f64;
            (secs > 0.0 && tokens > 0.0).then(|| tokens / secs)
        });
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let cancelled = self.in_flight.as_ref().is_some_and(|e| e.is_cancelled());
        if let Some(entry) = self.in_flight.take() {
            self.activity.leave(entry.id);
        }
        if cancelled {
            // An operator's cancel, not the client's leaving.
            if !self.answered {
                self.row.status = StatusCode::SERVICE_UNAVAILABLE.as_u16();
                self.answered = true;
            }
            if self.row.error.as_deref() != Some("cancelled") {
                self.row.error = Some(Cow::Borrowed("cancelled"));
            }
        }
        if !self.answered {
            self.row.status = 499;
        }
        if !self.completed {
            self.row.error.get_or_insert(Cow::Borrowed("client_closed"));
        }
        let elapsed = millis(self.arrived.elapsed());
        self.row.duration_ms = elapsed.max(self.upstream_ms.unwrap_or(0));
        // Stamped when it is recorded, as llama-swap's rows are (the
        // in-flight entry keeps the arrival): `start` and `end` select by it.
        // The clock is read again: arrival plus elapsed, each truncated to
        // the millisecond, could fall up to 2 ms before the completion.
        self.row.time_ms = unix_millis().max(self.row.time_ms);
        let row = &mut self.row;
        // Every other field is a copy; the model is shared (not the default
        // `Arc<str>`, which is not promised to be free).
        let row = Finished {
            request_id: std::mem::take(&mut row.request_id),
            model: Arc::clone(&row.model),
            path: std::mem::take(&mut row.path),
            selector: row.selector.take(),
            content_type: row.content_type.take(),
            error: row.error.take(),
            error_msg: row.error_msg.take(),
            api_key: row.api_key.take(),
            session_id: row.session_id.take(),
            ..*row
        };
        let capture = self.capture.take();
        if self.metered {
            self.activity.finish(row, capture);
        } else {
            self.activity.finish_unmetered(&row);
        }
    }
}

fn unix_millis() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(millis)
        .unwrap_or_default()
}
