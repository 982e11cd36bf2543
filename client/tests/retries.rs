//! Retry behaviour on the wire: what is retried, how often, with what delay and
//! headers, and what never is. mockswap plays the proxy: its faults fail the first
//! attempts, its journal shows what each attempt sent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::fast_builder;
use futures_util::StreamExt;
use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, Client, Error, Priority, RetryPolicy, StatusCode,
    StreamEvent,
};
use mockswap::{Fault, FaultRule, MockSwap, PriorityHeader};
use serde_json::json;

/// Upper bound that turns a hang into a failure; no test comes close to it.
const LIMIT: Duration = Duration::from_secs(20);

fn chat_request() -> ChatRequest {
    ChatRequest::new("demo", vec![ChatMessage::user("hi")])
}

/// A proxy double whose next `times` chat requests fail with `fault`; the ones
/// after get mockswap's echo.
async fn failing(fault: Fault, times: u64) -> MockSwap {
    MockSwap::builder()
        .fault(
            FaultRule::new(fault)
                .path("/v1/chat/completions")
                .times(times),
        )
        .start()
        .await
        .unwrap()
}

fn status(code: u16) -> Fault {
    Fault::status(StatusCode::from_u16(code).unwrap())
}

#[tokio::test]
async fn retried_call_keeps_its_priority_on_every_attempt() {
    let server = failing(status(503), 2).await;
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
    assert_eq!(resp.text(), "[demo] hi");
    server.assert_priorities([Some(-10), Some(-10), Some(-10)]);
}

#[tokio::test]
async fn retried_stream_keeps_normal_as_no_header() {
    let server = failing(status(502), 1).await;
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
    assert_eq!(stream.collect().await.unwrap().text(), "[demo] hi");
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    for req in &seen {
        assert!(req.stream);
        assert_eq!(req.priority, PriorityHeader::Absent);
        assert!(req.header_values("x-priority").is_empty());
    }
}

#[tokio::test]
async fn each_retryable_status_is_retried() {
    for status in [408u16, 429, 502, 503, 504] {
        let server = failing(self::status(status), 1).await;
        let client = fast_builder(&server.uri()).build().unwrap();
        client
            .chat(&chat_request(), &CallOptions::new())
            .await
            .unwrap();
        assert_eq!(server.requests().len(), 2, "status {status}");
    }
}

#[tokio::test]
async fn other_statuses_are_not_retried() {
    for status in [400u16, 401, 404, 409, 500] {
        let server = failing(self::status(status), 1).await;
        let client = fast_builder(&server.uri()).build().unwrap();
        let err = client
            .chat(&chat_request(), &CallOptions::new())
            .await
            .unwrap_err();
        assert_eq!(err.status().map(|s| s.as_u16()), Some(status));
        assert_eq!(server.requests().len(), 1, "status {status}");
    }
}

#[tokio::test]
async fn retries_stop_after_the_policy_maximum_with_the_last_error() {
    let server = failing(status(503), 100).await;
    let client = fast_builder(&server.uri()).build().unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.status().map(|s| s.as_u16()), Some(503));
    assert_eq!(server.requests().len(), 3, "1 attempt + 2 retries");

    let opts = CallOptions::new().retry(
        RetryPolicy::none()
            .with_max_retries(4)
            .with_backoff(Duration::from_millis(1), Duration::from_millis(1)),
    );
    client.chat(&chat_request(), &opts).await.unwrap_err();
    assert_eq!(server.requests().len(), 3 + 5, "per-call policy wins");
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
    let server = failing(status(429).header("retry-after", "0"), 1).await;
    let client = client_with_glacial_backoff(&server.uri());
    tokio::time::timeout(LIMIT, client.chat(&chat_request(), &CallOptions::new()))
        .await
        .expect("Retry-After: 0 was not honoured")
        .unwrap();
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn retry_after_ms_replaces_the_backoff() {
    let server = failing(status(503).header("retry-after-ms", "5"), 2).await;
    let client = client_with_glacial_backoff(&server.uri());
    tokio::time::timeout(LIMIT, client.chat(&chat_request(), &CallOptions::new()))
        .await
        .expect("retry-after-ms was not honoured")
        .unwrap();
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn retry_after_above_the_cap_fails_at_once_with_the_server_error() {
    let server = failing(
        status(429)
            .header("retry-after", "120")
            .body(json!({"error": {"message": "busy", "type": "rate_limit_error", "code": "concurrency_limit"}})),
        1,
    )
    .await;
    let client = fast_builder(&server.uri()).build().unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(120)));
    assert_eq!(err.code(), Some("concurrency_limit"));
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn retry_that_would_outlast_the_first_byte_budget_is_not_attempted() {
    let server = failing(status(503), 1).await;
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
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn nothing_is_retried_after_a_stream_has_started() {
    // Starts fine, then ends without [DONE] or a finish reason.
    let server = failing(Fault::TruncateAfter(1), 1).await;
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
    assert_eq!(items.len(), 2);
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn a_success_with_an_undecodable_body_is_not_retried() {
    let server = failing(status(200).body(json!("<html>oops</html>")), 1).await;
    let client = fast_builder(&server.uri()).build().unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    match err {
        Error::Decode { raw, .. } => assert_eq!(raw, "<html>oops</html>"),
        other => panic!("expected Decode, got {other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
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

#[tokio::test]
async fn connection_dropped_before_the_response_is_retried_with_the_same_priority() {
    let server = failing(Fault::ResetBeforeHeaders, 1).await;
    let client = fast_builder(&server.uri()).build().unwrap();
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
    assert_eq!(resp.text(), "[demo] hi");
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    for req in &seen {
        assert_eq!(req.header_values("x-priority"), ["10"], "{}", req.seq);
    }
}
