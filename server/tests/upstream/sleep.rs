//! Sleep instead of stop with real `mockswap` upstreams (vLLM's and SGLang's
//! calls): a release puts the model to sleep and keeps its process, the next
//! start wakes it (the same process, ready once healthy), a failed sleep or
//! wake falls back to stop and start, and a stop ends a sleeping process.

use std::time::Duration;

use llama_swap_server::testing::launcher::{Launcher, Released, UpstreamEvent};
use llama_swap_server::testing::upstream::{
    HttpCall, Monitor, ProcessSpec, ProcessState, SleepSpec, Supervisor,
};
use serde_json::Value;

use crate::support::{free_port, mockswap_bin, wait_gone, within};

fn spec(model: &str, flags: &str, sleep: SleepSpec) -> ProcessSpec {
    let port = free_port();
    ProcessSpec {
        model: model.into(),
        cmd: format!(
            "'{}' --listen 127.0.0.1:{port} --models {model} {flags}",
            mockswap_bin().display()
        ),
        cmd_stop: None,
        env: vec![],
        proxy: format!("http://127.0.0.1:{port}"),
        check_endpoint: Some("/health".into()),
        health_check_timeout: Duration::from_secs(30),
        sleep: Some(sleep),
        monitor: Monitor::default(),
    }
}

/// mockswap's own account of its sleep (`GET /__mockswap/sleep`).
async fn sleep_status(spec: &ProcessSpec) -> Value {
    reqwest::get(format!("{}/__mockswap/sleep", spec.proxy))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn wait_state(sup: &Supervisor, model: &str, state: ProcessState) {
    let mut rx = sup.watch_status(model).unwrap();
    within(
        &format!("{model} to be {state:?}"),
        rx.wait_for(|s| s.state == state),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_released_vllm_model_sleeps_in_its_process_and_the_next_start_wakes_it() {
    let spec = spec(
        "m",
        "--wake-time 50ms --memory 1000 --sleep-memory 10",
        SleepSpec::vllm(),
    );
    let (sup, _events) = Supervisor::new(vec![spec.clone()], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let pid = sup.status("m").unwrap().pid.unwrap();

    let released = within("release", sup.release("m", Duration::from_secs(10))).await;
    assert_eq!(released, Released::Slept);
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Sleeping);
    assert_eq!(
        sup.status("m").unwrap().pid,
        Some(pid),
        "the process is kept"
    );
    let asleep = sleep_status(&spec).await;
    assert_eq!(asleep["state"], "asleep");
    assert_eq!(asleep["level"], 1);
    assert_eq!(asleep["memory_bytes"], 10);

    within("wake", sup.ensure_ready("m")).await.unwrap();
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Ready);
    assert_eq!(
        sup.status("m").unwrap().pid,
        Some(pid),
        "woken, not restarted"
    );
    let awake = sleep_status(&spec).await;
    assert_eq!(
        (awake["state"].as_str(), awake["wakes"].as_u64()),
        (Some("awake"), Some(1))
    );

    sup.shutdown(Duration::from_secs(5)).await;
    wait_gone(pid).await;
}

#[tokio::test]
async fn sglang_calls_release_and_resume_memory() {
    let spec = spec("m", "", SleepSpec::sglang());
    let (sup, _events) = Supervisor::new(vec![spec.clone()], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    within("release", sup.release("m", Duration::from_secs(10))).await;
    assert_eq!(sleep_status(&spec).await["state"], "asleep");
    within("wake", sup.ensure_ready("m")).await.unwrap();
    let status = sleep_status(&spec).await;
    assert_eq!(
        (status["sleeps"].as_u64(), status["wakes"].as_u64()),
        (Some(1), Some(1))
    );
    sup.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_model_whose_sleep_call_fails_is_stopped_instead() {
    let broken = SleepSpec {
        sleep: HttpCall::post("/no-such-endpoint"),
        wake: HttpCall::post("/wake_up"),
    };
    let spec = spec("m", "", broken);
    let (sup, _events) = Supervisor::new(vec![spec], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let pid = sup.status("m").unwrap().pid.unwrap();
    let released = within("release", sup.release("m", Duration::from_secs(10))).await;
    assert_eq!(released, Released::Stopped);
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    wait_gone(pid).await;
    sup.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_model_that_does_not_wake_is_stopped_and_started_afresh() {
    let broken = SleepSpec {
        sleep: HttpCall::post("/sleep?level=1"),
        wake: HttpCall::post("/no-such-endpoint"),
    };
    let spec = spec("m", "", broken);
    let (sup, _events) = Supervisor::new(vec![spec.clone()], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let pid = sup.status("m").unwrap().pid.unwrap();
    within("release", sup.release("m", Duration::from_secs(10))).await;
    wait_state(&sup, "m", ProcessState::Sleeping).await;
    within("restart", sup.ensure_ready("m")).await.unwrap();
    let new_pid = sup.status("m").unwrap().pid.unwrap();
    assert_ne!(new_pid, pid, "a fresh process");
    wait_gone(pid).await;
    assert_eq!(sleep_status(&spec).await["state"], "awake");
    sup.shutdown(Duration::from_secs(5)).await;
    wait_gone(new_pid).await;
}

#[tokio::test]
async fn a_stop_ends_a_sleeping_process() {
    let spec = spec("m", "", SleepSpec::vllm());
    let (sup, _events) = Supervisor::new(vec![spec], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let pid = sup.status("m").unwrap().pid.unwrap();
    within("release", sup.release("m", Duration::from_secs(10))).await;
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Sleeping);
    within("stop", sup.stop("m", Duration::from_secs(10))).await;
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    wait_gone(pid).await;
    sup.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_model_without_a_sleep_mode_is_stopped_by_a_release() {
    let mut spec = spec("m", "", SleepSpec::vllm());
    spec.sleep = None;
    let (sup, _events) = Supervisor::new(vec![spec], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let pid = sup.status("m").unwrap().pid.unwrap();
    let released = within("release", sup.release("m", Duration::from_secs(10))).await;
    assert_eq!(released, Released::Stopped);
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    wait_gone(pid).await;
    sup.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_process_that_dies_asleep_is_reported_as_an_exit() {
    let spec = spec("m", "", SleepSpec::vllm());
    let (sup, mut events) = Supervisor::new(vec![spec], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let pid = sup.status("m").unwrap().pid.unwrap();
    let released = within("release", sup.release("m", Duration::from_secs(10))).await;
    assert_eq!(released, Released::Slept);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let event = within("the exit event", events.recv()).await;
    assert!(
        matches!(&event, Some(UpstreamEvent::Exited { model, .. }) if model == "m"),
        "{event:?}"
    );
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    sup.shutdown(Duration::from_secs(5)).await;
}
