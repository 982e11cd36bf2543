//! `POST/GET /__mockswap/expectations`, `GET /__mockswap/verify` and
//! `POST /__mockswap/reset`, as a shell test would use them.

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::support::{Proc, chat};
use crate::{admin, chat_call};

async fn expect(client: &reqwest::Client, uri: &str, body: Value) -> u64 {
    let (status, created) = admin(
        client,
        reqwest::Method::POST,
        uri,
        "expectations",
        Some(body.clone()),
    )
    .await;
    assert_eq!(status, 201, "{body} -> {created}");
    created["id"].as_u64().unwrap()
}

#[tokio::test]
async fn admin_expectations_are_listed_with_counts_and_verify_reports_the_unmet_ones() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    // A startup call before the expectations does not count for them.
    client
        .get(format!("{}/v1/models", proc.uri))
        .send()
        .await
        .unwrap();
    let elevated = expect(
        &client,
        &proc.uri,
        json!({"name": "chat is Elevated", "method": "POST", "path": "/v1/chat/completions",
               "model": "qwen", "priority": 10, "times": 1}),
    )
    .await;
    let absent = expect(
        &client,
        &proc.uri,
        json!({"priority": "absent", "times": 1}),
    )
    .await;
    assert_eq!((elevated, absent), (1, 2));
    chat_call(&client, &proc.uri, &chat("qwen", "hi", false), &[]).await;

    let (status, listed) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "expectations",
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(listed[0]["id"], 1);
    assert_eq!(listed[0]["name"], "chat is Elevated");
    assert_eq!(listed[0]["received"], 0);
    assert_eq!(listed[0]["ok"], false);
    assert_eq!(listed[0]["times"], json!({"min": 1, "max": 1}));
    assert_eq!(listed[1]["received"], 1);
    assert_eq!(listed[1]["ok"], true);

    let (status, verdict) = admin(&client, reqwest::Method::GET, &proc.uri, "verify", None).await;
    assert_eq!(status, 409);
    assert_eq!(verdict["ok"], false);
    let failures = verdict["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1);
    let failure = &failures[0];
    assert_eq!(failure["id"], 1);
    assert_eq!(failure["expected"], "exactly 1");
    assert_eq!(failure["received"], 0);
    assert_eq!(
        failure["match"],
        r#"POST /v1/chat/completions, model "qwen", X-Priority 10"#
    );
    let nearest = &failure["nearest"][0];
    assert_eq!(nearest["seq"], 2);
    assert_eq!(
        nearest["mismatches"],
        json!(["X-Priority: wanted 10, got absent"])
    );
    assert!(nearest["body"].as_str().unwrap().contains("\"hi\""));
    assert!(
        verdict["report"]
            .as_str()
            .unwrap()
            .contains("nearest requests:")
    );

    chat_call(
        &client,
        &proc.uri,
        &chat("qwen", "hi", false),
        &[("x-priority", "10")],
    )
    .await;
    let (status, verdict) = admin(&client, reqwest::Method::GET, &proc.uri, "verify", None).await;
    assert_eq!((status, verdict), (200, json!({"ok": true})));

    let (status, _) = admin(
        &client,
        reqwest::Method::DELETE,
        &proc.uri,
        "expectations",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (_, listed) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "expectations",
        None,
    )
    .await;
    assert_eq!(listed, json!([]));
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_expectations_take_every_matcher() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    let expectations = [
        json!({"method": "GET", "path": "/v1/models", "times": 1}),
        json!({"path": "/v1/chat/completions", "model": "up", "times": 1}),
        json!({"model": "m", "stream": true, "times": 1}),
        json!({"priority": "invalid", "times": 1}),
        json!({"priority": "duplicated", "times": 1}),
        json!({"priority": -10, "times": 1}),
        json!({"header": {"x-tenant": "a"}, "times": 1}),
        json!({"method": "POST", "header": {"x-tenant": null}, "times": {"min": 2, "max": 3}}),
        json!({"query": {"trace": "on"}, "times": 1}),
        json!({"body_contains": {"temperature": 0}, "times": 1}),
        json!({"body_json": {"model": "m", "input": "exact"}, "times": 1}),
        json!({"body_text_contains": "needle", "times": 1}),
        json!({"last_message_role": "tool", "times": 1}),
        json!({"has_tools": true, "times": 1}),
        json!({"stream": false, "times": {"min": 4}}),
    ];
    for body in expectations {
        expect(&client, &proc.uri, body).await;
    }
    let url = |path: &str| format!("{}{path}", proc.uri);
    client
        .get(url("/v1/models"))
        .header("x-priority", "-10")
        .send()
        .await
        .unwrap();
    let mut cold = chat("m", "needle", true);
    cold["temperature"] = json!(0);
    client
        .post(url("/v1/chat/completions?trace=on"))
        .header("x-priority", "high")
        .header("x-tenant", "a")
        .json(&cold)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let mut tool_turn = chat("m", "x", false);
    tool_turn["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "tool", "content": "1"}));
    tool_turn["tools"] = json!([{"type": "function", "function": {"name": "f"}}]);
    client
        .post(url("/v1/chat/completions"))
        .header("x-priority", "1, 2")
        .header("x-tenant", "b")
        .json(&tool_turn)
        .send()
        .await
        .unwrap();
    client
        .post(url("/upstream/up/v1/chat/completions"))
        .json(&chat("x", "x", false))
        .send()
        .await
        .unwrap();
    client
        .post(url("/v1/embeddings"))
        .json(&json!({"model": "m", "input": "exact"}))
        .send()
        .await
        .unwrap();
    let (status, verdict) = admin(&client, reqwest::Method::GET, &proc.uri, "verify", None).await;
    assert_eq!((status, &verdict["ok"]), (200, &json!(true)), "{verdict:#}");
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_expectations_refuse_a_missing_times_and_unknown_fields() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    for bad in [
        json!({"path": "/v1/chat/completions"}),
        json!({"times": "twice"}),
        json!({"times": 1, "priority": "high"}),
        json!({"times": 1, "colour": "red"}),
    ] {
        let (status, body) = admin(
            &client,
            reqwest::Method::POST,
            &proc.uri,
            "expectations",
            Some(bad.clone()),
        )
        .await;
        assert_eq!(status, 400, "{bad}");
        assert_eq!(body["error"]["code"], "invalid_admin_request", "{bad}");
    }
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_reset_clears_everything_and_opens_the_gate_in_one_call() {
    let mut proc = Proc::spawn(&["--gate-closed"]).await;
    let client = reqwest::Client::new();
    let post = |path: &'static str, body: Value| {
        let client = &client;
        let uri = &proc.uri;
        async move { admin(client, reqwest::Method::POST, uri, path, Some(body)).await }
    };
    post("faults", json!({"fault": {"type": "hang"}, "always": true})).await;
    post("replies", json!({"reply": {"content": "scripted"}})).await;
    post("expectations", json!({"times": 7})).await;
    client
        .get(format!("{}/v1/models", proc.uri))
        .send()
        .await
        .unwrap();

    let (status, body) = post("reset", json!({})).await;
    assert_eq!((status, body), (200, json!({"reset": true})));

    let (_, journal) = admin(&client, reqwest::Method::GET, &proc.uri, "requests", None).await;
    assert_eq!(journal, json!([]));
    let (_, gate) = admin(&client, reqwest::Method::GET, &proc.uri, "gate", None).await;
    assert_eq!(gate["open"], true);
    let (status, answer) = chat_call(&client, &proc.uri, &chat("m", "x", false), &[]).await;
    assert_eq!(status, 200);
    assert_eq!(answer["choices"][0]["message"]["content"], "[m] x");
    let (status, verdict) = admin(&client, reqwest::Method::GET, &proc.uri, "verify", None).await;
    assert_eq!((status, verdict), (200, json!({"ok": true})));
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_anthropic_messages_are_served_journaled_and_counted() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    expect(
        &client,
        &proc.uri,
        json!({"method": "POST", "path": "/v1/messages", "model": "claude", "priority": 10, "times": 2}),
    )
    .await;
    let body = |stream: bool| {
        json!({"model": "claude", "max_tokens": 16, "stream": stream,
               "messages": [{"role": "user", "content": "hello"}]})
    };
    let message: Value = client
        .post(format!("{}/v1/messages", proc.uri))
        .header("x-priority", "10")
        .json(&body(false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(message["type"], "message");
    assert_eq!(
        message["content"][0],
        json!({"type": "text", "text": "[claude] hello"})
    );
    let events = client
        .post(format!("{}/v1/messages", proc.uri))
        .header("x-priority", "10")
        .json(&body(true))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(events.starts_with("event: message_start\n"), "{events}");
    assert!(events.contains("event: content_block_delta\n"), "{events}");
    assert!(
        events
            .trim_end()
            .ends_with(r#"data: {"type":"message_stop"}"#),
        "{events}"
    );
    let (_, journal) = admin(&client, reqwest::Method::GET, &proc.uri, "requests", None).await;
    let seen: Vec<(&Value, &Value, &Value)> = journal
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (&e["path"], &e["model"], &e["stream"]))
        .collect();
    assert_eq!(
        seen,
        [
            (&json!("/v1/messages"), &json!("claude"), &json!(false)),
            (&json!("/v1/messages"), &json!("claude"), &json!(true)),
        ]
    );
    let (status, verdict) = admin(&client, reqwest::Method::GET, &proc.uri, "verify", None).await;
    assert_eq!((status, verdict), (200, json!({"ok": true})));
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}
