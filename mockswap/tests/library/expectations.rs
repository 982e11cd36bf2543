//! Expectations: scoping, every matcher, counts and ranges, verify on drop, the
//! failure report, and reset.

use std::panic::{AssertUnwindSafe, catch_unwind};

use mockswap::{Expect, MockSwap, Reply, ReplyRule};
use serde_json::json;

use crate::{BOUND, chat, client, post};

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

/// Sends `body` as raw text, so the journaled body (and the report) is byte-exact.
async fn post_raw(mock: &MockSwap, path: &str, body: &str, priority: Option<&str>) {
    let mut request = client()
        .post(format!("{}{path}", mock.uri()))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(p) = priority {
        request = request.header("x-priority", p);
    }
    request.send().await.unwrap();
}

#[tokio::test]
async fn met_expectations_pass_verify_and_drop() {
    let mock = MockSwap::start().await;
    Expect::chat().priority(10).times(1).mount(&mock);
    Expect::new().priority_absent().times(2).mount(&mock);
    post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "x", false),
        &["10"],
    )
    .await;
    post(&mock, "/v1/chat/completions", &chat("m", "x", true), &[]).await;
    post(
        &mock,
        "/v1/embeddings",
        &json!({"model": "m", "input": "x"}),
        &[],
    )
    .await;
    mock.verify();
    mock.assert_priorities([Some(10), None, None]);
}

#[tokio::test]
async fn failure_report_shows_each_unmet_expectation_with_its_nearest_requests() {
    let mock = MockSwap::start().await;
    client()
        .get(format!("{}/v1/models", mock.uri()))
        .send()
        .await
        .unwrap();
    let expect = Expect::chat()
        .model("qwen")
        .priority(10)
        .times(1)
        .named("interactive chat is Elevated");
    let line = line!() + 1;
    expect.mount(&mock);
    let chat_body = r#"{"model":"qwen","messages":[{"role":"user","content":"hi"}]}"#;
    post_raw(&mock, "/v1/chat/completions", chat_body, None).await;
    post_raw(
        &mock,
        "/v1/embeddings",
        r#"{"model":"qwen","input":"x"}"#,
        Some("10"),
    )
    .await;
    let text = panic_text(catch_unwind(AssertUnwindSafe(|| mock.verify())).unwrap_err());
    let location_start = text.find("(mounted at ").unwrap() + "(mounted at ".len();
    let location_end = location_start + text[location_start..].find(')').unwrap();
    let location = &text[location_start..location_end];
    assert!(
        location.starts_with(&format!("{}:{line}:", file!())),
        "{location} is not the mount line {line}"
    );
    let snapshot = text.replace(location, "<location>");
    let expected = r#"mockswap: 1 of 1 expectation(s) not met

"interactive chat is Elevated" (mounted at <location>)
  wanted:   POST /v1/chat/completions, model "qwen", X-Priority 10
  expected: exactly 1 matching request(s), received 0 (of 2 since it was mounted)
  nearest requests:
    #2 POST /v1/chat/completions model=qwen stream=false x-priority=-
      - X-Priority: wanted 10, got absent
      body: {"model":"qwen","messages":[{"role":"user","content":"hi"}]}
    #3 POST /v1/embeddings model=qwen stream=false x-priority=10
      - path: wanted /v1/chat/completions, got /v1/embeddings
      body: {"model":"qwen","input":"x"}

requests received by mockswap (3):
  seq  method  path                  model  stream  x-priority
  1    GET     /v1/models            -      false   -
  2    POST    /v1/chat/completions  qwen   false   -
  3    POST    /v1/embeddings        qwen   false   10
"#;
    assert_eq!(snapshot, expected);
    mock.reset();
}

#[tokio::test]
async fn unmet_expectation_panics_when_the_mock_drops() {
    let mock = MockSwap::start().await;
    Expect::chat().priority(10).times(1).mount(&mock);
    post(
        &mock,
        "/v1/chat/completions",
        &chat("qwen", "x", true),
        &["0"],
    )
    .await;
    let text = panic_text(catch_unwind(AssertUnwindSafe(move || drop(mock))).unwrap_err());
    assert!(text.contains("X-Priority: wanted 10, got 0"), "{text}");
    assert!(
        text.contains("1    POST    /v1/chat/completions  qwen   true    0"),
        "{text}"
    );
}

#[tokio::test]
async fn expectation_counts_only_requests_after_it_was_mounted() {
    let mock = MockSwap::start().await;
    post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "startup", false),
        &[],
    )
    .await;
    Expect::new().priority_absent().times(1).mount(&mock);
    post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[]).await;
    mock.verify();
}

#[tokio::test]
async fn scoped_expectation_is_checked_when_its_guard_drops() {
    let mock = MockSwap::start().await;
    {
        let stage = Expect::chat().priority(-10).times(2).mount_as_scoped(&mock);
        for _ in 0..2 {
            post(
                &mock,
                "/v1/chat/completions",
                &chat("m", "x", false),
                &["-10"],
            )
            .await;
        }
        let seqs: Vec<u64> = stage.received_requests().iter().map(|r| r.seq).collect();
        assert_eq!(seqs, [1, 2]);
    }
    let unmet = Expect::chat().priority(10).times(1).mount_as_scoped(&mock);
    post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "x", false),
        &["-10"],
    )
    .await;
    let text = panic_text(catch_unwind(AssertUnwindSafe(move || drop(unmet))).unwrap_err());
    assert!(
        text.contains("expected: exactly 1 matching request(s), received 0 (of 1"),
        "{text}"
    );
    // Unmounted with its guard: the mock's own check no longer sees it.
    mock.verify();
}

#[tokio::test]
async fn too_many_requests_list_the_matching_ones_and_ranges_are_inclusive() {
    let mock = MockSwap::start().await;
    let none = Expect::chat()
        .model("forbidden")
        .times(0)
        .named("no forbidden calls")
        .mount_as_scoped(&mock);
    let some = Expect::chat().times(2..=3).mount_as_scoped(&mock);
    let open = Expect::chat().times(1..).mount_as_scoped(&mock);
    let few = Expect::chat().times(..=1).mount_as_scoped(&mock);
    post(
        &mock,
        "/v1/chat/completions",
        &chat("forbidden", "x", false),
        &[],
    )
    .await;
    post(&mock, "/v1/chat/completions", &chat("ok", "x", false), &[]).await;
    some.verify();
    open.verify();
    let text = panic_text(catch_unwind(AssertUnwindSafe(|| none.verify())).unwrap_err());
    assert!(
        text.contains("expected: exactly 0 matching request(s), received 1"),
        "{text}"
    );
    assert!(
        text.contains("matching requests:\n    #1 POST /v1/chat/completions model=forbidden"),
        "{text}"
    );
    let text = panic_text(catch_unwind(AssertUnwindSafe(|| few.verify())).unwrap_err());
    assert!(text.contains("at most 1"), "{text}");
    // Their own drops would report them again: let them, and catch it.
    for guard in [none, few] {
        assert!(catch_unwind(AssertUnwindSafe(move || drop(guard))).is_err());
    }
}

#[tokio::test]
async fn every_matcher_selects_its_requests() {
    let mock = MockSwap::start().await;
    let guards = [
        Expect::new()
            .method("get")
            .path("/v1/models")
            .times(1)
            .mount_as_scoped(&mock),
        Expect::chat().times(4).mount_as_scoped(&mock),
        Expect::new()
            .path("/v1/chat/completions")
            .model("up")
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new()
            .model("m")
            .stream(true)
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new().priority(5).times(1).mount_as_scoped(&mock),
        Expect::new()
            .priority_invalid()
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new()
            .priority_duplicated()
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new()
            .priority_absent()
            .times(3)
            .mount_as_scoped(&mock),
        Expect::new()
            .header("x-tenant", "a")
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new()
            .header_exists("x-tenant")
            .times(2)
            .mount_as_scoped(&mock),
        Expect::chat()
            .header_absent("x-tenant")
            .times(2)
            .mount_as_scoped(&mock),
        Expect::new()
            .query_param("trace", "on")
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new()
            .body_contains(json!({"temperature": 0}))
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new()
            .body_json(json!({"model": "m", "input": "exact"}))
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new()
            .body_text_contains("needle")
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new()
            .last_message_role("tool")
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new()
            .has_tools(true)
            .times(1)
            .mount_as_scoped(&mock),
        Expect::new()
            .when(|r| r.path.ends_with("embeddings"))
            .times(1)
            .mount_as_scoped(&mock),
    ];
    let url = |path: &str| format!("{}{path}", mock.uri());
    client()
        .get(url("/v1/models"))
        .header("x-priority", "5")
        .send()
        .await
        .unwrap();
    let mut cold = chat("m", "needle", true);
    cold["temperature"] = json!(0);
    client()
        .post(url("/v1/chat/completions?trace=on"))
        .header("x-priority", "ten")
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
    client()
        .post(url("/v1/chat/completions"))
        .header("x-priority", "1")
        .header("x-priority", "2")
        .header("x-tenant", "b")
        .json(&tool_turn)
        .send()
        .await
        .unwrap();
    client()
        .post(url("/upstream/up/v1/chat/completions"))
        .json(&chat("ignored", "x", false))
        .send()
        .await
        .unwrap();
    client()
        .post(url("/v1/chat/completions"))
        .json(&chat("m", "x", false))
        .send()
        .await
        .unwrap();
    client()
        .post(url("/v1/embeddings"))
        .json(&json!({"model": "m", "input": "exact"}))
        .send()
        .await
        .unwrap();
    for guard in &guards {
        guard.verify();
    }
}

#[tokio::test]
async fn verify_panics_at_the_line_that_called_it() {
    let mock = MockSwap::start().await;
    Expect::chat().times(1).mount(&mock);
    let (tx, rx) = std::sync::mpsc::channel();
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let _ = tx.send(info.location().map(|l| (l.file().to_owned(), l.line())));
    }));
    let line = line!() + 1;
    let result = catch_unwind(AssertUnwindSafe(|| mock.verify()));
    std::panic::set_hook(previous);
    assert!(result.is_err());
    assert_eq!(rx.recv().unwrap(), Some((file!().to_owned(), line)));
    mock.reset();
}

#[tokio::test]
async fn wait_until_satisfied_returns_once_a_background_call_arrives() {
    let mock = MockSwap::start().await;
    let guard = Expect::chat().priority(10).times(1).mount_as_scoped(&mock);
    let uri = mock.uri();
    let call = tokio::spawn(async move {
        client()
            .post(format!("{uri}/v1/chat/completions"))
            .header("x-priority", "10")
            .json(&chat("m", "x", false))
            .send()
            .await
            .unwrap()
            .status()
    });
    guard.wait_until_satisfied(BOUND).await.unwrap();
    assert_eq!(call.await.unwrap(), 200);
    let never = Expect::chat().priority(99).times(1).mount_as_scoped(&mock);
    let err = never
        .wait_until_satisfied(std::time::Duration::from_millis(20))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("X-Priority 99"), "{err}");
    assert!(catch_unwind(AssertUnwindSafe(move || drop(never))).is_err());
}

#[tokio::test]
async fn expect_priority_counts_the_whole_journal() {
    let mock = MockSwap::start().await;
    post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "x", false),
        &["10"],
    )
    .await;
    mock.expect_priority(Some(10), 1);
    mock.expect_priority(None, 0);
    mock.verify();
    mock.clear_requests();
    let text = panic_text(catch_unwind(AssertUnwindSafe(|| mock.verify())).unwrap_err());
    assert!(text.contains("received 0"), "{text}");
    mock.reset();
}

#[tokio::test]
async fn reset_clears_journal_replies_faults_and_expectations_and_opens_the_gate() {
    let mock = MockSwap::builder().gate_closed().start().await.unwrap();
    mock.add_reply(ReplyRule::new(Reply::text("scripted")));
    mock.add_fault(mockswap::FaultRule::new(mockswap::Fault::Hang).always());
    Expect::chat().times(5).mount(&mock);
    client()
        .get(format!("{}/v1/models", mock.uri()))
        .send()
        .await
        .unwrap();
    mock.reset();
    assert!(mock.requests().is_empty());
    let body: serde_json::Value = post(&mock, "/v1/chat/completions", &chat("m", "x", false), &[])
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "[m] x");
    mock.verify();
}

#[tokio::test]
async fn assert_priorities_reports_a_duplicated_header_in_the_table() {
    let mock = MockSwap::start().await;
    post(
        &mock,
        "/v1/chat/completions",
        &chat("m", "x", false),
        &["10", "10"],
    )
    .await;
    let payload =
        catch_unwind(AssertUnwindSafe(|| mock.assert_priorities([Some(10)]))).unwrap_err();
    let text = panic_text(payload);
    assert!(text.contains("expected [10]"), "{text}");
    assert!(text.contains("duplicated(10 | 10)"), "{text}");
}
