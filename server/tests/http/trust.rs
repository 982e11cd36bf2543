//! Trust controls and queue bounds over HTTP: caps show in `/api/queue`
//! (requested, capped, effective), a full queue answers 429 `queue_full` with
//! `Retry-After`.

use serde_json::Value;

use crate::support::{Harness, LIMIT, ModelSpec, model};

fn gated() -> Vec<ModelSpec> {
    vec![model("a", "--gate-closed"), model("b", "--gate-closed")]
}

async fn finish(handle: tokio::task::JoinHandle<(u16, String)>) -> u16 {
    tokio::time::timeout(LIMIT, handle)
        .await
        .unwrap()
        .unwrap()
        .0
}

/// Lets the request holding `a` finish, then the one waiting for `b`.
async fn release(
    h: &Harness,
    busy: tokio::task::JoinHandle<(u16, String)>,
    waiting: tokio::task::JoinHandle<(u16, String)>,
) {
    h.open_gate("a").await;
    assert_eq!(finish(busy).await, 200);
    h.wait_held("b", 1).await;
    h.open_gate("b").await;
    assert_eq!(finish(waiting).await, 200);
}

#[tokio::test]
async fn global_cap_shows_in_api_queue_as_requested_capped_and_effective() {
    let h = Harness::start(&gated(), "priority:\n  maxHeaderPriority: 5\n").await;
    let busy = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let waiting = h.spawn(h.chat("b", Some("10"), false));
    let queue = h.wait_queue_len(1).await;
    assert_eq!(queue[0]["requested_priority"], 10);
    assert_eq!(queue[0]["capped_priority"], 5);
    assert_eq!(queue[0]["effective_priority"], 5);
    assert_eq!(queue[0]["aged"], false);
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("llamaswap_priority_capped_total 1\n"),
        "{metrics}"
    );
    release(&h, busy, waiting).await;
    h.shutdown().await;
}

#[tokio::test]
async fn per_key_cap_lowers_that_keys_calls_only() {
    let yaml = "apiKeys: [sk-chat, sk-batch]\npriority:\n  apiKeys:\n    - key: sk-batch\n      maxPriority: -10\n";
    let h = Harness::start(&gated(), yaml).await;
    let busy = h.spawn(h.chat("a", None, false).bearer_auth("sk-chat"));
    h.wait_held("a", 1).await;
    let batch = h.spawn(h.chat("b", Some("10"), false).bearer_auth("sk-batch"));
    let queue: Vec<Value> = h
        .wait_for(|h| async move {
            let body: Value = h
                .http
                .get(h.url("/api/queue"))
                .bearer_auth("sk-chat")
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let queue = body["queue"].as_array()?.clone();
            (queue.len() == 1).then_some(queue)
        })
        .await;
    assert_eq!(queue[0]["requested_priority"], 10);
    assert_eq!(queue[0]["capped_priority"], -10);
    assert_eq!(queue[0]["effective_priority"], -10);
    // The key never reaches the upstream.
    release(&h, busy, batch).await;
    let journal = h.journal("b").await.unwrap();
    let text = serde_json::to_string(&journal).unwrap();
    assert!(!text.contains("sk-batch"), "{text}");
    h.shutdown().await;
}

#[tokio::test]
async fn full_queue_answers_429_queue_full_with_retry_after() {
    let h = Harness::start(&gated(), "priority:\n  maxQueued:\n    b: 1\n").await;
    let busy = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let waiting = h.spawn(h.chat("b", None, false));
    h.wait_queue_len(1).await;
    let refused = h.chat("b", Some("10"), false).send().await.unwrap();
    assert_eq!(refused.status(), 429);
    let retry: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(retry >= 1);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "queue_full");
    assert_eq!(body["error"]["type"], "rate_limit_error");
    let metrics = h.metrics().await;
    assert!(
        metrics.contains(
            "llamaswap_requests_total{outcome=\"rejected\",code=\"queue_full\",band=\"elevated\"} 1\n"
        ),
        "{metrics}"
    );
    release(&h, busy, waiting).await;
    h.shutdown().await;
}
