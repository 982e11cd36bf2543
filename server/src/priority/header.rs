//! Parsing of the `X-Priority` request header.
//!
//! The value is a signed 32-bit decimal after trimming ASCII whitespace; a leading
//! `+` or `-` is allowed. Anything else (absent, empty, non-numeric, fractional,
//! out of range, or more than one value) counts as 0: a bad header never fails a
//! request. [`HeaderPriority`] keeps *why* a value was 0, for logs and metrics.

use http::HeaderMap;

/// The request header that carries a request's priority.
/// A `HeaderName` rather than a string, so a lookup does not parse the name again.
pub(crate) const PRIORITY_HEADER: http::HeaderName = http::HeaderName::from_static("x-priority");

/// What the `X-Priority` header of one request said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderPriority {
    /// No header was sent.
    Absent,
    /// One well-formed value.
    Value(i32),
    /// One value that is not a signed 32-bit decimal.
    Invalid,
    /// More than one value (two header lines, or a comma-separated list).
    Duplicated,
}

impl HeaderPriority {
    /// Reads the header from a request's headers (name matched case-insensitively).
    pub fn from_headers(headers: &HeaderMap) -> Self {
        let mut values = headers.get_all(PRIORITY_HEADER).iter();
        let Some(first) = values.next() else {
            return Self::Absent;
        };
        if values.next().is_some() {
            return Self::Duplicated;
        }
        match first.to_str() {
            Ok(text) if text.contains(',') => Self::Duplicated,
            Ok(text) => parse_value(text).map_or(Self::Invalid, Self::Value),
            Err(_) => Self::Invalid,
        }
    }

    /// The priority the request is scheduled with: the value, or 0 for anything else.
    pub fn value(self) -> i32 {
        match self {
            Self::Value(v) => v,
            Self::Absent | Self::Invalid | Self::Duplicated => 0,
        }
    }

    /// True when a header was sent but could not be used.
    pub fn is_malformed(self) -> bool {
        matches!(self, Self::Invalid | Self::Duplicated)
    }
}

/// Parses one header value: ASCII whitespace trimmed, optional sign, decimal digits
/// only, within `i32`.
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
    fn absent_header_is_zero_and_absent() {
        let p = HeaderPriority::from_headers(&HeaderMap::new());
        assert_eq!(p, HeaderPriority::Absent);
        assert_eq!(p.value(), 0);
    }

    #[test]
    fn well_formed_values_parse_with_sign_and_whitespace() {
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
                HeaderPriority::from_headers(&headers(&[raw])),
                HeaderPriority::Value(want),
                "{}",
                String::from_utf8_lossy(raw)
            );
        }
    }

    #[test]
    fn malformed_values_are_invalid_and_count_as_zero() {
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
            b"\xd9\xa3",
        ] {
            let p = HeaderPriority::from_headers(&headers(&[raw]));
            assert_eq!(
                p,
                HeaderPriority::Invalid,
                "{}",
                String::from_utf8_lossy(raw)
            );
            assert_eq!(p.value(), 0);
        }
    }

    #[test]
    fn two_header_lines_or_a_list_are_duplicated() {
        assert_eq!(
            HeaderPriority::from_headers(&headers(&[b"10", b"10"])),
            HeaderPriority::Duplicated
        );
        let p = HeaderPriority::from_headers(&headers(&[b"10, -10"]));
        assert_eq!(p, HeaderPriority::Duplicated);
        assert_eq!(p.value(), 0);
    }

    #[test]
    fn header_name_is_case_insensitive() {
        let mut map = HeaderMap::new();
        map.insert("x-PRIORITY", HeaderValue::from_static("5"));
        assert_eq!(HeaderPriority::from_headers(&map).value(), 5);
    }
}
