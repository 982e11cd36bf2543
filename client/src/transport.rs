//! Sending one logical call: headers, deadlines, retries, error mapping.
//!
//! [`Client::request_headers`] is the only place the outgoing headers are assembled;
//! every endpoint goes through [`Client::send`], which builds them once per call and
//! reuses them for every attempt, so a retry carries exactly the same priority.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, StatusCode};
use tokio::time::{Instant, timeout_at};
use tracing::Instrument;

use crate::client::{Client, MAX_ERROR_BODY_BYTES};
use crate::error::{ApiError, Error, InvalidArgument, TimeoutPhase, should_retry_header};
use crate::middleware::Next;
use crate::options::{CallOptions, RetryPolicy};
use crate::priority::{Priority, apply_priority};
use crate::retry::{self, RetryDecision};

/// What the caller expects back, which decides the `Accept` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Accept {
    Json,
    EventStream,
    /// Raw `/upstream` calls: no `Accept` is added.
    Any,
}

/// One request of a call, before headers are added.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pub(crate) method: Method,
    /// Path (and query) below the base URL, starting with `/`.
    pub(crate) path: String,
    pub(crate) body: Option<Bytes>,
    pub(crate) content_type: Option<HeaderValue>,
    pub(crate) accept: Accept,
    /// The model the call names, for the tracing span.
    pub(crate) model: Option<String>,
}

/// The deadlines of one call, fixed when it starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadlines {
    first_byte: Option<(Instant, Duration)>,
    total: Option<(Instant, Duration)>,
    pub(crate) idle: Option<Duration>,
}

impl Deadlines {
    fn start(client: &Client, opts: &CallOptions) -> Deadlines {
        let t = &client.inner.timeouts;
        let now = Instant::now();
        let at = |d: Option<Duration>| d.map(|d| (now + d, d));
        Deadlines {
            first_byte: at(opts.first_byte_timeout.or(t.first_byte)),
            total: at(opts.total_timeout.or(t.total)),
            idle: opts.idle_timeout.or(t.idle),
        }
    }

    /// The earlier of two optional deadlines, with the phase it belongs to.
    fn earliest(
        a: Option<(Instant, Duration)>,
        a_phase: TimeoutPhase,
        b: Option<(Instant, Duration)>,
        b_phase: TimeoutPhase,
    ) -> Option<(Instant, Duration, TimeoutPhase)> {
        match (a, b) {
            (Some((at, d)), Some((bt, _))) if at < bt => Some((at, d, a_phase)),
            (_, Some((bt, bd))) => Some((bt, bd, b_phase)),
            (Some((at, d)), None) => Some((at, d, a_phase)),
            (None, None) => None,
        }
    }

    /// When waiting for response headers must stop, and why.
    fn headers_deadline(&self) -> Option<(Instant, Duration, TimeoutPhase)> {
        Self::earliest(
            self.first_byte,
            TimeoutPhase::FirstByte,
            self.total,
            TimeoutPhase::Total,
        )
    }

    /// When waiting for the next piece of a body must stop, and why.
    pub(crate) fn body_deadline(&self) -> Option<(Instant, Duration, TimeoutPhase)> {
        let idle = self.idle.map(|d| (Instant::now() + d, d));
        Self::earliest(idle, TimeoutPhase::Idle, self.total, TimeoutPhase::Total)
    }
}

/// Awaits `fut` until `deadline`; `None` waits without limit.
pub(crate) async fn until<F: Future>(
    deadline: Option<(Instant, Duration, TimeoutPhase)>,
    fut: F,
) -> Result<F::Output, Error> {
    match deadline {
        None => Ok(fut.await),
        Some((at, after, phase)) => timeout_at(at, fut)
            .await
            .map_err(|_| Error::Timeout { phase, after }),
    }
}

impl Client {
    /// Assembles the headers of one call: client defaults, then per-call headers
    /// (replacing defaults of the same name), then `Accept`, then the priority,
    /// written by [`apply_priority`] exactly once.
    ///
    /// Priority precedence: the call's typed priority, else an `X-Priority` in the
    /// call's headers, else the client's default.
    #[cfg(test)]
    pub(crate) fn request_headers(
        &self,
        opts: &CallOptions,
        accept: Accept,
    ) -> Result<HeaderMap, InvalidArgument> {
        self.request_headers_and_priority(opts, accept)
            .map(|(headers, _)| headers)
    }

    /// [`Client::request_headers`], and the priority they carry.
    pub(crate) fn request_headers_and_priority(
        &self,
        opts: &CallOptions,
        accept: Accept,
    ) -> Result<(HeaderMap, Priority), InvalidArgument> {
        let mut call_headers = opts.header_map()?;
        let call_header_priority = crate::client::take_priority_header(&mut call_headers)?;
        let priority = opts
            .priority
            .or(call_header_priority)
            .unwrap_or_else(|| self.default_priority());

        let mut headers = self.inner.headers.clone();
        let mut last = None;
        for (name, value) in call_headers {
            if let Some(name) = name {
                // First value of a name replaces the default; later ones add to it.
                headers.insert(name.clone(), value);
                last = Some(name);
            } else if let Some(name) = &last {
                headers.append(name.clone(), value);
            }
        }
        let accept_value = match accept {
            Accept::Json => Some("application/json"),
            Accept::EventStream => Some("text/event-stream"),
            Accept::Any => None,
        };
        if let Some(v) = accept_value
            && !headers.contains_key(ACCEPT)
        {
            headers.insert(ACCEPT, HeaderValue::from_static(v));
        }
        apply_priority(&mut headers, priority);
        if let Some(timeout) = opts.queue_timeout {
            headers.insert(
                crate::options::QUEUE_TIMEOUT_HEADER,
                crate::options::queue_timeout_value(timeout),
            );
        }
        Ok((headers, priority))
    }

    /// Sends one logical call and returns the first successful response.
    ///
    /// Retries follow the call's [`RetryPolicy`]: connection failures and retryable
    /// statuses (or a server's `x-should-retry`), never after a success status.
    /// Every attempt reuses the same header map, and all attempts share the call's
    /// first-byte and total deadlines. The span records the model, the priority,
    /// the attempt number, the last status and the latency to the response headers.
    pub(crate) async fn send(
        &self,
        out: Outgoing,
        opts: &CallOptions,
    ) -> Result<(reqwest::Response, Deadlines), Error> {
        let span = tracing::debug_span!(
            "llama_swap_call",
            method = %out.method,
            path = %out.path,
            model = tracing::field::Empty,
            x_priority = tracing::field::Empty,
            attempt = tracing::field::Empty,
            status = tracing::field::Empty,
            latency_ms = tracing::field::Empty,
        );
        if let Some(model) = &out.model {
            span.record("model", model.as_str());
        }
        self.send_attempts(out, opts).instrument(span).await
    }

    async fn send_attempts(
        &self,
        out: Outgoing,
        opts: &CallOptions,
    ) -> Result<(reqwest::Response, Deadlines), Error> {
        let started = Instant::now();
        let deadlines = Deadlines::start(self, opts);
        let (mut headers, priority) = self.request_headers_and_priority(opts, out.accept)?;
        let span = tracing::Span::current();
        let sent = priority.header_value();
        span.record(
            "x_priority",
            sent.as_ref()
                .and_then(|v| v.to_str().ok())
                .unwrap_or("absent"),
        );
        if let Some(ct) = out.content_type {
            headers.insert(CONTENT_TYPE, ct);
        }
        let url = format!("{}{}", self.inner.base_url, out.path);
        let url = reqwest::Url::parse(&url).map_err(|_| InvalidArgument::InvalidPath {
            path: out.path.clone(),
        })?;
        let policy: &RetryPolicy = opts.retry.as_ref().unwrap_or(&self.inner.retry);

        let mut retry_no = 0u32;
        loop {
            let mut builder = self
                .inner
                .http
                .request(out.method.clone(), url.clone())
                .headers(headers.clone());
            if let Some(body) = &out.body {
                builder = builder.body(body.clone());
            }
            let request = builder.build().map_err(|e| Error::Transport(Box::new(e)))?;
            let attempt = retry_no + 1;
            span.record("attempt", attempt);
            let next = Next {
                http: &self.inner.http,
                chain: &self.inner.middleware,
                priority,
                attempt,
                connect_timeout: self.inner.timeouts.connect,
            };
            let headers_deadline = deadlines.headers_deadline();
            let outcome = until(headers_deadline, next.run(request)).await?;
            let (error, server_delay) = match outcome {
                Ok(response) => {
                    let status = response.status();
                    span.record("status", status.as_u16());
                    span.record(
                        "latency_ms",
                        u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                    );
                    if status.is_success() {
                        return Ok((response, deadlines));
                    }
                    let should_retry = should_retry_header(response.headers());
                    let api = read_api_error(response, &deadlines).await?;
                    if !should_retry.unwrap_or_else(|| policy.retries_status(status)) {
                        return Err(api);
                    }
                    let delay = api.retry_after();
                    (api, delay)
                }
                Err(
                    error @ (Error::Connect(_)
                    | Error::Transport(_)
                    | Error::Timeout {
                        phase: TimeoutPhase::Connect,
                        ..
                    }),
                ) => (error, None),
                Err(other) => return Err(other),
            };
            let delay = match retry::decide(policy, retry_no, server_delay, retry::jitter()) {
                RetryDecision::After(delay) => delay,
                RetryDecision::GiveUp => return Err(error),
            };
            // One budget: a retry that could not even start before the call's
            // deadline would only turn the real error into a timeout.
            if let Some((at, _, _)) = headers_deadline
                && Instant::now() + delay >= at
            {
                return Err(error);
            }
            retry_no += 1;
            tracing::debug!(
                retry = retry_no,
                delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                status = error.status().map(|s| s.as_u16()),
                "retrying call"
            );
            tokio::time::sleep(delay).await;
        }
    }
}

/// Turns a non-success response into [`Error::Api`], keeping at most
/// [`MAX_ERROR_BODY_BYTES`] of its body.
async fn read_api_error(
    response: reqwest::Response,
    deadlines: &Deadlines,
) -> Result<Error, Error> {
    let status: StatusCode = response.status();
    let headers = response.headers().clone();
    let body = read_body(
        response,
        deadlines,
        BodyLimit::Truncate(MAX_ERROR_BODY_BYTES),
    )
    .await?;
    let raw_body = String::from_utf8_lossy(&body).into_owned();
    Ok(ApiError::from_parts(status, headers, raw_body).into())
}

/// What to do when a body is longer than expected.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BodyLimit {
    /// Keep the first bytes and stop reading (error bodies: the start is enough).
    Truncate(usize),
    /// Fail with [`Error::BodyTooLarge`] (success bodies: a cut one is useless).
    Fail(usize),
}

/// Reads a body under the idle and total deadlines, never holding more than the
/// limit allows.
pub(crate) async fn read_body(
    mut response: reqwest::Response,
    deadlines: &Deadlines,
    limit: BodyLimit,
) -> Result<Bytes, Error> {
    let mut buf = BytesMut::new();
    while let Some(piece) = until(deadlines.body_deadline(), response.chunk())
        .await?
        .map_err(|e| Error::Transport(Box::new(e)))?
    {
        buf.extend_from_slice(&piece);
        match limit {
            BodyLimit::Truncate(max) if buf.len() >= max => {
                buf.truncate(max);
                break;
            }
            BodyLimit::Fail(max) if buf.len() > max => {
                return Err(Error::BodyTooLarge { limit: max });
            }
            _ => {}
        }
    }
    Ok(buf.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::priority::{PRIORITY_HEADER, Priority};

    fn values(map: &HeaderMap) -> Vec<String> {
        map.get_all(PRIORITY_HEADER)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    #[test]
    fn per_call_priority_beats_client_default() {
        let c = Client::builder()
            .base_url("http://h")
            .default_priority(Priority::Low)
            .build()
            .unwrap();
        let h = c
            .request_headers(
                &CallOptions::with_priority(Priority::Elevated),
                Accept::Json,
            )
            .unwrap();
        assert_eq!(values(&h), vec!["10"]);
        let h = c
            .request_headers(&CallOptions::new(), Accept::Json)
            .unwrap();
        assert_eq!(values(&h), vec!["-10"]);
    }

    #[test]
    fn per_call_normal_removes_a_default_priority() {
        let c = Client::builder()
            .base_url("http://h")
            .default_priority(Priority::Elevated)
            .build()
            .unwrap();
        let h = c
            .request_headers(&CallOptions::with_priority(Priority::Normal), Accept::Json)
            .unwrap();
        assert!(h.get(PRIORITY_HEADER).is_none());
    }

    #[test]
    fn priority_header_in_call_headers_is_translated_not_duplicated() {
        let c = Client::builder()
            .base_url("http://h")
            .default_priority(Priority::Elevated)
            .build()
            .unwrap();
        let h = c
            .request_headers(
                &CallOptions::new().header("X-Priority", "-10"),
                Accept::Json,
            )
            .unwrap();
        assert_eq!(values(&h), vec!["-10"]);
        // The typed setting wins over a header naming the priority too.
        let h = c
            .request_headers(
                &CallOptions::with_priority(Priority::Normal).header("x-priority", "10"),
                Accept::Json,
            )
            .unwrap();
        assert!(h.get(PRIORITY_HEADER).is_none());
    }

    #[test]
    fn per_call_header_replaces_default_of_same_name_and_accept_is_kept() {
        let c = Client::builder()
            .base_url("http://h")
            .default_header("x-tenant", "a")
            .build()
            .unwrap();
        let h = c
            .request_headers(
                &CallOptions::new()
                    .header("x-tenant", "b")
                    .header("accept", "application/x-ndjson"),
                Accept::EventStream,
            )
            .unwrap();
        assert_eq!(h.get_all("x-tenant").iter().count(), 1);
        assert_eq!(h["x-tenant"], "b");
        assert_eq!(h[ACCEPT], "application/x-ndjson");
    }

    #[test]
    fn accept_follows_the_response_kind() {
        let c = Client::new("http://h").unwrap();
        let json = c
            .request_headers(&CallOptions::new(), Accept::Json)
            .unwrap();
        assert_eq!(json[ACCEPT], "application/json");
        let sse = c
            .request_headers(&CallOptions::new(), Accept::EventStream)
            .unwrap();
        assert_eq!(sse[ACCEPT], "text/event-stream");
        let raw = c.request_headers(&CallOptions::new(), Accept::Any).unwrap();
        assert!(raw.get(ACCEPT).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn first_byte_deadline_counts_from_call_start_and_total_can_be_earlier() {
        let c = Client::builder()
            .base_url("http://h")
            .first_byte_timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        let d = Deadlines::start(
            &c,
            &CallOptions::new().total_timeout(Duration::from_secs(5)),
        );
        let (_, after, phase) = d.headers_deadline().unwrap();
        assert_eq!(
            (after, phase),
            (Duration::from_secs(5), TimeoutPhase::Total)
        );
        let d = Deadlines::start(&c, &CallOptions::new());
        let (at, after, phase) = d.headers_deadline().unwrap();
        assert_eq!(
            (after, phase),
            (Duration::from_secs(30), TimeoutPhase::FirstByte)
        );
        tokio::time::advance(Duration::from_secs(10)).await;
        // Still the instant fixed at the start, not reset by the passing time.
        assert_eq!(d.headers_deadline().unwrap().0, at);
    }

    #[tokio::test(start_paused = true)]
    async fn until_reports_the_phase_that_expired() {
        let deadline = Some((
            Instant::now() + Duration::from_millis(10),
            Duration::from_millis(10),
            TimeoutPhase::Idle,
        ));
        let err = until(deadline, std::future::pending::<()>())
            .await
            .unwrap_err();
        assert_eq!(err.timeout_phase(), Some(TimeoutPhase::Idle));
    }
}
