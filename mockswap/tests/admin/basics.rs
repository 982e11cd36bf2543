//! Journal, faults, gate, long polls and websockets over the admin API.

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::admin;
use crate::support::{Proc, chat};

#[tokio::test]
async fn admin_requests_lists_the_journal_with_the_documented_fields_and_clears_it() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    for priority in [None, Some("10"), Some("nope")] {
        let mut request = client
            .post(format!("{}/v1/chat/completions", proc.uri))
            .json(&chat("m", "x", priority.is_some()));
        if let Some(p) = priority {
            request = request.header("X-Priority", p);
        }
        request.send().await.unwrap().bytes().await.unwrap();
    }
    let dup = client
        .post(format!("{}/upstream/u/v1/embeddings", proc.uri))
        .header("x-priority", "10")
        .header("x-priority", "-10")
        .json(&json!({"input": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(dup.status(), 200);
    let (status, journal) = admin(&client, reqwest::Method::GET, &proc.uri, "requests", None).await;
    assert_eq!(status, 200);
    let entries = journal.as_array().unwrap();
    assert_eq!(entries.len(), 4);
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(entries[0]["method"], "POST");
    assert_eq!(entries[0]["path"], "/v1/chat/completions");
    assert_eq!(entries[0]["model"], "m");
    assert_eq!(entries[0]["stream"], false);
    assert_eq!(entries[1]["stream"], true);
    assert_eq!(
        entries[0]["priority"],
        json!({"state": "absent", "value": null, "raw": []})
    );
    assert_eq!(
        entries[1]["priority"],
        json!({"state": "value", "value": 10, "raw": ["10"]})
    );
    assert_eq!(
        entries[2]["priority"],
        json!({"state": "invalid", "value": null, "raw": ["nope"]})
    );
    assert_eq!(
        entries[3]["priority"],
        json!({"state": "duplicated", "value": null, "raw": ["10", "-10"]})
    );
    assert_eq!(entries[3]["model"], "u");
    let pairs: Vec<&Value> = entries[3]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["name"] == "x-priority")
        .map(|h| &h["value"])
        .collect();
    assert_eq!(pairs, [&json!("10"), &json!("-10")]);
    let (_, newer) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "requests?since=2",
        None,
    )
    .await;
    let newer: Vec<&Value> = newer
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["seq"])
        .collect();
    assert_eq!(newer, [&json!(3), &json!(4)]);
    let (status, bad) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "requests?since=x",
        None,
    )
    .await;
    assert_eq!(
        (status, &bad["error"]["code"]),
        (400, &json!("invalid_admin_request"))
    );
    let (status, _) = admin(
        &client,
        reqwest::Method::DELETE,
        &proc.uri,
        "requests",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (_, journal) = admin(&client, reqwest::Method::GET, &proc.uri, "requests", None).await;
    assert_eq!(journal, json!([]));
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_faults_schedule_a_429_with_retry_after_for_the_next_request() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    let fault = json!({
        "fault": {"type": "status", "status": 429, "headers": {"Retry-After": "2"},
                  "body": {"error": {"message": "busy", "type": "rate_limit_error", "code": "concurrency_limit"}}},
        "match": {"model": "m"},
        "times": 1
    });
    let (status, installed) = admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "faults",
        Some(fault),
    )
    .await;
    assert_eq!((status, installed), (200, json!({"installed": 1})));
    let url = format!("{}/v1/chat/completions", proc.uri);
    let first = client
        .post(&url)
        .json(&chat("m", "x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 429);
    assert_eq!(first.headers()["retry-after"], "2");
    let second = client
        .post(&url)
        .json(&chat("m", "x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    let (status, bad) = admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "faults",
        Some(json!({"fault": {"type": "status", "status": 42}})),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(bad["error"]["code"], "invalid_admin_request");
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_gate_holds_requests_and_dispatch_order_follows_priority() {
    let mut proc = Proc::spawn(&["--gate-closed"]).await;
    let client = reqwest::Client::new();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, priority) in ["-10", "0", "10"].into_iter().enumerate() {
        let request = client
            .post(format!("{}/v1/chat/completions", proc.uri))
            .header("x-priority", priority)
            .json(&chat("m", "x", false));
        tasks.spawn(async move { request.send().await.unwrap().status() });
        // Arrival order is fixed by waiting until each request is held.
        let (status, gate) = admin(
            &client,
            reqwest::Method::GET,
            &proc.uri,
            &format!("gate?wait_held={}", i + 1),
            None,
        )
        .await;
        assert_eq!((status, gate["held"].as_u64()), (200, Some(i as u64 + 1)));
    }
    let (_, order) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "dispatch-order",
        None,
    )
    .await;
    assert_eq!(order, json!([]));
    let (status, _) = admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "gate",
        Some(json!({"open": true})),
    )
    .await;
    assert_eq!(status, 200);
    while let Some(done) = tasks.join_next().await {
        assert_eq!(done.unwrap(), 200);
    }
    let (_, order) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "dispatch-order",
        None,
    )
    .await;
    assert_eq!(order, json!([3, 2, 1]));
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_replies_script_a_response_for_a_path() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    let reply = json!({"match": {"path": "/v1/embeddings"}, "reply": {"json": {"scripted": true}, "status": 201}});
    let (status, _) = admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "replies",
        Some(reply),
    )
    .await;
    assert_eq!(status, 200);
    let response = client
        .post(format!("{}/v1/embeddings", proc.uri))
        .json(&json!({"model": "m", "input": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"scripted": true})
    );
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_long_polls_wait_for_requests_and_held_requests_without_client_sleeps() {
    let mut proc = Proc::spawn(&["--gate-closed"]).await;
    let client = reqwest::Client::new();
    let waiting = tokio::spawn({
        let url = format!(
            "{}/__mockswap/requests?wait_for=2&timeout_ms=10000",
            proc.uri
        );
        let client = client.clone();
        async move { client.get(url).send().await.unwrap() }
    });
    let mut calls = tokio::task::JoinSet::new();
    for priority in ["-10", "10"] {
        let request = client
            .post(format!("{}/v1/chat/completions", proc.uri))
            .header("x-priority", priority)
            .json(&chat("m", "x", false));
        calls.spawn(async move { request.send().await.unwrap().status() });
    }
    let journal: Value = waiting.await.unwrap().json().await.unwrap();
    assert_eq!(journal.as_array().unwrap().len(), 2);
    let (status, gate) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "gate?wait_held=2",
        None,
    )
    .await;
    assert_eq!((status, gate["held"].clone()), (200, json!(2)));
    let (status, timeout) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "requests?wait_for=5&timeout_ms=50",
        None,
    )
    .await;
    assert_eq!(status, 408);
    assert_eq!(timeout["error"]["code"], "wait_timeout");
    admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "gate",
        Some(json!({"open": true})),
    )
    .await;
    while let Some(done) = calls.join_next().await {
        assert_eq!(done.unwrap(), 200);
    }
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_websockets_counts_open_and_total_and_waits_for_a_close() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    let ws_url = proc.uri.replacen("http://", "ws://", 1) + "/upstream/m/ws";
    let (mut socket, _) = tokio_tungstenite::connect_async(ws_url).await.unwrap();
    socket.send(Message::text("ping me")).await.unwrap();
    let echoed = socket.next().await.unwrap().unwrap();
    assert_eq!(echoed, Message::text("ping me"));
    let (status, counts) =
        admin(&client, reqwest::Method::GET, &proc.uri, "websockets", None).await;
    assert_eq!((status, counts), (200, json!({"open": 1, "total": 1})));
    let (_, journal) = admin(&client, reqwest::Method::GET, &proc.uri, "requests", None).await;
    assert_eq!(journal[0]["websocket"], true);
    assert_eq!(journal[0]["path"], "/upstream/m/ws");
    assert_eq!(journal[0]["model"], "m");
    socket.close(None).await.unwrap();
    let (status, counts) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "websockets?wait_open=0&timeout_ms=10000",
        None,
    )
    .await;
    assert_eq!((status, counts), (200, json!({"open": 0, "total": 1})));
    let (status, timeout) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "websockets?wait_open=3&timeout_ms=10",
        None,
    )
    .await;
    assert_eq!(
        (status, &timeout["error"]["code"]),
        (408, &json!("wait_timeout"))
    );
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}
