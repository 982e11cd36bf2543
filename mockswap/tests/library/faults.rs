//! Every fault, checked with a real HTTP client.

use std::time::Duration;

use mockswap::{Crash, Fault, FaultRule, MockSwap};
use reqwest::StatusCode;
use serde_json::Value;

use crate::{BOUND, body_text, chat, client, data_frames, post};

fn has_io_kind(err: &(dyn std::error::Error + 'static), kind: std::io::ErrorKind) -> bool {
    let mut current = Some(err);
    while let Some(e) = current {
        if e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == kind)
        {
            return true;
        }
        current = e.source();
    }
    false
}

#[tokio::test]
async fn status_fault_for_next_two_requests_sends_429_with_retry_after_then_recovers() {
    let mock = MockSwap::start().await;
    mock.add_fault(FaultRule::new(Fault::too_many_requests(1)).times(2));
    for _ in 0..2 {
        let response = post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[]).await;
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(response.headers()["retry-after"], "1");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "concurrency_limit");
    }
    let ok = post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[]).await;
    assert_eq!(ok.status(), 200);
}

#[tokio::test]
async fn status_fault_applies_only_to_the_matching_model() {
    let mock = MockSwap::start().await;
    mock.add_fault(
        FaultRule::new(Fault::status(StatusCode::SERVICE_UNAVAILABLE))
            .model("b")
            .always(),
    );
    assert_eq!(
        post(&mock, "/v1/chat/completions", &chat("a", "x", false), &[])
            .await
            .status(),
        200
    );
    assert_eq!(
        post(&mock, "/v1/chat/completions", &chat("b", "x", false), &[])
            .await
            .status(),
        503
    );
    assert_eq!(
        post(&mock, "/v1/chat/completions", &chat("b", "x", false), &[])
            .await
            .status(),
        503
    );
}

#[tokio::test]
async fn hang_fault_never_answers() {
    let mock = MockSwap::start().await;
    mock.add_fault(FaultRule::new(Fault::Hang));
    let pending = client()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&chat("m", "x", false))
        .send();
    assert!(
        tokio::time::timeout(Duration::from_millis(200), pending)
            .await
            .is_err()
    );
}

#[tokio::test]
async fn delay_fault_answers_normally_after_the_delay() {
    let mock = MockSwap::start().await;
    mock.add_fault(FaultRule::new(Fault::Delay(Duration::from_millis(20))));
    let response = post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[]).await;
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn reset_fault_resets_the_connection_before_any_header() {
    let mock = MockSwap::start().await;
    mock.add_fault(FaultRule::new(Fault::ResetBeforeHeaders));
    let result = tokio::time::timeout(
        BOUND,
        client()
            .post(format!("{}/v1/chat/completions", mock.uri()))
            .json(&chat("m", "x", false))
            .send(),
    )
    .await
    .unwrap();
    let err = result.unwrap_err();
    assert!(!err.is_timeout());
    assert!(
        has_io_kind(&err, std::io::ErrorKind::ConnectionReset) || err.is_request(),
        "{err:?}"
    );
    // The next request (new connection) is served.
    assert_eq!(
        post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[])
            .await
            .status(),
        200
    );
}

#[tokio::test]
async fn stall_fault_sends_headers_then_no_body() {
    let mock = MockSwap::start().await;
    mock.add_fault(FaultRule::new(Fault::StallAfterHeaders));
    let response = post(&mock, "/v1/chat/completions", &chat("m", "x", true), &[]).await;
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let next = tokio::time::timeout(
        Duration::from_millis(200),
        futures_util::StreamExt::next(&mut stream),
    )
    .await;
    assert!(next.is_err(), "no byte may arrive");
}

#[tokio::test]
async fn truncate_fault_ends_the_stream_cleanly_without_done() {
    let mock = MockSwap::start().await;
    mock.add_fault(FaultRule::new(Fault::TruncateAfter(2)));
    let response = post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "a b c d", true),
        &[],
    )
    .await;
    let frames = data_frames(&body_text(response).await.unwrap());
    assert_eq!(frames.len(), 2);
    assert!(!frames.contains(&"[DONE]".to_owned()));
}

#[tokio::test]
async fn disconnect_fault_cuts_the_body_after_n_frames() {
    let mock = MockSwap::start().await;
    mock.add_fault(FaultRule::new(Fault::DisconnectAfter(3)));
    let response = post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "a b c d", true),
        &[],
    )
    .await;
    let partial = body_text(response).await.unwrap_err();
    assert_eq!(data_frames(&partial).len(), 3);
}

#[tokio::test]
async fn error_frame_fault_sends_the_envelope_then_done() {
    let mock = MockSwap::start().await;
    mock.add_fault(FaultRule::new(Fault::ErrorFrame {
        after: 1,
        message: "model crashed".into(),
    }));
    let response = post(&mock, "/v1/chat/completions", &chat("m", "a b", true), &[]).await;
    let frames = data_frames(&body_text(response).await.unwrap());
    assert_eq!(frames.len(), 3);
    let error: Value = serde_json::from_str(&frames[1]).unwrap();
    assert_eq!(error["error"]["message"], "model crashed");
    assert_eq!(frames[2], "[DONE]");
}

#[tokio::test]
async fn malformed_frame_fault_inserts_invalid_json_and_continues() {
    let mock = MockSwap::start().await;
    mock.add_fault(FaultRule::new(Fault::MalformedFrame { at: 1 }));
    let response = post(&mock, "/v1/chat/completions", &chat("m", "a", true), &[]).await;
    let frames = data_frames(&body_text(response).await.unwrap());
    assert!(
        serde_json::from_str::<Value>(&frames[1]).is_err(),
        "{}",
        frames[1]
    );
    assert_eq!(frames.last().unwrap(), "[DONE]");
}

#[tokio::test]
async fn stream_fault_waits_for_a_streaming_request() {
    let mock = MockSwap::start().await;
    mock.add_fault(FaultRule::new(Fault::TruncateAfter(0)));
    let plain = post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[]).await;
    assert_eq!(plain.status(), 200);
    let streamed = post(&mock, "/v1/chat/completions", &chat("m", "x", true), &[]).await;
    assert_eq!(body_text(streamed).await.unwrap(), "");
}

#[tokio::test]
async fn seeded_probability_fault_replays_the_same_pattern() {
    async fn pattern(seed: u64) -> Vec<u16> {
        let mock = MockSwap::start().await;
        mock.add_fault(
            FaultRule::new(Fault::status(StatusCode::BAD_GATEWAY)).probability(0.5, seed),
        );
        let mut statuses = Vec::new();
        for _ in 0..16 {
            statuses.push(
                post(
                    &mock,
                    "/v1/embeddings",
                    &serde_json::json!({"model": "m", "input": "x"}),
                    &[],
                )
                .await
                .status()
                .as_u16(),
            );
        }
        statuses
    }
    let first = pattern(42).await;
    assert_eq!(first, pattern(42).await);
    assert!(first.contains(&502) && first.contains(&200), "{first:?}");
}

#[tokio::test]
async fn crash_after_stops_serving_once_the_nth_request_completed() {
    let mock = MockSwap::builder().crash_after(1).start().await.unwrap();
    let response = post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[]).await;
    assert_eq!(response.status(), 200);
    let crash = tokio::time::timeout(BOUND, mock.crashed()).await.unwrap();
    assert_eq!(crash, Crash::AfterRequests(1));
    tokio::time::timeout(BOUND, mock.shutdown()).await.unwrap();
    let refused = client()
        .post(format!("{}/v1/chat/completions", mock.uri()))
        .json(&chat("m", "x", false))
        .send()
        .await;
    assert!(refused.is_err());
}

#[tokio::test]
async fn crash_mid_stream_cuts_the_first_stream_after_some_frames() {
    let mock = MockSwap::builder()
        .crash_mid_stream(true)
        .start()
        .await
        .unwrap();
    let response = post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "a b c d e", true),
        &[],
    )
    .await;
    assert_eq!(response.status(), 200);
    let partial = body_text(response).await.unwrap_err();
    let frames = data_frames(&partial);
    assert_eq!(frames.len(), 2, "{partial:?}");
    let crash = tokio::time::timeout(BOUND, mock.crashed()).await.unwrap();
    assert_eq!(crash, Crash::MidStream);
}

#[tokio::test]
async fn fault_matching_a_priority_fails_only_those_requests() {
    let mock = MockSwap::builder()
        .fault(
            FaultRule::new(Fault::status(http::StatusCode::SERVICE_UNAVAILABLE))
                .priority(-10)
                .always(),
        )
        .start()
        .await
        .unwrap();
    let low = post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "x", false),
        &["-10"],
    )
    .await;
    assert_eq!(low.status(), 503);
    let normal = post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[]).await;
    assert_eq!(normal.status(), 200);
}
