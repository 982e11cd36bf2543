//! `parallel: N` over HTTP with real mockswap upstreams: requests beyond a
//! model's slots wait in the server's ranked queue instead of the upstream's own
//! FIFO. Each upstream starts with its gate closed, so whatever reaches it stays
//! in flight until the test opens the gate; the upstream's journal then shows
//! the order requests arrived in (each request carries its name in its message).

use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::support::{Harness, LIMIT, ModelSpec, model};

fn gated(id: &'static str, yaml: &'static str) -> ModelSpec {
    ModelSpec {
        yaml,
        ..model(id, "--gate-closed")
    }
}

/// A chat request for `model` whose message is `name`, with an optional `X-Priority`.
fn send(h: &Harness, model: &str, priority: Option<&str>, name: &str) -> JoinHandle<(u16, String)> {
    let mut request = h.http.post(h.url("/v1/chat/completions")).json(&json!({
        "model": model,
        "messages": [{"role": "user", "content": name}],
    }));
    if let Some(p) = priority {
        request = request.header("X-Priority", p);
    }
    h.spawn(request)
}

async fn finish(handle: JoinHandle<(u16, String)>) -> (u16, String) {
    tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap()
}

/// The names of the requests the model's upstream received, in arrival order.
async fn arrivals(h: &Harness, model: &str) -> Vec<String> {
    h.journal(model)
        .await
        .expect("the upstream is running")
        .iter()
        .map(|e| {
            e["json"]["messages"][0]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn summary(queue: &[Value]) -> Vec<(String, i64, String)> {
    queue
        .iter()
        .map(|e| {
            (
                e["model"].as_str().unwrap().to_owned(),
                e["effective_priority"].as_i64().unwrap(),
                e["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn entry(model: &str, priority: i64, reason: &str) -> (String, i64, String) {
    (model.to_owned(), priority, reason.to_owned())
}

#[tokio::test]
async fn with_parallel_one_an_elevated_request_reaches_the_busy_upstream_before_an_earlier_low_one()
{
    let h = Harness::start(&[gated("a", "parallel: 1")], "").await;
    let long = send(&h, "a", None, "long");
    h.wait_held("a", 1).await;
    let low = send(&h, "a", Some("-10"), "low");
    h.wait_queue_len(1).await;
    let elevated = send(&h, "a", Some("10"), "elevated");
    let queue = h.wait_queue_len(2).await;
    assert_eq!(
        summary(&queue),
        vec![entry("a", 10, "slots full"), entry("a", -10, "slots full")]
    );
    assert_eq!(queue[1]["position"], 2);
    let metrics = h.metrics().await;
    for line in [
        "llamaswap_model_requests_in_flight{model=\"a\"} 1\n",
        "llamaswap_model_parallel_slots{model=\"a\"} 1\n",
    ] {
        assert!(metrics.contains(line), "missing {line}in\n{metrics}");
    }
    assert_eq!(arrivals(&h, "a").await, ["long"], "one request at a time");

    h.open_gate("a").await;
    for handle in [long, elevated, low] {
        assert_eq!(finish(handle).await.0, 200);
    }
    assert_eq!(arrivals(&h, "a").await, ["long", "elevated", "low"]);
    assert!(
        h.metrics()
            .await
            .contains("llamaswap_model_requests_in_flight{model=\"a\"} 0\n")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn without_parallel_every_request_reaches_the_upstream_at_once_in_arrival_order() {
    let h = Harness::start(&[gated("a", "")], "").await;
    let long = send(&h, "a", None, "long");
    h.wait_held("a", 1).await;
    let low = send(&h, "a", Some("-10"), "low");
    h.wait_held("a", 2).await;
    let elevated = send(&h, "a", Some("10"), "elevated");
    // All three are at the upstream together; nothing waits in the server.
    h.wait_held("a", 3).await;
    assert!(h.queue().await.is_empty());
    assert_eq!(arrivals(&h, "a").await, ["long", "low", "elevated"]);
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("llamaswap_model_requests_in_flight{model=\"a\"} 3\n"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("llamaswap_model_parallel_slots"),
        "{metrics}"
    );
    h.open_gate("a").await;
    for handle in [long, low, elevated] {
        assert_eq!(finish(handle).await.0, 200);
    }
    h.shutdown().await;
}

#[tokio::test]
async fn an_elevated_request_for_another_model_is_not_starved_by_low_requests_refilling_the_slots()
{
    // a and b are in the default group: one runs at a time.
    let h = Harness::start(&[gated("a", "parallel: 2"), gated("b", "")], "").await;
    let low1 = send(&h, "a", Some("-10"), "low 1");
    h.wait_held("a", 1).await;
    let low2 = send(&h, "a", Some("-10"), "low 2");
    h.wait_held("a", 2).await;
    let low3 = send(&h, "a", Some("-10"), "low 3");
    h.wait_queue_len(1).await;
    let elevated = send(&h, "b", Some("10"), "elevated");
    h.wait_queue_len(2).await;
    // More low traffic keeps coming while the elevated request waits.
    let low4 = send(&h, "a", Some("-10"), "low 4");
    let queue = h.wait_queue_len(3).await;
    assert_eq!(
        summary(&queue),
        vec![
            entry("b", 10, "swap"),
            entry("a", -10, "slots full"),
            entry("a", -10, "slots full"),
        ]
    );

    // The upstream finishes its two requests one after the other. The slot the
    // first frees stays empty, so a drains and b starts before any more low work.
    h.open_gate("a").await;
    assert_eq!(finish(low1).await.0, 200);
    assert_eq!(finish(low2).await.0, 200);
    h.wait_held("b", 1).await;
    assert_eq!(h.running().await, ["b"]);
    assert_eq!(
        summary(&h.queue().await),
        vec![entry("a", -10, "swap"), entry("a", -10, "swap")],
        "the low requests still wait: none took a freed slot"
    );

    h.open_gate("b").await;
    assert_eq!(finish(elevated).await.0, 200);
    // a is started again (its gate closed again) and takes both waiters; they
    // are granted together, so either may reach the upstream first.
    h.wait_held("a", 2).await;
    let mut arrived = arrivals(&h, "a").await;
    arrived.sort();
    assert_eq!(arrived, ["low 3", "low 4"]);
    h.open_gate("a").await;
    assert_eq!(finish(low3).await.0, 200);
    assert_eq!(finish(low4).await.0, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn a_streaming_slot_waiter_sees_its_queue_position_in_the_loading_frames() {
    let h = Harness::start(&[gated("a", "parallel: 1\nsendLoadingState: true")], "").await;
    let long = send(&h, "a", None, "long");
    h.wait_held("a", 1).await;
    let streaming = h.spawn(h.chat("a", Some("10"), true));
    h.wait_queue_len(1).await;
    h.open_gate("a").await;
    assert_eq!(finish(long).await.0, 200);
    let (status, body) = finish(streaming).await;
    assert_eq!(status, 200);
    let queued = body
        .find("\"status\":\"queued\"")
        .unwrap_or_else(|| panic!("no queued frame in {body}"));
    let ready = body
        .find("\"status\":\"ready\"")
        .unwrap_or_else(|| panic!("no ready frame in {body}"));
    assert!(queued < ready, "{body}");
    assert!(body.contains("\"position\":1"), "{body}");
    assert!(body.trim_end().ends_with("data: [DONE]"), "{body}");
    h.shutdown().await;
}
