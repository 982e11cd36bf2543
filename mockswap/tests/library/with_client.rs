//! mockswap driven by llama-swap-client, the pairing downstream users have:
//! expectations in the client's own `Priority`, a report read without panicking, a
//! fault's `Retry-After` the client obeys, and what a report shows of a long agent
//! conversation.
#![cfg(feature = "client")]

use std::time::Duration;

use llama_swap_client::{CallOptions, ChatMessage, ChatRequest, Client, Priority, RetryPolicy};
use mockswap::{Expect, Fault, FaultRule, MockSwap, StatusCode};

fn request(text: &str) -> ChatRequest {
    ChatRequest::new("qwen", vec![ChatMessage::user(text)])
}

#[tokio::test]
async fn expect_takes_the_clients_priority_and_normal_means_no_header() {
    let mock = MockSwap::start().await;
    let client = Client::new(mock.uri()).unwrap();
    let _elevated = Expect::chat()
        .priority(Priority::Elevated)
        .times(1)
        .mount_as_scoped(&mock);
    let _normal = Expect::chat()
        .priority(Priority::Normal)
        .times(1)
        .mount_as_scoped(&mock);
    let _low = Expect::chat()
        .priority(Priority::Low)
        .times(1)
        .mount_as_scoped(&mock);
    let _custom = Expect::chat()
        .priority(Priority::custom(5).unwrap())
        .times(1)
        .mount_as_scoped(&mock);
    for priority in [
        Priority::Elevated,
        Priority::Normal,
        Priority::Low,
        Priority::custom(5).unwrap(),
    ] {
        client
            .chat(&request("hi"), &CallOptions::with_priority(priority))
            .await
            .unwrap();
    }
    mock.assert_priorities([Some(10), None, Some(-10), Some(5)]);
}

#[tokio::test]
async fn queue_timeout_option_is_sent_beside_the_priority_and_only_on_its_call() {
    let mock = MockSwap::start().await;
    let client = Client::new(mock.uri()).unwrap();
    let _bounded = Expect::chat()
        .priority(Priority::Elevated)
        .queue_timeout(Duration::from_millis(1500))
        .times(1)
        .mount_as_scoped(&mock);
    let _unbounded = Expect::chat()
        .queue_timeout_absent()
        .times(1)
        .mount_as_scoped(&mock);
    let bounded =
        CallOptions::with_priority(Priority::Elevated).queue_timeout(Duration::from_millis(1500));
    client.chat(&request("hi"), &bounded).await.unwrap();
    client
        .chat(&request("hi"), &CallOptions::new())
        .await
        .unwrap();
    mock.assert_queue_timeouts([Some(Duration::from_millis(1500)), None]);
    mock.assert_priorities([Some(10), None]);
    let journal = mock.requests();
    assert_eq!(journal[0].header_values("x-queue-timeout"), ["1.5"]);
}

#[tokio::test]
async fn check_returns_the_unmet_report_as_a_value_without_panicking() {
    let mock = MockSwap::start().await;
    let client = Client::new(mock.uri()).unwrap();
    Expect::chat()
        .priority(Priority::Elevated)
        .times(1)
        .named("the reply a person waits for is Elevated")
        .mount(&mock);
    client
        .chat(&request("hi"), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    let unmet = mock.check().unwrap_err();
    assert!(
        unmet
            .report()
            .contains("\"the reply a person waits for is Elevated\""),
        "{unmet}"
    );
    assert!(
        unmet.report().contains("X-Priority: wanted 10, got -10"),
        "{unmet}"
    );
    assert_eq!(unmet.to_string(), unmet.report());
    let guard = Expect::chat().times(2).mount_as_scoped(&mock);
    assert!(guard.check().is_err());
    client
        .chat(&request("again"), &CallOptions::new())
        .await
        .unwrap();
    client
        .chat(&request("and again"), &CallOptions::new())
        .await
        .unwrap();
    guard.check().unwrap();
    drop(guard);
    // The mock would panic on drop with the unmet library expectation.
    mock.reset();
    mock.check().unwrap();
}

#[tokio::test]
async fn a_status_fault_carries_retry_after_which_the_client_obeys() {
    let mock = MockSwap::builder()
        .fault(
            FaultRule::new(
                Fault::status(StatusCode::SERVICE_UNAVAILABLE)
                    .header("retry-after", "0")
                    .header("x-reason", "warming up"),
            )
            .times(1),
        )
        .start()
        .await
        .unwrap();
    let no_retries = Client::builder()
        .base_url(mock.uri())
        .retry_policy(RetryPolicy::none())
        .build()
        .unwrap();
    let err = no_retries
        .chat(&request("hi"), &CallOptions::new())
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
    assert_eq!(err.retry_after(), Some(Duration::ZERO));
    assert_eq!(err.headers().unwrap()["x-reason"], "warming up");
    mock.add_fault(
        FaultRule::new(Fault::status(StatusCode::SERVICE_UNAVAILABLE).header("retry-after", "0"))
            .times(1),
    );
    let retrying = Client::new(mock.uri()).unwrap();
    retrying
        .chat(&request("hi"), &CallOptions::with_priority(Priority::Low))
        .await
        .unwrap();
    // The retry kept the call's priority.
    mock.assert_priorities([None, Some(-10), Some(-10)]);
}

#[tokio::test]
async fn the_failure_report_shows_the_last_messages_of_a_long_agent_conversation() {
    let mock = MockSwap::start().await;
    let client = Client::new(mock.uri()).unwrap();
    let system = "You are a careful assistant with a long shared system prompt. ".repeat(8);
    let turn = ChatRequest::new(
        "qwen",
        vec![
            ChatMessage::system(system.as_str()),
            ChatMessage::user("What time is it in Tokyo?"),
            ChatMessage::tool("call_1", "21:00 JST"),
        ],
    );
    Expect::chat()
        .last_message_role("user")
        .times(1)
        .named("a user turn")
        .mount(&mock);
    client
        .chat(&turn, &CallOptions::with_priority(Priority::Elevated))
        .await
        .unwrap();
    let report = mock.check().unwrap_err().into_report();
    assert!(report.contains("3 messages, the last"), "{report}");
    assert!(report.contains("21:00 JST"), "{report}");
    assert!(report.contains("What time is it in Tokyo?"), "{report}");
    mock.reset();
}
