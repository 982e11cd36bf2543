//! Retry timing: reading `Retry-After` and computing jittered backoff.
//!
//! Pure functions of their inputs (the clock and the random draw are passed in), so
//! the rules are unit-tested without waiting.

use std::time::{Duration, SystemTime};

use http::HeaderMap;

use crate::options::RetryPolicy;

/// What to do after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryDecision {
    /// Wait this long, then send again.
    After(Duration),
    /// Give up and report the attempt's error.
    GiveUp,
}

/// Reads the server's requested delay: `retry-after-ms` (milliseconds), else
/// `Retry-After` as seconds (fractions allowed) or as an HTTP date relative to `now`.
/// A date in the past means "now".
pub(crate) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    if let Some(ms) = headers
        .get("retry-after-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|t| t.trim().parse::<f64>().ok())
        .and_then(non_negative_secs(1000.0))
    {
        return Some(ms);
    }
    let text = headers
        .get(http::header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim();
    if let Ok(secs) = text.parse::<f64>() {
        return non_negative_secs(1.0)(secs);
    }
    let when = httpdate::parse_http_date(text).ok()?;
    Some(when.duration_since(now).unwrap_or(Duration::ZERO))
}

fn non_negative_secs(per_second: f64) -> impl Fn(f64) -> Option<Duration> {
    move |v| {
        let secs = v / per_second;
        if secs.is_finite() && secs >= 0.0 {
            Duration::try_from_secs_f64(secs).ok()
        } else {
            None
        }
    }
}

/// Decides the delay before retry number `retry` (0 for the first retry).
///
/// A `Retry-After` within the policy's cap is used as is; one above the cap means
/// the server asks for longer than the caller is willing to wait, so the call fails
/// at once. Without one, the delay is `base * 2^retry`, capped at the policy's
/// maximum, scaled by `jitter` (expected in `0.5..=1.0`) so that clients that failed
/// together do not retry together.
pub(crate) fn decide(
    policy: &RetryPolicy,
    retry: u32,
    server_delay: Option<Duration>,
    jitter: f64,
) -> RetryDecision {
    if retry >= policy.max_retries {
        return RetryDecision::GiveUp;
    }
    if let Some(delay) = server_delay {
        return if delay <= policy.retry_after_cap {
            RetryDecision::After(delay)
        } else {
            RetryDecision::GiveUp
        };
    }
    let factor = 2u32.saturating_pow(retry.min(31));
    let exp = policy
        .backoff_base
        .saturating_mul(factor)
        .min(policy.backoff_max);
    RetryDecision::After(exp.mul_f64(jitter.clamp(0.0, 1.0)))
}

/// A jitter factor in `0.5..=1.0`.
pub(crate) fn jitter() -> f64 {
    rand::random_range(0.5..=1.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn retry_after_reads_seconds_fractions_and_milliseconds() {
        let now = SystemTime::UNIX_EPOCH;
        assert_eq!(
            retry_after(&headers(&[("retry-after", "3")]), now),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "0.5")]), now),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "3"), ("retry-after-ms", "20")]),
                now
            ),
            Some(Duration::from_millis(20))
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "-1")]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn retry_after_reads_http_dates_relative_to_now() {
        // Sun, 06 Nov 1994 08:49:37 GMT is 784111777 s after the epoch.
        let date = headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:37 GMT")]);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_770);
        assert_eq!(retry_after(&date, now), Some(Duration::from_secs(7)));
        let later = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_800);
        assert_eq!(retry_after(&date, later), Some(Duration::ZERO));
    }

    #[test]
    fn server_delay_within_cap_is_used_exactly() {
        let p = RetryPolicy::default();
        assert_eq!(
            decide(&p, 0, Some(Duration::from_secs(60)), 0.5),
            RetryDecision::After(Duration::from_secs(60))
        );
    }

    #[test]
    fn server_delay_above_cap_gives_up_at_once() {
        let p = RetryPolicy::default();
        assert_eq!(
            decide(&p, 0, Some(Duration::from_secs(61)), 1.0),
            RetryDecision::GiveUp
        );
    }

    #[test]
    fn backoff_doubles_caps_and_applies_jitter() {
        let p = RetryPolicy::default()
            .with_max_retries(10)
            .with_backoff(Duration::from_millis(100), Duration::from_millis(350));
        assert_eq!(
            decide(&p, 0, None, 1.0),
            RetryDecision::After(Duration::from_millis(100))
        );
        assert_eq!(
            decide(&p, 1, None, 1.0),
            RetryDecision::After(Duration::from_millis(200))
        );
        assert_eq!(
            decide(&p, 2, None, 1.0),
            RetryDecision::After(Duration::from_millis(350))
        );
        assert_eq!(
            decide(&p, 1, None, 0.5),
            RetryDecision::After(Duration::from_millis(100))
        );
        assert_eq!(
            decide(&p, 9, None, 1.0),
            RetryDecision::After(Duration::from_millis(350))
        );
    }

    #[test]
    fn retries_stop_at_the_policy_maximum() {
        let p = RetryPolicy::default();
        assert!(matches!(decide(&p, 1, None, 1.0), RetryDecision::After(_)));
        assert_eq!(decide(&p, 2, None, 1.0), RetryDecision::GiveUp);
        assert_eq!(
            decide(&RetryPolicy::none(), 0, Some(Duration::ZERO), 1.0),
            RetryDecision::GiveUp
        );
    }

    #[test]
    fn jitter_stays_in_range() {
        for _ in 0..1000 {
            let j = jitter();
            assert!((0.5..=1.0).contains(&j));
        }
    }
}
