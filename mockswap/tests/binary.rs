//! The `mockswap` binary, tested by spawning it: the CLI contract the server's
//! supervisor and non-Rust tests rely on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use futures_util::StreamExt;
use nix::sys::signal::Signal;
use serde_json::{Value, json};
use tokio::process::Command;

use support::{BOUND, Proc, chat};

#[tokio::test]
async fn binary_prints_listening_line_first_and_echoes_chat() {
    let mut proc = Proc::spawn(&["--models", "a,b"]).await;
    let client = reqwest::Client::new();
    let body: Value = client
        .post(format!("{}/v1/chat/completions", proc.uri))
        .json(&chat("b", "hello there", false))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["choices"][0]["message"]["content"], "[b] hello there");
    assert_eq!(body["model"], "b");
    let models: Value = client
        .get(format!("{}/v1/models", proc.uri))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a", "b"]);
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn binary_paces_streams_and_refuses_unknown_models() {
    let mut proc = Proc::spawn(&[
        "--models",
        "a",
        "--latency",
        "5ms",
        "--time-to-first-token",
        "5ms",
        "--tokens-per-second",
        "400",
    ])
    .await;
    let client = reqwest::Client::new();
    let url = format!("{}/v1/chat/completions", proc.uri);
    let response = client
        .post(&url)
        .json(&chat("a", "one two three", true))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut chunks = 0;
    let mut text = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = tokio::time::timeout(BOUND, stream.next()).await.unwrap() {
        text.extend_from_slice(&chunk.unwrap());
        chunks += 1;
    }
    let text = String::from_utf8(text).unwrap();
    // Frames arrive one HTTP chunk each; the content is intact and ends with [DONE].
    assert!(chunks > 1, "{chunks}");
    assert!(text.contains(r#""content":" three""#), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let unknown = client
        .post(&url)
        .json(&chat("b", "x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let body: Value = unknown.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn binary_health_is_loading_until_load_time_has_passed() {
    // Long enough that the first check lands inside it even on a loaded CI machine.
    let mut proc = Proc::spawn(&["--load-time", "3s"]).await;
    let client = reqwest::Client::new();
    let health = client
        .get(format!("{}/health", proc.uri))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 503);
    assert_eq!(
        health.json::<Value>().await.unwrap(),
        json!({"status": "loading"})
    );
    let chat_during_load = client
        .post(format!("{}/v1/chat/completions", proc.uri))
        .json(&chat("m", "x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(chat_during_load.status(), 503);
    // Poll like a supervisor does until the load time has passed.
    let ready = tokio::time::timeout(BOUND, async {
        loop {
            let r = client
                .get(format!("{}/health", proc.uri))
                .send()
                .await
                .unwrap();
            if r.status() == 200 {
                return r.json::<Value>().await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .unwrap();
    assert_eq!(ready, json!({"status": "ok"}));
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn binary_never_healthy_answers_503_to_health() {
    let mut proc = Proc::spawn(&["--never-healthy"]).await;
    let health = reqwest::get(format!("{}/health", proc.uri)).await.unwrap();
    assert_eq!(health.status(), 503);
    proc.signal(Signal::SIGINT);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn binary_exits_zero_on_sigterm_while_a_request_hangs() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    let installed = client
        .post(format!("{}/__mockswap/faults", proc.uri))
        .json(&json!({"fault": {"type": "hang"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(installed.status(), 200);
    let hanging = tokio::spawn(
        client
            .post(format!("{}/v1/chat/completions", proc.uri))
            .json(&chat("m", "x", false))
            .send(),
    );
    // The journal shows the request arrived before the signal is sent.
    let journal = client
        .get(format!("{}/__mockswap/requests?wait_for=1", proc.uri))
        .send()
        .await
        .unwrap();
    assert_eq!(journal.status(), 200);
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
    let response = hanging.await.unwrap().unwrap();
    assert_eq!(response.status(), 503);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "shutting_down");
}

#[tokio::test]
async fn binary_with_ignore_sigterm_survives_sigterm_and_dies_on_sigkill() {
    let mut proc = Proc::spawn(&["--ignore-sigterm"]).await;
    proc.signal(Signal::SIGTERM);
    proc.stderr_line("SIGTERM received and ignored").await;
    let health = reqwest::get(format!("{}/health", proc.uri)).await.unwrap();
    assert_eq!(health.status(), 200);
    proc.signal(Signal::SIGKILL);
    let status = proc.wait().await;
    assert_eq!(status.code(), None);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );
}

#[tokio::test]
async fn binary_crash_after_two_requests_exits_one_after_answering_both() {
    let mut proc = Proc::spawn(&["--crash-after", "2"]).await;
    let client = reqwest::Client::new();
    for text in ["one", "two"] {
        let body: Value = client
            .post(format!("{}/v1/chat/completions", proc.uri))
            .json(&chat("m", text, false))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            body["choices"][0]["message"]["content"],
            format!("[m] {text}")
        );
    }
    assert_eq!(proc.wait().await.code(), Some(1));
}

#[tokio::test]
async fn binary_crash_mid_stream_exits_one_after_sending_some_frames() {
    let mut proc = Proc::spawn(&["--crash-mid-stream"]).await;
    let response = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proc.uri))
        .json(&chat("m", "a long enough answer to be cut", true))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let mut received = Vec::new();
    let mut ended_with_error = false;
    let mut stream = response.bytes_stream();
    while let Some(chunk) = tokio::time::timeout(BOUND, stream.next()).await.unwrap() {
        match chunk {
            Ok(bytes) => received.extend_from_slice(&bytes),
            Err(_) => {
                ended_with_error = true;
                break;
            }
        }
    }
    let text = String::from_utf8(received).unwrap();
    assert!(text.starts_with("data: "), "{text:?}");
    assert!(!text.contains("[DONE]"), "{text:?}");
    assert!(ended_with_error, "the body must end abruptly: {text:?}");
    assert_eq!(proc.wait().await.code(), Some(1));
}

#[tokio::test]
async fn binary_fixture_scripts_replies_per_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fixture.json");
    std::fs::write(
        &path,
        r#"{"replies": [{"match": {"model": "a"}, "reply": {"text": "scripted for a"}}]}"#,
    )
    .unwrap();
    let mut proc = Proc::spawn(&["--fixture", path.to_str().unwrap()]).await;
    let client = reqwest::Client::new();
    for (model, want) in [("a", "scripted for a"), ("b", "[b] q")] {
        let body: Value = client
            .post(format!("{}/v1/chat/completions", proc.uri))
            .json(&chat(model, "q", false))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(body["choices"][0]["message"]["content"], want);
    }
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn binary_refuses_a_malformed_fixture_with_exit_code_two() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    std::fs::write(&path, r#"{"faults": [{"fault": {"type": "explode"}}]}"#).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_mockswap"))
        .args(["--fixture", path.to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("explode"), "{stderr}");
}

#[tokio::test]
async fn binary_send_loading_state_opens_chat_streams_with_marked_chunks() {
    let mut proc = Proc::spawn(&["--send-loading-state"]).await;
    let text = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", proc.uri))
        .json(&chat("m", "hi", true))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let statuses: Vec<&Value> = chunks
        .iter()
        .filter_map(|c| c.get("llamaswap"))
        .map(|m| &m["status"])
        .collect();
    assert_eq!(
        statuses,
        [&json!("waiting"), &json!("loading"), &json!("ready")]
    );
    assert!(
        chunks.iter().all(|c| c["object"] == "chat.completion.chunk"
            && !c["choices"].as_array().unwrap().is_empty()),
        "{text}"
    );
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}
