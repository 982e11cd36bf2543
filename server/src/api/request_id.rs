//! Request ids: taken from `X-Request-Id` when the client sent a usable one,
//! generated otherwise, returned in the response's `X-Request-Id` and carried
//! as the `request_id` field of a tracing span around the whole request
//! (queueing, the swap it waits for, proxying). The id is also forwarded to
//! the upstream, so its logs can be matched.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::extract::Request;
use http::HeaderValue;

/// The request and response header that carries the id.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// Longest client-supplied id kept; longer ones are replaced.
const MAX_LEN: usize = 128;

/// Hash keys drawn once per process, so ids differ between runs.
static SEED: LazyLock<RandomState> = LazyLock::new(RandomState::new);
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh id: 16 hex digits, unique within the process.
fn generate() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}", SEED.hash_one(n))
}

/// The client's id if it is short, visible ASCII; `None` otherwise.
fn usable(value: &HeaderValue) -> Option<String> {
    let bytes = value.as_bytes();
    let ok =
        !bytes.is_empty() && bytes.len() <= MAX_LEN && bytes.iter().all(|b| b.is_ascii_graphic());
    ok.then(|| String::from_utf8_lossy(bytes).into_owned())
}

/// Assigns the request its id: the client's usable one or a fresh one, set
/// in the request's headers (so the upstream sees it too). Returns the id and
/// the header value to echo in the response.
pub(crate) fn assign(request: &mut Request) -> (String, Option<HeaderValue>) {
    let id = request
        .headers()
        .get(REQUEST_ID_HEADER)
        .and_then(usable)
        .unwrap_or_else(generate);
    let value = HeaderValue::from_str(&id).ok();
    if let Some(value) = &value {
        request
            .headers_mut()
            .insert(REQUEST_ID_HEADER, value.clone());
    }
    (id, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_ids_differ() {
        let a = generate();
        let b = generate();
        assert_ne!(a, b);
        assert_eq!(a.len(), 16);
    }

    #[test]
    fn only_short_visible_ascii_ids_are_kept() {
        assert_eq!(
            usable(&HeaderValue::from_static("abc-123")),
            Some("abc-123".to_owned())
        );
        assert_eq!(usable(&HeaderValue::from_static("")), None);
        assert_eq!(usable(&HeaderValue::from_static("a b")), None);
        let long = "x".repeat(MAX_LEN + 1);
        assert_eq!(usable(&HeaderValue::from_str(&long).unwrap()), None);
    }
}
