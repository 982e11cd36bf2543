//! Sleep instead of stop over HTTP with real mockswap upstreams: a swap puts a
//! model with `sleep: vllm` to sleep, keeping its process, and its next request
//! wakes the same process and is forwarded only once it is awake. A model
//! whose sleep call fails is stopped instead, and one whose process dies while
//! asleep is stopped: both show as stopped everywhere, not as sleeping.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::{Harness, ModelSpec, model};
use crate::ui::Events;

async fn ok(h: &Harness, model: &str) {
    let response = h.chat(model, None, false).send().await.unwrap();
    assert_eq!(response.status(), 200, "{model}");
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(m, s)| ((*m).to_owned(), (*s).to_owned()))
        .collect()
}

/// `GET /running` as (model, state) pairs.
async fn states(h: &Harness) -> Vec<(String, String)> {
    let body: serde_json::Value = h
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
        .map(|m| {
            (
                m["model"].as_str().unwrap().to_owned(),
                m["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// mockswap's account of its sleep (`GET /__mockswap/sleep`).
async fn sleep_status(h: &Harness, model: &str) -> serde_json::Value {
    h.http
        .get(format!("{}/__mockswap/sleep", h.upstream(model)))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_swap_puts_a_sleeping_model_to_sleep_and_its_next_request_wakes_the_same_process() {
    let h = Harness::start(
        &[
            ModelSpec {
                args: "--wake-time 100ms",
                yaml: "sleep: vllm",
                id: "a",
            },
            model("b", ""),
        ],
        "",
    )
    .await;
    ok(&h, "a").await;
    let pid = h.upstream_pid("a").unwrap();
    // One model at a time (no groups): b's start puts a to sleep.
    ok(&h, "b").await;
    assert_eq!(
        states(&h).await,
        pairs(&[("a", "sleeping"), ("b", "ready")])
    );
    assert_eq!(sleep_status(&h, "a").await["state"], "asleep");
    assert_eq!(h.upstream_pid("a"), Some(pid), "a's process is kept");
    // A burst for a while it wakes: none reaches it before it is awake.
    let burst: Vec<_> = (0..4).map(|_| h.spawn(h.chat("a", None, false))).collect();
    for handle in burst {
        let (status, body) = tokio::time::timeout(crate::support::LIMIT, handle)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(h.upstream_pid("a"), Some(pid), "woken, not restarted");
    let status = sleep_status(&h, "a").await;
    assert_eq!(status["wakes"], 1);
    assert_eq!(
        status["refused_while_asleep"], 0,
        "forwarded before it woke: {status}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_sleeping_model_shows_as_sleeping_and_unload_stops_its_process() {
    let h = Harness::start(
        &[
            ModelSpec {
                args: "",
                yaml: "sleep: vllm",
                id: "a",
            },
            model("b", ""),
        ],
        "",
    )
    .await;
    ok(&h, "a").await;
    ok(&h, "b").await;
    assert!(h.upstream_pid("a").is_some());
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("llamaswap_model_state{model=\"a\",state=\"sleeping\"} 1\n"),
        "{metrics}"
    );
    let response = h
        .http
        .post(h.url("/api/models/unload/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // The unload answers once the stop is done.
    assert_eq!(h.upstream_pid("a"), None, "a's process is gone");
    assert_eq!(states(&h).await, pairs(&[("b", "ready")]));
    h.shutdown().await;
}

/// The state `/metrics` gives `model` (`llamaswap_model_state` at 1).
fn metrics_state(metrics: &str, model: &str) -> Option<String> {
    let prefix = format!("llamaswap_model_state{{model=\"{model}\",state=\"");
    metrics.lines().find_map(|line| {
        let rest = line.strip_prefix(&prefix)?;
        let (state, value) = rest.split_once("\"} ")?;
        (value == "1").then(|| state.to_owned())
    })
}

/// `model`'s state in a `modelStatus` payload.
fn status_of(models: &serde_json::Value, model: &str) -> Option<String> {
    models
        .as_array()?
        .iter()
        .find(|m| m["id"] == model)
        .and_then(|m| m["state"].as_str())
        .map(str::to_owned)
}

#[tokio::test]
async fn a_model_whose_sleep_call_fails_is_stopped_and_shown_stopped_not_sleeping() {
    let h = Harness::start(
        &[
            ModelSpec {
                args: "",
                // mockswap has no such endpoint: the sleep call answers 404.
                yaml: "sleep: {sleep: \"POST /no-such-sleep\", wake: \"POST /wake_up\"}",
                id: "a",
            },
            model("b", ""),
        ],
        "",
    )
    .await;
    ok(&h, "a").await;
    let mut events = Events::connect(&h, None).await;
    ok(&h, "b").await;
    assert_eq!(h.upstream_pid("a"), None, "a's process is stopped");
    assert_eq!(states(&h).await, pairs(&[("b", "ready")]));
    assert_eq!(
        metrics_state(&h.metrics().await, "a").as_deref(),
        Some("stopped")
    );
    let models = events
        .until("modelStatus", |m| {
            status_of(m, "b").as_deref() == Some("ready")
        })
        .await;
    assert_eq!(
        status_of(&models, "a").as_deref(),
        Some("stopped"),
        "{models}"
    );
    // Its next request starts it afresh.
    ok(&h, "a").await;
    h.shutdown().await;
}

#[tokio::test]
async fn a_model_whose_process_dies_while_asleep_is_shown_stopped_and_started_afresh() {
    let h = Harness::start(
        &[
            ModelSpec {
                args: "",
                yaml: "sleep: vllm",
                id: "a",
            },
            model("b", ""),
        ],
        "",
    )
    .await;
    ok(&h, "a").await;
    ok(&h, "b").await;
    assert_eq!(
        states(&h).await,
        pairs(&[("a", "sleeping"), ("b", "ready")])
    );
    let mut events = Events::connect(&h, None).await;
    let pid = h.upstream_pid("a").expect("a sleeps in its process");
    kill(Pid::from_raw(i32::try_from(pid).unwrap()), Signal::SIGKILL).unwrap();
    events
        .until("modelStatus", |m| {
            status_of(m, "a").as_deref() == Some("stopped")
        })
        .await;
    assert_eq!(states(&h).await, pairs(&[("b", "ready")]));
    assert_eq!(
        metrics_state(&h.metrics().await, "a").as_deref(),
        Some("stopped")
    );
    // Its next request starts a new process (a wake would find nothing).
    ok(&h, "a").await;
    let again = h.upstream_pid("a").expect("a runs again");
    assert_ne!(again, pid);
    assert_eq!(sleep_status(&h, "a").await["wakes"], 0);
    h.shutdown().await;
}
