//! How failures map to error variants. mockswap plays the proxy (its faults and
//! echo); the two tests that need another server's exact bytes (a raw envelope kept
//! byte for byte, the server's in-stream frames) answer through wiremock.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::fast_builder;
use llama_swap_client::{
    CallOptions, ChatMessage, ChatRequest, Client, Error, RetryPolicy, StatusCode, TimeoutPhase,
};
use mockswap::{Fault, FaultRule, MockSwap};
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const LIMIT: Duration = Duration::from_secs(20);

fn chat_request() -> ChatRequest {
    ChatRequest::new("demo", vec![ChatMessage::user("hi")])
}

/// A proxy double whose every chat request meets `fault`.
async fn proxy_failing_with(fault: Fault) -> MockSwap {
    MockSwap::builder()
        .fault(FaultRule::new(fault).path("/v1/chat/completions").always())
        .start()
        .await
        .unwrap()
}

async fn server_answering(template: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(template)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn error_envelope_keeps_status_type_code_and_raw_body() {
    // The server's bytes (docs/ERRORS.md): llama-swap's envelope.
    let body = r#"{"src":"llama-swap","error":{"message":"model 'nope' is not configured","type":"invalid_request_error","param":null,"code":"model_not_found"}}"#;
    let server =
        server_answering(ResponseTemplate::new(404).set_body_raw(body, "application/json")).await;
    let client = Client::new(server.uri()).unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    let api = err.api().expect("an API error");
    assert_eq!(api.status.as_u16(), 404);
    let env = api.envelope.as_ref().unwrap();
    assert_eq!(env.message, "model 'nope' is not configured");
    assert_eq!(env.kind.as_deref(), Some("invalid_request_error"));
    assert_eq!(env.code.as_deref(), Some("model_not_found"));
    assert_eq!(api.raw_body, body);
    assert_eq!(api.retry_after, None);
    assert!(err.to_string().contains("model 'nope' is not configured"));
}

#[tokio::test]
async fn rate_limit_keeps_retry_after_when_retries_are_off() {
    let server = proxy_failing_with(Fault::too_many_requests(1)).await;
    let client = Client::builder()
        .base_url(server.uri())
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.status().unwrap().as_u16(), 429);
    assert_eq!(err.retry_after(), Some(Duration::from_secs(1)));
    assert_eq!(err.code(), Some("concurrency_limit"));
}

#[tokio::test]
async fn error_without_envelope_keeps_the_raw_body() {
    let server = proxy_failing_with(
        Fault::status(StatusCode::INTERNAL_SERVER_ERROR).body(json!("upstream exploded")),
    )
    .await;
    let client = Client::new(server.uri()).unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    let api = err.api().unwrap();
    assert!(api.envelope.is_none());
    assert_eq!(api.raw_body, "upstream exploded");
}

#[tokio::test]
async fn stream_that_fails_to_open_keeps_status_and_body() {
    let server = proxy_failing_with(
        Fault::status(StatusCode::BAD_REQUEST).body(json!({"error": {"message": "bad messages", "type": "invalid_request_error", "code": "invalid_json"}})),
    )
    .await;
    let client = Client::new(server.uri()).unwrap();
    let err = client
        .chat_stream(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.status().unwrap().as_u16(), 400);
    assert_eq!(err.code(), Some("invalid_json"));
}

#[tokio::test]
async fn in_stream_error_frame_maps_to_in_stream_error() {
    let body = concat!(
        "data: {\"object\":\"proxy.status\",\"status\":\"loading\",\"model\":\"demo\"}\n\n",
        "data: {\"error\":{\"message\":\"health check timed out\",\"type\":\"server_error\",\"code\":\"model_start_timeout\"}}\n\n",
        "data: [DONE]\n\n",
    );
    let server =
        server_answering(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")).await;
    let client = Client::new(server.uri()).unwrap();
    let stream = client
        .chat_stream(&chat_request(), &CallOptions::new())
        .await
        .unwrap();
    let err = stream.collect().await.unwrap_err();
    match &err {
        Error::InStream(frame) => {
            assert_eq!(frame.envelope.message, "health check timed out");
            assert_eq!(frame.envelope.kind.as_deref(), Some("server_error"));
        }
        other => panic!("expected InStream, got {other:?}"),
    }
    assert_eq!(err.code(), Some("model_start_timeout"));
}

#[tokio::test]
async fn truncated_stream_fails_collect() {
    let server = proxy_failing_with(Fault::TruncateAfter(1)).await;
    let client = Client::new(server.uri()).unwrap();
    let err = client
        .chat_stream(&chat_request(), &CallOptions::new())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Truncated { chunks: 1 }), "{err:?}");
}

#[tokio::test]
async fn slow_headers_time_out_in_the_first_byte_phase() {
    let server = proxy_failing_with(Fault::Delay(Duration::from_secs(30))).await;
    // Long enough for the mock to have recorded the request before the client
    // gives up on it, even on a loaded machine (at 50 ms it sometimes had not).
    let client = fast_builder(&server.uri())
        .first_byte_timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let err = tokio::time::timeout(LIMIT, client.chat(&chat_request(), &CallOptions::new()))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.timeout_phase(), Some(TimeoutPhase::FirstByte));
    // A first-byte timeout is the call's budget: it is not retried.
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn per_call_total_timeout_wins_and_names_the_total_phase() {
    let server = proxy_failing_with(Fault::Delay(Duration::from_secs(30))).await;
    let client = Client::new(server.uri()).unwrap();
    let opts = CallOptions::new().total_timeout(Duration::from_millis(50));
    let err = tokio::time::timeout(LIMIT, client.chat(&chat_request(), &opts))
        .await
        .unwrap()
        .unwrap_err();
    match err {
        Error::Timeout { phase, after } => {
            assert_eq!(phase, TimeoutPhase::Total);
            assert_eq!(after, Duration::from_millis(50));
        }
        other => panic!("expected a timeout, got {other:?}"),
    }
}

#[tokio::test]
async fn api_key_never_appears_in_error_text() {
    let server = proxy_failing_with(
        Fault::status(StatusCode::UNAUTHORIZED).body(json!({"error": {"message": "invalid api key", "type": "authentication_error", "code": "invalid_api_key"}})),
    )
    .await;
    let client = Client::builder()
        .base_url(server.uri())
        .api_key("sk-super-secret-key")
        .build()
        .unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    let text = format!("{err} {err:?} {client:?}");
    assert!(!text.contains("sk-super-secret-key"), "{text}");
    let stream_err = client
        .chat_stream(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert!(!format!("{stream_err:?}").contains("sk-super-secret-key"));
}

#[tokio::test]
async fn bad_per_call_header_is_an_invalid_argument_and_nothing_is_sent() {
    let server = MockSwap::start().await;
    let client = Client::new(server.uri()).unwrap();
    let err = client
        .chat(
            &chat_request(),
            &CallOptions::new().header("x-priority", "seven"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    let stream_err = client
        .chat_stream(
            &chat_request(),
            &CallOptions::new().header("bad header", "v"),
        )
        .await
        .unwrap_err();
    assert!(matches!(stream_err, Error::InvalidArgument(_)));
    let empty_model = client
        .chat(&ChatRequest::new("", vec![]), &CallOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(empty_model, Error::InvalidArgument(_)));
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn oversized_success_body_fails_instead_of_buffering() {
    let server = MockSwap::start().await;
    let client = Client::builder()
        .base_url(server.uri())
        .max_body_bytes(16)
        .build()
        .unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::BodyTooLarge { limit: 16 }), "{err:?}");
}

#[tokio::test]
async fn long_error_body_is_kept_up_to_the_error_body_limit() {
    let long = "x".repeat(200_000);
    let server =
        proxy_failing_with(Fault::status(StatusCode::INTERNAL_SERVER_ERROR).body(json!(long)))
            .await;
    let client = Client::new(server.uri()).unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.api().unwrap().raw_body.len(), 64 * 1024);
}
