//! Bounded waits (issue 29): `X-Queue-Timeout` and `maxQueueWait`. A request
//! still waiting at its deadline leaves the queue with 503 `queue_timeout` and
//! `Retry-After`, or with an error frame once its loading stream has begun;
//! the bound never changes its rank.
//!
//! Every mockswap starts with its gate closed and only one model runs at a
//! time, so a request for another model than the busy one waits.

use serde_json::Value;

use crate::support::{Harness, LIMIT, model};

async fn finish(handle: tokio::task::JoinHandle<(u16, String)>) -> (u16, String) {
    tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap()
}

/// Holds model `a` busy with one request and returns its handle.
async fn occupy_a(h: &Harness) -> tokio::task::JoinHandle<(u16, String)> {
    let busy = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    busy
}

async fn activity(h: &Harness) -> Vec<Value> {
    let body: Value = h
        .http
        .get(h.url("/api/activity"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["activity"].as_array().unwrap().clone()
}

#[tokio::test]
async fn waiting_request_leaves_the_queue_at_its_timeout_with_503_and_never_loads_its_model() {
    let h = Harness::start(
        &[model("a", "--gate-closed"), model("b", "--gate-closed")],
        "",
    )
    .await;
    let busy = occupy_a(&h).await;

    let response = h
        .chat("b", None, false)
        .header("X-Queue-Timeout", "0.5")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "1");
    assert_eq!(
        response.headers()["x-should-retry"],
        "false",
        "the client set the bound: its library does not wait again by itself"
    );
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "queue_timeout");
    assert_eq!(body["error"]["type"], "server_error");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("model 'b'"), "{message}");

    assert!(h.queue().await.is_empty(), "it left the queue");
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("llamaswap_queue_timeouts_total{model=\"b\",band=\"normal\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("code=\"queue_timeout\""),
        "counted by outcome: {metrics}"
    );
    let rows = activity(&h).await;
    let row = rows
        .iter()
        .find(|r| r["model"] == "b")
        .expect("a row for b");
    assert_eq!(row["resp_status_code"], 503, "{row}");

    // Once a is free nothing waits for b: it is never started.
    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    assert_eq!(h.running().await, vec!["a"]);
    assert!(h.journal("b").await.is_none(), "b was started");
    h.shutdown().await;
}

#[tokio::test]
async fn elevated_request_with_a_short_timeout_still_overtakes_queued_low() {
    let h = Harness::start(
        &[
            model("a", "--gate-closed"),
            model("b", "--gate-closed"),
            model("c", "--gate-closed"),
        ],
        "",
    )
    .await;
    let busy = occupy_a(&h).await;
    let low = h.spawn(h.chat("b", Some("-10"), false));
    h.wait_queue_len(1).await;
    let high = h.spawn(
        h.chat("c", Some("10"), false)
            .header("X-Queue-Timeout", "30"),
    );
    let queue = h.wait_queue_len(2).await;
    assert_eq!(queue[0]["model"], "c", "the bound does not lower its rank");
    assert_eq!(queue[1]["model"], "b");

    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    h.wait_held("c", 1).await;
    assert_eq!(h.queue().await.len(), 1, "b still waits behind c");
    // The hint is for this proxy's queue, not for the model server.
    let journal = h.journal("c").await.unwrap();
    let sent = journal[0]["headers"].to_string().to_ascii_lowercase();
    assert!(!sent.contains("x-queue-timeout"), "{sent}");
    h.open_gate("c").await;
    assert_eq!(finish(high).await.0, 200);
    h.wait_held("b", 1).await;
    h.open_gate("b").await;
    assert_eq!(finish(low).await.0, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn max_queue_wait_bounds_requests_without_the_header_and_caps_longer_ones() {
    let h = Harness::start(
        &[
            model("a", "--gate-closed"),
            crate::support::ModelSpec {
                id: "b",
                args: "--gate-closed",
                yaml: "maxQueueWait: 2",
            },
        ],
        "maxQueueWait: 3600\n",
    )
    .await;
    // The UI's data shows each model's bound.
    let config: Value = h
        .http
        .get(h.url("/api/models/config/b"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(config["maxQueueWait"], 2.0, "{config}");
    let busy = occupy_a(&h).await;

    let plain = h.chat("b", None, false).send().await.unwrap();
    assert_eq!(plain.status(), 503);
    assert_eq!(plain.headers()["retry-after"], "2", "the model's bound");
    assert!(
        plain.headers().get("x-should-retry").is_none(),
        "the operator's bound leaves retrying to the client"
    );
    let asked_more = h
        .chat("b", None, false)
        .header("X-Queue-Timeout", "86400")
        .send()
        .await
        .unwrap();
    assert_eq!(asked_more.status(), 503);
    assert_eq!(asked_more.headers()["retry-after"], "2", "capped");
    let body: Value = asked_more.json().await.unwrap();
    assert_eq!(body["error"]["code"], "queue_timeout");

    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn queue_timeout_after_the_loading_stream_began_is_an_error_frame() {
    let h = Harness::start(
        &[model("a", "--gate-closed"), model("b", "--gate-closed")],
        "sendLoadingState: true\n",
    )
    .await;
    let busy = occupy_a(&h).await;

    let response = h
        .chat("b", None, true)
        .header("X-Queue-Timeout", "0.5")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    let frames: Vec<&str> = text
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .collect();
    assert!(
        frames[0].contains("\"llamaswap\""),
        "a loading frame first: {text}"
    );
    assert_eq!(frames.last(), Some(&"[DONE]"), "{text}");
    let error: Value = serde_json::from_str(frames[frames.len() - 2]).unwrap();
    assert_eq!(error["error"]["code"], "queue_timeout", "{text}");
    assert!(h.queue().await.is_empty());

    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn unusable_queue_timeout_is_refused_before_anything_is_scheduled() {
    let h = Harness::start(&[model("a", "")], "").await;
    for bad in ["5s", "-1", "1e3", "soon"] {
        let response = h
            .chat("a", None, false)
            .header("X-Queue-Timeout", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{bad}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], "invalid_queue_timeout", "{bad}");
        assert!(
            body["error"]["message"].as_str().unwrap().contains(bad),
            "{body}"
        );
    }
    assert!(h.running().await.is_empty(), "nothing was started");
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    // A request that need not wait is served whatever its bound, even 0.
    let ok = h
        .chat("a", None, false)
        .header("X-Queue-Timeout", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    h.shutdown().await;
}

#[tokio::test]
async fn a_waiter_of_each_band_leaves_at_its_timeout_and_none_preempts_the_busy_model() {
    let h = Harness::start(
        &[model("a", "--gate-closed"), model("b", "--gate-closed")],
        "",
    )
    .await;
    let busy = occupy_a(&h).await;
    // Low, Normal and Elevated, each bounded: all wait behind a's request
    // (no preemption: the drain fence holds even an Elevated swap), in rank
    // order, and each leaves at its own deadline with 503.
    // Bounds long enough for a loaded machine to see all three waiting.
    let waiters: Vec<_> = [("-10", "8"), ("0", "7"), ("10", "6")]
        .into_iter()
        .map(|(priority, timeout)| {
            h.spawn(
                h.chat("b", Some(priority), false)
                    .header("X-Queue-Timeout", timeout),
            )
        })
        .collect();
    let queue = h.wait_queue_len(3).await;
    let ranked: Vec<i64> = queue
        .iter()
        .map(|e| e["effective_priority"].as_i64().unwrap())
        .collect();
    assert_eq!(ranked, [10, 0, -10], "{queue:?}");
    for waiter in waiters {
        let (status, body) = finish(waiter).await;
        assert_eq!(status, 503, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        assert_eq!(body["error"]["code"], "queue_timeout", "{body}");
    }
    assert!(h.queue().await.is_empty());
    // a's request was never cut, and b never started.
    assert!(h.journal("b").await.is_none(), "b was started");
    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    let metrics = h.metrics().await;
    for band in ["low", "normal", "elevated"] {
        let line = format!("llamaswap_queue_timeouts_total{{model=\"b\",band=\"{band}\"}} 1\n");
        assert!(metrics.contains(&line), "{line} not in\n{metrics}");
    }
    h.shutdown().await;
}
