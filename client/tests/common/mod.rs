//! Shared test helpers: a wiremock proxy double that answers every endpoint, and a
//! raw TCP server for what wiremock cannot do (pacing a body, seeing a disconnect).
#![allow(dead_code)]

use std::time::Duration;

use llama_swap_client::{Client, ClientBuilder, RetryPolicy};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use wiremock::matchers::{body_partial_json, method, path, path_regex};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

/// A complete, well-formed chat stream.
pub const CHAT_SSE: &str = concat!(
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"}}]}\n\n",
    "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
    "data: [DONE]\n\n",
);

pub fn chat_json() -> serde_json::Value {
    json!({
        "id": "c1", "object": "chat.completion", "created": 1, "model": "demo",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    })
}

/// A wiremock server that answers every endpoint the SDK calls.
pub async fn proxy_double() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .and(body_partial_json(json!({"stream": true})))
        .respond_with(ResponseTemplate::new(200).set_body_raw(CHAT_SSE, "text/event-stream"))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(chat_json()))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "t1", "object": "text_completion", "model": "demo",
            "choices": [{"index": 0, "text": "Hello", "finish_reason": "stop"}]
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "model": "demo",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.25, 0.5]}]
        })))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/v1/models"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "object": "list", "data": [{"id": "demo", "object": "model", "owned_by": "llama-swap"}]
        })))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/running"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "running": [{"model": "demo", "state": "ready"}]
        })))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path_regex("^/api/models/unload(/.+)?$"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"msg": "ok"})))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/health"))
        .respond_with(ResponseTemplate::new(200).set_body_string("OK"))
        .mount(&server)
        .await;
    Mock::given(path_regex("^/upstream/demo/.*$"))
        .respond_with(ResponseTemplate::new(200).set_body_string("upstream ok"))
        .mount(&server)
        .await;
    server
}

/// A builder with millisecond backoff so retry tests never wait seconds.
pub fn fast_builder(base: &str) -> ClientBuilder {
    Client::builder().base_url(base).retry_policy(
        RetryPolicy::default().with_backoff(Duration::from_millis(1), Duration::from_millis(5)),
    )
}

/// Every `X-Priority` value of a recorded request, in order.
pub fn priority_values(req: &Request) -> Vec<String> {
    req.headers
        .get_all("x-priority")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect()
}

pub async fn requests(server: &MockServer) -> Vec<Request> {
    server.received_requests().await.unwrap()
}

/// What the raw server saw of its one connection.
pub struct RawServer {
    pub base_url: String,
    /// Fires when the client closes the connection.
    pub closed: oneshot::Receiver<()>,
    /// Holds the server task open until the test ends.
    _task: tokio::task::JoinHandle<()>,
}

/// Accepts one connection, reads the request head, writes `head` and then each of
/// `parts` (never more), and reports when the client hangs up.
pub async fn raw_server(head: &'static str, parts: Vec<Vec<u8>>) -> RawServer {
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
pub const SSE_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

/// Frames `data` as one HTTP chunk.
pub fn http_chunk(data: &str) -> Vec<u8> {
    format!("{:x}\r\n{data}\r\n", data.len()).into_bytes()
}
