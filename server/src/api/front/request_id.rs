//! Request ids: taken from `X-Request-Id` when the client sent a usable one,
//! generated otherwise, returned in the response's `X-Request-Id` and carried
//! as the `request_id` field of a tracing span around the whole request
//! (queueing, the swap it waits for, proxying). The id is also forwarded to
//! the upstream, so its logs can be matched.
//!
//! Every request gets one, so it costs one allocation: a fresh id is a single
//! shared buffer that the request's and the response's headers both point at;
//! a client's id stays in the request's headers as sent, and the response's
//! copy is made once. A copy rather than a view: the request may wait long
//! for its model, and a view would keep the connection's whole read buffer.

use std::collections::hash_map::RandomState;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::Request;
use bytes::Bytes;
use http::{HeaderName, HeaderValue};

/// The request and response header that carries the id: a `HeaderName`, so
/// that looking it up or inserting it neither parses nor copies the name.
pub(crate) const REQUEST_ID_HEADER: HeaderName = HeaderName::from_static("x-request-id");

/// Longest client-supplied id kept; longer ones are replaced.
const MAX_LEN: usize = 128;

/// Hash keys drawn once per process, so ids differ between runs.
static SEED: LazyLock<RandomState> = LazyLock::new(RandomState::new);
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A request's id, as its header value (visible ASCII only, so it is text).
#[derive(Debug, Clone)]
pub(crate) struct RequestId(HeaderValue);

impl RequestId {
    /// The id's text.
    pub(crate) fn as_str(&self) -> &str {
        // Only visible ASCII gets here (`usable`, `generate`), which is text.
        self.0.to_str().unwrap_or_default()
    }

    /// The header value carrying it, for the response.
    pub(crate) fn into_header_value(self) -> HeaderValue {
        self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A fresh id: 16 hex digits, unique within the process.
fn generate() -> RequestId {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let n = SEED.hash_one(COUNTER.fetch_add(1, Ordering::Relaxed));
    let mut digits = [0u8; 16];
    for (i, digit) in digits.iter_mut().enumerate() {
        // Most significant nibble first, as `{:016x}` prints it.
        *digit = HEX[((n >> (60 - 4 * i)) & 0xf) as usize];
    }
    // One allocation holding the digits; clones of the value share it.
    let value = HeaderValue::from_maybe_shared(Bytes::from_owner(digits))
        .unwrap_or_else(|_| HeaderValue::from_static("0000000000000000"));
    RequestId(value)
}

/// The client's id if it is short, visible ASCII; `None` otherwise.
fn usable(value: &HeaderValue) -> Option<RequestId> {
    let bytes = value.as_bytes();
    let ok =
        !bytes.is_empty() && bytes.len() <= MAX_LEN && bytes.iter().all(|b| b.is_ascii_graphic());
    if !ok {
        return None;
    }
    // Copied, not shared with the parse buffer (see the module docs).
    HeaderValue::from_bytes(bytes).ok().map(RequestId)
}

/// Assigns the request its id: the client's usable one or a fresh one, set
/// in the request's headers (so the upstream sees it too, and only it).
/// Returns the id, which is also the header value to echo in the response.
pub(crate) fn assign(request: &mut Request) -> RequestId {
    let headers = request.headers_mut();
    match headers.get(REQUEST_ID_HEADER).and_then(usable) {
        Some(id) => {
            // A repeated header forwards the one id that was taken.
            if headers.get_all(REQUEST_ID_HEADER).iter().nth(1).is_some() {
                headers.insert(REQUEST_ID_HEADER, id.0.clone());
            }
            id
        }
        None => {
            let id = generate();
            headers.insert(REQUEST_ID_HEADER, id.0.clone());
            id
        }
    }
}

/// The id [`assign`] put in `headers` (empty when none was assigned).
pub(crate) fn of(headers: &http::HeaderMap) -> &str {
    headers
        .get(REQUEST_ID_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_differ() {
        let a = generate();
        let b = generate();
        assert_ne!(a.as_str(), b.as_str());
        assert_eq!(a.as_str().len(), 16);
        assert!(a.as_str().bytes().all(|b| b.is_ascii_hexdigit()));
    }

    #[test]
    fn a_generated_id_is_the_counters_hash_in_sixteen_hex_digits() {
        let before = COUNTER.load(Ordering::Relaxed);
        let id = generate();
        // Other tests may generate ids meanwhile: the id is one of the hashes
        // of the counter values taken since `before`.
        let after = COUNTER.load(Ordering::Relaxed);
        let expected: Vec<String> = (before..after)
            .map(|n| format!("{:016x}", SEED.hash_one(n)))
            .collect();
        assert!(
            expected.iter().any(|e| e == id.as_str()),
            "{id} {expected:?}"
        );
    }

    #[test]
    fn only_short_visible_ascii_ids_are_kept() {
        let kept = |value: HeaderValue| usable(&value).map(|id| id.as_str().to_owned());
        assert_eq!(
            kept(HeaderValue::from_static("abc-123")),
            Some("abc-123".to_owned())
        );
        assert_eq!(kept(HeaderValue::from_static("")), None);
        assert_eq!(kept(HeaderValue::from_static("a b")), None);
        let long = "x".repeat(MAX_LEN + 1);
        assert_eq!(kept(HeaderValue::from_str(&long).unwrap()), None);
    }

    fn request_with(ids: &[&'static str]) -> Request {
        let mut request = Request::new(axum::body::Body::empty());
        for id in ids {
            request
                .headers_mut()
                .append(REQUEST_ID_HEADER, HeaderValue::from_static(id));
        }
        request
    }

    #[test]
    fn a_usable_client_id_is_kept_and_forwarded_alone() {
        let mut request = request_with(&["client-1", "client-2"]);
        let id = assign(&mut request);
        assert_eq!(id.as_str(), "client-1");
        let forwarded: Vec<_> = request
            .headers()
            .get_all(REQUEST_ID_HEADER)
            .iter()
            .collect();
        assert_eq!(forwarded, ["client-1"]);
    }

    #[test]
    fn a_kept_client_id_is_a_copy_not_a_view_of_the_request_headers() {
        let mut request = Request::new(axum::body::Body::empty());
        // Like hyper's parse: a header value that is a view of a larger buffer.
        let parsed = bytes::Bytes::from_static(b"GET / x-request-id: client-1\r\n");
        let value = HeaderValue::from_maybe_shared(parsed.slice(20..28)).unwrap();
        request.headers_mut().insert(REQUEST_ID_HEADER, value);
        let id = assign(&mut request);
        assert_eq!(id.as_str(), "client-1");
        let sent = request.headers().get(REQUEST_ID_HEADER).unwrap();
        assert_eq!(
            sent.as_bytes().as_ptr(),
            parsed[20..].as_ptr(),
            "forwarded as sent"
        );
        assert_ne!(
            id.0.as_bytes().as_ptr(),
            sent.as_bytes().as_ptr(),
            "the id held until the response does not keep the parse buffer"
        );
    }

    #[test]
    fn an_unusable_client_id_is_replaced_in_the_forwarded_headers() {
        let mut request = request_with(&["has space"]);
        let id = assign(&mut request);
        assert_eq!(id.as_str().len(), 16);
        assert_eq!(request.headers().get(REQUEST_ID_HEADER), Some(&id.0));
    }
}
