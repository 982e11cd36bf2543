//! A minimal keep-alive HTTP/1.1 client on hyper's connection API: one connection per
//! simulated client, no pool, so every figure is the cost of the proxy under test and not
//! of a client library's pooling.

use std::net::SocketAddr;
use std::time::Instant;

use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use crate::Res;

/// One HTTP/1.1 connection; its driver task is aborted when the connection is dropped.
pub(crate) struct Conn {
    send: SendRequest<Full<Bytes>>,
    driver: JoinHandle<()>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Conn {
    /// Opens a connection with Nagle off (every figure here is about small messages).
    pub(crate) async fn open(addr: SocketAddr) -> Res<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let driver = tokio::spawn(async move {
            // The connection ends when the peer closes it or the Conn is dropped; either
            // way the next request reports the error to its caller.
            let _ = conn.await;
        });
        Ok(Self { send, driver })
    }

    /// Sends one request and returns the response head with its body unread.
    pub(crate) async fn send(&mut self, request: Request<Full<Bytes>>) -> Res<Response<Incoming>> {
        self.send.ready().await?;
        Ok(self.send.send_request(request).await?)
    }

    /// Sends one request and reads the whole body.
    pub(crate) async fn call(&mut self, request: Request<Full<Bytes>>) -> Res<(StatusCode, Bytes)> {
        let response = self.send(request).await?;
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok((status, body))
    }
}

/// A POST of a JSON body to `path`, with extra headers.
pub(crate) fn post(
    path: &str,
    body: Bytes,
    headers: &[(&str, String)],
) -> Res<Request<Full<Bytes>>> {
    let mut builder = Request::post(path)
        .header(header::HOST, "127.0.0.1")
        .header(header::CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        builder = builder.header(*name, value.as_str());
    }
    Ok(builder.body(Full::new(body))?)
}

/// A GET of `path`.
pub(crate) fn get(path: &str) -> Res<Request<Full<Bytes>>> {
    Ok(Request::get(path)
        .header(header::HOST, "127.0.0.1")
        .body(Full::new(Bytes::new()))?)
}

/// One GET on a fresh connection, body parsed as JSON.
pub(crate) async fn get_json(addr: SocketAddr, path: &str) -> Res<serde_json::Value> {
    let mut conn = Conn::open(addr).await?;
    let (status, body) = conn.call(get(path)?).await?;
    if !status.is_success() {
        return Err(format!("GET {path}: status {status}").into());
    }
    Ok(serde_json::from_slice(&body)?)
}

/// One GET on a fresh connection, body as text.
pub(crate) async fn get_text(addr: SocketAddr, path: &str) -> Res<String> {
    let mut conn = Conn::open(addr).await?;
    let (status, body) = conn.call(get(path)?).await?;
    if !status.is_success() {
        return Err(format!("GET {path}: status {status}").into());
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// A small non-streaming chat completion for `model`.
pub(crate) fn chat_body(model: &str, stream: bool) -> Bytes {
    Bytes::from(
        serde_json::json!({
            "model": model,
            "stream": stream,
            "messages": [{"role": "user", "content": "hi"}],
        })
        .to_string(),
    )
}

/// The outcome of one timed request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timed {
    /// When it was sent.
    pub sent: Instant,
    /// When the body ended (or the request failed).
    pub done: Instant,
    /// Its status, or `None` when the connection failed.
    pub status: Option<StatusCode>,
}

impl Timed {
    /// Seconds from `sent` to `done`.
    pub(crate) fn secs(&self) -> f64 {
        self.done.duration_since(self.sent).as_secs_f64()
    }
}

/// Sends a chat completion on a fresh connection and times it to the end of the body.
pub(crate) async fn timed_chat(addr: SocketAddr, model: &str, headers: &[(&str, String)]) -> Timed {
    let sent = Instant::now();
    let status = async {
        let mut conn = Conn::open(addr).await?;
        let (status, _) = conn
            .call(post(
                "/v1/chat/completions",
                chat_body(model, false),
                headers,
            )?)
            .await?;
        Res::Ok(status)
    }
    .await
    .ok();
    Timed {
        sent,
        done: Instant::now(),
        status,
    }
}
