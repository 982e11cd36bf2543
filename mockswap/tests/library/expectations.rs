//! Priority expectations and the table printed when they fail.

use std::panic::{AssertUnwindSafe, catch_unwind};

use mockswap::MockSwap;

use crate::{chat, post};

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[tokio::test]
async fn met_expectations_pass_verify_and_drop() {
    let mock = MockSwap::start().await;
    mock.expect_priority(Some(10), 1);
    mock.expect_priority(None, 2);
    post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "x", false),
        &["10"],
    )
    .await;
    post(&mock, "/v1/chat/completions", &chat("m", "x", true), &[]).await;
    post(
        &mock,
        "/v1/embeddings",
        &serde_json::json!({"model": "m", "input": "x"}),
        &[],
    )
    .await;
    mock.verify();
    mock.assert_priorities([Some(10), None, None]);
}

#[tokio::test]
async fn unmet_expectation_panics_on_drop_with_a_table_of_every_request() {
    let mock = MockSwap::start().await;
    mock.expect_priority(Some(10), 1);
    post(
        &mock,
        "/v1/chat/completions",
        &chat("qwen", "x", true),
        &["0"],
    )
    .await;
    let payload = catch_unwind(AssertUnwindSafe(move || drop(mock))).unwrap_err();
    let text = panic_text(payload);
    assert!(
        text.contains("expected 1 request(s) with X-Priority 10, received 0"),
        "{text}"
    );
    assert!(text.contains("seq  method  path"), "{text}");
    assert!(
        text.contains("1    POST    /v1/chat/completions  qwen   true    0"),
        "{text}"
    );
}

#[tokio::test]
async fn expectation_for_no_header_does_not_accept_an_explicit_zero() {
    let mock = MockSwap::start().await;
    mock.expect_priority(None, 1);
    post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "x", false),
        &["0"],
    )
    .await;
    let payload = catch_unwind(AssertUnwindSafe(|| mock.verify())).unwrap_err();
    assert!(panic_text(payload).contains("no X-Priority header"));
    mock.clear_requests();
    post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[]).await;
    mock.verify();
}

#[tokio::test]
async fn assert_priorities_reports_a_duplicated_header_in_the_table() {
    let mock = MockSwap::start().await;
    post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "x", false),
        &["10", "10"],
    )
    .await;
    let payload =
        catch_unwind(AssertUnwindSafe(|| mock.assert_priorities([Some(10)]))).unwrap_err();
    let text = panic_text(payload);
    assert!(text.contains("expected [10]"), "{text}");
    assert!(text.contains("duplicated(10 | 10)"), "{text}");
}
