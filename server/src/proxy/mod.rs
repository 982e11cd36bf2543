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
mod connector;
mod error;
mod headers;
mod hops;
mod request_body;
mod timeouts;
mod tls;
mod upgrade;

use std::net::IpAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, Request, StatusCode, Uri, header};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::errors::error_chain;
use connector::{NoTls, TlsFailed, UpstreamConnector};
use request_body::{ContinueLatch, ExpectGate, Sent, SentSignal};

pub(crate) use body::LeasedBody;
pub(crate) use connector::TransportTimeout;
pub(crate) use error::{BoxError, ProxyError, RequestBodyError, StreamErrorFrames, TimeoutPhase};
pub(crate) use headers::remove_hop_by_hop;
pub use hops::{MAX_HOPS, VIA_HEADER};
// For the proxy's tests, which check where a request was marked.
#[cfg(test)]
pub(crate) use hops::came_through_here;
pub(crate) use hops::{HopMark, hops};
pub use timeouts::{DEFAULT_RESPONSE_HEADER, Timeouts};
pub(crate) use tls::{TlsSetupError, UpstreamTls, parse_pem_certificates};
pub(crate) use upgrade::{Cancelled, is_websocket_upgrade, splice};

/// A request on its way to an upstream.
#[derive(Debug)]
pub(crate) struct Outbound {
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
    /// A websocket handshake ([`is_websocket_upgrade`]) whose client side the
    /// caller holds: the upstream is asked for the upgrade (without a body),
    /// and its `101` is returned for [`splice`]. When false, `Connection` and
    /// `Upgrade` are dropped like every hop-by-hop header.
    pub websocket: bool,
    /// Headers set after the client's were cleaned, replacing any of the same
    /// name (a peer's credential, the priority carried across to a peer).
    pub set_headers: HeaderMap,
}

/// The body of an [`Outbound`] request.
#[derive(Debug)]
pub(crate) enum OutboundBody {
    /// A body already read (and maybe rewritten); sent with its exact length.
    Buffered(Bytes),
    /// A body streamed from the client as it arrives.
    Streaming(Body),
}

impl OutboundBody {
    /// The body, when it was read whole.
    pub(crate) fn buffered(&self) -> Option<&Bytes> {
        match self {
            Self::Buffered(bytes) => Some(bytes),
            Self::Streaming(_) => None,
        }
    }
}

/// Why [`Proxy::send`] produced no response.
#[derive(Debug)]
pub(crate) struct SendError<L> {
    /// What went wrong.
    pub error: ProxyError,
    /// The request and its lease, when no connection could be made and the
    /// request can be sent again unchanged (its body was buffered).
    pub unsent: Option<(Outbound, L)>,
}

/// How a [`Proxy`] reaches its upstreams.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub(crate) struct ProxyOptions {
    /// Transport timeouts (default: llama-swap's).
    pub timeouts: Timeouts,
    /// TLS for `https://` upstreams (default none: `https://` URLs fail).
    pub tls: Option<UpstreamTls>,
    /// The mark added to [`VIA_HEADER`] of every request sent (default
    /// [`HopMark::process`]); `None` adds none (the marks already there pass on).
    /// A server gives every client of its own (models' and peers') its
    /// instance's mark, which its front checks.
    pub hop_mark: Option<HopMark>,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        Self {
            timeouts: Timeouts::default(),
            tls: None,
            hop_mark: Some(HopMark::process()),
        }
    }
}

impl ProxyOptions {
    /// Sets the transport timeouts.
    #[must_use]
    pub(crate) fn timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// Sets the TLS client for `https://` upstreams.
    #[must_use]
    pub(crate) fn tls(mut self, tls: Option<UpstreamTls>) -> Self {
        self.tls = tls;
        self
    }

    /// Sets the mark requests carry (see [`hop_mark`](Self::hop_mark)).
    #[must_use]
    pub(crate) fn hop_mark(mut self, mark: Option<HopMark>) -> Self {
        self.hop_mark = mark;
        self
    }
}

/// The pooled client that forwards requests to upstreams. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct Proxy {
    client: Client<UpstreamConnector, Body>,
    stream_error: StreamErrorFrames,
    timeouts: Timeouts,
    https: bool,
    hop_mark: Option<HopMark>,
}

impl Proxy {
    /// A proxy with a fresh connection pool, llama-swap's default timeouts and
    /// no TLS; an event stream that fails after its response started ends with
    /// the frames of `stream_error`.
    #[cfg(test)]
    pub(crate) fn new(stream_error: StreamErrorFrames) -> Self {
        Self::with_options(stream_error, ProxyOptions::default())
    }

    /// A proxy with a fresh connection pool, reaching upstreams as `options`
    /// say; an event stream that fails after its response started ends with
    /// the frames of `stream_error`.
    pub(crate) fn with_options(stream_error: StreamErrorFrames, options: ProxyOptions) -> Self {
        let https = options.tls.is_some();
        let connector = UpstreamConnector::new(options.timeouts, options.tls);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(options.timeouts.idle_conn)
            .build(connector);
        Self {
            client,
            stream_error,
            timeouts: options.timeouts,
            https,
            hop_mark: options.hop_mark,
        }
    }

    /// The timeouts this proxy applies.
    pub(crate) fn timeouts(&self) -> &Timeouts {
        &self.timeouts
    }

    /// Sends `outbound` to the upstream at `base` (the model's `proxy` URL) and
    /// returns its response, whose body streams through and holds `lease` until
    /// it ends or is dropped.
    ///
    /// # Errors
    ///
    /// [`ProxyError::Unreachable`] when the upstream cannot be connected to
    /// or fails before answering; [`ProxyError::Timeout`] when a transport
    /// timeout runs out first; [`ProxyError::BodyTooLarge`] when a streamed
    /// body passes its limit; [`ProxyError::BadUpstreamUrl`] for a base URL the
    /// proxy cannot use (not `http://` or `https://`) and [`ProxyError::NoTls`]
    /// for `https://` without a TLS client.
    pub(crate) async fn forward<L>(
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
    pub(crate) async fn send<L>(
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
            tracing::error!(%model, %base, "the model's proxy URL is not a usable http:// or https:// URL");
            return Err(SendError {
                error: ProxyError::BadUpstreamUrl {
                    model: model.to_owned(),
                    base: base.to_owned(),
                },
                unsent: None,
            });
        };
        if uri.scheme_str() == Some("https") && !self.https {
            tracing::error!(%model, %base, "https:// upstream but no TLS client was set up");
            return Err(SendError {
                error: ProxyError::NoTls {
                    model: model.to_owned(),
                },
                unsent: None,
            });
        }
        let replay = match &outbound.body {
            OutboundBody::Buffered(bytes) => Some(Outbound {
                method: outbound.method.clone(),
                path_and_query: outbound.path_and_query.clone(),
                headers: outbound.headers.clone(),
                body: OutboundBody::Buffered(bytes.clone()),
                client_ip: outbound.client_ip,
                body_limit: outbound.body_limit,
                websocket: outbound.websocket,
                set_headers: outbound.set_headers.clone(),
            }),
            OutboundBody::Streaming(_) => None,
        };
        let mut headers = outbound.headers;
        headers::request_headers_without_mark(&mut headers);
        if let Some(mark) = &self.hop_mark {
            mark.add_to(&mut headers);
        }
        headers.extend(outbound.set_headers);
        if let Some(ip) = outbound.client_ip {
            append_forwarded_for(&mut headers, ip);
        }
        let websocket = outbound.websocket;
        let body = if websocket {
            // A handshake has no body (RFC 6455 section 4.1).
            upgrade::ask_for_websocket(&mut headers);
            headers.remove(header::CONTENT_LENGTH);
            Body::empty()
        } else {
            match outbound.body {
                OutboundBody::Buffered(bytes) => {
                    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
                    Body::from(bytes)
                }
                OutboundBody::Streaming(body) => body,
            }
        };
        let latch = match self.timeouts.expect_continue {
            Some(wait) if expects_continue(&headers) => {
                Some((Arc::new(ContinueLatch::default()), wait))
            }
            _ => None,
        };
        let body = match &latch {
            Some((latch, wait)) => Body::new(ExpectGate::new(body, Arc::clone(latch), *wait)),
            None => body,
        };
        let sent = Arc::new(Sent::default());
        let body = match self.timeouts.response_header {
            Some(_) => Body::new(SentSignal::new(body, Arc::clone(&sent))),
            None => body,
        };
        let mut request = Request::new(body);
        *request.method_mut() = outbound.method;
        *request.uri_mut() = uri;
        *request.headers_mut() = headers;
        if let Some((latch, _)) = latch {
            hyper::ext::on_informational(&mut request, move |response| {
                if response.status() == StatusCode::CONTINUE {
                    latch.open();
                }
            });
        }

        let limit = outbound.body_limit;
        let pending = self.client.request(request);
        let answered = match self.timeouts.response_header {
            Some(after) => {
                tokio::pin!(pending);
                tokio::select! {
                    biased;
                    answered = &mut pending => answered,
                    () = sent.elapsed(after) => {
                        tracing::warn!(%model, ?after, "upstream sent no response headers within timeouts.responseHeader");
                        return Err(SendError {
                            error: ProxyError::Timeout {
                                model: model.to_owned(),
                                phase: TimeoutPhase::ResponseHeader,
                                after,
                            },
                            unsent: None,
                        });
                    }
                }
            }
            None => pending.await,
        };
        let response = match answered {
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
                // With its causes: hyper's own text is only "client error", and
                // the TLS or socket cause is what an operator needs.
                let detail = error_chain(&error);
                tracing::warn!(%model, error = %detail, "upstream request failed");
                let unsent = if refused_before_sending(&error) {
                    replay.map(|outbound| (outbound, lease))
                } else {
                    None
                };
                let model = model.to_owned();
                let error = if let Some(timeout) = find_cause::<TransportTimeout>(&error) {
                    ProxyError::Timeout {
                        model,
                        phase: timeout.phase,
                        after: timeout.after,
                    }
                } else if find_cause::<NoTls>(&error).is_some() {
                    ProxyError::NoTls { model }
                } else {
                    ProxyError::Unreachable { model }
                };
                return Err(SendError { error, unsent });
            }
        };

        let (mut parts, incoming) = response.into_parts();
        let switched = upgrade::switched_to_websocket(parts.status, &parts.headers);
        if parts.status == StatusCode::SWITCHING_PROTOCOLS && !(websocket && switched) {
            tracing::warn!(%model, upgrade = ?parts.headers.get(header::UPGRADE), "upstream switched protocols without being asked to, or to another protocol than websocket");
            return Err(SendError {
                error: ProxyError::Unreachable {
                    model: model.to_owned(),
                },
                unsent: None,
            });
        }
        remove_hop_by_hop(&mut parts.headers);
        if switched {
            upgrade::ask_for_websocket(&mut parts.headers);
        }
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
        let body = LeasedBody::new(incoming, lease, model.to_owned(), sse)
            .idle_timeout(self.timeouts.body_idle);
        Ok(Response::from_parts(parts, Body::new(body)))
    }
}

/// True when no connection could be made because the upstream is not there
/// (refused or reset): it may have exited an instant ago, and the request can
/// wait for it to start again. A handshake that failed or a timeout that ran
/// out reached a running upstream, which would fail a replay the same way.
fn refused_before_sending(error: &hyper_util::client::legacy::Error) -> bool {
    error.is_connect()
        && find_cause::<TlsFailed>(error).is_none()
        && find_cause::<TransportTimeout>(error).is_none()
}

/// True when the request failed because its streamed body exceeded the limit.
fn caused_by_body_limit(error: &(dyn std::error::Error + 'static)) -> bool {
    find_cause::<http_body_util::LengthLimitError>(error).is_some()
}

/// The first error of type `E` in `error`'s source chain.
fn find_cause<'a, E: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a E> {
    let mut source = Some(error);
    while let Some(error) = source {
        if let Some(found) = error.downcast_ref::<E>() {
            return Some(found);
        }
        source = error.source();
    }
    None
}

/// True when the request asks the server to confirm before the body is sent.
fn expects_continue(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::EXPECT)
        .iter()
        .any(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"))
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
pub(crate) fn is_event_stream(headers: &HeaderMap) -> bool {
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
///
/// Built as one string parsed once: every request passes here.
fn upstream_uri(base: &str, path_and_query: &str) -> Option<Uri> {
    let (scheme, rest) = base.split_once("://")?;
    let scheme = if scheme.eq_ignore_ascii_case("http") {
        "http"
    } else if scheme.eq_ignore_ascii_case("https") {
        "https"
    } else {
        return None;
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, after) = rest.split_at(end);
    if authority.is_empty() {
        return None;
    }
    let path = after.split(['?', '#']).next().unwrap_or_default();
    let prefix = path.trim_end_matches('/');
    let tail = if path_and_query.is_empty() {
        "/"
    } else {
        path_and_query
    };
    let mut joined =
        String::with_capacity(scheme.len() + 3 + authority.len() + prefix.len() + tail.len());
    joined.push_str(scheme);
    joined.push_str("://");
    joined.push_str(authority);
    joined.push_str(prefix);
    joined.push_str(tail);
    Uri::from_maybe_shared(Bytes::from(joined)).ok()
}

fn append_forwarded_for(headers: &mut HeaderMap, ip: IpAddr) {
    use std::fmt::Write as _;
    let name = http::HeaderName::from_static("x-forwarded-for");
    let existing = headers.get(&name).and_then(|v| v.to_str().ok());
    // One buffer, handed to the header value without a copy.
    let mut value = String::with_capacity(existing.map_or(0, |e| e.len() + 2) + 39);
    if let Some(existing) = existing {
        value.push_str(existing);
        value.push_str(", ");
    }
    let _ = write!(value, "{ip}");
    if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(value)) {
        headers.insert(name, value);
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod transport_tests;
