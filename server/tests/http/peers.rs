//! Peers: a front server forwarding to a back server (both real, on
//! loopback, the back's models real mockswap processes), or to an in-process
//! mockswap standing in for any OpenAI-compatible peer.

use futures_util::StreamExt;
use mockswap::{MockSwap, PriorityHeader};
use serde_json::{Value, json};

use crate::support::{Harness, LIMIT, ModelSpec, free_port, model};

async fn finish(handle: tokio::task::JoinHandle<(u16, String)>) -> (u16, String) {
    tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap()
}

fn models_in(queue: &[Value]) -> Vec<&str> {
    queue.iter().map(|e| e["model"].as_str().unwrap()).collect()
}

/// A `peers:` section with one peer.
fn peer_yaml(id: &str, proxy: &str, models: &[&str], extra: &str) -> String {
    let mut yaml = format!(
        "peers:\n  {id}:\n    proxy: {proxy}\n    models: [{}]\n",
        models.join(", ")
    );
    for line in extra.lines().filter(|l| !l.trim().is_empty()) {
        yaml.push_str(&format!("    {}\n", line.trim()));
    }
    yaml
}

/// A front server with `local` models and `global` YAML (its `peers:`).
async fn front(local: &[ModelSpec], global: &str) -> Harness {
    Harness::start(local, global).await
}

fn chat_body(model: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn a_peer_model_is_served_through_the_front_with_the_peer_key() {
    let back = Harness::start(&[model("a", "")], "apiKeys: [back-key]\n").await;
    let yaml = format!(
        "apiKeys: [front-key]\n{}",
        peer_yaml("back", &back.base, &["a"], "apiKey: back-key")
    );
    let front = front(&[], &yaml).await;

    for name in ["back/a", "a"] {
        let response = front
            .http
            .post(front.url("/v1/chat/completions"))
            .bearer_auth("front-key")
            .json(&chat_body(name, false))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let body: Value = response.json().await.unwrap();
        assert_eq!(status, 200, "{name}: {body}");
        assert_eq!(body["model"], "a", "{name}: the back's model answered");
    }
    // The back only takes its own key: the front sent the peer key, not the caller's.
    let direct = back
        .http
        .post(back.url("/v1/chat/completions"))
        .bearer_auth("front-key")
        .json(&chat_body("a", false))
        .send()
        .await
        .unwrap();
    assert_eq!(direct.status(), 401);
    let journal = back.journal("a").await.unwrap();
    let chats: Vec<&Value> = journal
        .iter()
        .filter(|e| e["path"] == "/v1/chat/completions")
        .collect();
    assert_eq!(chats.len(), 2);
    for entry in chats {
        assert_eq!(entry["model"], "a", "the body names the peer's own model");
    }
    front.shutdown().await;
    back.shutdown().await;
}

#[tokio::test]
async fn the_peer_gets_its_api_key_in_both_headers_and_no_forwarding_headers() {
    let peer = MockSwap::start().await;
    let yaml = format!(
        "{}{}",
        peer_yaml("keyed", &peer.uri(), &["m"], "apiKey: peer-key"),
        "  open:\n    proxy: ".to_owned() + &peer.uri() + "\n    models: [m2]\n"
    );
    let front = front(&[], &yaml).await;
    for name in ["keyed/m", "open/m2"] {
        let response = front
            .http
            .post(front.url("/v1/chat/completions"))
            .header("Authorization", "Bearer caller-key")
            .header("x-api-key", "caller-key")
            .header("X-Forwarded-For", "203.0.113.9")
            .json(&chat_body(name, false))
            .send()
            .await
            .unwrap();
        let status = response.status();
        assert_eq!(status, 200, "{name}: {}", response.text().await.unwrap());
    }
    let seen = peer.requests();
    let keyed = seen
        .iter()
        .find(|r| r.model.as_deref() == Some("m"))
        .unwrap();
    assert_eq!(keyed.header_values("authorization"), ["Bearer peer-key"]);
    assert_eq!(keyed.header_values("x-api-key"), ["peer-key"]);
    assert!(keyed.header_values("x-forwarded-for").is_empty());
    // Without an apiKey (and with this server's auth off) the caller's own
    // credentials are the peer's business, as in llama-swap.
    let open = seen
        .iter()
        .find(|r| r.model.as_deref() == Some("m2"))
        .unwrap();
    assert_eq!(open.header_values("authorization"), ["Bearer caller-key"]);
    front.shutdown().await;
}

#[tokio::test]
async fn the_callers_capped_priority_crosses_the_hop_and_normal_sends_none() {
    let peer = MockSwap::start().await;
    let yaml = format!(
        "priority:\n  maxHeaderPriority: 5\n{}",
        peer_yaml("p", &peer.uri(), &["m"], "")
    );
    let front = front(&[], &yaml).await;
    for priority in [Some("10"), Some("-10"), None, Some("garbage")] {
        let status = front
            .chat("p/m", priority, false)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 200);
    }
    let seen: Vec<PriorityHeader> = peer.requests().into_iter().map(|r| r.priority).collect();
    assert_eq!(
        seen,
        [
            PriorityHeader::Value(5),
            PriorityHeader::Value(-10),
            PriorityHeader::Absent,
            PriorityHeader::Absent,
        ]
    );
    front.shutdown().await;
}

#[tokio::test]
async fn a_qualified_name_reaches_the_peer_while_the_bare_name_stays_local() {
    let back = Harness::start(&[model("a", "")], "").await;
    let front = front(
        &[model("a", "")],
        &peer_yaml("back", &back.base, &["a"], ""),
    )
    .await;
    assert_eq!(
        front.chat("a", None, false).send().await.unwrap().status(),
        200
    );
    assert_eq!(
        front.running().await,
        ["a"],
        "the local model served the bare name"
    );
    assert!(back.running().await.is_empty());
    assert_eq!(
        front
            .chat("back/a", None, false)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(back.running().await, ["a"]);
    front.shutdown().await;
    back.shutdown().await;
}

#[tokio::test]
async fn a_streamed_answer_passes_through_chunk_by_chunk() {
    let back = Harness::start(&[model("a", "")], "").await;
    let front = front(&[], &peer_yaml("back", &back.base, &["a"], "")).await;
    let response = front.chat("back/a", None, true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    assert_eq!(response.headers()["x-accel-buffering"], "no");
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    while let Some(chunk) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
    }
    let frames: Vec<&str> = text
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .collect();
    assert!(frames.len() >= 3, "{text}");
    assert_eq!(frames.last(), Some(&"[DONE]"), "{text}");
    let first: Value = serde_json::from_str(frames[0]).unwrap();
    assert_eq!(first["object"], "chat.completion.chunk");
    front.shutdown().await;
    back.shutdown().await;
}

#[tokio::test]
async fn upstream_paths_reach_the_peers_upstream_of_the_model() {
    let back = Harness::start(&[model("a", "")], "").await;
    let front = front(&[], &peer_yaml("back", &back.base, &["a"], "")).await;
    let response = front
        .http
        .post(front.url("/upstream/back/a/v1/chat/completions?x=1"))
        .json(&json!({"model": "a", "unread": true, "messages": []}))
        .send()
        .await
        .unwrap();
    let status = response.status();
    assert_eq!(status, 200, "{}", response.text().await.unwrap());
    let journal = back.journal("a").await.unwrap();
    let entry = journal
        .iter()
        .find(|e| e["path"] == "/v1/chat/completions")
        .unwrap();
    assert_eq!(entry["query"], "x=1");
    assert_eq!(
        entry["json"],
        json!({"model": "a", "unread": true, "messages": []}),
        "/upstream bodies pass unread"
    );

    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let redirect = no_redirects
        .get(front.url("/upstream/back/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(redirect.status(), 301);
    assert_eq!(redirect.headers()["location"], "/upstream/back/a/");
    front.shutdown().await;
    back.shutdown().await;
}

#[tokio::test]
async fn a_peer_that_is_down_answers_502_naming_it_and_is_tried_again_next_time() {
    let port = free_port();
    let proxy = format!("http://127.0.0.1:{port}");
    let front = front(
        &[],
        &peer_yaml("gpu2", &proxy, &["m"], "timeouts: {connect: 5}"),
    )
    .await;
    let response = tokio::time::timeout(LIMIT, front.chat("gpu2/m", None, false).send())
        .await
        .expect("a refused connection is answered at once")
        .unwrap();
    assert_eq!(response.status(), 502);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "peer_unreachable");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("peer 'gpu2'"), "{message}");
    assert!(
        front
            .metrics()
            .await
            .contains("llamaswap_peer_failures_total{peer=\"gpu2\",reason=\"unreachable\"} 1\n")
    );

    // The peer comes up on that port: the next request goes through.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap();
    let peer = MockSwap::builder().serve(listener).unwrap();
    let status = front
        .chat("gpu2/m", None, false)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status, 200);
    assert_eq!(peer.requests().len(), 1);
    front.shutdown().await;
}

#[tokio::test]
async fn elevated_request_reaches_the_peers_upstream_before_an_earlier_low_one() {
    let gated = [
        model("a", "--gate-closed"),
        model("b", "--gate-closed"),
        model("c", "--gate-closed"),
    ];
    let back = Harness::start(&gated, "").await;
    let front = front(&[], &peer_yaml("back", &back.base, &["a", "b", "c"], "")).await;

    // The back's GPU (one model at a time: the default group) is held by `a`.
    let busy = front.spawn(front.chat("back/a", None, false));
    back.wait_held("a", 1).await;
    let low = front.spawn(front.chat("back/b", Some("-10"), false));
    back.wait_queue_len(1).await;
    let high = front.spawn(front.chat("c", Some("10"), false));
    let queue = back.wait_queue_len(2).await;
    assert_eq!(
        models_in(&queue),
        ["c", "b"],
        "the back ranks the front's callers"
    );
    assert_eq!(queue[0]["requested_priority"], 10);
    assert_eq!(queue[1]["requested_priority"], -10);
    let back_metrics = back.metrics().await;
    assert!(
        back_metrics.contains("llamaswap_queue_depth{band=\"elevated\"} 1\n")
            && back_metrics.contains("llamaswap_queue_depth{band=\"low\"} 1\n"),
        "{back_metrics}"
    );
    // The front schedules nothing of its own, and says so; it counts.
    assert!(front.queue().await.is_empty());
    assert!(front.running().await.is_empty());
    let front_metrics = front.metrics().await;
    assert!(
        front_metrics.contains("llamaswap_peer_requests_in_flight{peer=\"back\"} 3\n"),
        "{front_metrics}"
    );

    back.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    back.wait_held("c", 1).await;
    assert!(
        !back.running().await.iter().any(|m| m == "b"),
        "b started before the Elevated c"
    );
    back.open_gate("c").await;
    assert_eq!(finish(high).await.0, 200);
    back.wait_held("b", 1).await;
    back.open_gate("b").await;
    assert_eq!(finish(low).await.0, 200);
    assert!(
        front
            .metrics()
            .await
            .contains("llamaswap_peer_requests_in_flight{peer=\"back\"} 0\n")
    );
    front.shutdown().await;
    back.shutdown().await;
}

#[tokio::test]
async fn models_lists_peer_models_as_llama_swap_does() {
    let front = front(
        &[model("local", "")],
        &peer_yaml("back", "http://127.0.0.1:9", &["a", "org/b"], ""),
    )
    .await;
    let body: Value = front
        .http
        .get(front.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = body["data"].as_array().unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["back/a", "back/org/b", "local"]);
    let peer_row = &rows[1];
    assert_eq!(peer_row["name"], "back: org/b");
    assert_eq!(peer_row["status"]["value"], "unloaded");
    assert_eq!(
        peer_row["meta"]["llamaswap"],
        json!({"type": "peer", "peerID": "back"})
    );
    front.shutdown().await;
}

#[tokio::test]
async fn unloading_a_peer_model_here_is_refused_with_a_message_that_says_where_it_runs() {
    let front = front(&[], &peer_yaml("back", "http://127.0.0.1:9", &["a"], "")).await;
    let response = front
        .http
        .post(front.url("/api/models/unload/back/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("served by a peer"),
        "{body}"
    );
    front.shutdown().await;
}

#[tokio::test]
async fn the_ui_data_counts_requests_in_flight_per_peer_model() {
    let back = Harness::start(&[model("a", "--gate-closed")], "").await;
    let front = front(&[], &peer_yaml("back", &back.base, &["a"], "")).await;
    let held = front.spawn(front.chat("back/a", None, false));
    back.wait_held("a", 1).await;
    let response = front
        .http
        .get(front.url("/api/events"))
        .send()
        .await
        .unwrap();
    let mut stream = response.bytes_stream();
    let mut buffer = String::new();
    let row = loop {
        let chunk = tokio::time::timeout(LIMIT, stream.next())
            .await
            .expect("no modelStatus event")
            .unwrap()
            .unwrap();
        buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        let found = buffer.split("\n\n").find_map(|block| {
            let data = block.lines().find_map(|l| l.strip_prefix("data: "))?;
            let envelope: Value = serde_json::from_str(data).ok()?;
            if envelope["type"] != "modelStatus" {
                return None;
            }
            let rows: Value = serde_json::from_str(envelope["data"].as_str()?).ok()?;
            rows.as_array()?
                .iter()
                .find(|r| r["id"] == "back/a" && r["in_flight"] == 1)
                .cloned()
        });
        if let Some(row) = found {
            break row;
        }
    };
    assert_eq!(row["kind"], "peer");
    assert_eq!(row["peerID"], "back");
    drop(stream);
    back.open_gate("a").await;
    assert_eq!(finish(held).await.0, 200);
    front.shutdown().await;
    back.shutdown().await;
}

#[tokio::test]
async fn a_selector_and_a_profile_pin_may_name_peer_models() {
    let peer = MockSwap::start().await;
    let yaml = format!(
        "{}selectors:\n  remote:\n    strategy: pin\n    targets: [p/m]\nprofiles:\n  away:\n    pins: {{chat: p/m2}}\n",
        peer_yaml("p", &peer.uri(), &["m", "m2"], "")
    );
    let front = front(&[], &yaml).await;
    assert_eq!(
        front
            .chat("remote", None, false)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let switch = front
        .http
        .put(front.url("/api/profiles/active"))
        .json(&json!({"name": "away"}))
        .send()
        .await
        .unwrap();
    assert_eq!(switch.status(), 200);
    assert_eq!(
        front
            .chat("chat", None, false)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let models: Vec<Option<String>> = peer.requests().into_iter().map(|r| r.model).collect();
    assert_eq!(models, [Some("m".to_owned()), Some("m2".to_owned())]);
    front.shutdown().await;
}

#[tokio::test]
async fn a_websocket_to_a_peer_model_reaches_the_peers_upstream_and_counts_in_flight() {
    use crate::websockets::{close, echo, open};
    use tokio_tungstenite::tungstenite::Message;

    let back = Harness::start(&[model("a", "")], "apiKeys: [back-key]\n").await;
    let front = front(
        &[],
        &peer_yaml("back", &back.base, &["a"], "apiKey: back-key"),
    )
    .await;
    for path in ["/upstream/back/a/ws?client=1", "/props?model=back/a"] {
        let mut ws = open(&front, path, &[]).await;
        echo(&mut ws, Message::text("across the hop")).await;
        echo(&mut ws, Message::binary(vec![0_u8, 1, 255])).await;
        assert!(
            front
                .metrics()
                .await
                .contains("llamaswap_peer_requests_in_flight{peer=\"back\"} 1\n"),
            "{path}: the open socket counts as in flight to the peer"
        );
        close(ws).await;
    }
    let journal = back.journal("a").await.unwrap();
    let sockets: Vec<(&str, &str)> = journal
        .iter()
        .filter(|e| e["websocket"] == true)
        .map(|e| {
            (
                e["path"].as_str().unwrap(),
                e["query"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(sockets, [("/ws", "client=1"), ("/props", "model=a")]);
    front.shutdown().await;
    back.shutdown().await;
}

#[tokio::test]
async fn a_name_several_peers_list_goes_to_the_peer_that_has_it_loaded() {
    let cold = Harness::start(&[model("a", "")], "").await;
    let warm = Harness::start(&[model("a", "")], "").await;
    // `p1` comes first by ID, so only the loaded model makes `p2` win.
    let yaml = format!(
        "{}  p2:\n    proxy: {}\n    models: [a]\n",
        peer_yaml("p1", &cold.base, &["a"], ""),
        warm.base
    );
    let front = front(&[], &yaml).await;
    let status = warm.chat("a", None, false).send().await.unwrap().status();
    assert_eq!(status, 200, "a is loaded on the second peer");
    for _ in 0..2 {
        let status = front.chat("a", None, false).send().await.unwrap().status();
        assert_eq!(status, 200);
    }
    let chats = warm
        .journal("a")
        .await
        .unwrap()
        .iter()
        .filter(|e| e["path"] == "/v1/chat/completions")
        .count();
    assert_eq!(chats, 3, "both pool requests went to the peer with a ready");
    assert!(
        cold.running().await.is_empty(),
        "the cold peer started nothing"
    );
    front.shutdown().await;
    cold.shutdown().await;
    warm.shutdown().await;
}
