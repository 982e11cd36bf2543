//! Layers in front of every endpoint: CORS preflight, the loop check and the
//! access log.

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};

/// Refuses (508 `proxy_loop`) a request this server itself sent to an
/// upstream: the upstream address leads back here, and serving it would send
/// it upstream again, without end.
pub(crate) async fn refuse_loops(request: Request, next: Next) -> Response {
    if crate::proxy::came_through_here(request.headers()) {
        tracing::warn!(
            path = request.uri().path(),
            "a request came back to this server through a model's upstream; refused"
        );
        return super::ApiError::ProxyLoop.into_response();
    }
    next.run(request).await
}

/// Headers a browser may send when the preflight does not name any.
const DEFAULT_ALLOWED_HEADERS: &str =
    "Content-Type, Authorization, Accept, X-Requested-With, X-Priority, X-Api-Key";
/// Longest `Access-Control-Request-Headers` echoed back.
const MAX_ECHOED_HEADERS: usize = 1024;

/// Answers CORS preflight (`OPTIONS`) requests before routing and
/// authentication, like llama-swap, so browser UIs can call the API.
pub(crate) async fn preflight(request: Request, next: Next) -> Response {
    if request.method() != Method::OPTIONS {
        return next.run(request).await;
    }
    let requested = request
        .headers()
        .get(header::ACCESS_CONTROL_REQUEST_HEADERS)
        .filter(|v| v.len() <= MAX_ECHOED_HEADERS && is_header_list(v.as_bytes()))
        .cloned()
        .unwrap_or_else(|| HeaderValue::from_static(DEFAULT_ALLOWED_HEADERS));
    let mut response = StatusCode::NO_CONTENT.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_ORIGIN,
        HeaderValue::from_static("*"),
    );
    headers.insert(
        header::ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, PUT, PATCH, DELETE, OPTIONS"),
    );
    headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, requested);
    headers.insert(
        header::ACCESS_CONTROL_MAX_AGE,
        HeaderValue::from_static("86400"),
    );
    response
}

/// Header names separated by commas and spaces, nothing else.
fn is_header_list(raw: &[u8]) -> bool {
    raw.iter()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b',' | b' '))
}

/// One log line per request: method, path, status and time to the response
/// head (a streamed body may last much longer). Paths that are polled are
/// logged at debug level.
pub(crate) async fn access_log(request: Request, next: Next) -> Response {
    let started = tokio::time::Instant::now();
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if matches!(
        path.as_str(),
        "/health" | "/wol-health" | "/api/queue" | "/running" | "/metrics"
    ) {
        tracing::debug!(%method, %path, status, ms, "request");
    } else {
        tracing::info!(%method, %path, status, ms, "request");
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_header_lists_are_echoed() {
        assert!(is_header_list(b"content-type, x-priority"));
        assert!(!is_header_list(b"content-type\r\nx-evil: 1"));
        assert!(!is_header_list(b"a;b"));
    }
}
