//! The new request and response types as they travel: what the SDK sends (exact
//! JSON bodies) and what it reads back from a server's answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use futures_util::StreamExt;
use llama_swap_client::{
    CallOptions, ChatEvent, ChatMessage, ChatRequest, Client, CompletionEvent, CompletionRequest,
    ContentPart, DecodeTarget, Error, ImageDetail, JsonSchemaFormat, Priority, ProxyStatus,
    ResponseFormat, Tool, ToolCall, ToolChoice,
};
use serde::Deserialize;
use serde_json::{Value, json};
use wiremock::matchers::{body_json, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn weather_tool() -> Tool {
    Tool::function(
        "get_weather",
        "Current weather for a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    )
}

async fn body_of_only_request(server: &MockServer) -> Value {
    let requests = common::requests(server).await;
    assert_eq!(requests.len(), 1);
    serde_json::from_slice(&requests[0].body).unwrap()
}

#[tokio::test]
async fn tools_tool_choice_and_parallel_calls_are_sent_in_openai_shape() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(common::chat_json()))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let req = ChatRequest::new("demo", vec![ChatMessage::user("Oslo?")])
        .tool(weather_tool().strict(true))
        .tool_choice(ToolChoice::function("get_weather"))
        .parallel_tool_calls(false);
    client.chat(&req, &CallOptions::new()).await.unwrap();
    assert_eq!(
        body_of_only_request(&server).await,
        json!({
            "model": "demo",
            "messages": [{"role": "user", "content": "Oslo?"}],
            "tools": [{"type": "function", "function": {"name": "get_weather",
                "description": "Current weather for a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
                "strict": true}}],
            "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
            "parallel_tool_calls": false
        })
    );
}

#[tokio::test]
async fn tool_calls_in_a_response_parse_into_typed_arguments() {
    #[derive(Deserialize, Debug, PartialEq)]
    struct City {
        city: String,
    }
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "c", "object": "chat.completion", "created": 1, "model": "demo",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null, "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]}}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28,
                "prompt_tokens_details": {"cached_tokens": 16},
                "completion_tokens_details": {"reasoning_tokens": 2}},
            "timings": {"prompt_n": 4, "predicted_n": 8, "predicted_per_second": 41.5},
            "system_fingerprint": "b6000"
        })))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let req = ChatRequest::new("demo", vec![ChatMessage::user("Oslo?")]).tool(weather_tool());
    let resp = client.chat(&req, &CallOptions::new()).await.unwrap();
    let call = &resp.tool_calls()[0];
    assert_eq!(call.name(), "get_weather");
    assert_eq!(
        call.function.parse_arguments::<City>().unwrap(),
        City {
            city: "Oslo".into()
        }
    );
    let usage = resp.usage.as_ref().unwrap();
    assert_eq!(
        usage.prompt_tokens_details.as_ref().unwrap().cached_tokens,
        Some(16)
    );
    assert_eq!(
        usage
            .completion_tokens_details
            .as_ref()
            .unwrap()
            .reasoning_tokens,
        Some(2)
    );
    assert_eq!(
        resp.timings.as_ref().unwrap().predicted_per_second,
        Some(41.5)
    );
    assert_eq!(resp.extra["system_fingerprint"], "b6000");
    assert_eq!(resp.choices[0].extra["logprobs"], Value::Null);
}

#[tokio::test]
async fn history_rebuilt_from_constructors_goes_out_without_old_reasoning() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(common::chat_json()))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let history = vec![
        ChatMessage::system("Be brief."),
        ChatMessage::user("Weather in Oslo?"),
        ChatMessage::assistant_tool_calls([ToolCall::function(
            "call_1",
            "get_weather",
            r#"{"city":"Oslo"}"#,
        )])
        .with_reasoning("the user wants weather"),
        ChatMessage::tool_json("call_1", &json!({"celsius": 4})).unwrap(),
    ];
    let req = ChatRequest::new("demo", history).tool(weather_tool());
    client.chat(&req, &CallOptions::new()).await.unwrap();
    let sent = body_of_only_request(&server).await;
    assert_eq!(
        sent["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
            {"role": "tool", "content": "{\"celsius\":4}", "tool_call_id": "call_1"}
        ])
    );
}

#[tokio::test]
async fn reasoning_is_resent_only_when_asked() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(common::chat_json()))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let history = vec![
        ChatMessage::user("q"),
        ChatMessage::assistant("a").with_reasoning("because"),
    ];
    let req = ChatRequest::new("demo", history).with_reasoning_resent(true);
    client.chat(&req, &CallOptions::new()).await.unwrap();
    assert_eq!(
        body_of_only_request(&server).await["messages"][1]["reasoning_content"],
        "because"
    );
}

#[derive(Deserialize, Debug, PartialEq)]
struct Verdict {
    ok: bool,
    reason: String,
}

#[tokio::test]
async fn json_schema_response_format_is_sent_and_the_answer_parses_into_a_type() {
    let server = MockServer::start().await;
    let answer = |content: &str| {
        json!({"id": "c", "object": "chat.completion", "model": "demo",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": content}}]})
    };
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(answer(r#"{"ok": true, "reason": "fine"}"#)),
        )
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(answer(r#"{"ok": "maybe"}"#)))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}, "reason": {"type": "string"}},
        "required": ["ok", "reason"]});
    let req = ChatRequest::new("demo", vec![ChatMessage::user("Is it fine?")]).response_format(
        ResponseFormat::json_schema(JsonSchemaFormat::new("verdict", schema.clone()).strict(true)),
    );
    let resp = client.chat(&req, &CallOptions::new()).await.unwrap();
    assert_eq!(
        resp.parse::<Verdict>().unwrap(),
        Verdict {
            ok: true,
            reason: "fine".into()
        }
    );
    let sent: Value = serde_json::from_slice(&common::requests(&server).await[0].body).unwrap();
    assert_eq!(
        sent["response_format"],
        json!({"type": "json_schema", "json_schema": {"name": "verdict", "schema": schema, "strict": true}})
    );
    let mismatch = client.chat(&req, &CallOptions::new()).await.unwrap();
    match mismatch.parse::<Verdict>() {
        Err(Error::Decode { what, raw, .. }) => {
            assert_eq!(what, DecodeTarget::StructuredOutput);
            assert_eq!(raw, r#"{"ok": "maybe"}"#);
        }
        other => panic!("expected a typed decode error, got {other:?}"),
    }
}

#[tokio::test]
async fn multimodal_parts_are_sent_typed_and_unknown_parts_pass_through() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(common::chat_json()))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let video: ContentPart =
        serde_json::from_value(json!({"type": "video_url", "video_url": {"url": "v.mp4"}}))
            .unwrap();
    let req = ChatRequest::new(
        "demo",
        vec![ChatMessage::user_parts([
            ContentPart::text("Describe these."),
            ContentPart::image_url("data:image/png;base64,AAAA").with_detail(ImageDetail::High),
            ContentPart::input_audio("UklGRg==", "wav"),
            video,
        ])],
    );
    client.chat(&req, &CallOptions::new()).await.unwrap();
    assert_eq!(
        body_of_only_request(&server).await["messages"][0]["content"],
        json!([
            {"type": "text", "text": "Describe these."},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "high"}},
            {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
            {"type": "video_url", "video_url": {"url": "v.mp4"}}
        ])
    );
}

#[tokio::test]
async fn streamed_tool_call_over_http_yields_semantic_events_with_parsed_arguments() {
    let body = concat!(
        "data: {\"id\":\"llamaswap-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"Queue position: #2\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"queued\",\"position\":2,\"model\":\"demo\"}}\n\n",
        "data: {\"id\":\"c\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"tool_calls\":[{\"index\":0,\"id\":\"call_7\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"id\":\"c\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"city\\\":\"}}]}}]}\n\n",
        "data: {\"id\":\"c\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"\\\"Oslo\\\"}\"}}]}}]}\n\n",
        "data: {\"id\":\"c\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n",
    );
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let req = ChatRequest::new("demo", vec![ChatMessage::user("Oslo?")]).tool(weather_tool());
    let mut events = client
        .chat_stream(&req, &CallOptions::with_priority(Priority::Elevated))
        .await
        .unwrap()
        .events();
    let mut got = Vec::new();
    while let Some(event) = events.next().await {
        got.push(event.unwrap());
    }
    assert!(
        matches!(&got[0], ChatEvent::Proxy(p) if p.status == ProxyStatus::Queued { position: 2 })
    );
    assert!(matches!(&got[1], ChatEvent::Started { id, model } if id == "c" && model == "demo"));
    let deltas: Vec<&str> = got
        .iter()
        .filter_map(|e| match e {
            ChatEvent::ToolCallArgumentsDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, ["{\"city\":", "\"Oslo\"}"]);
    let finished = got
        .iter()
        .find_map(|e| match e {
            ChatEvent::ToolCallFinished {
                call, arguments, ..
            } => Some((call, arguments)),
            _ => None,
        })
        .unwrap();
    assert_eq!(finished.0.id, "call_7");
    assert_eq!(finished.1, &Some(json!({"city": "Oslo"})));
    assert!(matches!(got.last(), Some(ChatEvent::Done { .. })));
    assert_eq!(events.response().tool_calls()[0].name(), "get_weather");
    let sent = &common::requests(&server).await[0];
    assert_eq!(common::priority_values(sent), ["10"]);
}

#[tokio::test]
async fn streaming_completions_carry_priority_and_collect_the_text() {
    let body = concat!(
        "data: {\"id\":\"llamaswap-2\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"llama-swap loading model: demo\"},\"finish_reason\":null}],\"llamaswap\":{\"status\":\"loading\",\"model\":\"demo\"}}\n\n",
        "data: {\"id\":\"t\",\"object\":\"text_completion\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"text\":\"Once \",\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"t\",\"object\":\"text_completion\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"text\":\"upon\",\"finish_reason\":\"length\"}],\"timings\":{\"predicted_n\":2}}\n\n",
        "data: [DONE]\n\n",
    );
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/completions"))
        .and(body_json(
            json!({"model": "demo", "prompt": "Tell", "max_tokens": 2, "stream": true}),
        ))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let req = CompletionRequest::new("demo", "Tell").max_tokens(2);
    let mut stream = client
        .completions_stream(&req, &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(matches!(first, CompletionEvent::Proxy(p) if p.status == ProxyStatus::Loading));
    let resp = stream.collect().await.unwrap();
    assert_eq!(resp.text(), "Once upon");
    assert_eq!(
        resp.choices[0].finish_reason,
        Some(llama_swap_client::FinishReason::Length)
    );
    assert_eq!(resp.timings.unwrap().predicted_n, Some(2));
    let sent = &common::requests(&server).await[0];
    assert_eq!(common::priority_values(sent), ["-10"]);
    assert_eq!(sent.headers["accept"], "text/event-stream");
}

#[tokio::test]
async fn truncated_completion_stream_is_an_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            "data: {\"choices\":[{\"index\":0,\"text\":\"par\"}]}\n\n",
            "text/event-stream",
        ))
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let err = client
        .completions_stream(&CompletionRequest::new("demo", "x"), &CallOptions::new())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Truncated { chunks: 1 }), "{err:?}");
}
