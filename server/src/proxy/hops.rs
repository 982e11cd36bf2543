//! Recognising a request that comes back to this server.
//!
//! A model whose upstream address leads back here (directly, through a name
//! the configuration check cannot resolve, or through other proxies) turns
//! one request into an unbounded chain of nested ones. Each request sent
//! upstream carries this server's mark in [`VIA_HEADER`], added to the marks
//! already there; a request arriving with the mark is refused.

use std::hash::{BuildHasher, Hasher};
use std::sync::LazyLock;

use http::{HeaderMap, HeaderName, HeaderValue};

/// The header listing the servers a request passed through, one mark each
/// (comma-separated or on several lines).
pub const VIA_HEADER: HeaderName = HeaderName::from_static("x-llama-swap-via");

/// This process's mark: random, so two servers proxying to each other tell
/// their marks apart, and a restarted server is a new one.
static OWN_MARK: LazyLock<HeaderValue> = LazyLock::new(|| {
    // RandomState is seeded from the system's randomness for each process.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let text = format!("llama-swap-rs-{random:016x}");
    HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("llama-swap-rs"))
});

/// Adds this server's mark to the request headers going upstream.
pub(crate) fn add_own_hop(headers: &mut HeaderMap) {
    headers.append(VIA_HEADER, OWN_MARK.clone());
}

/// Whether a request with these headers was sent upstream by this server.
#[must_use]
pub fn came_through_here(headers: &HeaderMap) -> bool {
    let own = OWN_MARK.as_bytes();
    headers.get_all(VIA_HEADER).iter().any(|value| {
        value
            .as_bytes()
            .split(|b| *b == b',')
            .any(|mark| mark.trim_ascii() == own)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_this_server_sent_upstream_is_recognised_among_other_marks() {
        let mut headers = HeaderMap::new();
        assert!(!came_through_here(&headers));
        headers.append(VIA_HEADER, HeaderValue::from_static("llama-swap-rs-peer"));
        assert!(!came_through_here(&headers));
        add_own_hop(&mut headers);
        assert!(came_through_here(&headers));

        let mut joined = HeaderMap::new();
        let list = format!("other, {}", OWN_MARK.to_str().unwrap());
        joined.insert(VIA_HEADER, HeaderValue::from_str(&list).unwrap());
        assert!(came_through_here(&joined));
    }

    #[test]
    fn the_mark_is_added_not_replacing_earlier_ones() {
        let mut headers = HeaderMap::new();
        headers.append(VIA_HEADER, HeaderValue::from_static("llama-swap-rs-peer"));
        add_own_hop(&mut headers);
        assert_eq!(headers.get_all(VIA_HEADER).iter().count(), 2);
    }
}
