//! The transport's hooks: middleware around every attempt, the headers and request id
//! an error keeps, and the provider trait's other calls. (The tracing span has its own
//! test binary, `call_span.rs`.) mockswap plays the proxy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use llama_swap_client::{
    CallOptions, ChatMessage, ChatProvider, ChatRequest, Client, EmbeddingsRequest, Error,
    Middleware, Next, Priority, StatusCode,
};
use mockswap::{Fault, FaultRule, MockSwap};

/// A proxy double whose first chat requests fail with `rule`.
async fn proxy_with(rule: FaultRule) -> MockSwap {
    MockSwap::builder().fault(rule).start().await.unwrap()
}

fn chat_request() -> ChatRequest {
    ChatRequest::new("demo", vec![ChatMessage::user("hi")])
}

/// Adds a tag, counts attempts, and tries to change the priority.
#[derive(Default)]
struct Tagger {
    attempts: AtomicU32,
    seen_priority: Mutex<Vec<Priority>>,
}

#[async_trait]
impl Middleware for Tagger {
    async fn handle(
        &self,
        mut request: reqwest::Request,
        next: Next<'_>,
    ) -> Result<reqwest::Response, Error> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        self.seen_priority.lock().unwrap().push(next.priority());
        let attempt = next.attempt().to_string();
        request
            .headers_mut()
            .insert("x-attempt", attempt.parse().unwrap());
        request
            .headers_mut()
            .insert("x-priority", "999".parse().unwrap());
        next.run(request).await
    }
}

#[tokio::test]
async fn middleware_runs_on_every_attempt_and_cannot_change_the_priority() {
    let server = proxy_with(
        FaultRule::new(Fault::status(StatusCode::SERVICE_UNAVAILABLE).header("retry-after", "0"))
            .times(1),
    )
    .await;
    let tagger = Arc::new(Tagger::default());
    let client = common::fast_builder(&server.uri())
        .middleware(tagger.clone())
        .build()
        .unwrap();
    client
        .chat(&chat_request(), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    assert_eq!(tagger.attempts.load(Ordering::SeqCst), 2);
    assert_eq!(
        *tagger.seen_priority.lock().unwrap(),
        [Priority::Low, Priority::Low]
    );
    let requests = server.requests();
    let attempts: Vec<&str> = requests
        .iter()
        .map(|r| r.headers["x-attempt"].to_str().unwrap())
        .collect();
    assert_eq!(attempts, ["1", "2"]);
    for request in &requests {
        assert_eq!(request.header_values("x-priority"), ["-10"]);
    }
}

/// Refreshes a token when the server says 401, as an auth layer would.
struct RefreshOn401 {
    refreshed: AtomicU32,
}

#[async_trait]
impl Middleware for RefreshOn401 {
    async fn handle(
        &self,
        request: reqwest::Request,
        next: Next<'_>,
    ) -> Result<reqwest::Response, Error> {
        let Some(mut retry) = request.try_clone() else {
            return next.run(request).await;
        };
        let first = next.clone().run(request).await?;
        if first.status() != 401 {
            return Ok(first);
        }
        self.refreshed.fetch_add(1, Ordering::SeqCst);
        retry
            .headers_mut()
            .insert("authorization", "Bearer fresh".parse().unwrap());
        next.run(retry).await
    }
}

#[tokio::test]
async fn middleware_can_resend_with_a_refreshed_token() {
    let server = proxy_with(
        FaultRule::new(Fault::status(StatusCode::UNAUTHORIZED))
            .header("authorization", "Bearer stale")
            .always(),
    )
    .await;
    let refresh = Arc::new(RefreshOn401 {
        refreshed: AtomicU32::new(0),
    });
    let client = Client::builder()
        .base_url(server.uri())
        .api_key("stale")
        .middleware(refresh.clone())
        .build()
        .unwrap();
    let resp = client
        .chat(
            &chat_request(),
            &CallOptions::with_priority(Priority::Elevated),
        )
        .await
        .unwrap();
    assert_eq!(resp.text(), "[demo] hi");
    assert_eq!(refresh.refreshed.load(Ordering::SeqCst), 1);
    let requests = server.requests();
    let tokens: Vec<Vec<String>> = requests
        .iter()
        .map(|r| r.header_values("authorization"))
        .collect();
    assert_eq!(tokens, [["Bearer stale"], ["Bearer fresh"]]);
    for request in requests {
        assert_eq!(request.header_values("x-priority"), ["10"]);
    }
}

#[tokio::test]
async fn api_errors_keep_response_headers_request_id_and_say_if_retryable() {
    let server = proxy_with(
        FaultRule::new(
            Fault::status(StatusCode::TOO_MANY_REQUESTS)
                .header("x-request-id", "req-42")
                .header("x-ratelimit-remaining", "0")
                .header("x-should-retry", "false")
                .body(
                    serde_json::json!({"error": {"message": "busy", "code": "concurrency_limit"}}),
                ),
        )
        .always(),
    )
    .await;
    let client = common::fast_builder(&server.uri()).build().unwrap();
    let err = client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.request_id(), Some("req-42"));
    assert_eq!(err.headers().unwrap()["x-ratelimit-remaining"], "0");
    assert!(!err.is_retryable());
    // x-should-retry: false stopped the SDK's own retries too.
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn x_should_retry_true_retries_a_status_the_policy_does_not_list() {
    let server = proxy_with(
        FaultRule::new(
            Fault::status(StatusCode::INTERNAL_SERVER_ERROR).header("x-should-retry", "true"),
        )
        .times(1),
    )
    .await;
    let client = common::fast_builder(&server.uri()).build().unwrap();
    client
        .chat(&chat_request(), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn client_as_a_provider_serves_embeddings_and_models_with_priority() {
    let server = MockSwap::builder().models(["demo"]).start().await.unwrap();
    let provider: Arc<dyn ChatProvider> = Arc::new(Client::new(server.uri()).unwrap());
    let opts = CallOptions::with_priority(Priority::Low);
    let vectors = provider
        .embeddings(&EmbeddingsRequest::new("demo", "text"), &opts)
        .await
        .unwrap();
    assert_eq!(vectors.data[0].embedding.len(), 8);
    let models = provider.models(&opts).await.unwrap();
    assert_eq!(models.data[0].id, "demo");
    server.assert_priorities([Some(-10), Some(-10)]);
}
