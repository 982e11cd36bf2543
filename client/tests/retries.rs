//! Retry behaviour on the wire: what is retried, how often, with what delay and
//! headers, and what never is.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{CHAT_SSE, chat_json, fast_builder, priority_values, requests};
use futures_util::StreamExt;
use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, Client, Error, Priority, RetryPolicy, StreamEvent,
};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Upper bound that turns a hang into a failure; no test comes close to it.
const LIMIT: Duration = Duration::from_secs(20);

fn chat_request() -> ChatRequest {
    ChatRequest::new("demo", vec![ChatMessage::user("hi")])
}

async fn mount_failures(server: &MockServer, template: ResponseTemplate, times: u64) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(template)
        .up_to_n_times(times)
        .with_priority(1)
        .mount(server)
        .await;
}

async fn mount_success(server: &MockServer) {
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(chat_json()))
        .mount(server)
        .await;
}

#[tokio::test]
async fn retried_call_keeps_its_priority_on_every_attempt() {
    let server = MockServer::start().await;
    mount_failures(&server, ResponseTemplate::new(503), 2).await;
    mount_success(&server).await;
    let client = fast_builder(&server.uri())
        .default_priority(Priority::Elevated)
        .build()
        .unwrap();
    let resp = tokio::time::timeout(
        LIMIT,
        client.chat(&chat_request(), &CallOptions::with_priority(Priority::Low)),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(resp.text(), "Hello");
    let seen = requests(&server).await;
    assert_eq!(seen.len(), 3);
    for req in &seen {
        assert_eq!(priority_values(req), vec!["-10"]);
    }
}

#[tokio::test]
async fn retried_stream_keeps_normal_as_no_header() {
    let server = MockServer::start().await;
    mount_failures(&server, ResponseTemplate::new(502), 1).await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(CHAT_SSE, "text/event-stream"))
        .mount(&server)
        .await;
    let client = fast_builder(&server.uri())
        .default_priority(Priority::Low)
        .build()
        .unwrap();
    let stream = client
        .chat_stream(
            &chat_request(),
            &CallOptions::with_priority(Priority::Normal),
        )
        .await
        .unwrap();
    assert_eq!(stream.collect().await.unwrap().text(), "Hello");
    let seen = requests(&server).await;
    assert_eq!(seen.len(), 2);
    for req in &seen {
        assert!(priority_values(req).is_empty());
    }
}

#[tokio::test]
async fn each_retryable_status_is_retried() {
    for status in [408u16, 429, 502, 503, 504] {
        let server = MockServer::start().await;
        mount_failures(&server, ResponseTemplate::new(status), 1).await;
        mount_success(&server).await;
        let client = fast_builder(&server.uri()).build().unwrap();
        client
            .chat(&chat_request(), &CallOptions::new())
            .await
            .unwrap();
        assert_eq!(requests(&server).await.len(), 2, "status {status}");
    }
}

#[tokio::test]
async fn other_statuses_are_not_retried() {
    for status in [400u16, 401, 404, 409, 500] {
        let server = MockServer::start().await;
        mount_failures(&server, ResponseTemplate::new(status), 1).await;
        mount_success(&server).await;
        let client = fast_builder(&server.uri()).build().unwrap();
        let err = client
            .chat(&chat_request(), &CallOptions::new())
            .await
            .unwrap_err();
        assert_eq!(err.status().map(|s| s.as_u16()), Some(status));
        assert_eq!(requests(&server).await.len(), 1, "status {status}");
    }
}

#[tokio::test]
async fn retries_stop_after_the_policy_maximum_with_the_last_error() {
    let server = MockServer::start().await;
    mount_failures(&server, ResponseTemplate::new(503), 100).await;
    let client = fast_builder(&server.uri()).build().unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.status().map(|s| s.as_u16()), Some(503));
    assert_eq!(requests(&server).await.len(), 3, "1 attempt + 2 retries");

    let opts = CallOptions::new().retry(
        RetryPolicy::none()
            .with_max_retries(4)
            .with_backoff(Duration::from_millis(1), Duration::from_millis(1)),
    );
    client.chat(&chat_request(), &opts).await.unwrap_err();
    assert_eq!(requests(&server).await.len(), 3 + 5, "per-call policy wins");
}

/// The backoff is set to ten minutes: the call can only finish quickly if the
/// server's `Retry-After` replaced it.
fn client_with_glacial_backoff(base: &str) -> Client {
    Client::builder()
        .base_url(base)
        .retry_policy(
            RetryPolicy::default().with_backoff(Duration::from_secs(600), Duration::from_secs(600)),
        )
        .build()
        .unwrap()
}

#[tokio::test]
async fn retry_after_seconds_replaces_the_backoff() {
    let server = MockServer::start().await;
    mount_failures(
        &server,
        ResponseTemplate::new(429).insert_header("retry-after", "0"),
        1,
    )
    .await;
    mount_success(&server).await;
    let client = client_with_glacial_backoff(&server.uri());
    tokio::time::timeout(LIMIT, client.chat(&chat_request(), &CallOptions::new()))
        .await
        .expect("Retry-After: 0 was not honoured")
        .unwrap();
    assert_eq!(requests(&server).await.len(), 2);
}

#[tokio::test]
async fn retry_after_ms_replaces_the_backoff() {
    let server = MockServer::start().await;
    mount_failures(
        &server,
        ResponseTemplate::new(503).insert_header("retry-after-ms", "5"),
        2,
    )
    .await;
    mount_success(&server).await;
    let client = client_with_glacial_backoff(&server.uri());
    tokio::time::timeout(LIMIT, client.chat(&chat_request(), &CallOptions::new()))
        .await
        .expect("retry-after-ms was not honoured")
        .unwrap();
    assert_eq!(requests(&server).await.len(), 3);
}

#[tokio::test]
async fn retry_after_above_the_cap_fails_at_once_with_the_server_error() {
    let server = MockServer::start().await;
    mount_failures(
        &server,
        ResponseTemplate::new(429)
            .insert_header("retry-after", "120")
            .set_body_json(json!({"error": {"message": "busy", "type": "rate_limit_error", "code": "concurrency_limit"}})),
        1,
    )
    .await;
    mount_success(&server).await;
    let client = fast_builder(&server.uri()).build().unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(120)));
    assert_eq!(err.code(), Some("concurrency_limit"));
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn retry_that_would_outlast_the_first_byte_budget_is_not_attempted() {
    let server = MockServer::start().await;
    mount_failures(&server, ResponseTemplate::new(503), 1).await;
    mount_success(&server).await;
    let client = Client::builder()
        .base_url(server.uri())
        .first_byte_timeout(Duration::from_secs(5))
        .retry_policy(
            RetryPolicy::default().with_backoff(Duration::from_secs(60), Duration::from_secs(60)),
        )
        .build()
        .unwrap();
    let err = tokio::time::timeout(LIMIT, client.chat(&chat_request(), &CallOptions::new()))
        .await
        .expect("the call waited for a retry beyond its budget")
        .unwrap_err();
    assert_eq!(err.status().map(|s| s.as_u16()), Some(503));
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn nothing_is_retried_after_a_stream_has_started() {
    let server = MockServer::start().await;
    // Starts fine, then ends without [DONE] or a finish reason.
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            "data: {\"id\":\"c\",\"choices\":[{\"delta\":{\"content\":\"par\"}}]}\n\n",
            "text/event-stream",
        ))
        .mount(&server)
        .await;
    let client = fast_builder(&server.uri()).build().unwrap();
    let mut stream = client
        .chat_stream(&chat_request(), &CallOptions::new())
        .await
        .unwrap();
    let mut items = Vec::new();
    while let Some(item) = stream.next().await {
        items.push(item);
    }
    assert!(matches!(items[0], Ok(StreamEvent::Chunk(_))));
    assert!(matches!(items[1], Err(Error::Truncated { chunks: 1 })));
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn a_success_with_an_undecodable_body_is_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_string("<html>oops</html>"))
        .mount(&server)
        .await;
    let client = fast_builder(&server.uri()).build().unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    match err {
        Error::Decode { raw, .. } => assert_eq!(raw, "<html>oops</html>"),
        other => panic!("expected Decode, got {other:?}"),
    }
    assert_eq!(requests(&server).await.len(), 1);
}

#[tokio::test]
async fn connection_refused_is_retried_then_reported_as_connect_error() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let client = fast_builder(&format!("http://{addr}")).build().unwrap();
    let err = tokio::time::timeout(LIMIT, client.chat(&chat_request(), &CallOptions::new()))
        .await
        .unwrap()
        .unwrap_err();
    assert!(matches!(err, Error::Connect(_)), "{err:?}");
}

/// Reads one request head (up to the blank line) as text.
async fn read_head(sock: &mut tokio::net::TcpStream) -> String {
    use tokio::io::AsyncReadExt;
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = sock.read(&mut buf).await.unwrap();
        assert!(n > 0, "client closed before sending a request");
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).to_lowercase()
}

#[tokio::test]
async fn connection_dropped_before_the_response_is_retried_with_the_same_priority() {
    use tokio::io::AsyncWriteExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut first, _) = listener.accept().await.unwrap();
        let first_head = read_head(&mut first).await;
        drop(first);
        let (mut second, _) = listener.accept().await.unwrap();
        let second_head = read_head(&mut second).await;
        let body = chat_json().to_string();
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        second.write_all(response.as_bytes()).await.unwrap();
        (first_head, second_head)
    });
    let client = fast_builder(&format!("http://{addr}")).build().unwrap();
    let resp = tokio::time::timeout(
        LIMIT,
        client.chat(
            &chat_request(),
            &CallOptions::with_priority(Priority::Elevated),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(resp.text(), "Hello");
    let (first, second) = server.await.unwrap();
    for head in [first, second] {
        assert_eq!(head.matches("x-priority:").count(), 1, "{head}");
        assert!(head.contains("x-priority: 10\r\n"), "{head}");
    }
}
