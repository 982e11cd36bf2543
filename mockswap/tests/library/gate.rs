//! The gate: held requests are released by priority, then arrival, one at a time.

use mockswap::MockSwap;
use serde_json::json;
use tokio::task::JoinSet;

use crate::{BOUND, body_text, chat, post};

/// Sends one request per priority (in this order), waiting until each is held, so the
/// arrival order is exactly the order given.
async fn send_held(
    mock: &MockSwap,
    priorities: &[Option<&'static str>],
    stream: bool,
) -> JoinSet<String> {
    let mut tasks = JoinSet::new();
    for (i, priority) in priorities.iter().enumerate() {
        let uri = mock.uri();
        let priority = *priority;
        tasks.spawn(async move {
            let mut request = reqwest::Client::new()
                .post(format!("{uri}/v1/chat/completions"))
                .json(&chat("m", &format!("r{i}"), stream));
            if let Some(p) = priority {
                request = request.header("x-priority", p);
            }
            let response = request.send().await.unwrap();
            body_text(response).await.unwrap()
        });
        mock.wait_for_held(i + 1, BOUND).await.unwrap();
    }
    tasks
}

#[tokio::test]
async fn gate_releases_elevated_then_normal_then_low_with_ties_in_arrival_order() {
    let mock = MockSwap::builder().gate_closed().start().await.unwrap();
    let priorities = [
        Some("-10"),
        None,
        Some("10"),
        Some("0"),
        Some("-10"),
        Some("10"),
        Some("garbage"),
    ];
    let mut tasks = send_held(&mock, &priorities, false).await;
    assert!(mock.dispatch_order().is_empty());
    mock.open_gate();
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    // seq = index + 1. Elevated (3, 6), then priority 0 in arrival order (2, 4, 7: absent,
    // "0" and an invalid header all count as 0), then Low (1, 5).
    assert_eq!(mock.dispatch_order(), [3, 6, 2, 4, 7, 1, 5]);
    let journal = mock.requests();
    assert_eq!(journal[2].dispatched, Some(0));
    assert_eq!(journal[0].dispatched, Some(5));
}

#[tokio::test]
async fn gate_waits_for_each_stream_to_complete_before_releasing_the_next() {
    let mock = MockSwap::builder()
        .gate_closed()
        .tokens_per_second(500.0)
        .start()
        .await
        .unwrap();
    let mut tasks = send_held(&mock, &[Some("-10"), Some("10")], true).await;
    mock.open_gate();
    let mut finished = Vec::new();
    while let Some(done) = tasks.join_next().await {
        finished.push(done.unwrap());
    }
    assert_eq!(mock.dispatch_order(), [2, 1]);
    // One at a time: the elevated stream ended before the low one started.
    assert!(finished[0].contains("r1"), "{finished:?}");
}

#[tokio::test]
async fn open_gate_serves_requests_without_holding() {
    let mock = MockSwap::start().await;
    let response = post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "x", false),
        &["5"],
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(mock.held(), 0);
    assert_eq!(mock.dispatch_order(), [1]);
}

#[tokio::test]
async fn held_requests_answer_shutting_down_when_the_mock_stops() {
    let mock = MockSwap::builder().gate_closed().start().await.unwrap();
    let uri = mock.uri();
    let held = tokio::spawn(async move {
        reqwest::Client::new()
            .post(format!("{uri}/v1/chat/completions"))
            .json(&json!({"model": "m"}))
            .send()
            .await
    });
    mock.wait_for_held(1, BOUND).await.unwrap();
    tokio::time::timeout(BOUND, mock.shutdown()).await.unwrap();
    let response = held.await.unwrap().unwrap();
    assert_eq!(response.status(), 503);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "shutting_down");
}

#[tokio::test]
async fn api_queue_lists_held_requests_in_release_order_like_the_server() {
    let mock = MockSwap::builder().gate_closed().start().await.unwrap();
    let _tasks = send_held(&mock, &[Some("-10"), None, Some("10")], false).await;
    let queue: serde_json::Value = reqwest::get(format!("{}/api/queue", mock.uri()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = queue["queue"].as_array().unwrap();
    let view: Vec<(i64, i64, i64)> = rows
        .iter()
        .map(|r| {
            (
                r["seq"].as_i64().unwrap(),
                r["effective_priority"].as_i64().unwrap(),
                r["position"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(view, [(3, 10, 1), (2, 0, 2), (1, -10, 3)]);
    assert_eq!(rows[0]["model"], "m");
    mock.open_gate();
}
