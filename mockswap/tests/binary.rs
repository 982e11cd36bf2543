//! The `mockswap` binary, tested by spawning it: the CLI contract the server's
//! supervisor and non-Rust tests rely on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use futures_util::StreamExt;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, Command};

/// Generous upper bound for anything that should happen promptly.
const BOUND: Duration = Duration::from_secs(10);

/// A spawned `mockswap`; killed and reaped on drop if the test did not wait for it.
struct Proc {
    child: Child,
    uri: String,
    stderr: Lines<BufReader<ChildStderr>>,
}

impl Proc {
    async fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mockswap"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut lines = BufReader::new(stdout).lines();
        let first = tokio::time::timeout(BOUND, lines.next_line())
            .await
            .expect("no listening line in time")
            .unwrap()
            .expect("stdout closed before the listening line");
        let uri = first
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("first line is not the listening line: {first:?}"))
            .to_owned();
        assert!(uri.starts_with("http://127.0.0.1:"), "{uri}");
        assert!(!uri.ends_with(":0"), "{uri}");
        Self { child, uri, stderr }
    }

    fn signal(&self, signal: Signal) {
        let pid = i32::try_from(self.child.id().unwrap()).unwrap();
        kill(Pid::from_raw(pid), signal).unwrap();
    }

    async fn wait(&mut self) -> ExitStatus {
        tokio::time::timeout(BOUND, self.child.wait())
            .await
            .expect("mockswap did not exit in time")
            .unwrap()
    }

    /// Reads stderr until a line containing `needle` (the process logs what it does).
    async fn stderr_line(&mut self, needle: &str) -> String {
        tokio::time::timeout(BOUND, async {
            loop {
                let line = self
                    .stderr
                    .next_line()
                    .await
                    .unwrap()
                    .expect("stderr closed");
                if line.contains(needle) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no stderr line with {needle:?}"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // start_kill + the runtime's orphan reaping; tests that care wait explicitly.
        let _ = self.child.start_kill();
    }
}

fn chat(model: &str, text: &str, stream: bool) -> Value {
    json!({"model": model, "stream": stream, "messages": [{"role": "user", "content": text}]})
}

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
async fn binary_health_is_loading_until_load_time_has_passed() {
    let mut proc = Proc::spawn(&["--load-time", "1500ms"]).await;
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
    tokio::time::timeout(BOUND, async {
        loop {
            let journal: Value = client
                .get(format!("{}/__mockswap/requests", proc.uri))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if journal.as_array().unwrap().len() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
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

async fn admin(
    client: &reqwest::Client,
    method: reqwest::Method,
    uri: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = client.request(method, format!("{uri}/__mockswap/{path}"));
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn admin_requests_lists_the_journal_with_the_documented_fields_and_clears_it() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    for priority in [None, Some("10"), Some("nope")] {
        let mut request = client
            .post(format!("{}/v1/chat/completions", proc.uri))
            .json(&chat("m", "x", priority.is_some()));
        if let Some(p) = priority {
            request = request.header("X-Priority", p);
        }
        request.send().await.unwrap().bytes().await.unwrap();
    }
    let dup = client
        .post(format!("{}/upstream/u/v1/embeddings", proc.uri))
        .header("x-priority", "10")
        .header("x-priority", "-10")
        .json(&json!({"input": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(dup.status(), 200);
    let (status, journal) = admin(&client, reqwest::Method::GET, &proc.uri, "requests", None).await;
    assert_eq!(status, 200);
    let entries = journal.as_array().unwrap();
    assert_eq!(entries.len(), 4);
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    assert_eq!(entries[0]["method"], "POST");
    assert_eq!(entries[0]["path"], "/v1/chat/completions");
    assert_eq!(entries[0]["model"], "m");
    assert_eq!(entries[0]["stream"], false);
    assert_eq!(entries[1]["stream"], true);
    assert_eq!(
        entries[0]["priority"],
        json!({"state": "absent", "value": null, "raw": []})
    );
    assert_eq!(
        entries[1]["priority"],
        json!({"state": "value", "value": 10, "raw": ["10"]})
    );
    assert_eq!(
        entries[2]["priority"],
        json!({"state": "invalid", "value": null, "raw": ["nope"]})
    );
    assert_eq!(
        entries[3]["priority"],
        json!({"state": "duplicated", "value": null, "raw": ["10", "-10"]})
    );
    assert_eq!(entries[3]["model"], "u");
    let pairs: Vec<&Value> = entries[3]["headers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|h| h["name"] == "x-priority")
        .map(|h| &h["value"])
        .collect();
    assert_eq!(pairs, [&json!("10"), &json!("-10")]);
    let (status, _) = admin(
        &client,
        reqwest::Method::DELETE,
        &proc.uri,
        "requests",
        None,
    )
    .await;
    assert_eq!(status, 200);
    let (_, journal) = admin(&client, reqwest::Method::GET, &proc.uri, "requests", None).await;
    assert_eq!(journal, json!([]));
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_faults_schedule_a_429_with_retry_after_for_the_next_request() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    let fault = json!({
        "fault": {"type": "status", "status": 429, "headers": {"Retry-After": "2"},
                  "body": {"error": {"message": "busy", "type": "rate_limit_error", "code": "concurrency_limit"}}},
        "match": {"model": "m"},
        "times": 1
    });
    let (status, installed) = admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "faults",
        Some(fault),
    )
    .await;
    assert_eq!((status, installed), (200, json!({"installed": 1})));
    let url = format!("{}/v1/chat/completions", proc.uri);
    let first = client
        .post(&url)
        .json(&chat("m", "x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), 429);
    assert_eq!(first.headers()["retry-after"], "2");
    let second = client
        .post(&url)
        .json(&chat("m", "x", false))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 200);
    let (status, bad) = admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "faults",
        Some(json!({"fault": {"type": "status", "status": 42}})),
    )
    .await;
    assert_eq!(status, 400);
    assert_eq!(bad["error"]["code"], "invalid_admin_request");
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_gate_holds_requests_and_dispatch_order_follows_priority() {
    let mut proc = Proc::spawn(&["--gate-closed"]).await;
    let client = reqwest::Client::new();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, priority) in ["-10", "0", "10"].into_iter().enumerate() {
        let request = client
            .post(format!("{}/v1/chat/completions", proc.uri))
            .header("x-priority", priority)
            .json(&chat("m", "x", false));
        tasks.spawn(async move { request.send().await.unwrap().status() });
        // Arrival order is fixed by waiting until each request is held.
        tokio::time::timeout(BOUND, async {
            loop {
                let (_, gate) = admin(&client, reqwest::Method::GET, &proc.uri, "gate", None).await;
                if gate["held"] == i + 1 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .unwrap();
    }
    let (_, order) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "dispatch-order",
        None,
    )
    .await;
    assert_eq!(order, json!([]));
    let (status, _) = admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "gate",
        Some(json!({"open": true})),
    )
    .await;
    assert_eq!(status, 200);
    while let Some(done) = tasks.join_next().await {
        assert_eq!(done.unwrap(), 200);
    }
    let (_, order) = admin(
        &client,
        reqwest::Method::GET,
        &proc.uri,
        "dispatch-order",
        None,
    )
    .await;
    assert_eq!(order, json!([3, 2, 1]));
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}

#[tokio::test]
async fn admin_replies_script_a_response_for_a_path() {
    let mut proc = Proc::spawn(&[]).await;
    let client = reqwest::Client::new();
    let reply = json!({"match": {"path": "/v1/embeddings"}, "reply": {"json": {"scripted": true}, "status": 201}});
    let (status, _) = admin(
        &client,
        reqwest::Method::POST,
        &proc.uri,
        "replies",
        Some(reply),
    )
    .await;
    assert_eq!(status, 200);
    let response = client
        .post(format!("{}/v1/embeddings", proc.uri))
        .json(&json!({"model": "m", "input": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"scripted": true})
    );
    proc.signal(Signal::SIGTERM);
    assert_eq!(proc.wait().await.code(), Some(0));
}
