//! Shared test helpers: canned bodies for the wire tests (which answer with another
//! server's exact bytes through wiremock; mockswap plays the proxy everywhere else),
//! and a raw TCP server for pacing a body and seeing a disconnect.
#![allow(dead_code)]

use std::time::Duration;

use llama_swap_client::{Client, ClientBuilder, RetryPolicy};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use wiremock::{MockServer, Request};

/// A complete, well-formed chat stream.
pub(crate) const CHAT_SSE: &str = concat!(
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

pub(crate) fn chat_json() -> serde_json::Value {
    json!({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "demo",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    })
}

/// A builder with millisecond backoff so retry tests never wait seconds.
pub(crate) fn fast_builder(base: &str) -> ClientBuilder {
    Client::builder().base_url(base).retry_policy(
        RetryPolicy::default().with_backoff(Duration::from_millis(1), Duration::from_millis(5)),
    )
}

/// Every `X-Priority` value of a recorded request, in order.
pub(crate) fn priority_values(req: &Request) -> Vec<String> {
    req.headers
        .get_all("x-priority")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

pub(crate) async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap()
}

/// What the raw server saw of its one connection.
pub(crate) struct RawServer {
    pub base_url: String,
    /// Fires when the client closes the connection.
    pub closed: oneshot::Receiver<()>,
    /// Holds the server task open until the test ends.
    _task: tokio::task::JoinHandle<()>,
}

/// Accepts one connection, reads the request head, writes `head` and then each of
/// `parts` (never more), and reports when the client hangs up.
pub(crate) async fn raw_server(head: &'static str, parts: Vec<Vec<u8>>) -> RawServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (closed_tx, closed) = oneshot::channel();
    let task = tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = sock.read(&mut buf).await.unwrap();
            if n == 0 {
                return;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        sock.write_all(head.as_bytes()).await.unwrap();
        for part in parts {
            sock.write_all(&part).await.unwrap();
            sock.flush().await.unwrap();
        }
        // Drain until the client hangs up (the request body may still be arriving).
        loop {
            match sock.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = closed_tx.send(());
    });
    RawServer {
        base_url: format!("http://{addr}"),
        closed,
        _task: task,
    }
}

/// A chunked SSE response head.
pub(crate) const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

/// Frames `data` as one HTTP chunk.
pub(crate) fn http_chunk(data: &str) -> Vec<u8> {
    format!("{:x}\r\n{data}\r\n", data.len()).into_bytes()
}
