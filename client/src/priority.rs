//! Request priority and its `X-Priority` header.
//!
//! A proxy ranks waiting requests by the integer in `X-Priority` (higher is served
//! earlier; no header means the proxy's default, 0). The SDK exposes three tiers and
//! owns the header: every endpoint and every retry attempt gets it from
//! [`apply_priority`], which inserts it once or removes it.

use std::fmt;
use std::str::FromStr;

use http::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The request header that carries a call's priority (lowercase, as HTTP/2 requires).
pub const PRIORITY_HEADER: HeaderName = HeaderName::from_static("x-priority");

/// The header value sent for [`Priority::Elevated`].
pub const ELEVATED_VALUE: i32 = 10;

/// The header value sent for [`Priority::Low`].
pub const LOW_VALUE: i32 = -10;

/// How urgent one call is, relative to other calls waiting at the proxy.
///
/// `Elevated` is sent as `X-Priority: 10`, `Low` as `X-Priority: -10`, and `Normal`
/// sends no header at all (never `0`), so a proxy without priority support sees
/// exactly what it would see from any other client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Priority {
    /// Interactive work a person is waiting for: served before normal and low work.
    Elevated,
    /// The proxy's default ordering (no header).
    #[default]
    Normal,
    /// Background work (scheduled jobs, batch segments): served after everything else.
    Low,
}

impl Priority {
    /// Every tier, from most to least urgent.
    pub const ALL: [Priority; 3] = [Priority::Elevated, Priority::Normal, Priority::Low];

    /// The integer the proxy ranks by, or `None` for `Normal` (no header).
    pub fn header_int(self) -> Option<i32> {
        match self {
            Priority::Elevated => Some(ELEVATED_VALUE),
            Priority::Normal => None,
            Priority::Low => Some(LOW_VALUE),
        }
    }

    /// The `X-Priority` header value for this tier, or `None` when no header is sent.
    pub fn header_value(self) -> Option<HeaderValue> {
        match self {
            Priority::Elevated => Some(HeaderValue::from_static("10")),
            Priority::Normal => None,
            Priority::Low => Some(HeaderValue::from_static("-10")),
        }
    }

    /// The lowercase name used by `Display`, `FromStr` and serde.
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Elevated => "elevated",
            Priority::Normal => "normal",
            Priority::Low => "low",
        }
    }

    /// Reads a tier back from an `X-Priority` header value the SDK itself would send
    /// (`10`, `-10`, or `0` for the default). Used to honour a priority that a caller
    /// put into a plain header map instead of using the typed setting.
    ///
    /// # Errors
    ///
    /// [`ParsePriorityError`] when the value is not one of those three integers.
    pub fn from_header_value(value: &HeaderValue) -> Result<Priority, ParsePriorityError> {
        let bad = || ParsePriorityError {
            input: String::from_utf8_lossy(value.as_bytes()).into_owned(),
        };
        let text = value.to_str().map_err(|_| bad())?;
        match text.trim().parse::<i32>() {
            Ok(ELEVATED_VALUE) => Ok(Priority::Elevated),
            Ok(0) => Ok(Priority::Normal),
            Ok(LOW_VALUE) => Ok(Priority::Low),
            _ => Err(bad()),
        }
    }
}

/// Makes `headers` carry exactly the header `priority` calls for: every existing
/// `X-Priority` entry is removed, then one value is inserted (none for `Normal`).
///
/// This is the single place the header is written; the request builder calls it for
/// every endpoint, and retries reuse the map it produced.
pub fn apply_priority(headers: &mut HeaderMap, priority: Priority) {
    // `remove` drops every value under the name, so a duplicated entry from a
    // default header map cannot survive next to ours.
    headers.remove(&PRIORITY_HEADER);
    if let Some(value) = priority.header_value() {
        headers.insert(PRIORITY_HEADER, value);
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad` so width and alignment flags work in tables.
        f.pad(self.as_str())
    }
}

/// A string that names no priority tier.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown priority {input:?}: expected one of elevated, normal, low")]
pub struct ParsePriorityError {
    /// The text that was rejected.
    pub input: String,
}

impl FromStr for Priority {
    type Err = ParsePriorityError;

    /// Accepts `elevated`, `normal` and `low`, ignoring ASCII case and surrounding
    /// whitespace.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Priority::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(t))
            .ok_or_else(|| ParsePriorityError {
                input: s.to_owned(),
            })
    }
}

impl Serialize for Priority {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Priority {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_map_to_ten_nothing_and_minus_ten() {
        assert_eq!(
            Priority::Elevated.header_value(),
            Some(HeaderValue::from_static("10"))
        );
        assert_eq!(Priority::Normal.header_value(), None);
        assert_eq!(
            Priority::Low.header_value(),
            Some(HeaderValue::from_static("-10"))
        );
        assert_eq!(Priority::Elevated.header_int(), Some(10));
        assert_eq!(Priority::Normal.header_int(), None);
        assert_eq!(Priority::Low.header_int(), Some(-10));
    }

    #[test]
    fn header_name_is_lowercase_x_priority() {
        assert_eq!(PRIORITY_HEADER.as_str(), "x-priority");
    }

    #[test]
    fn display_and_from_str_round_trip_every_tier() {
        for p in Priority::ALL {
            assert_eq!(p.to_string().parse::<Priority>().unwrap(), p);
        }
        assert_eq!(" LOW ".parse::<Priority>().unwrap(), Priority::Low);
        assert_eq!(format!("[{:<6}]", Priority::Low), "[low   ]");
        let err = "urgent".parse::<Priority>().unwrap_err();
        assert_eq!(err.input, "urgent");
    }

    #[test]
    fn serde_uses_lowercase_names() {
        assert_eq!(
            serde_json::to_string(&Priority::Elevated).unwrap(),
            "\"elevated\""
        );
        let p: Priority = serde_json::from_str("\"low\"").unwrap();
        assert_eq!(p, Priority::Low);
        assert!(serde_json::from_str::<Priority>("\"10\"").is_err());
    }

    #[test]
    fn apply_priority_replaces_duplicates_with_one_value() {
        let mut headers = HeaderMap::new();
        headers.append(PRIORITY_HEADER, HeaderValue::from_static("5"));
        headers.append("X-Priority", HeaderValue::from_static("7"));
        apply_priority(&mut headers, Priority::Low);
        let values: Vec<_> = headers.get_all(PRIORITY_HEADER).iter().collect();
        assert_eq!(values, vec![&HeaderValue::from_static("-10")]);
    }

    #[test]
    fn apply_priority_normal_removes_the_header() {
        let mut headers = HeaderMap::new();
        headers.insert(PRIORITY_HEADER, HeaderValue::from_static("10"));
        apply_priority(&mut headers, Priority::Normal);
        assert!(headers.get(PRIORITY_HEADER).is_none());
    }

    #[test]
    fn header_values_read_back_as_tiers() {
        let read = |v: &'static str| Priority::from_header_value(&HeaderValue::from_static(v));
        assert_eq!(read("10").unwrap(), Priority::Elevated);
        assert_eq!(read(" -10 ").unwrap(), Priority::Low);
        assert_eq!(read("0").unwrap(), Priority::Normal);
        assert_eq!(read("5").unwrap_err().input, "5");
        assert!(read("high").is_err());
    }
}
