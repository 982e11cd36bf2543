//! `POST /__mockswap/replies` with body matchers, tool calls, errors and sequences.

use nix::sys::signal::Signal;
use serde_json::{Value, json};

use crate::support::{Proc, chat};
use crate::{admin, chat_call};

#[tokio::test]
async fn admin_replies_script_tool_calls_by_conversation_state_and_tools_offered() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    let rules = json!([
        {"match": {"last_message_role": "tool"}, "reply": {"content": "It is noon."}},
        {"match": {"has_tools": true, "model": "m"},
         "reply": {"tool_calls": [{"name": "get_time", "arguments": {"tz": "UTC"}}]}},
        {"match": {"body_contains": {"temperature": 0}}, "reply": {"content": "cold"}},
        {"match": {"priority": "absent", "header": {"x-tenant": "b"}}, "reply": {"text": "tenant b"}}
    ]);
    let (status, installed) = admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "replies",
        Some(rules),
    )
    .await;
    assert_eq!((status, installed), (200, json!({"installed": 4})));

    let mut body = chat("m", "time?", false);
    body["tools"] = json!([{"type": "function", "function": {"name": "get_time"}}]);
    let (_, first) = chat_call(&client, &proc.uri, &body, &[]).await;
    let call = &first["choices"][0]["message"]["tool_calls"][0];
    assert_eq!(call["function"]["name"], "get_time");
    assert_eq!(call["function"]["arguments"], r#"{"tz":"UTC"}"#);
    assert_eq!(first["choices"][0]["finish_reason"], "tool_calls");

    body["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "tool", "tool_call_id": "c", "content": "12:00"}));
    let (_, second) = chat_call(&client, &proc.uri, &body, &[]).await;
    assert_eq!(second["choices"][0]["message"]["content"], "It is noon.");

    let mut cold = chat("other", "x", false);
    cold["temperature"] = json!(0);
    let (_, cold) = chat_call(&client, &proc.uri, &cold, &[]).await;
    assert_eq!(cold["choices"][0]["message"]["content"], "cold");

    let plain = chat("other", "x", false);
    let (_, tenant) = chat_call(&client, &proc.uri, &plain, &[("x-tenant", "b")]).await;
    assert_eq!(tenant["choices"][0]["message"]["content"], "tenant b");
    let (_, elevated) = chat_call(
        &client,
        &proc.uri,
        &plain,
        &[("x-tenant", "b"), ("x-priority", "10")],
    )
    .await;
    assert_eq!(elevated["choices"][0]["message"]["content"], "[other] x");
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_replies_script_an_error_then_a_sequence() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    let rules = json!([
        {"match": {"model": "busy"}, "times": 1, "reply": {"status": 429, "headers": {"retry-after": "0"},
         "error": {"message": "busy", "code": "concurrency_limit"}}},
        {"match": {"model": "busy"}, "reply": {"sequence": [
            {"tool_calls": [{"name": "a"}]},
            {"content": "done"}
        ]}}
    ]);
    let (status, _) = admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "replies",
        Some(rules),
    )
    .await;
    assert_eq!(status, 200);
    let body = chat("busy", "x", false);
    let (status, error) = chat_call(&client, &proc.uri, &body, &[]).await;
    assert_eq!(status, 429);
    assert_eq!(
        error,
        json!({"error": {"message": "busy", "type": "rate_limit_error", "code": "concurrency_limit"}})
    );
    let (_, first) = chat_call(&client, &proc.uri, &body, &[]).await;
    assert_eq!(
        first["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{}"
    );
    let (_, second) = chat_call(&client, &proc.uri, &body, &[]).await;
    assert_eq!(second["choices"][0]["message"]["content"], "done");
    let (_, third) = chat_call(&client, &proc.uri, &body, &[]).await;
    assert_eq!(third["choices"][0]["message"]["content"], "[busy] x");
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_replies_refuse_ambiguous_kinds_and_unknown_priority_words() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    for bad in [
        json!({"reply": {"content": "a", "json": {}}}),
        json!({"reply": {"text": "a", "content": "b"}}),
        json!({"match": {"priority": "high"}, "reply": {"content": "a"}}),
        json!({"match": {"colour": "red"}, "reply": {"content": "a"}}),
    ] {
        let (status, body): (u16, Value) = admin(
            &client,
            reqwest::Method::POST,
            &proc.uri,
            "replies",
            Some(bad.clone()),
        )
        .await;
        assert_eq!(status, 400, "{bad}");
        assert_eq!(body["error"]["code"], "invalid_admin_request", "{bad}");
    }
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}
