//! The fake and the decorators as an agent runtime would use them: through
//! `dyn ChatProvider`, with per-call priorities.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc;
use llama_swap_client::{
    ApiError, CallOptions, ChatChunk, ChatDelta, ChatEvent, ChatMessage, ChatProvider, ChatRequest,
    Client, EmbeddingsRequest, Error, ErrorEnvelope, FinishReason, Priority, ProxyEvent,
    ProxyStatus, RetryPolicy, Role, StreamEvent, Tool, ToolCallDelta,
};
use llama_swap_provider_fakes::{FakeProvider, FakeReply, FallbackProvider, LoggingProvider};
use serde_json::json;
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

const LIMIT: Duration = Duration::from_secs(20);

fn clock() -> Tool {
    Tool::function(
        "current_time",
        "The time",
        json!({"type": "object", "properties": {}}),
    )
}

/// A minimal agent loop written only against the trait: stream a turn, run the
/// tools it finished, answer with their results, until the model stops calling.
async fn agent_turns(
    provider: &dyn ChatProvider,
    prompt: &str,
    priority: Priority,
) -> Result<(String, Vec<String>), Error> {
    let opts = CallOptions::with_priority(priority);
    let mut history = vec![ChatMessage::user(prompt)];
    let mut tools_run = Vec::new();
    for _ in 0..4 {
        let request = ChatRequest::new("demo", history.clone()).tool(clock());
        let mut events = provider.chat_stream(&request, &opts).await?.events();
        let mut calls = Vec::new();
        while let Some(event) = events.next().await {
            if let ChatEvent::ToolCallFinished { call, .. } = event? {
                calls.push(call);
            }
        }
        if calls.is_empty() {
            return Ok((events.response().text(), tools_run));
        }
        history.push(ChatMessage::assistant_tool_calls(calls.clone()));
        for call in calls {
            tools_run.push(call.function.name.clone());
            history.push(ChatMessage::tool(call.id.as_str(), "12:00"));
        }
    }
    Ok(("(turn limit)".to_owned(), tools_run))
}

#[tokio::test]
async fn an_agent_loop_runs_against_the_in_process_fake() {
    let fake = FakeProvider::new(["demo"]);
    fake.push(FakeReply::Events(vec![
        Ok(ChatEvent::Proxy(ProxyEvent::new(ProxyStatus::Queued {
            position: 1,
        }))),
        Ok(ChatEvent::text("Checking. ")),
        Ok(ChatEvent::tool_call(0, "call_1", "current_time", json!({}))),
        Ok(ChatEvent::done(FinishReason::ToolCalls)),
    ]))
    .push(FakeReply::Events(vec![
        Ok(ChatEvent::text("It is 12:00.")),
        Ok(ChatEvent::done(FinishReason::Stop)),
    ]));
    let (answer, tools) = agent_turns(&fake, "What time is it?", Priority::Elevated)
        .await
        .unwrap();
    assert_eq!(answer, "It is 12:00.");
    assert_eq!(tools, ["current_time"]);
    let calls = fake.calls();
    assert_eq!(calls.len(), 2);
    assert!(calls.iter().all(|c| c.priority == Some(Priority::Elevated)));
    let second = calls[1].request.as_ref().unwrap();
    let last = second.messages.last().unwrap();
    assert_eq!(last.role, Role::Tool);
    assert_eq!(last.tool_call_id.as_deref(), Some("call_1"));
    assert_eq!(
        second.messages[1].tool_calls[0].function.name,
        "current_time"
    );
}

#[tokio::test]
async fn a_fake_stream_from_a_channel_delivers_events_as_they_are_sent() {
    let (tx, rx) = mpsc::unbounded::<Result<StreamEvent, Error>>();
    let fake = FakeProvider::new(["demo"]);
    fake.push(FakeReply::Stream(rx.boxed()));
    let request = ChatRequest::new("demo", vec![ChatMessage::user("hi")]);
    let mut events = fake
        .chat_stream(&request, &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap()
        .events();
    let send = |event| tx.unbounded_send(Ok(StreamEvent::Chunk(event))).unwrap();
    send(ChatChunk::delta("demo", ChatDelta::text("Hel")));
    assert!(matches!(
        tokio::time::timeout(LIMIT, events.next()).await.unwrap(),
        Some(Ok(ChatEvent::Started { .. }))
    ));
    assert_eq!(
        tokio::time::timeout(LIMIT, events.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap(),
        ChatEvent::text("Hel")
    );
    // Nothing more until the next chunk is sent: the stream is live, not buffered.
    send(ChatChunk::delta(
        "demo",
        ChatDelta::tool_call(ToolCallDelta::start(0, "c1", "current_time")),
    ));
    send(ChatChunk::delta(
        "demo",
        ChatDelta::tool_call(ToolCallDelta::arguments(0, "{}")),
    ));
    send(ChatChunk::finish("demo", FinishReason::ToolCalls));
    drop(tx);
    let rest: Vec<ChatEvent> = tokio::time::timeout(LIMIT, events.by_ref().collect::<Vec<_>>())
        .await
        .unwrap()
        .into_iter()
        .map(Result::unwrap)
        .collect();
    assert!(matches!(&rest[0], ChatEvent::ToolCallStarted { name, .. } if name == "current_time"));
    assert!(
        matches!(&rest[2], ChatEvent::ToolCallFinished { arguments: Some(a), .. } if *a == json!({}))
    );
    assert_eq!(
        rest.last(),
        Some(&ChatEvent::Done {
            finish_reason: Some(FinishReason::ToolCalls)
        })
    );
    assert_eq!(events.response().tool_calls()[0].id, "c1");
}

#[tokio::test]
async fn the_logging_decorator_records_every_operation_with_its_priority_and_outcome() {
    let fake = FakeProvider::new(["demo", "embed"]);
    fake.push(FakeReply::Events(vec![
        Ok(ChatEvent::text("plain")),
        Ok(ChatEvent::done(FinishReason::Stop)),
    ]))
    .push(FakeReply::Events(vec![
        Ok(ChatEvent::text("a")),
        Ok(ChatEvent::text("b")),
        Ok(ChatEvent::done(FinishReason::Stop)),
    ]))
    .push(FakeReply::Events(vec![
        Ok(ChatEvent::text("cut")),
        Err(Error::Truncated { chunks: 1 }),
    ]))
    .push(FakeReply::Fail(Error::from(
        ApiError::new(http_status(503))
            .with_envelope(ErrorEnvelope::new("loading").with_code("model_loading")),
    )));
    let logged = LoggingProvider::new(fake);
    let provider: &dyn ChatProvider = &logged;
    let request = ChatRequest::new("demo", vec![ChatMessage::user("hi")]);
    let plain = provider
        .chat(&request, &CallOptions::with_priority(Priority::Elevated))
        .await
        .unwrap();
    assert_eq!(plain.text(), "plain");
    let text = provider
        .chat_stream(&request, &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(text.text(), "ab");
    let cut = provider
        .chat_stream(&request, &CallOptions::new())
        .await
        .unwrap()
        .collect()
        .await
        .unwrap_err();
    assert!(matches!(cut, Error::Truncated { .. }));
    let refused = provider
        .chat(&request, &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Some("model_loading"));
    provider
        .embeddings(
            &EmbeddingsRequest::new("embed", "two words"),
            &CallOptions::with_priority(Priority::Low),
        )
        .await
        .unwrap();
    assert_eq!(
        provider.models(&CallOptions::new()).await.unwrap().ids(),
        ["demo", "embed"]
    );

    let log = logged.log();
    let lines: Vec<(&str, &str, Priority, &str)> = log
        .iter()
        .map(|l| {
            (
                l.operation,
                l.model.as_str(),
                l.priority,
                l.outcome.as_str(),
            )
        })
        .collect();
    assert_eq!(lines[0], ("chat", "demo", Priority::Elevated, "ok"));
    // Two text chunks plus the finish chunk.
    assert_eq!(
        lines[1],
        (
            "chat_stream",
            "demo",
            Priority::Low,
            "stream ended after 3 events"
        )
    );
    assert_eq!(lines[2].0, "chat_stream");
    assert!(
        lines[2].3.starts_with("stream failed after 1 events"),
        "{}",
        lines[2].3
    );
    assert_eq!(lines[3].0, "chat");
    assert!(
        lines[3].3.starts_with("error: the proxy answered 503"),
        "{}",
        lines[3].3
    );
    assert_eq!(lines[4], ("embeddings", "embed", Priority::Low, "ok"));
    assert_eq!(lines[5], ("models", "", Priority::Normal, "ok"));
}

fn http_status(code: u16) -> http::StatusCode {
    http::StatusCode::from_u16(code).unwrap()
}

async fn proxy_answering(status: u16) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(status).set_body_json(json!({"error": {"message": "nope"}})),
        )
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn fallback_moves_a_retryable_failure_of_the_real_client_to_the_fake() {
    let server = proxy_answering(503).await;
    let client = Client::builder()
        .base_url(server.uri())
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let fake = FakeProvider::new(["demo"]);
    fake.push(FakeReply::Events(vec![
        Ok(ChatEvent::text("from the fallback")),
        Ok(ChatEvent::done(FinishReason::Stop)),
    ]))
    .push(FakeReply::Events(vec![
        Ok(ChatEvent::text("streamed fallback")),
        Ok(ChatEvent::done(FinishReason::Stop)),
    ]));
    let fallback = FallbackProvider::new(client, fake.clone());
    let request = ChatRequest::new("demo", vec![ChatMessage::user("hi")]);
    let opts = CallOptions::with_priority(Priority::Elevated);
    assert_eq!(
        fallback.chat(&request, &opts).await.unwrap().text(),
        "from the fallback"
    );
    let streamed = fallback
        .chat_stream(&request, &opts)
        .await
        .unwrap()
        .collect()
        .await
        .unwrap();
    assert_eq!(streamed.text(), "streamed fallback");
    // The call kept its priority on both providers.
    for request in server.received_requests().await.unwrap() {
        assert_eq!(request.headers["x-priority"], "10");
    }
    assert!(
        fake.calls()
            .iter()
            .all(|c| c.priority == Some(Priority::Elevated))
    );
}

#[tokio::test]
async fn fallback_leaves_a_non_retryable_error_to_the_caller() {
    let server = proxy_answering(400).await;
    let client = Client::new(server.uri()).unwrap();
    let fake = FakeProvider::new(["demo"]);
    let fallback = FallbackProvider::new(client, fake.clone());
    let request = ChatRequest::new("demo", vec![ChatMessage::user("hi")]);
    let err = fallback
        .chat(&request, &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(http_status(400)));
    assert!(fake.calls().is_empty());
}

#[tokio::test]
async fn errors_built_outside_the_sdk_drive_the_fallback_like_real_ones() {
    let primary = FakeProvider::new(["demo"]);
    let refused = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
    primary.push(FakeReply::Fail(Error::Connect(Box::new(refused))));
    let secondary = FakeProvider::new(["demo"]);
    secondary.push(FakeReply::Events(vec![
        Ok(ChatEvent::text("ok")),
        Ok(ChatEvent::done(FinishReason::Stop)),
    ]));
    let fallback = FallbackProvider::new(primary, secondary.clone());
    let request = ChatRequest::new("demo", vec![ChatMessage::user("hi")]);
    let resp = fallback
        .chat(&request, &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    assert_eq!(resp.text(), "ok");
    assert_eq!(secondary.calls()[0].priority, Some(Priority::Low));
}
