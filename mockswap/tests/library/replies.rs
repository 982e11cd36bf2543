//! Scripted replies: each kind (tool calls, errors, sequences) and each matcher, read
//! with a real HTTP client; and a whole agent loop scripted by conversation state.

use http::StatusCode;
use mockswap::{MockSwap, Reply, ReplyRule, ToolCall};
use serde_json::{Value, json};

use crate::{body_text, chat, client, data_frames, post};

const CHAT: &str = "/v1/chat/completions";

fn with_tools(mut body: Value) -> Value {
    body["tools"] =
        json!([{"type": "function", "function": {"name": "get_time", "parameters": {}}}]);
    body
}

async fn json_of(mock: &MockSwap, path: &str, body: &Value) -> (u16, Value) {
    let response = post(mock, path, body, &[]).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Joins streamed chat tool-call deltas the way an OpenAI client does: by `index`,
/// taking id and name from the first delta and concatenating argument pieces.
fn join_tool_calls(frames: &[String]) -> (Vec<(String, String, String)>, usize, Value) {
    let mut calls: Vec<(String, String, String)> = Vec::new();
    let mut pieces = 0;
    let mut finish = Value::Null;
    for frame in frames.iter().filter(|f| *f != "[DONE]") {
        let chunk: Value = serde_json::from_str(frame).unwrap();
        let choice = &chunk["choices"][0];
        if !choice["finish_reason"].is_null() {
            finish = choice["finish_reason"].clone();
        }
        for delta in choice["delta"]["tool_calls"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let index = usize::try_from(delta["index"].as_u64().unwrap()).unwrap();
            if index == calls.len() {
                calls.push(Default::default());
            }
            let call = &mut calls[index];
            if let Some(id) = delta["id"].as_str() {
                call.0 = id.to_owned();
            }
            if let Some(name) = delta["function"]["name"].as_str() {
                call.1 = name.to_owned();
            }
            if let Some(args) = delta["function"]["arguments"].as_str()
                && !args.is_empty()
            {
                call.2.push_str(args);
                pieces += 1;
            }
        }
    }
    (calls, pieces, finish)
}

#[tokio::test]
async fn tool_call_reply_answers_with_tool_calls_and_finish_reason() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(Reply::tool_call(
            "get_time",
            json!({"timezone": "Europe/Paris"}),
        )))
        .start()
        .await
        .unwrap();
    let (status, body) = json_of(&mock, CHAT, &chat("m", "what time is it", false)).await;
    assert_eq!(status, 200);
    let choice = &body["choices"][0];
    assert_eq!(choice["finish_reason"], "tool_calls");
    assert_eq!(choice["message"]["content"], Value::Null);
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert_eq!(call["id"], "call_mockswap_1_0");
    assert_eq!(call["function"]["name"], "get_time");
    let args: Value =
        serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(args, json!({"timezone": "Europe/Paris"}));
}

#[tokio::test]
async fn streamed_tool_call_splits_its_arguments_across_several_deltas() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(Reply::tool_calls([
            ToolCall::new("get_time", json!({"timezone": "Europe/Paris"})).id("call_a"),
            ToolCall::new("get_weather", json!({"city": "Paris", "unit": "C"})),
        ])))
        .start()
        .await
        .unwrap();
    let text = body_text(post(&mock, CHAT, &chat("m", "x", true), &[]).await)
        .await
        .unwrap();
    let frames = data_frames(&text);
    let (calls, pieces, finish) = join_tool_calls(&frames);
    assert_eq!(finish, "tool_calls");
    assert!(
        pieces >= 4,
        "{pieces} argument deltas for two calls:\n{text}"
    );
    assert_eq!(calls.len(), 2);
    assert_eq!(
        (calls[0].0.as_str(), calls[0].1.as_str()),
        ("call_a", "get_time")
    );
    assert_eq!(calls[1].0, "call_mockswap_1_1");
    let args: Value = serde_json::from_str(&calls[1].2).unwrap();
    assert_eq!(args, json!({"city": "Paris", "unit": "C"}));
    assert_eq!(frames.last().unwrap(), "[DONE]");
}

#[tokio::test]
async fn tool_call_with_content_sends_both() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(
            Reply::tool_call("lookup", json!({})).with_content("Let me look."),
        ))
        .start()
        .await
        .unwrap();
    let (_, body) = json_of(&mock, CHAT, &chat("m", "x", false)).await;
    assert_eq!(body["choices"][0]["message"]["content"], "Let me look.");
    assert_eq!(
        body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{}"
    );
}

#[tokio::test]
async fn error_reply_sends_the_envelope_with_its_status_type_and_code() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(
            Reply::error(StatusCode::TOO_MANY_REQUESTS, "slow down")
                .error_code("concurrency_limit")
                .header("retry-after", "0"),
        ))
        .start()
        .await
        .unwrap();
    let response = post(&mock, CHAT, &chat("m", "x", true), &[]).await;
    assert_eq!(response.status(), 429);
    assert_eq!(response.headers()["retry-after"], "0");
    let body: Value = response.json().await.unwrap();
    assert_eq!(
        body,
        json!({"error": {"message": "slow down", "type": "rate_limit_error", "code": "concurrency_limit"}})
    );
}

#[tokio::test]
async fn error_reply_on_messages_uses_anthropics_error_shape() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(Reply::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "down",
        )))
        .start()
        .await
        .unwrap();
    let (status, body) = json_of(&mock, "/v1/messages", &chat("claude", "x", false)).await;
    assert_eq!(status, 503);
    assert_eq!(
        body,
        json!({"type": "error", "error": {"type": "api_error", "message": "down"}})
    );
}

#[tokio::test]
async fn sequence_answers_a_tool_call_then_text_then_steps_aside() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(Reply::sequence([
            Reply::tool_call("get_time", json!({})),
            Reply::text("It is noon."),
        ])))
        .start()
        .await
        .unwrap();
    let (_, first) = json_of(&mock, CHAT, &chat("m", "time?", false)).await;
    assert_eq!(first["choices"][0]["finish_reason"], "tool_calls");
    let (_, second) = json_of(&mock, CHAT, &chat("m", "time?", false)).await;
    assert_eq!(second["choices"][0]["message"]["content"], "It is noon.");
    let (_, third) = json_of(&mock, CHAT, &chat("m", "time?", false)).await;
    assert_eq!(third["choices"][0]["message"]["content"], "[m] time?");
}

#[tokio::test]
async fn sequence_with_more_uses_repeats_its_last_reply() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(Reply::sequence([Reply::text("a"), Reply::text("b")])).times(3))
        .start()
        .await
        .unwrap();
    let mut seen = Vec::new();
    for _ in 0..4 {
        let (_, body) = json_of(&mock, CHAT, &chat("m", "x", false)).await;
        seen.push(
            body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(seen, ["a", "b", "b", "[m] x"]);
}

#[tokio::test]
async fn replies_match_on_last_message_role_tools_body_priority_header_and_closures() {
    let mock = MockSwap::builder()
        .reply(ReplyRule::new(Reply::text("tool turn")).last_message_role("tool"))
        .reply(ReplyRule::new(Reply::text("offered tools")).has_tools(true))
        .reply(ReplyRule::new(Reply::text("json subset")).body_contains(json!({"temperature": 0})))
        .reply(ReplyRule::new(Reply::text("elevated")).priority(10))
        .reply(ReplyRule::new(Reply::text("tenant a")).header("x-tenant", "a"))
        .reply(ReplyRule::new(Reply::text("long prompt")).when(|r| r.body.len() > 300))
        .start()
        .await
        .unwrap();
    let answer = |body: Value, headers: Vec<(&'static str, &'static str)>| {
        let mock = &mock;
        async move {
            let mut request = client().post(format!("{}{CHAT}", mock.uri())).json(&body);
            for (name, value) in headers {
                request = request.header(name, value);
            }
            let body: Value = request.send().await.unwrap().json().await.unwrap();
            body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    };
    let mut tool_turn = chat("m", "x", false);
    tool_turn["messages"]
        .as_array_mut()
        .unwrap()
        .push(json!({"role": "tool", "tool_call_id": "c", "content": "12:00"}));
    assert_eq!(answer(tool_turn, vec![]).await, "tool turn");
    assert_eq!(
        answer(with_tools(chat("m", "x", false)), vec![]).await,
        "offered tools"
    );
    let mut cold = chat("m", "x", false);
    cold["temperature"] = json!(0);
    assert_eq!(answer(cold, vec![]).await, "json subset");
    assert_eq!(
        answer(chat("m", "x", false), vec![("x-priority", "10")]).await,
        "elevated"
    );
    assert_eq!(
        answer(chat("m", "x", false), vec![("x-tenant", "a")]).await,
        "tenant a"
    );
    assert_eq!(
        answer(chat("m", &"word ".repeat(80), false), vec![]).await,
        "long prompt"
    );
    assert_eq!(answer(chat("m", "plain", false), vec![]).await, "[m] plain");
}

#[tokio::test]
async fn anthropic_messages_carry_tool_use_blocks_whole_and_streamed() {
    let mock = MockSwap::builder()
        .reply(
            ReplyRule::new(Reply::tool_call("get_time", json!({"tz": "UTC"}))).path("/v1/messages"),
        )
        .start()
        .await
        .unwrap();
    let (_, message) = json_of(&mock, "/v1/messages", &chat("claude", "x", false)).await;
    assert_eq!(message["stop_reason"], "tool_use");
    assert_eq!(
        message["content"],
        json!([{"type": "tool_use", "id": "toolu_mockswap_1_0", "name": "get_time", "input": {"tz": "UTC"}}])
    );
    let text = body_text(post(&mock, "/v1/messages", &chat("claude", "x", true), &[]).await)
        .await
        .unwrap();
    let mut partial = String::new();
    let mut events = Vec::new();
    for frame in text.split("\n\n").filter(|f| !f.is_empty()) {
        let event = frame
            .lines()
            .find_map(|l| l.strip_prefix("event: "))
            .unwrap();
        let data: Value = serde_json::from_str(
            frame
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(data["type"], event, "{frame}");
        if data["delta"]["type"] == "input_json_delta" {
            partial.push_str(data["delta"]["partial_json"].as_str().unwrap());
        }
        events.push(event.to_owned());
    }
    assert_eq!(
        events
            .iter()
            .filter(|e| *e == "content_block_delta")
            .count(),
        3,
        "{text}"
    );
    assert_eq!(
        serde_json::from_str::<Value>(&partial).unwrap(),
        json!({"tz": "UTC"})
    );
    assert!(text.contains(r#""stop_reason":"tool_use""#), "{text}");
    assert_eq!(events.first().unwrap(), "message_start");
    assert_eq!(events.last().unwrap(), "message_stop");
}

/// An agent loop scripted by conversation state, not by call count: the model calls a
/// tool while the last message is the user's, and answers once the tool result is in.
#[tokio::test]
async fn scripted_tool_loop_runs_an_agent_turn_end_to_end() {
    let mock = MockSwap::builder()
        .reply(
            ReplyRule::new(Reply::tool_call("get_time", json!({"timezone": "UTC"})))
                .has_tools(true)
                .last_message_role("user"),
        )
        .reply(ReplyRule::new(Reply::text("It is 12:00 UTC.")).last_message_role("tool"))
        .start()
        .await
        .unwrap();
    let mut body = with_tools(chat("m", "What time is it?", true));
    let mut turns = 0;
    let answer = loop {
        turns += 1;
        assert!(turns <= 3, "the loop did not end");
        let text = body_text(post(&mock, CHAT, &body, &["-10"]).await)
            .await
            .unwrap();
        let frames = data_frames(&text);
        let (calls, _, finish) = join_tool_calls(&frames);
        if finish == "tool_calls" {
            let messages = body["messages"].as_array_mut().unwrap();
            let (id, name, arguments) = calls[0].clone();
            assert_eq!(name, "get_time");
            assert_eq!(
                serde_json::from_str::<Value>(&arguments).unwrap()["timezone"],
                "UTC"
            );
            messages.push(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}
            ]}));
            messages.push(json!({"role": "tool", "tool_call_id": id, "content": "12:00"}));
            continue;
        }
        break frames
            .iter()
            .filter(|f| *f != "[DONE]")
            .filter_map(|f| {
                serde_json::from_str::<Value>(f).unwrap()["choices"][0]["delta"]["content"]
                    .as_str()
                    .map(str::to_owned)
            })
            .collect::<String>();
    };
    assert_eq!(answer, "It is 12:00 UTC.");
    assert_eq!(turns, 2);
    mock.assert_priorities([Some(-10), Some(-10)]);
}
