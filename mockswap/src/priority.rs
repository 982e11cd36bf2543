//! The `X-Priority` header as a request sent it.
//!
//! The proxy parses the header leniently (docs/DESIGN.md section 2): ASCII whitespace trimmed,
//! an optional sign, a signed 32-bit decimal; anything else counts as 0. A test double
//! must not lose *why* a value counts as 0, so [`PriorityHeader`] keeps the raw values
//! and tells "absent", "0", "garbage" and "two values" apart.

use http::HeaderMap;
use serde::Serialize;

/// The request header that carries a request's priority (lowercase, as hyper stores names).
pub const PRIORITY_HEADER: &str = "x-priority";

/// What the `X-Priority` header of one request said.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PriorityHeader {
    /// No `X-Priority` header was sent.
    Absent,
    /// Exactly one well-formed value.
    Value(i32),
    /// One value that is not a signed 32-bit decimal (kept as sent, lossily decoded).
    Invalid(String),
    /// More than one value: two header lines, or one line holding a comma-separated list.
    /// Every header line is kept as sent.
    Duplicated(Vec<String>),
}

impl PriorityHeader {
    /// Reads the header from a request's headers (the name is matched case-insensitively).
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let raw = raw_lines(headers);
        let mut values = headers.get_all(PRIORITY_HEADER).iter();
        let Some(first) = values.next() else {
            return Self::Absent;
        };
        if values.next().is_some() || first.as_bytes().contains(&b',') {
            return Self::Duplicated(raw);
        }
        match first.to_str().ok().and_then(parse_value) {
            Some(v) => Self::Value(v),
            None => Self::Invalid(raw.into_iter().next().unwrap_or_default()),
        }
    }

    /// The priority a proxy schedules the request with: the value, or 0 for anything else.
    pub fn effective(&self) -> i32 {
        match self {
            Self::Value(v) => *v,
            Self::Absent | Self::Invalid(_) | Self::Duplicated(_) => 0,
        }
    }

    /// The well-formed value, if exactly one was sent.
    pub fn value(&self) -> Option<i32> {
        match self {
            Self::Value(v) => Some(*v),
            Self::Absent | Self::Invalid(_) | Self::Duplicated(_) => None,
        }
    }

    /// The state name used in the JSON journal: `absent`, `value`, `invalid` or `duplicated`.
    pub fn state(&self) -> &'static str {
        match self {
            Self::Absent => "absent",
            Self::Value(_) => "value",
            Self::Invalid(_) => "invalid",
            Self::Duplicated(_) => "duplicated",
        }
    }
}

impl std::fmt::Display for PriorityHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Absent => f.write_str("-"),
            Self::Value(v) => write!(f, "{v}"),
            Self::Invalid(raw) => write!(f, "invalid({raw:?})"),
            Self::Duplicated(raw) => write!(f, "duplicated({})", raw.join(" | ")),
        }
    }
}

/// The serialised form of a request's priority in the admin API's journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct PriorityJson {
    /// `absent`, `value`, `invalid` or `duplicated`.
    pub state: &'static str,
    /// The value when `state` is `value`, else `null`.
    pub value: Option<i32>,
    /// Every header line as sent.
    pub raw: Vec<String>,
}

impl PriorityJson {
    /// Builds the view of docs/DESIGN.md section 5 from a request's headers: `raw` holds every
    /// `X-Priority` line exactly as sent (lossily decoded), even when the value is valid.
    pub(crate) fn from_headers(headers: &HeaderMap) -> Self {
        let parsed = PriorityHeader::from_headers(headers);
        Self {
            state: parsed.state(),
            value: parsed.value(),
            raw: raw_lines(headers),
        }
    }
}

/// Every `X-Priority` line of a request, as sent (lossily decoded).
pub(crate) fn raw_lines(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(PRIORITY_HEADER)
        .iter()
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        .collect()
}

/// Parses one header value the way the proxy does: ASCII whitespace trimmed, an optional
/// `+` or `-`, decimal digits only, within `i32`.
pub(crate) fn parse_value(text: &str) -> Option<i32> {
    let trimmed = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let digits = trimmed.strip_prefix(['+', '-']).unwrap_or(trimmed);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    trimmed.parse::<i32>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(values: &[&[u8]]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for v in values {
            map.append("X-Priority", HeaderValue::from_bytes(v).unwrap());
        }
        map
    }

    #[test]
    fn absent_header_is_absent_and_counts_as_zero() {
        let p = PriorityHeader::from_headers(&HeaderMap::new());
        assert_eq!(p, PriorityHeader::Absent);
        assert_eq!(p.effective(), 0);
    }

    #[test]
    fn well_formed_values_parse_with_sign_and_whitespace_but_keep_raw() {
        for (raw, want) in [
            (&b"10"[..], 10),
            (b"-10", -10),
            (b"+7", 7),
            (b"  42\t", 42),
            (b"0", 0),
            (b"2147483647", i32::MAX),
            (b"-2147483648", i32::MIN),
        ] {
            assert_eq!(
                PriorityHeader::from_headers(&headers(&[raw])),
                PriorityHeader::Value(want),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn malformed_values_are_invalid_with_their_raw_text() {
        for raw in [
            &b""[..],
            b" ",
            b"high",
            b"1.5",
            b"2147483648",
            b"-2147483649",
            b"++1",
            b"+",
            b"1e3",
            b"\xff",
        ] {
            let p = PriorityHeader::from_headers(&headers(&[raw]));
            assert_eq!(
                p,
                PriorityHeader::Invalid(String::from_utf8_lossy(raw).into_owned()),
            );
            assert_eq!(p.effective(), 0);
        }
    }

    #[test]
    fn two_lines_or_a_list_are_duplicated_with_every_line_kept() {
        assert_eq!(
            PriorityHeader::from_headers(&headers(&[b"10", b"10"])),
            PriorityHeader::Duplicated(vec!["10".into(), "10".into()])
        );
        let p = PriorityHeader::from_headers(&headers(&[b"10, -10"]));
        assert_eq!(p, PriorityHeader::Duplicated(vec!["10, -10".into()]));
        assert_eq!(p.effective(), 0);
        assert_eq!(p.state(), "duplicated");
    }

    #[test]
    fn json_view_keeps_the_raw_text_of_a_valid_value() {
        let v = serde_json::to_value(PriorityJson::from_headers(&headers(&[b" +10 "]))).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"state": "value", "value": 10, "raw": [" +10 "]})
        );
        let v = serde_json::to_value(PriorityJson::from_headers(&HeaderMap::new())).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"state": "absent", "value": null, "raw": []})
        );
    }
}
