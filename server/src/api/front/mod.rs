//! What every request passes before its endpoint, in one layer: the request
//! id and its tracing span ([`request_id`]), the access log, CORS preflight,
//! the loop check and authentication ([`auth`], with failed attempts limited
//! per address by [`auth_limit`]), and on the way out the format of an error
//! answer the client's `Accept` asks for ([`accept`]).
//!
//! One layer rather than a stack of them: each `from_fn` layer costs every
//! request a boxed future and a clone of the inner service, which a request
//! waiting for its model (there may be thousands) keeps until it is answered.

pub(crate) mod accept;
pub(crate) mod auth;
pub(crate) mod auth_limit;
pub(crate) mod request_id;
pub(crate) mod scopes;

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, Method, StatusCode, header};
use tokio::time::Instant;
use tracing::Instrument;

use crate::api::error::ApiError;
use crate::api::state::AppState;
use crate::logging::InlineText;
use crate::priority::KeyIndex;
use auth::ApiKeys;
use request_id::REQUEST_ID_HEADER;

/// The layer: assigns the request id, then, within the request's span,
/// answers a preflight, refuses a loop, checks the API key, runs the
/// endpoint, and logs the outcome.
pub(crate) async fn front(State(state): State<AppState>, request: Request, next: Next) -> Response {
    front_with(state, request, |_, request| next.run(request)).await
}

/// [`front`] around `endpoint` instead of the rest of the router: the model
/// endpoints are called this way without the router's own steps (see
/// [`crate::api::routes::App`]), with the same checks and the same log line.
pub(crate) async fn front_with<E, F>(state: AppState, request: Request, endpoint: E) -> Response
where
    E: FnOnce(AppState, Request) -> F,
    F: Future<Output = Response>,
{
    serve(state, request, endpoint, true).await
}

/// [`front_with`] for a request this server makes itself on behalf of a
/// caller it has already authenticated (the web UI's load test): the same
/// request id, span, loop check and access line, but no API key (the request
/// carries the caller's [`KeyIndex`], so the key's priority cap applies).
pub(crate) async fn front_on_behalf<E, F>(
    state: AppState,
    request: Request,
    endpoint: E,
) -> Response
where
    E: FnOnce(AppState, Request) -> F,
    F: Future<Output = Response>,
{
    serve(state, request, endpoint, false).await
}

async fn serve<E, F>(
    state: AppState,
    mut request: Request,
    endpoint: E,
    check_key: bool,
) -> Response
where
    E: FnOnce(AppState, Request) -> F,
    F: Future<Output = Response>,
{
    let id = request_id::assign(&mut request);
    let span = tracing::info_span!("request", request_id = %id, seq = tracing::field::Empty);
    let started = Instant::now();
    let method = request.method().clone();
    // Kept for the access line only: inline, so a typical API path costs
    // no allocation.
    let path = InlineText::<46>::from(request.uri().path());
    let format = accept::ErrorFormat::of(request.headers());
    let response = match span.in_scope(|| admit(&state, request, check_key)) {
        Admission::Pass(request) => endpoint(state, request).instrument(span.clone()).await,
        Admission::Answer(answer) => answer,
    };
    let mut response = format.render(response);
    span.in_scope(|| access_log(&method, path.as_str(), response.status(), started));
    response
        .headers_mut()
        .insert(REQUEST_ID_HEADER, id.into_header_value());
    response
}

/// The address of the client that sent `request` (`None` when the server was
/// not told: a request built in a test, or a listener without it).
pub(crate) fn client_ip(request: &Request) -> Option<IpAddr> {
    request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip())
}

/// What the checks before the endpoint decided.
enum Admission {
    /// On to the endpoint.
    Pass(Request),
    /// Answered here.
    Answer(Response),
}

/// The checks before the endpoint, in order: CORS preflight (answered before
/// authentication, like llama-swap), the loop check, the API key.
fn admit(state: &AppState, mut request: Request, check_key: bool) -> Admission {
    if request.method() == Method::OPTIONS {
        return Admission::Answer(preflight(&request));
    }
    let checked = refuse_loops(state, &request).and_then(|()| {
        if check_key {
            authenticate(state, &mut request)
        } else {
            Ok(())
        }
    });
    match checked {
        Ok(()) => Admission::Pass(request),
        Err(refusal) => Admission::Answer(refusal.into_response()),
    }
}

/// Paths llama-swap serves without an API key.
const OPEN_PATHS: &[&str] = &["/health", "/wol-health", "/", "/favicon.ico"];

/// True for the paths anyone may fetch: [`OPEN_PATHS`] and the UI's static
/// files under `/ui` (which hold no data; the page sends the key with its API calls).
fn is_open(path: &str) -> bool {
    OPEN_PATHS.contains(&path) || path == "/ui" || path.starts_with("/ui/")
}

/// Checks the API key (except on [open](is_open) paths) and removes it from
/// the request; a refusal is the answer.
fn authenticate(state: &AppState, request: &mut Request) -> Result<(), ApiError> {
    if !state.inner.keys.is_enabled() || is_open(request.uri().path()) {
        return Ok(());
    }
    let client = client_ip(request);
    let limiter = &state.inner.auth_failures;
    if let Some(ip) = client
        && let Some(retry_after) = limiter.blocked(ip, Instant::now())
    {
        return Err(ApiError::TooManyAuthFailures { retry_after });
    }
    if let Err(error) = state.inner.keys.check(request.headers()) {
        if let Some(ip) = client
            && ApiKeys::presents_credentials(request.headers())
        {
            limiter.record_failure(ip, Instant::now());
            tracing::info!(client = %ip, code = error.kind().code, "API key refused");
        }
        return Err(error);
    }
    let key = state.inner.keys.matched(request.headers()).map(KeyIndex);
    if let Some(key) = key {
        request.extensions_mut().insert(key);
    }
    if !state.inner.key_rules.may_manage(key) && scopes::needs_admin(request.uri().path()) {
        // Not a failed guess: the key is valid, the endpoint is not its.
        state.inner.keys.strip_credentials(request.headers_mut());
        return Err(ApiError::AdminKeyRequired);
    }
    state.inner.keys.strip_credentials(request.headers_mut());
    Ok(())
}

/// Refuses (508 `proxy_loop`) a request this server itself sent on (a
/// model's upstream or a peer leads back here, and serving it would send it
/// on again, without end), and one that passed through more than
/// [`MAX_HOPS`](crate::proxy::MAX_HOPS) servers (a loop through others).
fn refuse_loops(state: &AppState, request: &Request) -> Result<(), ApiError> {
    let headers = request.headers();
    if state.inner.hop_mark.is_on(headers) {
        tracing::warn!(
            path = request.uri().path(),
            "a request came back to this server through a model's upstream or a peer; refused"
        );
        return Err(ApiError::ProxyLoop);
    }
    let hops = crate::proxy::hops(headers);
    if hops > crate::proxy::MAX_HOPS {
        tracing::warn!(
            path = request.uri().path(),
            hops,
            "a request passed through more servers than allowed; refused"
        );
        return Err(ApiError::TooManyHops { hops });
    }
    Ok(())
}

/// Headers a browser may send when the preflight does not name any.
const DEFAULT_ALLOWED_HEADERS: &str =
    "Content-Type, Authorization, Accept, X-Requested-With, X-Priority, X-Queue-Timeout, X-Api-Key";
/// Longest `Access-Control-Request-Headers` echoed back.
const MAX_ECHOED_HEADERS: usize = 1024;

/// Answers a CORS preflight (`OPTIONS`) request before routing and
/// authentication, like llama-swap, so browser UIs can call the API.
fn preflight(request: &Request) -> Response {
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
fn access_log(method: &Method, path: &str, status: StatusCode, started: Instant) {
    let status = status.as_u16();
    let ms = started.elapsed().as_secs_f64() * 1000.0;
    if matches!(
        path,
        "/health" | "/wol-health" | "/api/queue" | "/running" | "/metrics"
    ) {
        tracing::debug!(%method, %path, status, ms, "request");
    } else {
        tracing::info!(%method, %path, status, ms, "request");
    }
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
