//! The server's error envelopes (docs/ERRORS.md) as the SDK's typed errors.

use std::time::Duration;

use futures::StreamExt;
use llama_swap_client::{CallOptions, Error, Priority};
use llama_swap_suite::harness::{LIMIT, Stack, Upstream, finish};

use crate::{chat, spawn_chat};

/// Status, `type` and `code` of an API error; panics on any other error.
fn api_parts(err: &Error) -> (u16, Option<&str>, Option<&str>) {
    let api = err
        .api()
        .unwrap_or_else(|| panic!("expected an API error, got {err:?}"));
    let envelope = api
        .envelope
        .as_ref()
        .unwrap_or_else(|| panic!("no error envelope in {:?}", api.raw_body));
    assert!(!envelope.message.is_empty(), "{envelope:?}");
    (
        api.status.as_u16(),
        envelope.kind.as_deref(),
        envelope.code.as_deref(),
    )
}

#[tokio::test]
async fn unknown_model_is_typed_404_model_not_found() {
    let stack = Stack::start(&[Upstream::new("a")], "sendLoadingState: true\n").await;
    let client = stack.client();
    let plain = client
        .chat(&chat("nope"), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(
        api_parts(&plain),
        (404, Some("invalid_request_error"), Some("model_not_found"))
    );
    // A streaming call gets the status too: nothing is streamed for a model
    // that does not exist, even with sendLoadingState.
    let stream = client
        .chat_stream(
            &chat("nope"),
            &CallOptions::with_priority(Priority::Elevated),
        )
        .await
        .unwrap_err();
    assert_eq!(
        api_parts(&stream),
        (404, Some("invalid_request_error"), Some("model_not_found"))
    );
    assert!(stack.running().await.is_empty());
    stack.shutdown().await;
}

#[tokio::test]
async fn concurrency_limit_is_typed_429_with_retry_after_parsed() {
    let limited = Upstream::gated("a").yaml("concurrencyLimit: 1");
    let stack = Stack::start(&[limited], "").await;
    let client = stack.client();
    let busy = spawn_chat(client, "a", Priority::Normal);
    stack.wait_held("a", 1).await;

    let err = client
        .chat(&chat("a"), &CallOptions::with_priority(Priority::Elevated))
        .await
        .unwrap_err();
    assert_eq!(
        api_parts(&err),
        (429, Some("rate_limit_error"), Some("concurrency_limit"))
    );
    // The SDK's value is the server's Retry-After header, in seconds.
    let raw = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", stack.base_url()))
        .json(&serde_json::json!({"model": "a", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 429);
    let seconds: u64 = raw.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(seconds > 0);
    assert_eq!(err.retry_after(), Some(Duration::from_secs(seconds)));

    stack.open_gate("a").await;
    finish("the busy call", busy).await.unwrap();
    stack.shutdown().await;
}

#[tokio::test]
async fn unload_while_waiting_is_typed_503_model_unloaded_plain_and_in_stream() {
    let stack = Stack::start(
        &[Upstream::gated("a"), Upstream::new("b")],
        "sendLoadingState: true\n",
    )
    .await;
    let client = stack.client();
    let busy = spawn_chat(client, "a", Priority::Normal);
    stack.wait_held("a", 1).await;
    let plain = spawn_chat(client, "b", Priority::Low);
    stack.wait_queue_len(1).await;
    // With sendLoadingState the stream is already answered 200, so the same
    // failure has to arrive inside it.
    let mut stream = client
        .chat_stream(&chat("b"), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    stack.wait_queue_len(2).await;

    client.unload_model("b", &CallOptions::new()).await.unwrap();

    let err = finish("the plain call", plain).await.unwrap_err();
    assert_eq!(
        api_parts(&err),
        (503, Some("server_error"), Some("model_unloaded"))
    );
    let in_stream = loop {
        match tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
            Some(Ok(_progress)) => {}
            Some(Err(err)) => break err,
            None => panic!("the stream ended without reporting the unload"),
        }
    };
    assert!(
        matches!(in_stream, Error::InStream(_)),
        "expected an in-stream error, got {in_stream:?}"
    );
    assert_eq!(in_stream.code(), Some("model_unloaded"));
    assert!(
        stream.next().await.is_none(),
        "the stream went on after its error"
    );
    assert!(stack.queue().await.is_empty());

    stack.open_gate("a").await;
    finish("the busy call", busy).await.unwrap();
    stack.shutdown().await;
}

#[tokio::test]
async fn an_upstream_that_exits_while_starting_is_typed_502_server_error_and_retryable() {
    // mockswap refuses an unknown flag and exits before it is healthy.
    let stack = Stack::start(&[Upstream::new("a").args("--no-such-flag")], "").await;
    let client = llama_swap_client::Client::builder()
        .base_url(stack.base_url())
        .retry_policy(llama_swap_client::RetryPolicy::none())
        .build()
        .unwrap();
    let err = client
        .chat(&chat("a"), &CallOptions::new())
        .await
        .unwrap_err();
    // llama-swap's type for a 502; the code says which failure it was.
    assert_eq!(
        api_parts(&err),
        (502, Some("server_error"), Some("model_start_failed"))
    );
    assert!(err.is_retryable(), "a 502 may succeed when sent again");
    stack.shutdown().await;
}
