//! Requests in flight: llama-swap's `inflight` events on `/api/events`, and
//! `POST /api/inflight/{id}/cancel` ending a waiting or a running request
//! with nothing left behind.

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::{Harness, LIMIT, model};
use crate::ui::Events;

/// `POST /api/inflight/{id}/cancel`: status and body.
async fn cancel(h: &Harness, id: &str) -> (u16, Value) {
    let response = h
        .http
        .post(h.url(&format!("/api/inflight/{id}/cancel")))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// The next `upsert` of a request to `model` in `state`.
async fn upsert(events: &mut Events, model: &str, state: &str) -> Value {
    let event = events
        .until("inflight", |p| {
            p["operation"] == "upsert"
                && p["request"]["model"] == model
                && p["request"]["state"] == state
        })
        .await;
    event["request"].clone()
}

/// Waits until `/metrics` holds `line` (gauges settle as bodies end).
async fn wait_metric(h: &Harness, line: &str) {
    h.wait_for(|h| async move { h.metrics().await.contains(line).then_some(()) })
        .await;
}

/// Nothing is left of any request: no waiter, nothing in progress.
async fn assert_nothing_left(h: &Harness, model: &str) {
    wait_metric(h, "llamaswap_requests_in_progress 0\n").await;
    wait_metric(
        h,
        &format!("llamaswap_model_requests_in_flight{{model=\"{model}\"}} 0\n"),
    )
    .await;
    assert!(h.queue().await.is_empty());
}

/// The activity row of the request with `X-Request-Id` `id`.
async fn row(h: &Harness, id: &str) -> Value {
    h.wait_for(|h| async move {
        let rows: Value = h
            .http
            .get(h.url("/api/metrics/activity?limit=50"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        rows["data"]
            .as_array()?
            .iter()
            .find(|r| r["request_id"] == id)
            .cloned()
    })
    .await
}

#[tokio::test]
async fn inflight_events_follow_a_request_from_queued_to_running_to_removed_in_llama_swaps_shape() {
    // The load time keeps the request waiting (and listed as such) a while.
    let h = Harness::start(&[model("a", "--gate-closed --load-time 300ms")], "").await;
    let mut events = Events::connect(&h, None).await;
    let snapshot = events.until("inflight", |_| true).await;
    assert_eq!(
        snapshot,
        json!({"operation": "snapshot", "requests": [], "total": 0})
    );
    let request = h.spawn(
        h.chat("a", Some("10"), false)
            .header("User-Agent", "inflight-test/1")
            .header("Cookie", "session=secret")
            .header("X-Forwarded-For", "203.0.113.9, 10.0.0.1")
            .header("X-Request-Id", "follow-me"),
    );
    // Listed while the model starts, then running once granted.
    let queued = upsert(&mut events, "a", "queued").await;
    let running = upsert(&mut events, "a", "running").await;
    assert_eq!(running["id"], queued["id"]);
    let id = running["id"].as_str().expect("llama-swap's id is a string");
    assert!(id.parse::<u64>().is_ok(), "{id}");
    let timestamp = running["timestamp"].as_str().unwrap();
    assert!(timestamp.parse::<jiff::Timestamp>().is_ok(), "{timestamp}");
    assert_eq!(running["model"], "a");
    assert_eq!(running["req_path"], "/v1/chat/completions");
    assert_eq!(running["method"], "POST");
    assert_eq!(running["req_headers"]["User-Agent"], "inflight-test/1");
    assert_eq!(running["req_headers"]["Cookie"], "[REDACTED]");
    // llama-swap's: the first X-Forwarded-For hop; the connection's beside it.
    assert_eq!(running["remote_ip"], "203.0.113.9");
    assert_eq!(running["connection_ip"], "127.0.0.1");
    assert_eq!(running["resp_headers"], json!({}));
    assert_eq!(running["resp_bytes"], 0);
    assert!(running["elapsed_ms"].is_u64());
    assert_eq!(running["metadata"]["fifo_priority"], "10");
    // Ours beside.
    assert_eq!(running["request_id"], "follow-me");
    assert_eq!(running["requested_priority"], 10);
    assert_eq!(running["band"], "elevated");
    assert!(running["seq"].is_u64());
    assert!(running["granted_ms"].is_u64());
    assert!(queued["granted_ms"].is_null());

    h.wait_held("a", 1).await;
    h.open_gate("a").await;
    let removed = events
        .until("inflight", |p| p["operation"] == "remove")
        .await;
    assert_eq!(removed["id"], id);
    assert_eq!(removed["total"], 0);
    assert_eq!(request.await.unwrap().0, 200);
    // A new subscriber's snapshot is empty again.
    let mut later = Events::connect(&h, None).await;
    let snapshot = later.until("inflight", |_| true).await;
    assert_eq!(snapshot["requests"], json!([]));
    h.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_waiting_request_leaves_the_queue_with_a_503_cancelled() {
    let h = Harness::start(&[model("a", "--gate-closed"), model("b", "")], "").await;
    let mut events = Events::connect(&h, None).await;
    let held = h.spawn(h.chat("a", None, false));
    upsert(&mut events, "a", "running").await;
    // b waits for a to stop.
    let waiting = h.spawn(h.chat("b", None, false).header("X-Request-Id", "waits"));
    let entry = upsert(&mut events, "b", "queued").await;
    h.wait_queue_len(1).await;
    let id = entry["id"].as_str().unwrap();

    assert_eq!(cancel(&h, id).await, (200, json!({"msg": "ok"})));
    let (status, body) = waiting.await.unwrap();
    assert_eq!(status, 503);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "cancelled");
    assert_eq!(body["error"]["type"], "server_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cancelled by an operator"),
        "{body}"
    );
    let removed = events
        .until("inflight", |p| p["operation"] == "remove")
        .await;
    assert_eq!(removed["id"], id);
    h.wait_queue_len(0).await;
    // Gone: a second cancel finds nothing.
    let (status, body) = cancel(&h, id).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "inflight_not_found");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("inflight request not found"),
        "{body}"
    );
    let row = row(&h, "waits").await;
    assert_eq!(row["resp_status_code"], 503);
    assert_eq!(row["error"], "cancelled");
    // b never started: the cancelled request caused no swap.
    assert_eq!(h.running().await, ["a"]);

    h.open_gate("a").await;
    assert_eq!(held.await.unwrap().0, 200);
    assert_nothing_left(&h, "a").await;
    assert!(
        h.metrics().await.contains(
            "llamaswap_requests_total{outcome=\"cancelled\",code=\"\",band=\"normal\"} 1\n"
        )
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_request_waiting_for_its_answer_gets_a_503_and_the_upstream_request_is_dropped()
{
    let h = Harness::start(&[model("a", "--gate-closed")], "").await;
    let mut events = Events::connect(&h, None).await;
    let request = h.spawn(h.chat("a", None, false));
    let entry = upsert(&mut events, "a", "running").await;
    h.wait_held("a", 1).await;
    let id = entry["id"].as_str().unwrap();
    assert_eq!(cancel(&h, id).await.0, 200);
    let (status, body) = request.await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("\"cancelled\""), "{body}");
    // The upstream's handler was dropped with its connection.
    h.wait_held("a", 0).await;
    assert_nothing_left(&h, "a").await;
    h.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_stream_ends_with_an_error_frame_and_its_slot_serves_the_next_request() {
    let parallel_one = crate::support::ModelSpec {
        id: "a",
        args: "--tokens-per-second 20",
        yaml: "parallel: 1",
    };
    let h = Harness::start(&[parallel_one], "").await;
    let mut events = Events::connect(&h, None).await;
    let long = "word ".repeat(2000);
    let response = h
        .http
        .post(h.url("/v1/chat/completions"))
        .json(&json!({
            "model": "a",
            "stream": true,
            "messages": [{"role": "user", "content": long}],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut body = response.bytes_stream();
    let first = tokio::time::timeout(LIMIT, body.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(first.starts_with(b"data: "), "{first:?}");
    let entry = upsert(&mut events, "a", "running").await;
    // Bytes sent are reported as the stream goes.
    let grown = events
        .until("inflight", |p| {
            p["request"]["resp_bytes"].as_u64().is_some_and(|n| n > 0)
        })
        .await;
    assert_eq!(grown["request"]["id"], entry["id"]);
    assert_eq!(
        grown["request"]["resp_headers"]["Content-Type"],
        "text/event-stream"
    );
    assert_eq!(cancel(&h, entry["id"].as_str().unwrap()).await.0, 200);
    let mut rest = Vec::new();
    tokio::time::timeout(LIMIT, async {
        while let Some(chunk) = body.next().await {
            rest.extend_from_slice(&chunk.unwrap());
        }
    })
    .await
    .expect("the stream ends once cancelled");
    let rest = String::from_utf8(rest).unwrap();
    let frames: Vec<&str> = rest
        .split("\n\n")
        .filter(|f| !f.trim().is_empty())
        .collect();
    assert_eq!(frames.last(), Some(&"data: [DONE]"), "{rest}");
    let error: Value =
        serde_json::from_str(frames[frames.len() - 2].strip_prefix("data: ").unwrap()).unwrap();
    assert_eq!(error["error"]["code"], "cancelled");
    // The slot came back: the next request is served.
    let next = h.chat("a", None, false).send().await.unwrap();
    assert_eq!(next.status(), 200);
    assert_nothing_left(&h, "a").await;
    h.shutdown().await;
}

#[tokio::test]
async fn cancelling_an_open_websocket_closes_it_and_frees_its_model() {
    use tokio_tungstenite::tungstenite::Message;

    let h = Harness::start(&[model("a", ""), model("b", "")], "").await;
    let mut events = Events::connect(&h, None).await;
    let mut ws = crate::websockets::open(&h, "/upstream/a/ws", &[("x-request-id", "socket")]).await;
    crate::websockets::echo(&mut ws, Message::text("open")).await;
    let entry = upsert(&mut events, "a", "running").await;
    assert_eq!(entry["req_path"], "/ws");
    let id = entry["id"].as_str().unwrap();
    // b waits for a, which the open socket holds like a request in flight.
    let waiting = h.spawn(h.chat("b", None, false));
    h.wait_queue_len(1).await;

    assert_eq!(cancel(&h, id).await, (200, json!({"msg": "ok"})));
    crate::websockets::wait_closed(&mut ws).await;
    events
        .until("inflight", |p| p["operation"] == "remove" && p["id"] == id)
        .await;
    // The socket's lease went back: b is served.
    let (status, body) = tokio::time::timeout(LIMIT, waiting).await.unwrap().unwrap();
    assert_eq!(status, 200, "{body}");
    let row = row(&h, "socket").await;
    assert_eq!(row["resp_status_code"], 101);
    assert_eq!(row["error"], "cancelled");
    assert_nothing_left(&h, "b").await;
    h.shutdown().await;
}

#[tokio::test]
async fn cancelling_an_open_websocket_to_a_peer_model_closes_it() {
    use tokio_tungstenite::tungstenite::Message;

    let back = Harness::start(&[model("a", "")], "").await;
    let front = Harness::start(
        &[],
        &format!(
            "peers:\n  back:\n    proxy: {}\n    models: [a]\n",
            back.base
        ),
    )
    .await;
    let mut events = Events::connect(&front, None).await;
    let mut ws = crate::websockets::open(
        &front,
        "/upstream/back/a/ws",
        &[("x-request-id", "peer-socket")],
    )
    .await;
    crate::websockets::echo(&mut ws, Message::text("open")).await;
    let entry = events
        .until("inflight", |p| {
            p["operation"] == "upsert" && p["request"]["request_id"] == "peer-socket"
        })
        .await;
    let id = entry["request"]["id"].as_str().unwrap();

    assert_eq!(cancel(&front, id).await, (200, json!({"msg": "ok"})));
    crate::websockets::wait_closed(&mut ws).await;
    events
        .until("inflight", |p| p["operation"] == "remove" && p["id"] == id)
        .await;
    wait_metric(
        &front,
        "llamaswap_peer_requests_in_flight{peer=\"back\"} 0\n",
    )
    .await;
    let row = row(&front, "peer-socket").await;
    assert_eq!(row["resp_status_code"], 101);
    assert_eq!(row["error"], "cancelled");
    front.shutdown().await;
    back.shutdown().await;
}

#[tokio::test]
async fn a_cancelled_request_to_a_peer_model_gets_a_503_and_the_peer_drops_it() {
    let back = Harness::start(&[model("a", "--gate-closed")], "").await;
    let front = Harness::start(
        &[],
        &format!(
            "peers:\n  back:\n    proxy: {}\n    models: [a]\n",
            back.base
        ),
    )
    .await;
    let mut events = Events::connect(&front, None).await;
    let request = front.spawn(
        front
            .chat("back/a", None, false)
            .header("X-Request-Id", "to-peer"),
    );
    let entry = events
        .until("inflight", |p| {
            p["operation"] == "upsert" && p["request"]["request_id"] == "to-peer"
        })
        .await;
    back.wait_held("a", 1).await;
    let id = entry["request"]["id"].as_str().unwrap();
    assert_eq!(cancel(&front, id).await.0, 200);
    let (status, body) = request.await.unwrap();
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("\"cancelled\""), "{body}");
    // The request to the peer was dropped with its connection.
    back.wait_held("a", 0).await;
    wait_metric(
        &front,
        "llamaswap_peer_requests_in_flight{peer=\"back\"} 0\n",
    )
    .await;
    assert_eq!(row(&front, "to-peer").await["error"], "cancelled");
    front.shutdown().await;
    back.shutdown().await;
}
