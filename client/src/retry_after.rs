//! Reading the delay a server asks for before a retry (`retry-after-ms`, `Retry-After`).
//!
//! A pure function of the headers and the clock (passed in), at the bottom of the
//! crate: the error type records it and the retry loop obeys it.

use std::time::{Duration, SystemTime};

use http::HeaderMap;

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
}
