//! Polling an upstream's health endpoint until it answers 200.
//!
//! llama-swap waits 250 ms and then probes once a second, so a model that is ready
//! is noticed up to a second late. Here the first probe goes out at once and the
//! interval grows from 10 ms to 40 ms, so a ready upstream is noticed within tens
//! of milliseconds however long it took to load (docs/DESIGN.md section 7: ready → first
//! request forwarded ≤ 50 ms median). A multi-minute load costs 25 loopback probes
//! a second, each a connect and a tiny GET that a loading llama-server answers 503.
//!
//! Each probe is one HTTP/1 GET on a fresh loopback connection, driven inline (no
//! spawned connection task, no pool to go stale when the upstream restarts).

use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep_until, timeout};

use crate::proxy::UpstreamTls;
use rustls::pki_types::ServerName;

/// Interval before the second probe.
pub(crate) const FIRST_INTERVAL: Duration = Duration::from_millis(5);
/// Longest interval between probes. With a 250 ms cap the readiness benchmark
/// measured 119 ms after a 2 s load (half an interval lost on average) and with
/// 40 ms a swap still cost ~20 ms beyond the load; 20 ms keeps that loss near 10 ms.
pub(crate) const MAX_INTERVAL: Duration = Duration::from_millis(20);
/// Longest a single probe may take before it counts as failed; a stuck upstream
/// must not stall the loop until the overall deadline.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a health URL could not be built from the proxy URL and the check endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum HealthUrlError {
    /// The combined URL does not parse.
    #[error("health check URL {url:?} is not a valid URL")]
    Invalid {
        /// The URL that was built.
        url: String,
    },
    /// Only `http://` and `https://` upstreams can be probed.
    #[error("health check URL {url:?} must start with http:// or https://")]
    UnsupportedScheme {
        /// The URL that was built.
        url: String,
    },
    /// An `https://` upstream, and no TLS client could be set up.
    #[error("health check URL {url:?} needs TLS, which could not be set up: {reason}")]
    NoTls {
        /// The URL that was built.
        url: String,
        /// Why.
        reason: String,
    },
}

/// Where to send health probes.
#[derive(Debug, Clone)]
pub(crate) struct HealthTarget {
    host: String,
    port: u16,
    authority: String,
    path: String,
    /// Set for an `https://` upstream.
    tls: Option<UpstreamTls>,
}

impl HealthTarget {
    /// Joins the upstream base URL (`http://127.0.0.1:5800`, an optional path prefix
    /// allowed) and the check endpoint (`/health`). An `https://` upstream is
    /// probed with `tls` (the system's roots when `None`).
    ///
    /// # Errors
    ///
    /// [`HealthUrlError`] when the result is not a valid `http://` or
    /// `https://` URL.
    pub(crate) fn new(
        proxy: &str,
        check_endpoint: &str,
        tls: Option<&UpstreamTls>,
    ) -> Result<Self, HealthUrlError> {
        let endpoint = check_endpoint.trim_start_matches('/');
        let url = format!("{}/{endpoint}", proxy.trim_end_matches('/'));
        let uri: Uri = url
            .parse()
            .map_err(|_| HealthUrlError::Invalid { url: url.clone() })?;
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(HealthUrlError::UnsupportedScheme { url }),
        };
        let tls = match (https, tls) {
            (false, _) => None,
            (true, Some(tls)) => Some(tls.clone()),
            (true, None) => Some(UpstreamTls::new(&[]).map_err(|e| HealthUrlError::NoTls {
                url: url.clone(),
                reason: e.to_string(),
            })?),
        };
        let Some(authority) = uri.authority() else {
            return Err(HealthUrlError::Invalid { url });
        };
        let host = authority
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let path = uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned());
        Ok(Self {
            host,
            port: authority.port_u16().unwrap_or(if https { 443 } else { 80 }),
            authority: authority.as_str().to_owned(),
            path,
            tls,
        })
    }

    /// Host, port, authority and path (with query), for a call that is not a probe.
    pub(crate) fn parts(&self) -> (&str, u16, &str, &str) {
        (&self.host, self.port, &self.authority, &self.path)
    }

    /// The TLS client of an `https://` upstream.
    pub(crate) fn tls(&self) -> Option<&UpstreamTls> {
        self.tls.as_ref()
    }

    /// The URL probed, for messages.
    pub(crate) fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}{}", self.authority, self.path)
    }

    /// Sends one GET and returns the status, or `None` if no response came (refused,
    /// reset, garbage, or slower than [`PROBE_TIMEOUT`]).
    pub(crate) async fn probe(&self) -> Option<StatusCode> {
        timeout(PROBE_TIMEOUT, self.probe_unbounded())
            .await
            .ok()
            .flatten()
    }

    async fn probe_unbounded(&self) -> Option<StatusCode> {
        let stream = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .ok()?;
        // Small requests on loopback: do not wait for Nagle.
        let _ = stream.set_nodelay(true);
        match &self.tls {
            None => self.exchange(TokioIo::new(stream)).await,
            Some(tls) => {
                let name = ServerName::try_from(self.host.clone()).ok()?;
                let stream = tls.connector().connect(name, stream).await.ok()?;
                self.exchange(TokioIo::new(stream)).await
            }
        }
    }

    /// One GET on an open connection.
    async fn exchange<IO>(&self, io: IO) -> Option<StatusCode>
    where
        IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.ok()?;
        let request = Request::get(self.path.as_str())
            .header(header::HOST, self.authority.as_str())
            .body(Empty::<Bytes>::new())
            .ok()?;
        let response = sender.send_request(request);
        tokio::pin!(conn, response);
        tokio::select! {
            biased;
            response = &mut response => response.ok().map(|r| r.status()),
            // With `connection: close` the connection can finish in the same poll that
            // hands over the response; the response future then still resolves.
            _ = &mut conn => response.await.ok().map(|r| r.status()),
        }
    }

    /// Sends one GET and returns the status with the body when it is at most
    /// `max_body` bytes, or `None` if no whole answer came within [`PROBE_TIMEOUT`].
    pub(crate) async fn fetch(&self, max_body: usize) -> Option<(StatusCode, Bytes)> {
        timeout(PROBE_TIMEOUT, self.fetch_unbounded(max_body))
            .await
            .ok()
            .flatten()
    }

    async fn fetch_unbounded(&self, max_body: usize) -> Option<(StatusCode, Bytes)> {
        let stream = TcpStream::connect((self.host.as_str(), self.port))
            .await
            .ok()?;
        let _ = stream.set_nodelay(true);
        match &self.tls {
            None => self.fetch_on(TokioIo::new(stream), max_body).await,
            Some(tls) => {
                let name = ServerName::try_from(self.host.clone()).ok()?;
                let stream = tls.connector().connect(name, stream).await.ok()?;
                self.fetch_on(TokioIo::new(stream), max_body).await
            }
        }
    }

    /// One GET on an open connection, reading the body.
    async fn fetch_on<IO>(&self, io: IO, max_body: usize) -> Option<(StatusCode, Bytes)>
    where
        IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.ok()?;
        let request = Request::get(self.path.as_str())
            .header(header::HOST, self.authority.as_str())
            .body(Empty::<Bytes>::new())
            .ok()?;
        let exchange = async {
            let response = sender.send_request(request).await.ok()?;
            let status = response.status();
            let body = Limited::new(response.into_body(), max_body)
                .collect()
                .await
                .ok()?;
            Some((status, body.to_bytes()))
        };
        tokio::pin!(conn, exchange);
        // The connection must be driven while the body is read; if it ends first
        // (`connection: close`), whatever it delivered is still read to the end.
        tokio::select! {
            biased;
            answer = &mut exchange => answer,
            _ = &mut conn => exchange.await,
        }
    }

    /// One check of a ready upstream (`healthCheckInterval`): `true` when it
    /// answers 200 within `limit`; refused, reset, another status or a hang
    /// is `false`.
    pub(crate) async fn check(&self, limit: Duration) -> bool {
        timeout(limit, self.probe_unbounded()).await.ok().flatten() == Some(StatusCode::OK)
    }

    /// Probes until a 200 arrives (`true`) or `limit` has passed (`false`).
    pub(crate) async fn wait_healthy(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        let attempt = async {
            let mut interval = FIRST_INTERVAL;
            loop {
                let started = Instant::now();
                if self.probe().await == Some(StatusCode::OK) {
                    return;
                }
                sleep_until(started + interval).await;
                interval = next_interval(interval);
            }
        };
        tokio::time::timeout_at(deadline, attempt).await.is_ok()
    }
}

/// The backoff step: ×1.25 per probe, capped, so the interval stays under the cap for
/// about the first second of a start.
fn next_interval(current: Duration) -> Duration {
    (current + current / 4).min(MAX_INTERVAL)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    #[test]
    fn target_joins_base_and_endpoint_with_one_slash() {
        for (base, ep) in [
            ("http://127.0.0.1:5800", "/health"),
            ("http://127.0.0.1:5800/", "/health"),
            ("http://127.0.0.1:5800/", "health"),
        ] {
            let t = HealthTarget::new(base, ep, None).unwrap();
            assert_eq!(t.url(), "http://127.0.0.1:5800/health");
            assert_eq!((t.host.as_str(), t.port), ("127.0.0.1", 5800));
        }
    }

    #[test]
    fn target_keeps_a_base_path_prefix_and_query() {
        let t = HealthTarget::new("http://localhost:9000/v1", "/health?full=1", None).unwrap();
        assert_eq!(t.path, "/v1/health?full=1");
        assert_eq!(t.host, "localhost");
    }

    #[test]
    fn target_defaults_to_port_80_and_unbrackets_ipv6() {
        assert_eq!(
            HealthTarget::new("http://example", "/h", None)
                .unwrap()
                .port,
            80
        );
        let t = HealthTarget::new("http://[::1]:81", "/h", None).unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 81));
        assert_eq!(t.authority, "[::1]:81");
    }

    #[test]
    fn target_takes_https_and_refuses_other_schemes_and_garbage() {
        let tls = UpstreamTls::only(&[]).unwrap();
        let t = HealthTarget::new("https://gpu-box", "/health", Some(&tls)).unwrap();
        assert_eq!(t.url(), "https://gpu-box/health");
        assert_eq!(t.port, 443);
        assert!(matches!(
            HealthTarget::new("ftp://127.0.0.1:1", "/health", None),
            Err(HealthUrlError::UnsupportedScheme { .. })
        ));
        assert!(matches!(
            HealthTarget::new("not a url", "/health", None),
            Err(HealthUrlError::Invalid { .. })
        ));
    }

    #[test]
    fn backoff_grows_from_first_interval_to_the_cap_and_stays() {
        let mut i = FIRST_INTERVAL;
        let mut total = Duration::ZERO;
        let mut steps = 0;
        while i < MAX_INTERVAL {
            total += i;
            let next = next_interval(i);
            assert!(next > i);
            i = next;
            steps += 1;
        }
        assert_eq!(next_interval(MAX_INTERVAL), MAX_INTERVAL);
        assert!(steps > 5, "backoff reaches the cap too fast: {steps} steps");
        assert!(
            total < Duration::from_secs(2),
            "backoff too slow: {total:?}"
        );
    }

    /// Answers each connection with the next status of `statuses` (the last repeats).
    async fn status_server(statuses: Vec<u16>) -> (u16, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut n = 0;
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                let status = statuses[n.min(statuses.len() - 1)];
                n += 1;
                let mut buf = [0u8; 1024];
                let _ = sock.read(&mut buf).await.unwrap();
                let resp = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                sock.write_all(resp.as_bytes()).await.unwrap();
            }
        });
        (port, task)
    }

    #[tokio::test]
    async fn probe_reports_the_status_the_upstream_answered() {
        let (port, server) = status_server(vec![503, 200]).await;
        let t = HealthTarget::new(&format!("http://127.0.0.1:{port}"), "/health", None).unwrap();
        assert_eq!(t.probe().await, Some(StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(t.probe().await, Some(StatusCode::OK));
        server.abort();
    }

    #[tokio::test]
    async fn probe_of_a_closed_port_is_no_answer() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let t = HealthTarget::new(&format!("http://127.0.0.1:{port}"), "/health", None).unwrap();
        assert_eq!(t.probe().await, None);
    }

    #[tokio::test]
    async fn wait_healthy_retries_until_200() {
        let (port, server) = status_server(vec![503, 503, 500, 200]).await;
        let t = HealthTarget::new(&format!("http://127.0.0.1:{port}"), "/health", None).unwrap();
        assert!(t.wait_healthy(Duration::from_secs(30)).await);
        server.abort();
    }

    #[tokio::test]
    async fn wait_healthy_gives_up_at_the_limit() {
        let (port, server) = status_server(vec![503]).await;
        let t = HealthTarget::new(&format!("http://127.0.0.1:{port}"), "/health", None).unwrap();
        assert!(!t.wait_healthy(Duration::from_millis(100)).await);
        server.abort();
    }
}
