//! Header hygiene between the client and the upstream.
//!
//! Hop-by-hop headers (RFC 9110 section 7.6.1) describe one connection, not the
//! message, so they never cross the proxy in either direction; the headers a
//! `Connection` header names are hop-by-hop too.

use http::{HeaderMap, HeaderName, header};

use crate::priority::PRIORITY_HEADER;

/// Headers that are hop-by-hop whatever `Connection` says.
const HOP_BY_HOP: [HeaderName; 8] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    header::PROXY_AUTHENTICATE,
    header::PROXY_AUTHORIZATION,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// Removes hop-by-hop headers, including those listed in `Connection`.
pub(crate) fn remove_hop_by_hop(headers: &mut HeaderMap) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(name);
    }
}

/// Prepares a client's request headers for the upstream: hop-by-hop headers,
/// `Host` (the connector sets the upstream's) and `X-Priority` (a scheduling
/// hint for this proxy, not for the model server) are removed.
///
/// The process's mark ([`HopMark::process`](super::HopMark::process)) is added
/// to the [`VIA_HEADER`](super::VIA_HEADER) list, so a request that comes back
/// is recognised.
#[cfg(test)]
pub(crate) fn request_headers_for_upstream(headers: &mut HeaderMap) {
    request_headers_without_mark(headers);
    super::HopMark::process().add_to(headers);
}

/// Removes the hop-by-hop headers, `Host` and `X-Priority` without adding a
/// mark (the marks already there stay); [`Proxy`](super::Proxy) adds its
/// client's own.
pub(crate) fn request_headers_without_mark(headers: &mut HeaderMap) {
    remove_hop_by_hop(headers);
    headers.remove(header::HOST);
    headers.remove(PRIORITY_HEADER);
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn hop_by_hop_and_connection_listed_headers_are_removed() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONNECTION,
            HeaderValue::from_static("keep-alive, X-Trace"),
        );
        headers.insert("x-trace", HeaderValue::from_static("1"));
        headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        headers.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        remove_hop_by_hop(&mut headers);
        assert_eq!(headers.len(), 1);
        assert!(headers.contains_key(header::CONTENT_TYPE));
    }

    #[test]
    fn priority_and_host_are_not_forwarded() {
        let mut headers = HeaderMap::new();
        headers.append("X-Priority", HeaderValue::from_static("10"));
        headers.append("x-priority", HeaderValue::from_static("-10"));
        headers.insert(header::HOST, HeaderValue::from_static("proxy:8080"));
        headers.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        request_headers_for_upstream(&mut headers);
        // Accept, and this server's loop mark (added, not forwarded).
        assert_eq!(headers.len(), 2);
        assert!(headers.contains_key(header::ACCEPT));
        assert!(headers.contains_key(crate::proxy::VIA_HEADER));
    }
}
