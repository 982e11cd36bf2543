//! The calls of a sleep mode (a model's `sleep:`): a swap that must free a
//! model whose server can sleep (vLLM's sleep mode, SGLang's memory release,
//! or any server with two such endpoints) asks it to sleep and keeps its
//! process; the next start wakes it and waits for its health check (the
//! owner task's side is `actor/sleeping.rs`).
//!
//! The calls are one HTTP request each on a fresh connection to the model's
//! `proxy`, with an empty JSON object as the body (SGLang reads one), bounded
//! by the stop grace (sleep) or `healthCheckTimeout` (wake).

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;

use super::SleepSpec;
use super::health::HealthTarget;
use crate::proxy::UpstreamTls;

/// The most of an answer's body read (and thrown away).
const MAX_ANSWER: usize = 64 * 1024;

/// One HTTP call of a sleep mode: a method and a path (with its query).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpCall {
    /// The method (`POST`).
    pub method: Method,
    /// The path and query, e.g. `/sleep?level=1`.
    pub path: String,
}

impl HttpCall {
    /// `POST path`.
    #[must_use]
    pub fn post(path: &str) -> Self {
        Self {
            method: Method::POST,
            path: path.to_owned(),
        }
    }
}

impl SleepSpec {
    /// vLLM's sleep mode (`--enable-sleep-mode`): `POST /sleep?level=1`, `POST /wake_up`.
    #[must_use]
    pub fn vllm() -> Self {
        Self {
            sleep: HttpCall::post("/sleep?level=1"),
            wake: HttpCall::post("/wake_up"),
        }
    }

    /// SGLang's memory release: `POST /release_memory_occupation`, `POST
    /// /resume_memory_occupation`.
    #[must_use]
    pub fn sglang() -> Self {
        Self {
            sleep: HttpCall::post("/release_memory_occupation"),
            wake: HttpCall::post("/resume_memory_occupation"),
        }
    }
}

/// Why a sleep or wake call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SleepCallError {
    /// The URL could not be built from the proxy and the path.
    #[error("{0}")]
    Url(String),
    /// No connection, no answer, or an answer cut short.
    #[error("{url}: no answer")]
    NoAnswer {
        /// The URL called.
        url: String,
    },
    /// No answer within the time allowed.
    #[error("{url}: no answer within {limit:?}")]
    Timeout {
        /// The URL called.
        url: String,
        /// The time allowed.
        limit: Duration,
    },
    /// An answer other than 2xx.
    #[error("{url} answered {status}")]
    Status {
        /// The URL called.
        url: String,
        /// Its status.
        status: StatusCode,
    },
}

/// Makes `call` on the upstream at `proxy`, within `limit`.
///
/// # Errors
///
/// [`SleepCallError`] unless a 2xx answer came in time.
pub(crate) async fn call(
    proxy: &str,
    call: &HttpCall,
    tls: Option<&UpstreamTls>,
    limit: Duration,
) -> Result<(), SleepCallError> {
    // Built like a health check's URL, which it is next to.
    let target = HealthTarget::new(proxy, &call.path, tls)
        .map_err(|e| SleepCallError::Url(e.to_string()))?;
    let url = target.url();
    let (host, port, authority, path) = target.parts();
    let exchange = async {
        let stream = TcpStream::connect((host, port)).await.ok()?;
        let _ = stream.set_nodelay(true);
        match target.tls() {
            None => send(TokioIo::new(stream), call, authority, path).await,
            Some(tls) => {
                let name = ServerName::try_from(host.to_owned()).ok()?;
                let stream = tls.connector().connect(name, stream).await.ok()?;
                send(TokioIo::new(stream), call, authority, path).await
            }
        }
    };
    match tokio::time::timeout(limit, exchange).await {
        Err(_) => Err(SleepCallError::Timeout { url, limit }),
        Ok(None) => Err(SleepCallError::NoAnswer { url }),
        Ok(Some(status)) if status.is_success() => Ok(()),
        Ok(Some(status)) => Err(SleepCallError::Status { url, status }),
    }
}

async fn send<IO>(io: IO, call: &HttpCall, authority: &str, path: &str) -> Option<StatusCode>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.ok()?;
    let request = Request::builder()
        .method(call.method.clone())
        .uri(path)
        .header(header::HOST, authority)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from_static(b"{}")))
        .ok()?;
    let exchange = async {
        let response = sender.send_request(request).await.ok()?;
        let status = response.status();
        // Read (and drop) the answer so the server is not cut off mid-write.
        let _ = http_body_util::Limited::new(response.into_body(), MAX_ANSWER)
            .collect()
            .await;
        Some(status)
    };
    tokio::pin!(conn, exchange);
    tokio::select! {
        biased;
        answer = &mut exchange => answer,
        _ = &mut conn => exchange.await,
    }
}
