//! Request priority and its `X-Priority` header.
//!
//! A proxy ranks waiting requests by the integer in `X-Priority` (higher is served
//! earlier; no header means the proxy's default, 0). The SDK's main API is three tiers;
//! [`Priority::custom`] is the escape hatch for any other integer the proxy ranks. The
//! SDK owns the header: every endpoint and every retry attempt gets it from
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
///
/// The three tiers are the API to use. A deployment that ranks by other numbers (a
/// band between Normal and Elevated, say) can send any integer the proxy accepts with
/// [`Priority::custom`]: the value is checked against the proxy's range (a signed
/// 32-bit integer; the proxy counts anything else as 0), and 10, 0 and -10 come back as
/// the tiers they mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Priority {
    /// Interactive work a person is waiting for: served before normal and low work.
    Elevated,
    /// The proxy's default ordering (no header).
    #[default]
    Normal,
    /// Background work (scheduled jobs, batch segments): served after everything else.
    Low,
    /// Another integer, made by [`Priority::custom`] (never 10, 0 or -10).
    Custom(CustomPriority),
}

/// An `X-Priority` value other than the tiers' 10, 0 and -10; made by
/// [`Priority::custom`], read with [`CustomPriority::value`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CustomPriority(i32);

impl CustomPriority {
    /// The integer sent as `X-Priority`.
    pub fn value(self) -> i32 {
        self.0
    }
}

/// A number outside the proxy's `X-Priority` range (a signed 32-bit integer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "X-Priority {value} is outside the proxy's range ({min}..={max}); the proxy would count it as 0",
    min = i32::MIN,
    max = i32::MAX
)]
pub struct PriorityOutOfRange {
    /// The number given.
    pub value: i64,
}

impl Priority {
    /// The three tiers, from most to least urgent.
    pub const ALL: [Priority; 3] = [Priority::Elevated, Priority::Normal, Priority::Low];

    /// The escape hatch: any integer the proxy ranks by. `10`, `0` and `-10` give
    /// [`Priority::Elevated`], [`Priority::Normal`] (no header) and [`Priority::Low`];
    /// anything else is sent as is.
    ///
    /// ```
    /// use llama_swap_client::Priority;
    ///
    /// let between = Priority::custom(5)?;
    /// assert_eq!(between.header_int(), Some(5));
    /// assert_eq!(Priority::custom(10)?, Priority::Elevated);
    /// assert!(Priority::custom(1_i64 << 40).is_err());
    /// # Ok::<(), llama_swap_client::PriorityOutOfRange>(())
    /// ```
    ///
    /// # Errors
    ///
    /// [`PriorityOutOfRange`] for a number the proxy cannot read as a priority.
    pub fn custom(value: impl Into<i64>) -> Result<Priority, PriorityOutOfRange> {
        let value = value.into();
        let int = i32::try_from(value).map_err(|_| PriorityOutOfRange { value })?;
        Ok(Priority::from_int(int))
    }

    /// The priority that sends `value` (`0` is Normal: no header).
    fn from_int(value: i32) -> Priority {
        match value {
            ELEVATED_VALUE => Priority::Elevated,
            0 => Priority::Normal,
            LOW_VALUE => Priority::Low,
            other => Priority::Custom(CustomPriority(other)),
        }
    }

    /// The integer the proxy ranks by, or `None` for `Normal` (no header).
    pub fn header_int(self) -> Option<i32> {
        match self {
            Priority::Elevated => Some(ELEVATED_VALUE),
            Priority::Normal => None,
            Priority::Low => Some(LOW_VALUE),
            Priority::Custom(custom) => Some(custom.0),
        }
    }

    /// The integer the proxy ranks this call by: [`Priority::header_int`], with 0 for
    /// `Normal`. Orders priorities the way the proxy does.
    pub fn rank(self) -> i32 {
        self.header_int().unwrap_or(0)
    }

    /// The `X-Priority` header value for this priority, or `None` when no header is
    /// sent.
    pub fn header_value(self) -> Option<HeaderValue> {
        match self {
            Priority::Elevated => Some(HeaderValue::from_static("10")),
            Priority::Normal => None,
            Priority::Low => Some(HeaderValue::from_static("-10")),
            Priority::Custom(custom) => Some(HeaderValue::from(custom.0)),
        }
    }

    /// The lowercase name of a tier (`elevated`, `normal`, `low`), or `custom` for
    /// another integer ([`Display`](fmt::Display) shows the integer itself).
    pub fn as_str(self) -> &'static str {
        match self {
            Priority::Elevated => "elevated",
            Priority::Normal => "normal",
            Priority::Low => "low",
            Priority::Custom(_) => "custom",
        }
    }

    /// Reads a priority back from an `X-Priority` header value: a signed 32-bit
    /// decimal (ASCII whitespace trimmed), as the proxy reads it. Used to honour a
    /// priority that a caller put into a plain header map instead of using the typed
    /// setting.
    ///
    /// # Errors
    ///
    /// [`ParsePriorityError`] when the value is not such an integer.
    pub fn from_header_value(value: &HeaderValue) -> Result<Priority, ParsePriorityError> {
        let bad = || ParsePriorityError {
            input: String::from_utf8_lossy(value.as_bytes()).into_owned(),
        };
        let text = value.to_str().map_err(|_| bad())?;
        parse_int(text).map(Priority::from_int).ok_or_else(bad)
    }
}

/// A signed 32-bit decimal with an optional sign, ASCII whitespace trimmed (the
/// proxy's rule).
fn parse_int(text: &str) -> Option<i32> {
    let trimmed = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let digits = trimmed.strip_prefix(['+', '-']).unwrap_or(trimmed);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    trimmed.parse().ok()
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
    /// A tier's name, or a custom priority's integer.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad` so width and alignment flags work in tables.
        match self {
            Priority::Custom(custom) => f.pad(&custom.0.to_string()),
            tier => f.pad(tier.as_str()),
        }
    }
}

/// A string that names no priority.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown priority {input:?}: expected elevated, normal, low or an integer the proxy ranks (a signed 32-bit integer)"
)]
pub struct ParsePriorityError {
    /// The text that was rejected.
    pub input: String,
}

impl FromStr for Priority {
    type Err = ParsePriorityError;

    /// Accepts `elevated`, `normal` and `low`, ignoring ASCII case and surrounding
    /// whitespace, or an integer as [`Priority::custom`] does (`"5"`, `"-10"`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        Priority::ALL
            .into_iter()
            .find(|p| p.as_str().eq_ignore_ascii_case(t))
            .or_else(|| parse_int(t).map(Priority::from_int))
            .ok_or_else(|| ParsePriorityError {
                input: s.to_owned(),
            })
    }
}

impl Serialize for Priority {
    /// A tier as its name (`"elevated"`), a custom priority as its integer (`5`).
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Priority::Custom(custom) => serializer.serialize_i32(custom.0),
            tier => serializer.serialize_str(tier.as_str()),
        }
    }
}

impl<'de> Deserialize<'de> for Priority {
    /// A tier's name, or an integer (a JSON number; a string of digits is refused, so
    /// a typo such as `"10"` for `"elevated"` is not silently a number).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Form {
            Number(i64),
            Name(String),
        }
        match Form::deserialize(deserializer)? {
            Form::Number(n) => Priority::custom(n).map_err(serde::de::Error::custom),
            Form::Name(name) => Priority::ALL
                .into_iter()
                .find(|p| p.as_str().eq_ignore_ascii_case(name.trim()))
                .ok_or_else(|| {
                    serde::de::Error::custom(format!(
                        "unknown priority {name:?}: expected elevated, normal, low or an integer"
                    ))
                }),
        }
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
        assert_eq!(read("5").unwrap().header_int(), Some(5));
        assert_eq!(read("high").unwrap_err().input, "high");
        assert!(read("2147483648").is_err());
        assert!(read("1.5").is_err());
    }

    #[test]
    fn custom_priorities_send_their_integer_and_name_the_tiers_they_equal() {
        let five = Priority::custom(5).unwrap();
        assert_eq!(five.header_value(), Some(HeaderValue::from_static("5")));
        assert_eq!(five.rank(), 5);
        assert_eq!(five.to_string(), "5");
        assert_eq!(Priority::custom(10).unwrap(), Priority::Elevated);
        assert_eq!(Priority::custom(0).unwrap(), Priority::Normal);
        assert_eq!(Priority::custom(-10).unwrap(), Priority::Low);
        assert_eq!(
            Priority::custom(i32::MIN).unwrap().header_int(),
            Some(i32::MIN)
        );
        assert_eq!(
            Priority::custom(i64::from(i32::MAX) + 1).unwrap_err(),
            PriorityOutOfRange {
                value: i64::from(i32::MAX) + 1
            }
        );
        assert_eq!("-3".parse::<Priority>().unwrap().header_int(), Some(-3));
        assert_eq!(" 10 ".parse::<Priority>().unwrap(), Priority::Elevated);
        let mut headers = HeaderMap::new();
        apply_priority(&mut headers, five);
        assert_eq!(headers[PRIORITY_HEADER], "5");
    }

    #[test]
    fn serde_writes_custom_priorities_as_numbers() {
        let five = Priority::custom(5).unwrap();
        assert_eq!(serde_json::to_string(&five).unwrap(), "5");
        assert_eq!(serde_json::from_str::<Priority>("5").unwrap(), five);
        assert_eq!(
            serde_json::from_str::<Priority>("10").unwrap(),
            Priority::Elevated
        );
        assert!(serde_json::from_str::<Priority>("4294967296").is_err());
    }
}
