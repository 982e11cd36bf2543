//! Bounded waits: how long a request is willing to wait for its turn.
//!
//! A request may say so in `X-Queue-Timeout: <seconds>` (a non-negative
//! decimal, fractions allowed; `0` = only if it is served without waiting).
//! The model's `maxQueueWait` (else the global one) is the default for
//! requests that send none and the cap of those that do. A request still
//! waiting at its deadline leaves the queue (dropping its ticket withdraws it
//! as a client that goes away does) and is answered 503 `queue_timeout` with
//! `Retry-After`, or with an error frame when its loading stream has begun
//! (docs/DESIGN.md section 2.4).

use std::time::Duration;

use http::HeaderMap;

/// The request header that bounds a request's wait.
pub(crate) const QUEUE_TIMEOUT_HEADER: http::HeaderName =
    http::HeaderName::from_static("x-queue-timeout");

/// The longest wait a header may ask for (a year): beyond it the value is
/// refused rather than overflowing a deadline.
const MAX_SECONDS: f64 = 365.0 * 24.0 * 3600.0;

/// A request's `X-Queue-Timeout` header that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "X-Queue-Timeout must be one number of seconds between 0 and 31536000 (fractions allowed), not {value:?}"
)]
pub(crate) struct InvalidQueueTimeout {
    /// The value as sent (lossy UTF-8, several lines joined by `, `).
    pub(crate) value: String,
}

/// The `X-Queue-Timeout` of a request: `None` when it sent none.
///
/// # Errors
///
/// [`InvalidQueueTimeout`] for anything but one non-negative decimal number
/// of seconds (two header lines, a list, a sign, a unit, an exponent, a
/// value over a year).
pub(crate) fn requested(headers: &HeaderMap) -> Result<Option<Duration>, InvalidQueueTimeout> {
    let mut values = headers.get_all(QUEUE_TIMEOUT_HEADER).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    let invalid = || InvalidQueueTimeout {
        value: headers
            .get_all(QUEUE_TIMEOUT_HEADER)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect::<Vec<_>>()
            .join(", "),
    };
    if values.next().is_some() {
        return Err(invalid());
    }
    let text = first.to_str().map_err(|_| invalid())?;
    parse_seconds(text).map(Some).ok_or_else(invalid)
}

/// One value: ASCII whitespace trimmed, digits with at most one `.` between
/// or after them, at most a year.
fn parse_seconds(text: &str) -> Option<Duration> {
    let text = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    let seconds: f64 = text.parse().ok()?;
    if !(0.0..=MAX_SECONDS).contains(&seconds) {
        return None;
    }
    Duration::try_from_secs_f64(seconds).ok()
}

/// How long the request may wait: the header capped by the model's
/// `maxQueueWait`, or that bound alone; `None` = as long as it takes.
pub(crate) fn bound(requested: Option<Duration>, max: Option<Duration>) -> Option<Duration> {
    match (requested, max) {
        (Some(asked), Some(max)) => Some(asked.min(max)),
        (asked, max) => asked.or(max),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn with(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(
                QUEUE_TIMEOUT_HEADER,
                HeaderValue::from_str(v).expect("valid header value"),
            );
        }
        headers
    }

    #[test]
    fn whole_and_fractional_seconds_are_read() {
        assert_eq!(requested(&with(&[])), Ok(None));
        assert_eq!(
            requested(&with(&[" 30 "])),
            Ok(Some(Duration::from_secs(30)))
        );
        assert_eq!(
            requested(&with(&["1.5"])),
            Ok(Some(Duration::from_millis(1500)))
        );
        assert_eq!(requested(&with(&["0"])), Ok(Some(Duration::ZERO)));
        assert_eq!(requested(&with(&["2."])), Ok(Some(Duration::from_secs(2))));
    }

    #[test]
    fn anything_but_one_plain_number_is_refused_naming_what_was_sent() {
        for bad in [
            "", "-1", "+5", "5s", "1e3", ".5", "nan", "inf", "1.2.3", "40000000",
        ] {
            assert!(requested(&with(&[bad])).is_err(), "{bad:?} was accepted");
        }
        let error = requested(&with(&["5", "6"])).expect_err("two lines");
        assert_eq!(error.value, "5, 6");
        assert!(requested(&with(&["5, 6"])).is_err());
    }

    #[test]
    fn max_queue_wait_is_the_default_and_the_cap() {
        let s = Duration::from_secs;
        assert_eq!(bound(None, None), None);
        assert_eq!(bound(Some(s(5)), None), Some(s(5)));
        assert_eq!(bound(None, Some(s(60))), Some(s(60)));
        assert_eq!(bound(Some(s(5)), Some(s(60))), Some(s(5)));
        assert_eq!(bound(Some(s(500)), Some(s(60))), Some(s(60)));
    }
}
