//! Connections to upstreams: TCP (with the `connect` timeout and TCP
//! keep-alive), then TLS for `https://` URLs (bounded by `tlsHandshake`).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper::rt::{Read, ReadBufCursor, Write};
use hyper_util::client::legacy::connect::{Connected, Connection, HttpConnector};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;

use super::error::{BoxError, TimeoutPhase};
use super::timeouts::Timeouts;
use super::tls::UpstreamTls;

/// A transport timeout, found in a request error's source chain.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("{phase} ({} s) ran out", after.as_secs())]
pub(crate) struct TransportTimeout {
    /// Which timeout.
    pub phase: TimeoutPhase,
    /// Its configured length.
    pub after: Duration,
}

/// An `https://` upstream while no TLS client is set up.
#[derive(Debug, thiserror::Error)]
#[error("https:// upstream but no TLS client is set up")]
pub(crate) struct NoTls;

/// The TLS handshake with an upstream failed (its certificate does not
/// verify, or it does not speak TLS): the upstream is there, so sending the
/// request again would fail the same way.
#[derive(Debug, thiserror::Error)]
#[error("the TLS handshake failed: {0}")]
pub(crate) struct TlsFailed(#[source] pub(crate) BoxError);

/// The connector of one upstream client.
#[derive(Clone, Debug)]
pub(crate) struct UpstreamConnector {
    http: HttpConnector,
    tls: Option<UpstreamTls>,
    timeouts: Timeouts,
}

impl UpstreamConnector {
    pub(crate) fn new(timeouts: Timeouts, tls: Option<UpstreamTls>) -> Self {
        let mut http = HttpConnector::new();
        http.set_nodelay(true);
        // https:// is handled here, on top of the TCP stream.
        http.enforce_http(false);
        http.set_connect_timeout(timeouts.connect);
        http.set_keepalive(timeouts.keepalive);
        Self {
            http,
            tls,
            timeouts,
        }
    }
}

impl tower::Service<Uri> for UpstreamConnector {
    type Response = UpstreamStream;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<UpstreamStream, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.http.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let https = uri.scheme_str() == Some("https");
        let host = uri
            .host()
            .map(|h| h.trim_start_matches('[').trim_end_matches(']').to_owned());
        let tls = self.tls.clone();
        let timeouts = self.timeouts;
        let tcp = self.http.call(uri);
        Box::pin(async move {
            let tcp = tcp
                .await
                .map_err(|error| classify_connect(error, timeouts))?;
            if !https {
                return Ok(UpstreamStream::Plain(tcp));
            }
            let tls = tls.ok_or(NoTls)?;
            let name = ServerName::try_from(host.unwrap_or_default())
                .map_err(|error| TlsFailed(error.into()))?;
            let handshake = tls.connector().connect(name, tcp.into_inner());
            let handshaken =
                match timeouts.tls_handshake {
                    Some(limit) => tokio::time::timeout(limit, handshake).await.map_err(|_| {
                        TransportTimeout {
                            phase: TimeoutPhase::TlsHandshake,
                            after: limit,
                        }
                    })?,
                    None => handshake.await,
                };
            let stream = handshaken.map_err(|error| TlsFailed(error.into()))?;
            Ok(UpstreamStream::Tls(Box::new(TokioIo::new(stream))))
        })
    }
}

/// hyper-util reports a connect timeout as an I/O "timed out" error; naming
/// the setting lets the client be told which one ran out.
fn classify_connect<E>(error: E, timeouts: Timeouts) -> BoxError
where
    E: std::error::Error + Send + Sync + 'static,
{
    let timed_out = error
        .source()
        .and_then(|e| e.downcast_ref::<io::Error>())
        .is_some_and(|e| e.kind() == io::ErrorKind::TimedOut);
    match (timed_out, timeouts.connect) {
        (true, Some(after)) => Box::new(TransportTimeout {
            phase: TimeoutPhase::Connect,
            after,
        }),
        _ => Box::new(error),
    }
}

/// A connection to an upstream, plain or TLS.
#[derive(Debug)]
pub(crate) enum UpstreamStream {
    Plain(TokioIo<TcpStream>),
    Tls(Box<TokioIo<TlsStream<TcpStream>>>),
}

impl Connection for UpstreamStream {
    fn connected(&self) -> Connected {
        match self {
            Self::Plain(tcp) => tcp.connected(),
            Self::Tls(tls) => tls.inner().get_ref().0.connected(),
        }
    }
}

impl Read for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl Write for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_flush(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Self::Plain(s) => s.is_write_vectored(),
            Self::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Self::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Self::Tls(s) => Pin::new(s.as_mut()).poll_write_vectored(cx, bufs),
        }
    }
}
