//! Anthropic `/v1/messages` through the proxy: plain and streaming, with priority.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use futures_util::StreamExt;
use llama_swap_client::anthropic::{
    ContentBlock, Message, MessagesEvent, MessagesRequest, StopReason, Tool, ToolChoice,
};
use llama_swap_client::{CallOptions, Client, Error, Priority, ProxyStatus};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn request() -> MessagesRequest {
    MessagesRequest::new("claude-local", 128, vec![Message::user("What time is it?")])
        .system("Be brief.")
        .tool(Tool::new(
            "now",
            "The current time",
            json!({"type": "object", "properties": {}}),
        ))
        .tool_choice(ToolChoice::Auto)
}

#[tokio::test]
async fn messages_call_sends_priority_version_and_body_and_reads_blocks() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-local",
            "content": [{"type": "thinking", "thinking": "clock", "signature": "s"},
                        {"type": "tool_use", "id": "tu_1", "name": "now", "input": {}}],
            "stop_reason": "tool_use", "stop_sequence": null,
            "usage": {"input_tokens": 12, "output_tokens": 3}
        })))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let resp = client
        .messages(&request(), &CallOptions::with_priority(Priority::Elevated))
        .await
        .unwrap();
    assert_eq!(resp.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(resp.tool_uses(), vec![("tu_1", "now", &json!({}))]);
    assert!(
        matches!(&resp.content[0], ContentBlock::Thinking { signature: Some(s), .. } if s == "s")
    );
    let sent = &common::requests(&server).await[0];
    assert_eq!(common::priority_values(sent), ["10"]);
    assert_eq!(sent.headers["anthropic-version"], "2023-06-01");
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["max_tokens"], 128);
    assert_eq!(body["system"], "Be brief.");
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    assert!(body.get("stream").is_none());
}

#[tokio::test]
async fn a_callers_anthropic_version_is_kept() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"type": "message", "content": []})),
        )
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    client
        .messages(
            &request(),
            &CallOptions::new().header("Anthropic-Version", "2024-01-01"),
        )
        .await
        .unwrap();
    let sent = &common::requests(&server).await[0];
    let versions: Vec<_> = sent.headers.get_all("anthropic-version").iter().collect();
    assert_eq!(versions, ["2024-01-01"]);
    assert!(sent.headers.get("x-priority").is_none());
}

const STREAM: &str = concat!(
    "data: {\"id\":\"llamaswap-3\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"claude-local\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Queue position: #1\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"queued\",\"position\":1}}\n\n",
    "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_2\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-local\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":12,\"output_tokens\":1}}}\n\n",
    "event: ping\ndata: {\"type\":\"ping\"}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Checking \"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"the clock.\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
    "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"tu_2\",\"name\":\"now\",\"input\":{}}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"tz\\\":\"}}\n\n",
    "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"\\\"UTC\\\"}\"}}\n\n",
    "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
    "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":9}}\n\n",
    "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
);

#[tokio::test]
async fn streamed_message_yields_named_events_and_collects_tool_input() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(STREAM, "text/event-stream"))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let mut stream = client
        .messages_stream(&request(), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(
        matches!(&first, MessagesEvent::Proxy(p) if p.status == ProxyStatus::Queued { position: 1 })
    );
    // collect() assembles from the events still to come: the proxy event was the
    // only one taken.
    let message = stream.collect().await.unwrap();
    assert_eq!(message.id, "msg_2");
    assert_eq!(message.text(), "Checking the clock.");
    assert_eq!(
        message.tool_uses(),
        vec![("tu_2", "now", &json!({"tz": "UTC"}))]
    );
    assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(
        (message.usage.input_tokens, message.usage.output_tokens),
        (12, 9)
    );
    let sent = &common::requests(&server).await[0];
    assert_eq!(common::priority_values(sent), ["-10"]);
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["stream"], true);
}

#[tokio::test]
async fn error_event_and_missing_message_stop_are_errors() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n",
            "text/event-stream",
        ))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"content\":[]}}\n\n",
            "text/event-stream",
        ))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let err = client
        .messages_stream(&request(), &CallOptions::new())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    match &err {
        Error::InStream(frame) => {
            assert_eq!(frame.envelope.message, "Overloaded");
            assert_eq!(frame.envelope.kind.as_deref(), Some("overloaded_error"));
        }
        other => panic!("expected an in-stream error, got {other:?}"),
    }
    let err = client
        .messages_stream(&request(), &CallOptions::new())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Truncated { chunks: 1 }), "{err:?}");
}
