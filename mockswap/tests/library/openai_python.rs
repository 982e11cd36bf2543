//! The official `openai` Python package reads mockswap's answers: loading frames
//! (contract C1), streamed and whole tool calls (contract C3), and scripted errors.
//!
//! Needs `python3` with `openai` (`.ci/run` installs it). Without it the test is
//! skipped, except when `LLAMA_SWAP_REQUIRE_ALL` is set (CI), where it fails.

use std::process::Stdio;

use http::StatusCode;
use mockswap::{MockSwap, Reply, ReplyRule, StreamShape, ToolCall};
use serde_json::{Value, json};

use crate::BOUND;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/openai_client.py");

fn openai_available() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import openai"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var_os("LLAMA_SWAP_REQUIRE_ALL").is_none(),
            "python3 with the openai package is required (pip install openai)"
        );
        eprintln!("skipped: python3 with the openai package is not installed");
    }
    ok
}

#[tokio::test]
async fn openai_python_client_reads_loading_frames_tool_calls_and_errors() {
    if !openai_available() {
        return;
    }
    let mock = MockSwap::builder()
        .stream_shape(StreamShape::new().loading_state(true))
        .reply(
            ReplyRule::new(Reply::tool_calls([
                ToolCall::new("get_time", json!({"timezone": "Europe/Paris"})),
                ToolCall::new("get_weather", json!({"city": "Paris"})).id("call_w"),
            ]))
            .model("tools")
            .has_tools(true),
        )
        .reply(
            ReplyRule::new(
                Reply::error(StatusCode::TOO_MANY_REQUESTS, "busy").error_code("concurrency_limit"),
            )
            .model("busy"),
        )
        .start()
        .await
        .unwrap();
    let output = tokio::time::timeout(
        BOUND,
        tokio::process::Command::new("python3")
            .args([SCRIPT, &mock.uri()])
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(
        output.status.success(),
        "the openai client failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).unwrap();

    let loading = &seen["loading"];
    assert_eq!(loading["statuses"], json!(["waiting", "loading", "ready"]));
    assert!(
        loading["reasoning"]
            .as_str()
            .unwrap()
            .contains("llama-swap loading model: loading"),
        "{loading}"
    );
    assert_eq!(loading["content"], "[loading] hi");

    let calls = json!([
        {"id": "call_mockswap_2_0", "name": "get_time", "arguments": {"timezone": "Europe/Paris"}},
        {"id": "call_w", "name": "get_weather", "arguments": {"city": "Paris"}},
    ]);
    let streamed = &seen["tool_stream"];
    assert_eq!(streamed["finish"], "tool_calls");
    assert_eq!(streamed["calls"], calls);
    assert!(
        streamed["argument_deltas"].as_u64().unwrap() >= 4,
        "{streamed}"
    );
    let whole = &seen["tool_whole"];
    assert_eq!(whole["finish"], "tool_calls");
    assert_eq!(whole["content"], Value::Null);
    let mut whole_calls = calls.clone();
    whole_calls[0]["id"] = json!("call_mockswap_3_0");
    assert_eq!(whole["calls"], whole_calls);

    assert_eq!(
        seen["error"],
        json!({"status": 429, "code": "concurrency_limit", "message": "busy"})
    );
}
