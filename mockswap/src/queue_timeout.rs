//! The `X-Queue-Timeout` header as a request sent it.
//!
//! A proxy reads it as how long the request will wait for its turn: one
//! non-negative decimal number of seconds, fractions allowed (docs/DESIGN.md
//! section 2.4). The journal keeps the value and, for anything else, the lines
//! as sent, so a test can assert what its client sent.

use std::time::Duration;

use http::HeaderMap;
use serde_json::{Value, json};

/// The request header that bounds a request's wait (lowercase, as hyper stores names).
pub const QUEUE_TIMEOUT_HEADER: &str = "x-queue-timeout";

/// What the `X-Queue-Timeout` header of one request said.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum QueueTimeoutHeader {
    /// No header was sent.
    Absent,
    /// Exactly one well-formed number of seconds.
    Value(Duration),
    /// Anything else: a value that is not a number of seconds, or more than one
    /// (every line kept as sent, lossily decoded).
    Invalid(Vec<String>),
}

impl QueueTimeoutHeader {
    /// Reads the header from a request's headers (name matched case-insensitively).
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let raw: Vec<String> = headers
            .get_all(QUEUE_TIMEOUT_HEADER)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        match raw.as_slice() {
            [] => Self::Absent,
            [one] => parse_seconds(one).map_or_else(|| Self::Invalid(raw.clone()), Self::Value),
            _ => Self::Invalid(raw),
        }
    }

    /// The duration, if exactly one well-formed value was sent.
    pub fn value(&self) -> Option<Duration> {
        match self {
            Self::Value(d) => Some(*d),
            Self::Absent | Self::Invalid(_) => None,
        }
    }

    /// The journal's form: `{"state": "absent" | "value" | "invalid", "seconds":
    /// <number or null>, "raw": [<lines as sent>]}`.
    pub(crate) fn to_json(&self, headers: &HeaderMap) -> Value {
        let raw: Vec<String> = headers
            .get_all(QUEUE_TIMEOUT_HEADER)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        let (state, seconds) = match self {
            Self::Absent => ("absent", None),
            Self::Value(d) => ("value", Some(d.as_secs_f64())),
            Self::Invalid(_) => ("invalid", None),
        };
        json!({"state": state, "seconds": seconds, "raw": raw})
    }
}

impl std::fmt::Display for QueueTimeoutHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Absent => f.write_str("-"),
            Self::Value(d) => write!(f, "{}s", d.as_secs_f64()),
            Self::Invalid(raw) => write!(f, "invalid({})", raw.join(" | ")),
        }
    }
}

/// One value as the proxy reads it: ASCII whitespace trimmed, digits with at
/// most one `.` after at least one digit, at most a year.
fn parse_seconds(text: &str) -> Option<Duration> {
    let text = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    let seconds: f64 = text.parse().ok()?;
    if !(0.0..=365.0 * 24.0 * 3600.0).contains(&seconds) {
        return None;
    }
    Duration::try_from_secs_f64(seconds).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&str]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append(QUEUE_TIMEOUT_HEADER, v.parse().unwrap());
        }
        map
    }

    #[test]
    fn queue_timeout_is_recorded_as_value_absent_or_invalid_with_its_lines() {
        assert_eq!(
            QueueTimeoutHeader::from_headers(&HeaderMap::new()),
            QueueTimeoutHeader::Absent
        );
        assert_eq!(
            QueueTimeoutHeader::from_headers(&headers(&["1.5"])),
            QueueTimeoutHeader::Value(Duration::from_millis(1500))
        );
        assert_eq!(
            QueueTimeoutHeader::from_headers(&headers(&["5s"])),
            QueueTimeoutHeader::Invalid(vec!["5s".into()])
        );
        let two = headers(&["1", "2"]);
        let parsed = QueueTimeoutHeader::from_headers(&two);
        assert_eq!(
            parsed.to_json(&two),
            json!({"state": "invalid", "seconds": null, "raw": ["1", "2"]})
        );
    }
}
