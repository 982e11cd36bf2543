//! Health monitoring and crash-loop backoff (issue 29; issue 31 #6, #10b): a
//! hung upstream (SIGSTOP) is found by its failed health checks, stopped and
//! started again for the requests waiting for it, while the one forwarded to
//! it ends with 502; a model that keeps crashing is started at a bounded rate
//! and then refused (503 `model_failed` with its last output) until an
//! explicit load; no request reaches a process before its health check passed.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

use crate::support::{Harness, LIMIT, ModelSpec, free_port, model};
use crate::ui::Events;

async fn finish(handle: tokio::task::JoinHandle<(u16, String)>) -> (u16, String) {
    tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap()
}

fn code(body: &str) -> String {
    let json: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    json["error"]["code"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn send(h: &Harness, model: &str) -> (u16, String) {
    let response = tokio::time::timeout(LIMIT, h.chat(model, None, false).send())
        .await
        .unwrap()
        .unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test]
async fn hung_upstream_is_restarted_for_its_waiters_and_its_request_in_flight_gets_502() {
    let h = Harness::start(
        &[ModelSpec {
            id: "a",
            args: "--gate-closed",
            yaml: "parallel: 1\nhealthCheckInterval: 1\nhealthCheckFailures: 2\nunloadTimeout: 1",
        }],
        "",
    )
    .await;
    let forwarded = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    // Its slot is taken: this one waits in the queue.
    let waiting = h.spawn(h.chat("a", Some("10"), false));
    h.wait_queue_len(1).await;
    let hung = h.upstream_pid("a").expect("a's process");
    kill(Pid::from_raw(i32::try_from(hung).unwrap()), Signal::SIGSTOP).unwrap();

    // Two checks hang, the process is stopped (a stopped process keeps
    // SIGTERM pending: SIGKILL after unloadTimeout), and its request fails.
    let (status, body) = finish(forwarded).await;
    assert_eq!(status, 502, "{body}");
    // The waiter kept its place and is served by the restarted process.
    h.wait_held("a", 1).await;
    let restarted = h.upstream_pid("a").expect("a restarted");
    assert_ne!(restarted, hung);
    h.open_gate("a").await;
    let (status, body) = finish(waiting).await;
    assert_eq!(status, 200, "{body}");

    let metrics = h.metrics().await;
    for line in [
        "llamaswap_upstream_failures_total{model=\"a\",reason=\"unhealthy\"} 1\n",
        "llamaswap_upstream_failures_total{model=\"a\",reason=\"health_check\"} 2\n",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn a_stream_from_an_upstream_that_hangs_mid_response_ends_with_an_error_frame() {
    // One token every 5 s: the stream has begun and is far from its end
    // when the process is stopped.
    let h = Harness::start(
        &[ModelSpec {
            id: "a",
            args: "--tokens-per-second 0.2",
            yaml: "healthCheckInterval: 1\nhealthCheckFailures: 2\nunloadTimeout: 1",
        }],
        "",
    )
    .await;
    let mut response = tokio::time::timeout(LIMIT, h.chat("a", None, true).send())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    let first = tokio::time::timeout(LIMIT, response.chunk())
        .await
        .unwrap()
        .unwrap()
        .expect("a first frame");
    assert!(!first.is_empty());
    let hung = h.upstream_pid("a").expect("a's process");
    kill(Pid::from_raw(i32::try_from(hung).unwrap()), Signal::SIGSTOP).unwrap();

    // Found unhealthy and stopped: the stream ends with the error envelope
    // as its last frame, then [DONE].
    let mut rest = Vec::new();
    while let Some(chunk) = tokio::time::timeout(LIMIT, response.chunk())
        .await
        .unwrap()
        .unwrap()
    {
        rest.extend_from_slice(&chunk);
    }
    let rest = String::from_utf8_lossy(&rest);
    let frames: Vec<&str> = rest
        .split("\n\n")
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .collect();
    assert_eq!(frames.last(), Some(&"data: [DONE]"), "{rest}");
    let error = frames[frames.len() - 2]
        .strip_prefix("data: ")
        .unwrap_or_default();
    assert_eq!(code(error), "upstream_unreachable", "{rest}");
    let metrics = h.metrics().await;
    let line = "llamaswap_upstream_failures_total{model=\"a\",reason=\"unhealthy\"} 1\n";
    assert!(metrics.contains(line), "{line} not in\n{metrics}");
    h.shutdown().await;
}

/// A model whose process exits at once, with its last words.
fn crashing(yaml: &str) -> String {
    format!(
        "models:\n  x:\n    cmd: /bin/sh -c 'echo the model file is corrupt; exit 3'\n    proxy: http://127.0.0.1:{}\n{yaml}",
        free_port()
    )
}

#[tokio::test]
async fn crash_loop_is_paced_then_failed_with_its_last_output_until_an_explicit_load() {
    let h = Harness::start_yaml(&crashing("    maxRestarts: 2\n    restartWindow: 600\n")).await;
    let (status, body) = send(&h, "x").await;
    assert_eq!(
        (status, code(&body).as_str()),
        (502, "model_start_failed"),
        "{body}"
    );
    // The second start waits for its backoff, fails, and makes the model failed.
    let (status, body) = send(&h, "x").await;
    assert_eq!(
        (status, code(&body).as_str()),
        (503, "model_failed"),
        "{body}"
    );
    assert!(body.contains("the model file is corrupt"), "{body}");
    // Refused at once now: no third process.
    let (status, body) = send(&h, "x").await;
    assert_eq!(
        (status, code(&body).as_str()),
        (503, "model_failed"),
        "{body}"
    );
    let metrics = h.metrics().await;
    for line in [
        "llamaswap_upstream_failures_total{model=\"x\",reason=\"start_failed\"} 2\n",
        "llamaswap_upstream_failures_total{model=\"x\",reason=\"failed\"} 1\n",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    // An explicit load forgets the failures and starts it (it fails again).
    let load = h
        .http
        .post(h.url("/api/models/load/x"))
        .send()
        .await
        .unwrap();
    let (status, body) = (load.status().as_u16(), load.text().await.unwrap());
    assert_eq!(
        (status, code(&body).as_str()),
        (502, "model_start_failed"),
        "{body}"
    );
    let metrics = h.metrics().await;
    let line = "llamaswap_upstream_failures_total{model=\"x\",reason=\"start_failed\"} 3\n";
    assert!(metrics.contains(line), "{line} not in\n{metrics}");
    h.shutdown().await;
}

#[tokio::test]
async fn many_clients_of_a_crash_looping_model_start_it_once_per_backoff_step_not_per_request() {
    // Eight clients (under the default concurrencyLimit of 10) that send
    // again as soon as they are answered: the model is started once per
    // backoff step (1 s, then 2 s), never once per waiting request, and is
    // failed at the third failure.
    let h = Harness::start_yaml(&crashing("    maxRestarts: 3\n    restartWindow: 600\n")).await;
    let began = std::time::Instant::now();
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let http = h.http.clone();
            let url = h.url("/v1/chat/completions");
            tokio::spawn(async move {
                let mut answers = Vec::new();
                loop {
                    let response = http
                        .post(&url)
                        .json(&serde_json::json!({"model": "x", "messages": []}))
                        .send()
                        .await
                        .unwrap();
                    let status = response.status().as_u16();
                    let code = code(&response.text().await.unwrap());
                    answers.push((status, code.clone()));
                    if code == "model_failed" || answers.len() == 10 {
                        return answers;
                    }
                }
            })
        })
        .collect();
    for client in clients {
        let answers = tokio::time::timeout(LIMIT, client).await.unwrap().unwrap();
        assert_eq!(
            answers.last(),
            Some(&(503, "model_failed".to_owned())),
            "{answers:?}"
        );
        assert!(
            answers[..answers.len() - 1]
                .iter()
                .all(|answer| *answer == (502, "model_start_failed".to_owned())),
            "{answers:?}"
        );
    }
    // A lower bound, not a timing figure: the second start came at least 1 s
    // after the first failure, the third at least 2 s after the second.
    assert!(began.elapsed() >= std::time::Duration::from_secs(3));
    let metrics = h.metrics().await;
    for line in [
        "llamaswap_upstream_failures_total{model=\"x\",reason=\"start_failed\"} 3\n",
        "llamaswap_upstream_failures_total{model=\"x\",reason=\"failed\"} 1\n",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn monitored_model_retries_a_failed_start_for_the_same_waiters_until_it_is_failed() {
    let h = Harness::start_yaml(&crashing(
        "    healthCheckInterval: 5\n    maxRestarts: 2\n    restartWindow: 600\n",
    ))
    .await;
    // One request sees both starts: the first failure is retried, not answered.
    let (status, body) = send(&h, "x").await;
    assert_eq!(
        (status, code(&body).as_str()),
        (503, "model_failed"),
        "{body}"
    );
    assert!(body.contains("the model file is corrupt"), "{body}");
    let metrics = h.metrics().await;
    let line = "llamaswap_upstream_failures_total{model=\"x\",reason=\"start_failed\"} 2\n";
    assert!(metrics.contains(line), "{line} not in\n{metrics}");
    h.shutdown().await;
}

#[tokio::test]
async fn crashing_model_is_never_forwarded_a_request_before_its_health_check_passed() {
    // Each process crashes after one answer and answers 503 "loading" for
    // its first 100 ms: a request granted while the router still believes in
    // the crashed process must wait for the next one to be healthy, never
    // reach it while it loads. Clients sending back to back make that race
    // likely under load (a stress check: on an idle machine it passed without
    // the check in forward_granted too; the deterministic proof is the unit
    // test in api/model/call.rs).
    let h = Harness::start(&[model("a", "--crash-after 1 --load-time 100ms")], "").await;
    let clients: Vec<_> = (0..8)
        .map(|client| {
            let requests: Vec<_> = (0..8).map(|_| h.chat("a", None, false)).collect();
            tokio::spawn(async move {
                let mut seen = Vec::new();
                for request in requests {
                    let response = request.send().await.unwrap();
                    let status = response.status().as_u16();
                    seen.push((client, status, response.text().await.unwrap_or_default()));
                }
                seen
            })
        })
        .collect();
    for client in clients {
        for (client, status, body) in tokio::time::timeout(LIMIT, client).await.unwrap().unwrap() {
            assert!(
                !body.contains("loading"),
                "client {client}: a request reached the upstream before it was healthy: {status} {body}"
            );
        }
    }
    h.shutdown().await;
}

/// The row of model `id` in a `modelStatus` payload.
fn status_row<'a>(models: &'a Value, id: &str) -> &'a Value {
    models
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or(&Value::Null)
}

/// The `/running` row of `id`, if listed.
async fn running_row(h: &Harness, id: &str) -> Option<Value> {
    let body: Value = h
        .http
        .get(h.url("/running"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["running"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["model"] == id)
        .cloned()
}

/// A mockswap that exits at once at every start (clap refuses its flag).
fn crashing_mockswap(yaml: &'static str) -> ModelSpec {
    ModelSpec {
        id: "x",
        args: "--no-such-flag",
        yaml,
    }
}

#[tokio::test]
async fn a_failed_model_is_a_model_state_everywhere_until_its_window_has_passed() {
    // A window long enough for a loaded machine to look everywhere in it.
    let h = Harness::start(&[crashing_mockswap("maxRestarts: 1\nrestartWindow: 8")], "").await;
    let mut events = Events::connect(&h, None).await;
    events
        .until("modelStatus", |m| status_row(m, "x")["state"] == "stopped")
        .await;
    // One failure within the window is maxRestarts: failed at once.
    let (status, body) = send(&h, "x").await;
    assert_eq!(
        (status, code(&body).as_str()),
        (503, "model_failed"),
        "{body}"
    );

    let models = events
        .until("modelStatus", |m| status_row(m, "x")["state"] == "failed")
        .await;
    let failure = &status_row(&models, "x")["failure"];
    assert!(
        failure["reason"]
            .as_str()
            .unwrap()
            .starts_with("exited while starting (exit status: 2)"),
        "{failure}"
    );
    assert!(
        failure["last_output"]
            .as_str()
            .unwrap()
            .contains("--no-such-flag"),
        "{failure}"
    );
    assert_eq!(failure["failures"], 1, "{failure}");
    assert_eq!(failure["window_s"], 8, "{failure}");
    let failed_at = failure["failed_at_ms"].as_u64().unwrap();
    assert_eq!(
        failure["retry_at_ms"].as_u64().unwrap(),
        failed_at + 8000,
        "{failure}"
    );

    let row = running_row(&h, "x")
        .await
        .expect("a failed model is in /running");
    assert_eq!(row["state"], "failed", "{row}");
    assert_eq!(&row["failure"], failure, "{row}");
    let metrics = h.metrics().await;
    for line in [
        "llamaswap_model_state{model=\"x\",state=\"failed\"} 1\n",
        "llamaswap_model_state{model=\"x\",state=\"stopped\"} 0\n",
    ] {
        assert!(metrics.contains(line), "{line} not in\n{metrics}");
    }
    let listing: Value = h
        .http
        .get(h.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        listing["data"][0]["status"],
        serde_json::json!({"value": "unloaded", "failed": true}),
        "{listing}"
    );

    // Its window passes: it leaves the failed state by itself, on the event
    // stream as everywhere.
    events
        .until("modelStatus", |m| status_row(m, "x")["state"] == "stopped")
        .await;
    assert!(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            >= u128::from(failed_at + 8000)
    );
    assert_eq!(running_row(&h, "x").await, None);
    let metrics = h.metrics().await;
    let line = "llamaswap_model_state{model=\"x\",state=\"failed\"} 0\n";
    assert!(metrics.contains(line), "{line} not in\n{metrics}");
    h.shutdown().await;
}

#[tokio::test]
async fn an_explicit_load_takes_a_model_out_of_the_failed_state() {
    let h = Harness::start(
        &[crashing_mockswap("maxRestarts: 2\nrestartWindow: 600")],
        "",
    )
    .await;
    let mut events = Events::connect(&h, None).await;
    // The second start (after its 1 s backoff) makes it failed.
    let (status, body) = send(&h, "x").await;
    assert_eq!(
        (status, code(&body).as_str()),
        (502, "model_start_failed"),
        "{body}"
    );
    let (status, body) = send(&h, "x").await;
    assert_eq!(
        (status, code(&body).as_str()),
        (503, "model_failed"),
        "{body}"
    );
    let models = events
        .until("modelStatus", |m| status_row(m, "x")["state"] == "failed")
        .await;
    assert_eq!(status_row(&models, "x")["failure"]["failures"], 2);

    // The load clears it and starts the model, which fails once more: one
    // failure of two, so stopped, not failed.
    let load = h
        .http
        .post(h.url("/api/models/load/x"))
        .send()
        .await
        .unwrap();
    let (status, body) = (load.status().as_u16(), load.text().await.unwrap());
    assert_eq!(
        (status, code(&body).as_str()),
        (502, "model_start_failed"),
        "{body}"
    );
    let models = events
        .until("modelStatus", |m| status_row(m, "x")["state"] == "stopped")
        .await;
    assert_eq!(status_row(&models, "x").get("failure"), None);
    assert_eq!(running_row(&h, "x").await, None);
    h.shutdown().await;
}

#[tokio::test]
async fn a_model_that_never_passes_its_health_check_is_failed_with_that_reason() {
    let h = Harness::start(
        &[ModelSpec {
            id: "x",
            args: "--never-healthy",
            yaml: "maxRestarts: 1\nrestartWindow: 600",
        }],
        "",
    )
    .await;
    let (status, body) = send(&h, "x").await;
    assert_eq!(
        (status, code(&body).as_str()),
        (503, "model_failed"),
        "{body}"
    );
    let row = running_row(&h, "x").await.expect("listed as failed");
    assert_eq!(row["state"], "failed", "{row}");
    // (healthCheckTimeout has llama-swap's minimum of 15 s.)
    assert_eq!(
        row["failure"]["reason"], "did not become healthy within 15s",
        "{row}"
    );
    // Stopped after its failed check: no process is left behind it.
    assert_eq!(h.upstream_pid("x"), None);
    h.shutdown().await;
}

#[tokio::test]
async fn a_monitored_model_whose_ready_process_exits_is_failed_with_the_exit_as_its_reason() {
    let h = Harness::start(
        &[ModelSpec {
            id: "x",
            args: "--crash-after 1",
            yaml: "healthCheckInterval: 30\nmaxRestarts: 1\nrestartWindow: 600",
        }],
        "",
    )
    .await;
    let (status, body) = send(&h, "x").await;
    assert_eq!(status, 200, "{body}");
    // It exits after that answer: for a monitored model one failure, here
    // maxRestarts, so failed.
    let mut events = Events::connect(&h, None).await;
    let models = events
        .until("modelStatus", |m| status_row(m, "x")["state"] == "failed")
        .await;
    let failure = &status_row(&models, "x")["failure"];
    assert_eq!(failure["reason"], "exited (exit status: 1)", "{failure}");
    let (status, body) = send(&h, "x").await;
    assert_eq!(
        (status, code(&body).as_str()),
        (503, "model_failed"),
        "{body}"
    );
    let line = "llamaswap_upstream_failures_total{model=\"x\",reason=\"exited\"} 1\n";
    let metrics = h.metrics().await;
    assert!(metrics.contains(line), "{line} not in\n{metrics}");
    h.shutdown().await;
}
