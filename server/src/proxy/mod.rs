//! The streaming reverse proxy to upstream model servers.
//!
//! One pooled HTTP/1 client serves every upstream (connections are kept per
//! host and port). Request and response bodies stream through frame by frame:
//! nothing is buffered here, so each SSE chunk reaches the client as the
//! upstream sends it. Dropping the response body (the client went away) drops
//! the upstream response, which closes that upstream connection and so cancels
//! the generation; the request's lease lives inside that body
//! ([`LeasedBody`]).

mod body;
mod error;
mod headers;

use std::net::IpAddr;
use std::time::Duration;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, Uri, header};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

pub use body::{BoxError, LeasedBody};
pub use error::{ProxyError, RequestBodyError, StreamErrorFrames};
pub use headers::{remove_hop_by_hop, request_headers_for_upstream};

/// How long to wait for a TCP connection to an upstream (llama-swap's default).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long an idle pooled connection is kept.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// A request on its way to an upstream.
#[derive(Debug)]
pub struct Outbound {
    /// The method.
    pub method: Method,
    /// Path and query to append to the upstream's base URL, starting with `/`.
    pub path_and_query: String,
    /// The client's headers; hop-by-hop, `Host` and `X-Priority` are removed here,
    /// credentials must already be stripped by the caller.
    pub headers: HeaderMap,
    /// The body.
    pub body: OutboundBody,
    /// The client's address, appended to `X-Forwarded-For`.
    pub client_ip: Option<IpAddr>,
    /// The limit a [`OutboundBody::Streaming`] body is cut at, reported as 413
    /// when the upstream request fails because of it.
    pub body_limit: usize,
}

/// The body of an [`Outbound`] request.
#[derive(Debug)]
pub enum OutboundBody {
    /// A body already read (and maybe rewritten); sent with its exact length.
    Buffered(Bytes),
    /// A body streamed from the client as it arrives.
    Streaming(Body),
}

/// Why [`Proxy::send`] produced no response.
#[derive(Debug)]
pub struct SendError<L> {
    /// What went wrong.
    pub error: ProxyError,
    /// The request and its lease, when no connection could be made and the
    /// request can be sent again unchanged (its body was buffered).
    pub unsent: Option<(Outbound, L)>,
}

/// The pooled client that forwards requests to upstreams. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Proxy {
    client: Client<HttpConnector, Body>,
    stream_error: StreamErrorFrames,
}

impl Proxy {
    /// A proxy with a fresh connection pool; an event stream that fails after
    /// its response started ends with the frames of `stream_error`.
    pub fn new(stream_error: StreamErrorFrames) -> Self {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .build(connector);
        Self {
            client,
            stream_error,
        }
    }

    /// Sends `outbound` to the upstream at `base` (the model's `proxy` URL) and
    /// returns its response, whose body streams through and holds `lease` until
    /// it ends or is dropped.
    ///
    /// # Errors
    ///
    /// [`ProxyError::Unreachable`] when the upstream cannot be connected to
    /// or fails before answering; [`ProxyError::BodyTooLarge`] when a streamed
    /// body passes its limit; [`ProxyError::BadUpstreamUrl`] for a base URL the
    /// proxy cannot use (not `http://`).
    pub async fn forward<L>(
        &self,
        model: &str,
        base: &str,
        outbound: Outbound,
        lease: L,
    ) -> Result<Response, ProxyError>
    where
        L: Send + 'static,
    {
        self.send(model, base, outbound, lease)
            .await
            .map_err(|failed| failed.error)
    }

    /// As [`forward`](Self::forward), but when no connection could be made and
    /// the body was buffered, hands the request and the lease back so the
    /// caller can send it again: the upstream never saw it.
    ///
    /// # Errors
    ///
    /// A [`SendError`] with the error for the client, and the request when it
    /// can be replayed.
    pub async fn send<L>(
        &self,
        model: &str,
        base: &str,
        outbound: Outbound,
        lease: L,
    ) -> Result<Response, SendError<L>>
    where
        L: Send + 'static,
    {
        let Some(uri) = upstream_uri(base, &outbound.path_and_query) else {
            tracing::error!(%model, %base, "the model's proxy URL is not a usable http:// URL");
            return Err(SendError {
                error: ProxyError::BadUpstreamUrl {
                    model: model.to_owned(),
                    base: base.to_owned(),
                },
                unsent: None,
            });
        };
        let replay = match &outbound.body {
            OutboundBody::Buffered(bytes) => Some(Outbound {
                method: outbound.method.clone(),
                path_and_query: outbound.path_and_query.clone(),
                headers: outbound.headers.clone(),
                body: OutboundBody::Buffered(bytes.clone()),
                client_ip: outbound.client_ip,
                body_limit: outbound.body_limit,
            }),
            OutboundBody::Streaming(_) => None,
        };
        let mut headers = outbound.headers;
        request_headers_for_upstream(&mut headers);
        if let Some(ip) = outbound.client_ip {
            append_forwarded_for(&mut headers, ip);
        }
        let body = match outbound.body {
            OutboundBody::Buffered(bytes) => {
                headers.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
                Body::from(bytes)
            }
            OutboundBody::Streaming(body) => body,
        };
        let mut request = Request::new(body);
        *request.method_mut() = outbound.method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;

        let limit = outbound.body_limit;
        let response = match self.client.request(request).await {
            Ok(response) => response,
            Err(error) if caused_by_body_limit(&error) => {
                return Err(SendError {
                    error: ProxyError::BodyTooLarge { limit },
                    unsent: None,
                });
            }
            Err(error) => {
                if let Some(cut) = body_cut(&error) {
                    let error = match cut {
                        RequestBodyError::TooLarge { limit } => ProxyError::BodyTooLarge { limit },
                        RequestBodyError::TimedOut { timeout } => {
                            ProxyError::BodyTimeout { timeout }
                        }
                        RequestBodyError::Aborted => ProxyError::BodyAborted,
                    };
                    return Err(SendError {
                        error,
                        unsent: None,
                    });
                }
                tracing::warn!(%model, %error, "upstream request failed");
                let unsent = if error.is_connect() {
                    replay.map(|outbound| (outbound, lease))
                } else {
                    None
                };
                return Err(SendError {
                    error: ProxyError::Unreachable {
                        model: model.to_owned(),
                    },
                    unsent,
                });
            }
        };

        let (mut parts, incoming) = response.into_parts();
        remove_hop_by_hop(&mut parts.headers);
        let sse = is_event_stream(&parts.headers);
        if sse {
            // An error frame may be appended, and intermediaries must not buffer.
            parts.headers.remove(header::CONTENT_LENGTH);
            parts.headers.insert(
                http::HeaderName::from_static("x-accel-buffering"),
                HeaderValue::from_static("no"),
            );
        }
        let sse = sse.then_some(self.stream_error);
        let body = LeasedBody::new(incoming, lease, model.to_owned(), sse);
        Ok(Response::from_parts(parts, Body::new(body)))
    }
}

/// True when the request failed because its streamed body exceeded the limit.
fn caused_by_body_limit(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut source = Some(error);
    while let Some(error) = source {
        if error.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = error.source();
    }
    false
}

/// Why the request's own body was cut, when that is why the request failed.
fn body_cut(error: &(dyn std::error::Error + 'static)) -> Option<RequestBodyError> {
    let mut source = Some(error);
    while let Some(error) = source {
        if let Some(cut) = error.downcast_ref::<RequestBodyError>() {
            return Some(cut.clone());
        }
        source = error.source();
    }
    None
}

/// True for a `text/event-stream` response.
pub fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// Joins the base URL (which may carry a path prefix) and the request's path.
fn upstream_uri(base: &str, path_and_query: &str) -> Option<Uri> {
    let base: Uri = base.parse().ok()?;
    if base.scheme_str() != Some("http") {
        return None;
    }
    let authority = base.authority()?;
    let prefix = base.path().trim_end_matches('/');
    let tail = if path_and_query.is_empty() {
        "/"
    } else {
        path_and_query
    };
    format!("http://{authority}{prefix}{tail}").parse().ok()
}

fn append_forwarded_for(headers: &mut HeaderMap, ip: IpAddr) {
    let name = http::HeaderName::from_static("x-forwarded-for");
    let value = match headers.get(&name).and_then(|v| v.to_str().ok()) {
        Some(existing) => format!("{existing}, {ip}"),
        None => ip.to_string(),
    };
    if let Ok(value) = HeaderValue::from_str(&value) {
        headers.insert(name, value);
    }
}

#[cfg(test)]
mod tests;
