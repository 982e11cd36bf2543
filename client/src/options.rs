//! Timeouts, retry policy and per-call options.
//!
//! Client-wide defaults live in [`Timeouts`] and [`RetryPolicy`] on the builder; a
//! [`CallOptions`] value overrides them for one call. Per-call values always win,
//! and nothing set on a call survives into the next one.

use std::fmt;
use std::time::Duration;

use http::{HeaderMap, HeaderName, HeaderValue, StatusCode};

use crate::error::{InvalidArgument, TimeoutPhase};
use crate::priority::Priority;

/// Deadlines by phase of a call.
///
/// reqwest's single request timeout would cut healthy long streams, so the SDK keeps
/// one limit per phase instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// Opening a TCP connection. Default 10 s. Applies only to the HTTP client the
    /// SDK builds itself (an injected `reqwest::Client` keeps its own).
    pub connect: Duration,
    /// From the start of the call to the response headers, retries included. Default
    /// 10 minutes, because a model swap can take minutes. `None` waits forever.
    pub first_byte: Option<Duration>,
    /// The longest gap between two pieces of a response body (stream frames,
    /// keep-alives and loading frames all count). Default 5 minutes.
    pub idle: Option<Duration>,
    /// The whole call, retries and the full body included. Default `None`.
    pub total: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Duration::from_secs(10),
            first_byte: Some(Duration::from_secs(600)),
            idle: Some(Duration::from_secs(300)),
            total: None,
        }
    }
}

impl Timeouts {
    /// Rejects zero durations, which would fail every call.
    pub(crate) fn validate(&self) -> Result<(), InvalidArgument> {
        let checks = [
            (Some(self.connect), TimeoutPhase::Connect),
            (self.first_byte, TimeoutPhase::FirstByte),
            (self.idle, TimeoutPhase::Idle),
            (self.total, TimeoutPhase::Total),
        ];
        for (value, phase) in checks {
            if value == Some(Duration::ZERO) {
                return Err(InvalidArgument::ZeroTimeout { phase });
            }
        }
        Ok(())
    }
}

/// When and how often a call is retried.
///
/// Retries happen only before the first byte of a successful response: on
/// connection errors and on the statuses in [`RetryPolicy::statuses`]. A stream that
/// has started is never re-sent (it would run the generation again). All attempts of
/// a call share its first-byte and total deadlines, so retries never multiply them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Retries after the first attempt. Default 2.
    pub max_retries: u32,
    /// The first backoff delay; doubled for each later retry. Default 500 ms.
    pub backoff_base: Duration,
    /// The largest backoff delay. Default 8 s.
    pub backoff_max: Duration,
    /// The longest `Retry-After` the SDK waits for; a longer one fails the call at
    /// once with the server's error. Default 60 s.
    pub retry_after_cap: Duration,
    /// The statuses that are retried. Default 408, 429, 502, 503, 504.
    pub statuses: Vec<StatusCode>,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(8),
            retry_after_cap: Duration::from_secs(60),
            statuses: vec![
                StatusCode::REQUEST_TIMEOUT,
                StatusCode::TOO_MANY_REQUESTS,
                StatusCode::BAD_GATEWAY,
                StatusCode::SERVICE_UNAVAILABLE,
                StatusCode::GATEWAY_TIMEOUT,
            ],
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> RetryPolicy {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// Sets the number of retries after the first attempt.
    #[must_use]
    pub fn with_max_retries(mut self, retries: u32) -> RetryPolicy {
        self.max_retries = retries;
        self
    }

    /// Sets the first backoff delay and the largest one.
    #[must_use]
    pub fn with_backoff(mut self, base: Duration, max: Duration) -> RetryPolicy {
        self.backoff_base = base;
        self.backoff_max = max;
        self
    }

    /// Sets the longest `Retry-After` the SDK is willing to wait for.
    #[must_use]
    pub fn with_retry_after_cap(mut self, cap: Duration) -> RetryPolicy {
        self.retry_after_cap = cap;
        self
    }

    /// Replaces the list of retried statuses.
    #[must_use]
    pub fn with_statuses(mut self, statuses: impl IntoIterator<Item = StatusCode>) -> RetryPolicy {
        self.statuses = statuses.into_iter().collect();
        self
    }

    /// True when `status` is one the policy retries.
    pub fn retries_status(&self, status: StatusCode) -> bool {
        self.statuses.contains(&status)
    }

    pub(crate) fn validate(&self) -> Result<(), InvalidArgument> {
        if self.backoff_base > self.backoff_max {
            return Err(InvalidArgument::BackoffRange {
                base: self.backoff_base,
                max: self.backoff_max,
            });
        }
        Ok(())
    }
}

/// Options for one call. `CallOptions::default()` inherits every client default.
///
/// ```
/// use std::time::Duration;
/// use llama_swap_client::{CallOptions, Priority};
///
/// let opts = CallOptions::new()
///     .priority(Priority::Low)
///     .header("x-request-source", "nightly-digest")
///     .idle_timeout(Duration::from_secs(30));
/// assert_eq!(opts.priority_override(), Some(Priority::Low));
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct CallOptions {
    pub(crate) priority: Option<Priority>,
    pub(crate) queue_timeout: Option<Duration>,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) header_map: HeaderMap,
    pub(crate) first_byte_timeout: Option<Duration>,
    pub(crate) idle_timeout: Option<Duration>,
    pub(crate) total_timeout: Option<Duration>,
    pub(crate) retry: Option<RetryPolicy>,
}

impl fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Header names only: a per-call header may carry a credential.
        let names: Vec<&str> = self
            .headers
            .iter()
            .map(|(name, _)| name.as_str())
            .chain(self.header_map.keys().map(HeaderName::as_str))
            .collect();
        f.debug_struct("CallOptions")
            .field("priority", &self.priority)
            .field("queue_timeout", &self.queue_timeout)
            .field("header_names", &names)
            .field("first_byte_timeout", &self.first_byte_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("total_timeout", &self.total_timeout)
            .field("retry", &self.retry)
            .finish()
    }
}

impl CallOptions {
    /// Options that inherit every client default.
    pub fn new() -> CallOptions {
        CallOptions::default()
    }

    /// Shorthand for `CallOptions::new().priority(priority)`.
    pub fn with_priority(priority: Priority) -> CallOptions {
        CallOptions::new().priority(priority)
    }

    /// The priority of this call. Default: the client's default priority.
    /// `Priority::Normal` removes a client default (no header is sent).
    pub fn priority(mut self, priority: Priority) -> CallOptions {
        self.priority = Some(priority);
        self
    }

    /// How long this call is willing to wait at the proxy for its turn (in the
    /// queue and for its model to start), sent as `X-Queue-Timeout` in seconds
    /// (millisecond precision, rounded up). The proxy caps it by its
    /// `maxQueueWait`; a call still waiting then gets a 503 `queue_timeout`
    /// [`Error::Api`](crate::Error::Api) with `Retry-After`, which the SDK does
    /// not retry by itself (the proxy says `x-should-retry: false`). It does
    /// not change the call's rank. Default: none (the proxy's `maxQueueWait`,
    /// if any, applies).
    pub fn queue_timeout(mut self, timeout: Duration) -> CallOptions {
        self.queue_timeout = Some(timeout);
        self
    }

    /// The queue timeout set on this call, if any.
    pub fn queue_timeout_override(&self) -> Option<Duration> {
        self.queue_timeout
    }

    /// Adds a header for this call; it replaces a client default header of the same
    /// name. Default: none. An invalid name or value fails the call with
    /// [`InvalidArgument`] (the setter itself never fails). An `X-Priority` header
    /// given here is read as this call's priority (an integer, as
    /// [`Priority::custom`] takes it) unless [`CallOptions::priority`] is also set.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> CallOptions {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Adds already-validated headers for this call (same rules as
    /// [`CallOptions::header`]).
    pub fn headers(mut self, headers: HeaderMap) -> CallOptions {
        let mut last: Option<HeaderName> = None;
        for (name, value) in headers {
            if let Some(name) = name {
                last = Some(name);
            }
            if let Some(name) = &last {
                let mut value = value;
                if is_secret_header(name) {
                    value.set_sensitive(true);
                }
                self.header_map.append(name.clone(), value);
            }
        }
        self
    }

    /// The first-byte deadline for this call, measured from its start. Default: the
    /// client's [`Timeouts::first_byte`].
    pub fn first_byte_timeout(mut self, timeout: Duration) -> CallOptions {
        self.first_byte_timeout = Some(timeout);
        self
    }

    /// The longest gap between two pieces of the body for this call. Default: the
    /// client's [`Timeouts::idle`].
    pub fn idle_timeout(mut self, timeout: Duration) -> CallOptions {
        self.idle_timeout = Some(timeout);
        self
    }

    /// A deadline for the whole call. Default: the client's [`Timeouts::total`].
    pub fn total_timeout(mut self, timeout: Duration) -> CallOptions {
        self.total_timeout = Some(timeout);
        self
    }

    /// The retry policy for this call. Default: the client's policy.
    pub fn retry(mut self, policy: RetryPolicy) -> CallOptions {
        self.retry = Some(policy);
        self
    }

    /// The priority set on this call, if any.
    pub fn priority_override(&self) -> Option<Priority> {
        self.priority
    }

    /// Whether the call sets a header of this name (ASCII case ignored).
    pub(crate) fn has_header(&self, name: &str) -> bool {
        self.headers
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case(name))
            || self.header_map.contains_key(name)
    }

    /// Validates the per-call headers into one map.
    pub(crate) fn header_map(&self) -> Result<HeaderMap, InvalidArgument> {
        let mut map = self.header_map.clone();
        for (name, value) in &self.headers {
            let (name, value) = parse_header(name, value)?;
            map.insert(name, value);
        }
        Ok(map)
    }
}

/// Validates one textual header; errors never include the value.
pub(crate) fn parse_header(
    name: &str,
    value: &str,
) -> Result<(HeaderName, HeaderValue), InvalidArgument> {
    let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
        InvalidArgument::InvalidHeaderName {
            name: name.to_owned(),
        }
    })?;
    let mut header_value =
        HeaderValue::from_str(value).map_err(|_| InvalidArgument::InvalidHeaderValue {
            name: name.to_owned(),
        })?;
    if is_secret_header(&header_name) {
        header_value.set_sensitive(true);
    }
    Ok((header_name, header_value))
}

/// Headers whose values are credentials and must not show up in `Debug` output.
pub(crate) fn is_secret_header(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "authorization" | "proxy-authorization" | "x-api-key" | "api-key" | "cookie"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_timeouts_are_rejected_with_their_phase() {
        let t = Timeouts {
            idle: Some(Duration::ZERO),
            ..Timeouts::default()
        };
        assert_eq!(
            t.validate(),
            Err(InvalidArgument::ZeroTimeout {
                phase: TimeoutPhase::Idle
            })
        );
        assert_eq!(Timeouts::default().validate(), Ok(()));
    }

    #[test]
    fn backoff_base_above_max_is_rejected() {
        let p = RetryPolicy::default().with_backoff(Duration::from_secs(9), Duration::from_secs(1));
        assert!(matches!(
            p.validate(),
            Err(InvalidArgument::BackoffRange { .. })
        ));
    }

    #[test]
    fn default_policy_retries_the_documented_statuses_only() {
        let p = RetryPolicy::default();
        for code in [408, 429, 502, 503, 504] {
            assert!(
                p.retries_status(StatusCode::from_u16(code).unwrap()),
                "{code}"
            );
        }
        for code in [400, 401, 404, 409, 500] {
            assert!(
                !p.retries_status(StatusCode::from_u16(code).unwrap()),
                "{code}"
            );
        }
        assert_eq!(p.max_retries, 2);
        assert_eq!(p.retry_after_cap, Duration::from_secs(60));
    }

    #[test]
    fn per_call_header_errors_name_the_header_but_not_the_value() {
        let opts = CallOptions::new().header("authorization", "Bearer sk-secret\n");
        let err = opts.header_map().unwrap_err();
        let text = format!("{err} {err:?}");
        assert!(text.contains("authorization"));
        assert!(!text.contains("sk-secret"));
        let opts = CallOptions::new().header("bad name", "v");
        assert!(matches!(
            opts.header_map(),
            Err(InvalidArgument::InvalidHeaderName { .. })
        ));
    }

    #[test]
    fn call_options_debug_hides_header_values() {
        let mut map = HeaderMap::new();
        map.insert("x-api-key", HeaderValue::from_static("sk-map-secret"));
        let opts = CallOptions::new()
            .header("authorization", "Bearer sk-text-secret")
            .headers(map);
        let text = format!("{opts:?}");
        assert!(!text.contains("sk-"), "{text}");
        assert!(text.contains("authorization") && text.contains("x-api-key"));
    }

    #[test]
    fn later_per_call_header_replaces_earlier_one() {
        let opts = CallOptions::new().header("x-a", "1").header("X-A", "2");
        let map = opts.header_map().unwrap();
        let values: Vec<_> = map.get_all("x-a").iter().collect();
        assert_eq!(values, vec![&HeaderValue::from_static("2")]);
    }
}

/// The request header that bounds a call's wait at the proxy.
pub const QUEUE_TIMEOUT_HEADER: HeaderName = HeaderName::from_static("x-queue-timeout");

/// The `X-Queue-Timeout` value for `timeout`: whole seconds, or seconds with
/// up to three decimals, rounded up to the millisecond.
pub(crate) fn queue_timeout_value(timeout: Duration) -> HeaderValue {
    let millis = timeout.as_micros().div_ceil(1000);
    let (secs, frac) = (millis / 1000, millis % 1000);
    let text = if frac == 0 {
        secs.to_string()
    } else {
        format!("{secs}.{frac:03}").trim_end_matches('0').to_owned()
    };
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("0"))
}

#[cfg(test)]
mod queue_timeout_tests {
    use super::*;

    #[test]
    fn queue_timeout_is_sent_in_seconds_rounded_up_to_the_millisecond() {
        let value = |d| queue_timeout_value(d).to_str().unwrap().to_owned();
        assert_eq!(value(Duration::from_secs(30)), "30");
        assert_eq!(value(Duration::from_millis(1500)), "1.5");
        assert_eq!(value(Duration::from_millis(2050)), "2.05");
        assert_eq!(value(Duration::from_micros(1)), "0.001");
        assert_eq!(value(Duration::ZERO), "0");
    }
}
