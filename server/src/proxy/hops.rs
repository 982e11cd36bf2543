//! Recognising a request that comes back to this server, and bounding how
//! many servers a request may pass through.
//!
//! A model or peer whose address leads back here (directly, through a name
//! the configuration check cannot resolve, through another server that lists
//! this one as its peer, or through other proxies) turns one request into an
//! unbounded chain of nested ones. Each request this server sends on (to a
//! model's upstream or to a peer) carries its mark in [`VIA_HEADER`], added to
//! the marks already there, as `Via` does for HTTP proxies; a request arriving
//! with this server's own mark, or with more than [`MAX_HOPS`] marks, is
//! refused.
//!
//! A mark belongs to one served instance (a [`HopMark`] made once and kept
//! across reloads), not to the process: two servers in one process (the
//! test suite's front and back, or a library user's) are two hops.

use std::hash::{BuildHasher, Hasher};
use std::sync::LazyLock;

use http::{HeaderMap, HeaderName, HeaderValue};

/// The header listing the servers a request passed through, one mark each
/// (comma-separated or on several lines).
pub const VIA_HEADER: HeaderName = HeaderName::from_static("x-llama-swap-via");

/// Most servers a request may have passed through (marks in [`VIA_HEADER`])
/// and still be served. Real set-ups chain two or three (a front, a peer, a
/// model server); more means a loop this server's own mark cannot see.
pub const MAX_HOPS: usize = 8;

/// The mark of [`HopMark::process`].
static PROCESS_MARK: LazyLock<HopMark> = LazyLock::new(HopMark::new);

/// One server's mark in [`VIA_HEADER`]: random, so two servers sending
/// requests to each other tell their marks apart, and a restarted server is a
/// new one. Cheap to clone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HopMark(HeaderValue);

impl Default for HopMark {
    fn default() -> Self {
        Self::new()
    }
}

impl HopMark {
    /// A new mark, unlike any other.
    #[must_use]
    pub fn new() -> Self {
        // RandomState is seeded from the system's randomness, differently each time.
        let random = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let text = format!("llama-swap-rs-{random:016x}");
        Self(HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("llama-swap-rs")))
    }

    /// The mark shared by everything in this process that does not make its
    /// own (a [`Proxy`](super::Proxy) built with default options).
    #[must_use]
    pub fn process() -> Self {
        PROCESS_MARK.clone()
    }

    /// The mark's text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        self.0.to_str().unwrap_or_default()
    }

    /// Adds this mark to request headers going on to another server.
    pub(crate) fn add_to(&self, headers: &mut HeaderMap) {
        headers.append(VIA_HEADER, self.0.clone());
    }

    /// Whether a request with these headers was sent on by the server of this mark.
    #[must_use]
    pub fn is_on(&self, headers: &HeaderMap) -> bool {
        let own = self.0.as_bytes();
        marks(headers).any(|mark| mark == own)
    }
}

/// Every mark in a request's [`VIA_HEADER`] lines.
fn marks(headers: &HeaderMap) -> impl Iterator<Item = &[u8]> {
    headers.get_all(VIA_HEADER).iter().flat_map(|value| {
        value
            .as_bytes()
            .split(|b| *b == b',')
            .map(<[u8]>::trim_ascii)
            .filter(|mark| !mark.is_empty())
    })
}

/// How many servers marked the request: the hops it already made.
#[must_use]
pub(crate) fn hops(headers: &HeaderMap) -> usize {
    marks(headers).count()
}

/// Whether a request with these headers was sent upstream by this process's
/// shared mark ([`HopMark::process`]).
#[cfg(test)]
#[must_use]
pub(crate) fn came_through_here(headers: &HeaderMap) -> bool {
    PROCESS_MARK.is_on(headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_this_server_sent_on_is_recognised_among_other_marks() {
        let mark = HopMark::new();
        let mut headers = HeaderMap::new();
        assert!(!mark.is_on(&headers));
        headers.append(VIA_HEADER, HeaderValue::from_static("llama-swap-rs-peer"));
        assert!(!mark.is_on(&headers));
        mark.add_to(&mut headers);
        assert!(mark.is_on(&headers));
        assert!(!HopMark::new().is_on(&headers), "another server's mark");

        let mut joined = HeaderMap::new();
        let list = format!("other, {}", mark.as_str());
        joined.insert(VIA_HEADER, HeaderValue::from_str(&list).unwrap());
        assert!(mark.is_on(&joined));
    }

    #[test]
    fn the_mark_is_added_not_replacing_earlier_ones_and_every_mark_counts_as_a_hop() {
        let mut headers = HeaderMap::new();
        assert_eq!(hops(&headers), 0);
        headers.append(VIA_HEADER, HeaderValue::from_static("a, b,, c"));
        HopMark::new().add_to(&mut headers);
        assert_eq!(headers.get_all(VIA_HEADER).iter().count(), 2);
        assert_eq!(hops(&headers), 4);
    }

    #[test]
    fn the_process_mark_is_one_mark_and_new_marks_differ() {
        assert_eq!(HopMark::process(), HopMark::process());
        assert_ne!(HopMark::new(), HopMark::new());
        let mut headers = HeaderMap::new();
        HopMark::process().add_to(&mut headers);
        assert!(came_through_here(&headers));
    }
}
