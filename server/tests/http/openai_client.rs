//! The official `openai` Python package reads our loading-state streams with
//! its usual loop (`for chunk in stream: chunk.choices[0].delta`): every
//! injected frame is a chunk with `choices`, the queue position is in the
//! `llamaswap` extension object, and an error after the 200 raises the
//! client's `APIError` instead of crashing the loop.
//!
//! Needs `python3` with `openai` (`.ci/run` installs it). Without them the
//! tests are skipped, except when `LLAMA_SWAP_REQUIRE_ALL` is set (CI), where
//! a missing dependency fails them.

use std::path::PathBuf;
use std::process::Stdio;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

use crate::support::{Harness, LIMIT, ModelSpec, free_port, model};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/openai_stream.py");

/// Whether `python3` can import `openai`; panics when it cannot and CI
/// requires every test to run.
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

/// The script streaming one completion for `model`; its reports arrive line
/// by line while the stream is open.
struct PythonClient {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl PythonClient {
    fn start(base: &str, model: &str) -> Self {
        let mut child = Command::new("python3")
            .arg(PathBuf::from(SCRIPT))
            .args([base, model])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        Self {
            child,
            lines: BufReader::new(stdout).lines(),
        }
    }

    /// The next report; `None` once the script has ended.
    async fn next(&mut self) -> Option<Value> {
        let line = tokio::time::timeout(LIMIT, self.lines.next_line())
            .await
            .expect("the python client said nothing within the limit")
            .unwrap()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
    }

    /// Reads reports until one satisfies `until` (returned with those before it).
    async fn read_until(&mut self, until: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let Some(report) = self.next().await else {
                let status = self.finish().await;
                panic!("the python client ended ({status}) before the expected report: {seen:?}");
            };
            let hit = until(&report);
            seen.push(report);
            if hit {
                return seen;
            }
        }
    }

    /// Waits for the script to end; its stderr on failure.
    async fn finish(&mut self) -> String {
        let status = tokio::time::timeout(LIMIT, self.child.wait())
            .await
            .unwrap()
            .unwrap();
        let mut stderr = String::new();
        if let Some(mut pipe) = self.child.stderr.take() {
            tokio::io::AsyncReadExt::read_to_string(&mut pipe, &mut stderr)
                .await
                .unwrap();
        }
        format!("{status}: {stderr}")
    }

    /// Reads to the end and checks the script exited cleanly.
    async fn rest(&mut self) -> Vec<Value> {
        let mut seen = Vec::new();
        while let Some(report) = self.next().await {
            seen.push(report);
        }
        let status = self.finish().await;
        assert!(status.starts_with("exit status: 0"), "{status}");
        seen
    }
}

fn marker(report: &Value) -> &Value {
    &report["chunk"]["llamaswap"]
}

/// No frame without `choices` may be one the proxy injected.
fn assert_no_marked_usage_chunk(reports: &[Value]) {
    for report in reports.iter().filter(|r| r["usage"] == true) {
        assert!(report["llamaswap"].is_null(), "{report}");
    }
}

fn is_status(report: &Value, status: &str) -> bool {
    marker(report)["status"] == status
}

/// The model's own text, from chunks without the marker.
fn content(reports: &[Value]) -> String {
    reports
        .iter()
        .filter(|r| !r["chunk"].is_null() && marker(r).is_null())
        .filter_map(|r| r["chunk"]["content"].as_str())
        .collect()
}

fn loading_model(id: &'static str, args: &'static str) -> ModelSpec {
    ModelSpec {
        id,
        args,
        yaml: "sendLoadingState: true",
    }
}

#[tokio::test]
async fn openai_python_loop_reads_a_loading_stream_then_the_answer() {
    if !openai_available() {
        return;
    }
    let h = Harness::start(&[loading_model("b", "--load-time 300ms")], "").await;
    let mut client = PythonClient::start(&h.base, "b");
    let mut reports = client.read_until(|r| r["done"] == true).await;
    reports.extend(client.rest().await);

    let injected: Vec<&Value> = reports
        .iter()
        .filter(|r| !r["chunk"].is_null() && !marker(r).is_null())
        .collect();
    assert!(
        injected.iter().any(|r| is_status(r, "loading")),
        "{reports:?}"
    );
    let last = injected.last().unwrap();
    assert!(is_status(last, "ready"), "{reports:?}");
    assert!(marker(last)["waited_ms"].is_u64(), "{reports:?}");
    for report in &injected {
        assert_eq!(marker(report)["model"], "b", "{report}");
        assert!(report["chunk"]["content"].is_null(), "{report}");
        assert!(report["chunk"]["reasoning"].is_string(), "{report}");
    }
    let text: String = injected
        .iter()
        .filter_map(|r| r["chunk"]["reasoning"].as_str())
        .collect();
    assert!(text.contains("llama-swap loading model: b"), "{text}");
    assert!(text.contains("Done! ("), "{text}");
    assert_eq!(content(&reports), "[b] hi");
    assert_no_marked_usage_chunk(&reports);
    h.shutdown().await;
}

#[tokio::test]
async fn openai_python_loop_gets_the_queue_position_from_the_extension_field() {
    if !openai_available() {
        return;
    }
    let h = Harness::start(&[model("a", "--gate-closed"), loading_model("b", "")], "").await;
    let busy = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;

    let mut client = PythonClient::start(&h.base, "b");
    let before = client.read_until(|r| is_status(r, "queued")).await;
    let queued = before.last().unwrap();
    assert_eq!(marker(queued)["position"], 1, "{before:?}");
    h.open_gate("a").await;
    let (status, _) = tokio::time::timeout(LIMIT, busy).await.unwrap().unwrap();
    assert_eq!(status, 200);

    let after = client.rest().await;
    assert_eq!(after.last().unwrap()["done"], true, "{after:?}");
    assert!(after.iter().any(|r| is_status(r, "ready")), "{after:?}");
    assert_eq!(content(&after), "[b] hi");
    assert_no_marked_usage_chunk(&after);
    h.shutdown().await;
}

#[tokio::test]
async fn an_upstream_that_dies_mid_stream_raises_api_error_in_the_openai_loop() {
    if !openai_available() {
        return;
    }
    let h = Harness::start(&[loading_model("b", "--crash-mid-stream")], "").await;
    let mut client = PythonClient::start(&h.base, "b");
    let reports = client.rest().await;
    let error = &reports.last().unwrap()["api_error"];
    assert_eq!(error["class"], "APIError", "{reports:?}");
    assert!(error["body"]["code"].is_string(), "{reports:?}");
    assert!(reports.iter().any(|r| is_status(r, "ready")), "{reports:?}");
    h.shutdown().await;
}

#[tokio::test]
async fn a_model_that_fails_to_start_raises_api_error_in_the_openai_loop() {
    if !openai_available() {
        return;
    }
    let port = free_port();
    let yaml = format!(
        "healthCheckTimeout: 15\nmodels:\n  broken:\n    cmd: /bin/false\n    proxy: http://127.0.0.1:{port}\n    sendLoadingState: true\n"
    );
    let h = Harness::start_yaml(&yaml).await;
    let mut client = PythonClient::start(&h.base, "broken");
    let reports = client.rest().await;
    let error = &reports.last().unwrap()["api_error"];
    assert_eq!(error["class"], "APIError", "{reports:?}");
    assert_eq!(error["body"]["code"], "model_start_failed", "{reports:?}");
    assert!(
        reports
            .iter()
            .all(|r| !r["chunk"].is_null() || !r["api_error"].is_null()),
        "{reports:?}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_shutdown_while_queued_raises_api_error_in_the_openai_loop() {
    if !openai_available() {
        return;
    }
    let mut h = Harness::start(&[model("a", "--gate-closed"), loading_model("b", "")], "").await;
    let busy = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let mut client = PythonClient::start(&h.base, "b");
    // The 200 and a queued frame are out: the error can only come in-stream.
    client.read_until(|r| is_status(r, "queued")).await;
    h.begin_shutdown();
    let reports = client.rest().await;
    let error = &reports.last().unwrap()["api_error"];
    assert_eq!(error["class"], "APIError", "{reports:?}");
    assert_eq!(error["body"]["code"], "shutting_down", "{reports:?}");
    // The in-flight request may finish, then the server stops.
    h.open_gate("a").await;
    let (status, _) = tokio::time::timeout(LIMIT, busy).await.unwrap().unwrap();
    assert_eq!(status, 200);
    h.shutdown().await;
}
