//! The five priority behaviours of docs/DESIGN.md section 2, and the drain fence, over
//! HTTP with real upstream processes.
//!
//! Every model's mockswap starts with its gate closed, so a request that reaches
//! an upstream stays in flight until the test opens that gate. With the default
//! group only one model runs at a time, so which upstream holds a request shows
//! which waiter the scheduler picked.

use serde_json::Value;

use crate::support::{Harness, LIMIT, model};

fn gated() -> Vec<crate::support::ModelSpec> {
    vec![
        model("a", "--gate-closed"),
        model("b", "--gate-closed"),
        model("c", "--gate-closed"),
    ]
}

async fn finish(handle: tokio::task::JoinHandle<(u16, String)>) -> (u16, String) {
    tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap()
}

fn models_in(queue: &[Value]) -> Vec<&str> {
    queue.iter().map(|e| e["model"].as_str().unwrap()).collect()
}

/// Runs `first` (already queued) to completion while checking `second` did not
/// start, then runs `second`.
async fn expect_order(
    h: &Harness,
    first: (&str, tokio::task::JoinHandle<(u16, String)>),
    second: (&str, tokio::task::JoinHandle<(u16, String)>),
) {
    h.wait_held(first.0, 1).await;
    assert!(
        !h.running().await.iter().any(|m| m == second.0),
        "{} started before {}",
        second.0,
        first.0
    );
    assert_eq!(models_in(&h.queue().await), vec![second.0]);
    h.open_gate(first.0).await;
    assert_eq!(finish(first.1).await.0, 200);
    h.wait_held(second.0, 1).await;
    h.open_gate(second.0).await;
    assert_eq!(finish(second.1).await.0, 200);
}

/// Holds model `a` busy with one request and returns its handle.
async fn occupy_a(h: &Harness, priority: Option<&str>) -> tokio::task::JoinHandle<(u16, String)> {
    let busy = h.spawn(h.chat("a", priority, false));
    h.wait_held("a", 1).await;
    busy
}

#[tokio::test]
async fn elevated_request_overtakes_queued_low() {
    let h = Harness::start(&gated(), "").await;
    let busy = occupy_a(&h, None).await;
    let low = h.spawn(h.chat("b", Some("-10"), false));
    h.wait_queue_len(1).await;
    let high = h.spawn(h.chat("c", Some("10"), false));
    let queue = h.wait_queue_len(2).await;
    assert_eq!(models_in(&queue), vec!["c", "b"]);
    assert_eq!(queue[0]["requested_priority"], 10);
    assert_eq!(queue[0]["effective_priority"], 10);
    assert_eq!(queue[0]["position"], 1);
    assert_eq!(queue[1]["requested_priority"], -10);
    assert_eq!(queue[1]["position"], 2);
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("llamaswap_queue_depth{band=\"elevated\"} 1\n"),
        "{metrics}"
    );

    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    expect_order(&h, ("c", high), ("b", low)).await;
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("llamaswap_queue_depth{band=\"elevated\"} 0\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("llamaswap_queue_wait_seconds_count{band=\"elevated\"} 1\n"),
        "{metrics}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn elevated_request_overtakes_queued_low_through_upstream_path() {
    let h = Harness::start(&gated(), "").await;
    let busy = occupy_a(&h, None).await;
    // The body is forwarded untouched: no model is read from it on this path.
    let body = |model: &str| serde_json::json!({"model": model, "messages": []});
    let low = h.spawn(
        h.http
            .post(h.url("/upstream/b/v1/chat/completions"))
            .header("X-Priority", "-10")
            .json(&body("b")),
    );
    h.wait_queue_len(1).await;
    let high = h.spawn(
        h.http
            .post(h.url("/upstream/c/v1/chat/completions"))
            .header("x-priority", "10")
            .json(&body("c")),
    );
    assert_eq!(models_in(&h.wait_queue_len(2).await), vec!["c", "b"]);
    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    expect_order(&h, ("c", high), ("b", low)).await;
    // The upstream saw the path without the /upstream/<model> prefix and no X-Priority.
    let journal = h.journal("b").await.unwrap();
    assert_eq!(journal[0]["path"], "/v1/chat/completions");
    assert_eq!(journal[0]["priority"]["state"], "absent");
    h.shutdown().await;
}

#[tokio::test]
async fn equal_priority_preserves_arrival_order() {
    let h = Harness::start(&gated(), "").await;
    let busy = occupy_a(&h, None).await;
    let first = h.spawn(h.chat("c", Some("3"), false));
    h.wait_queue_len(1).await;
    let second = h.spawn(h.chat("b", Some("3"), false));
    assert_eq!(models_in(&h.wait_queue_len(2).await), vec!["c", "b"]);
    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    expect_order(&h, ("c", first), ("b", second)).await;
    h.shutdown().await;
}

#[tokio::test]
async fn running_low_request_is_not_interrupted_by_arriving_high() {
    let h = Harness::start(&gated(), "").await;
    let low = occupy_a(&h, Some("-10")).await;
    let high = h.spawn(h.chat("b", Some("10"), false));
    let queue = h.wait_queue_len(1).await;
    assert_eq!(queue[0]["model"], "b");
    // The low request keeps its model: a is still serving it, b is not started.
    assert_eq!(h.running().await, vec!["a"]);
    assert!(!low.is_finished());

    h.open_gate("a").await;
    let (status, body) = finish(low).await;
    assert_eq!(status, 200);
    assert!(body.contains("chat.completion"), "{body}");
    h.wait_held("b", 1).await;
    h.open_gate("b").await;
    assert_eq!(finish(high).await.0, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn config_model_priority_ranks_without_header() {
    let priorities = "routing:\n  scheduler:\n    use: fifo\n    settings:\n      fifo:\n        priority:\n          c: 5\n";
    let h = Harness::start(&gated(), priorities).await;
    let busy = occupy_a(&h, None).await;
    let plain = h.spawn(h.chat("b", None, false));
    h.wait_queue_len(1).await;
    let floored = h.spawn(h.chat("c", None, false));
    let queue = h.wait_queue_len(2).await;
    assert_eq!(models_in(&queue), vec!["c", "b"]);
    assert_eq!(queue[0]["requested_priority"], 0);
    assert_eq!(queue[0]["effective_priority"], 5);
    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    expect_order(&h, ("c", floored), ("b", plain)).await;
    h.shutdown().await;
}

#[tokio::test]
async fn header_below_config_floor_ranks_at_the_floor() {
    let priorities =
        "routing:\n  scheduler:\n    settings:\n      fifo:\n        priority:\n          b: 5\n";
    let h = Harness::start(&gated(), priorities).await;
    let busy = occupy_a(&h, None).await;
    let three = h.spawn(h.chat("c", Some("3"), false));
    h.wait_queue_len(1).await;
    let floored = h.spawn(h.chat("b", Some("-10"), false));
    let queue = h.wait_queue_len(2).await;
    assert_eq!(models_in(&queue), vec!["b", "c"]);
    assert_eq!(queue[0]["requested_priority"], -10);
    assert_eq!(queue[0]["effective_priority"], 5);
    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    expect_order(&h, ("b", floored), ("c", three)).await;
    h.shutdown().await;
}

#[tokio::test]
async fn drain_fence_queues_low_traffic_behind_elevated_swap() {
    let h = Harness::start(&gated(), "").await;
    // Steady low traffic to the loaded model a.
    let low1 = occupy_a(&h, Some("-10")).await;
    let high = h.spawn(h.chat("b", Some("10"), false));
    h.wait_queue_len(1).await;
    // a is ready and evicts nothing, but serving this would starve b: it queues.
    let low2 = h.spawn(h.chat("a", Some("-10"), false));
    let queue = h.wait_queue_len(2).await;
    assert_eq!(models_in(&queue), vec!["b", "a"]);
    h.open_gate("a").await;
    assert_eq!(finish(low1).await.0, 200);
    // b runs next; the second low request waits for it and then reloads a.
    h.wait_held("b", 1).await;
    assert_eq!(models_in(&h.queue().await), vec!["a"]);
    h.open_gate("b").await;
    assert_eq!(finish(high).await.0, 200);
    // a was stopped for b; its new process holds the request at its closed gate.
    h.wait_held("a", 1).await;
    h.open_gate("a").await;
    assert_eq!(finish(low2).await.0, 200);
    h.shutdown().await;
}
