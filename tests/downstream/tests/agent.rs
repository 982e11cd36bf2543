//! The agent's model layer against mockswap (the proxy's double) and against its own
//! fake, as a user's test suite does.

use std::sync::Arc;
use std::time::Duration;

use downstream_agent::{Agent, Deadline, Recorded, Scripted, Step, clock_tool};
use futures_util::StreamExt;
use llama_swap_client::{
    CallOptions, ChatEvent, ChatMessage, ChatProvider, ChatRequest, Client, EmbeddingsRequest,
    Error, Priority, RetryPolicy, StatusCode,
};
use mockswap::{Expect, Fault, FaultRule, MockSwap, Reply, ReplyRule};
use serde_json::json;

/// A proxy double whose model calls the clock while the user spoke last and
/// answers once the tool result is in.
async fn model_with_a_clock() -> MockSwap {
    MockSwap::builder()
        .reply(
            ReplyRule::new(Reply::tool_call("current_time", json!({"timezone": "UTC"})))
                .has_tools(true)
                .last_message_role("user"),
        )
        .reply(ReplyRule::new(Reply::text("It is 12:00 UTC.")).last_message_role("tool"))
        .start()
        .await
        .unwrap()
}

fn question() -> ChatRequest {
    ChatRequest::new("qwen", vec![ChatMessage::user("What time is it?")])
}

#[tokio::test]
async fn the_tool_loop_runs_at_elevated_then_at_low() {
    let mock = model_with_a_clock().await;
    let elevated = Expect::chat()
        .priority(Priority::Elevated)
        .times(2)
        .named("the run a person waits for is Elevated, tool turn included")
        .mount_as_scoped(&mock);
    let low = Expect::chat()
        .priority(Priority::Low)
        .times(2)
        .named("the background run is Low, tool turn included")
        .mount_as_scoped(&mock);
    let _tool_results = Expect::chat()
        .last_message_role("tool")
        .times(2)
        .mount_as_scoped(&mock);
    // The base URL as every other SDK is configured: with /v1.
    let client = Client::new(format!("{}/v1", mock.uri())).unwrap();
    let agent = Agent::new(Arc::new(client), "qwen");

    let now = agent
        .answer("What time is it?", Priority::Elevated)
        .await
        .unwrap();
    assert_eq!(now.text, "It is 12:00 UTC.");
    assert_eq!(now.model_calls, 2);
    assert_eq!(now.tools_run, ["current_time(UTC)"]);
    elevated.check().unwrap();
    assert!(low.check().is_err(), "no Low call yet");

    let later = agent
        .answer("What time is it?", Priority::Low)
        .await
        .unwrap();
    assert_eq!(later, now);
    mock.assert_priorities([Some(10), Some(10), Some(-10), Some(-10)]);
}

#[tokio::test]
async fn a_decorator_over_the_shared_provider_sees_each_calls_priority() {
    let mock = model_with_a_clock().await;
    let shared: Arc<dyn ChatProvider> = Arc::new(Client::new(mock.uri()).unwrap());
    let recorded = Arc::new(Recorded::new(Arc::clone(&shared)));
    let agent = Agent::new(recorded.clone(), "qwen");
    agent
        .answer("What time is it?", Priority::Low)
        .await
        .unwrap();
    let stream = recorded
        .chat_stream(
            &question().tool(clock_tool()),
            &CallOptions::with_priority(Priority::Elevated),
        )
        .await
        .unwrap();
    assert_eq!(stream.collect().await.unwrap().tool_calls().len(), 1);
    assert_eq!(
        recorded.seen(),
        [
            ("chat", Priority::Low),
            ("chat", Priority::Low),
            ("chat_stream", Priority::Elevated),
        ]
    );
    mock.assert_priorities([Some(-10), Some(-10), Some(10)]);
}

#[tokio::test]
async fn mockswap_expectations_hold_on_every_priority() {
    let mock = MockSwap::start().await;
    let client = Client::new(mock.uri()).unwrap();
    let between = Priority::custom(5).unwrap();
    let guards: Vec<_> = [Priority::Elevated, Priority::Normal, Priority::Low, between]
        .into_iter()
        .map(|priority| {
            Expect::new()
                .priority(priority)
                .times(3)
                .named(format!("chat, stream and embeddings at {priority:?}"))
                .mount_as_scoped(&mock)
        })
        .collect();
    let absent = Expect::new()
        .priority_absent()
        .times(3)
        .mount_as_scoped(&mock);
    for priority in [Priority::Elevated, Priority::Normal, Priority::Low, between] {
        let options = CallOptions::with_priority(priority);
        let answer = client.chat(&question(), &options).await.unwrap();
        assert_eq!(answer.text(), "[qwen] What time is it?");
        let mut events = client
            .chat_stream(&question(), &options)
            .await
            .unwrap()
            .events();
        let mut text = String::new();
        while let Some(event) = events.next().await {
            if let ChatEvent::TextDelta { text: piece, .. } = event.unwrap() {
                text.push_str(&piece);
            }
        }
        assert_eq!(text, "[qwen] What time is it?");
        let input: Vec<&str> = vec!["a", "b"];
        let embeddings = client
            .embeddings(&EmbeddingsRequest::new("qwen", input), &options)
            .await
            .unwrap();
        assert_eq!(embeddings.data.len(), 2);
    }
    for guard in &guards {
        guard.check().unwrap();
    }
    absent.check().unwrap();
    assert_eq!(mock.requests().len(), 12);
}

#[tokio::test]
async fn a_retry_keeps_the_calls_priority() {
    let mock = MockSwap::start().await;
    mock.add_fault(
        FaultRule::new(Fault::status(StatusCode::SERVICE_UNAVAILABLE).header("retry-after", "0"))
            .times(1),
    );
    let low = Expect::chat()
        .priority(Priority::Low)
        .times(2)
        .named("the failed attempt and its retry are both Low")
        .mount_as_scoped(&mock);
    let _nothing_else = Expect::new()
        .priority_absent()
        .times(0)
        .mount_as_scoped(&mock);
    let client = Client::builder()
        .base_url(mock.uri())
        .retry_policy(RetryPolicy::default().with_max_retries(1))
        .build()
        .unwrap();
    let answer = client
        .chat(&question(), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    assert_eq!(answer.text(), "[qwen] What time is it?");
    low.check().unwrap();
    drop(low);

    // Without retries the same fault is the caller's, with the server's Retry-After.
    mock.add_fault(
        FaultRule::new(Fault::status(StatusCode::SERVICE_UNAVAILABLE).header("retry-after", "0"))
            .times(1),
    );
    let err = client
        .chat(
            &question(),
            &CallOptions::with_priority(Priority::Low).retry(RetryPolicy::none()),
        )
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(err.retry_after(), Some(Duration::ZERO));
    assert!(err.is_retryable());
    mock.assert_priorities([Some(-10), Some(-10), Some(-10)]);
}

#[tokio::test]
async fn an_unmet_expectation_is_a_report_naming_what_arrived() {
    let mock = MockSwap::start().await;
    Expect::chat()
        .priority(Priority::Elevated)
        .times(1)
        .named("the reply a person waits for is Elevated")
        .mount(&mock);
    let client = Client::new(mock.uri()).unwrap();
    client
        .chat(&question(), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    let report = mock.check().unwrap_err().into_report();
    assert!(
        report.contains("the reply a person waits for is Elevated"),
        "{report}"
    );
    assert!(
        report.contains("X-Priority: wanted 10, got -10"),
        "{report}"
    );
    assert!(report.contains("What time is it?"), "{report}");
    mock.reset();
}

#[tokio::test]
async fn the_agent_runs_on_a_fake_without_a_server() {
    let fake = Arc::new(Scripted::new([
        Step::ToolCall("current_time".into(), json!({"timezone": "Asia/Tokyo"})),
        Step::Text("It is 21:00 in Tokyo.".into()),
    ]));
    let agent = Agent::new(fake.clone(), "qwen");
    let answer = agent
        .answer("Time in Tokyo?", Priority::Elevated)
        .await
        .unwrap();
    assert_eq!(answer.text, "It is 21:00 in Tokyo.");
    assert_eq!(answer.tools_run, ["current_time(Asia/Tokyo)"]);
    assert_eq!(fake.priorities(), [Priority::Elevated, Priority::Elevated]);

    // A script that runs out is the fake's general error, with its message.
    let err = agent.answer("Again?", Priority::Low).await.unwrap_err();
    assert!(matches!(err, Error::Other { .. }), "{err:?}");
    assert_eq!(err.to_string(), "the script has no step left");
}

#[tokio::test(start_paused = true)]
async fn a_deadline_gives_up_on_a_slow_provider_in_virtual_time() {
    let slow = Scripted::new([Step::Text("late".into()), Step::Text("in time".into())])
        .with_delay(Duration::from_secs(120));
    let deadline = Deadline::new(slow, Duration::from_secs(30));
    let started = tokio::time::Instant::now();
    let err = deadline
        .chat(&question(), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap_err();
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    assert!(
        matches!(
            err,
            Error::Other {
                source: Some(_),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.to_string(), "qwen gave no answer within 30s");

    let patient = Deadline::new(
        Scripted::new([Step::Text("in time".into())]).with_delay(Duration::from_secs(20)),
        Duration::from_secs(30),
    );
    let started = tokio::time::Instant::now();
    let answer = patient
        .chat(&question(), &CallOptions::new())
        .await
        .unwrap();
    assert_eq!(answer.text(), "in time");
    assert_eq!(started.elapsed(), Duration::from_secs(20));
}
