//! `Supervisor::reconfigure`: a reload keeps the processes of models it does
//! not change, gives changed models their new definition at their next start,
//! and lets removed models be stopped, never starting or stopping anything
//! itself.

use std::time::Duration;

use llama_swap_server::testing::launcher::{LaunchError, Launcher};
use llama_swap_server::testing::upstream::{Monitor, ProcessSpec, ProcessState, Supervisor};

use crate::support::{assert_gone, free_port, is_alive, mockswap_bin, within};

fn mock_spec(model: &str, port: u16, flags: &str) -> ProcessSpec {
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
        sleep: None,
        monitor: Monitor::default(),
    }
}

fn pid(sup: &Supervisor, model: &str) -> u32 {
    sup.status(model)
        .and_then(|s| s.pid)
        .expect("a running process")
}

#[tokio::test]
async fn a_reconfigure_that_adds_a_model_keeps_the_running_process_of_the_others() {
    let a = mock_spec("a", free_port(), "");
    let (sup, _events) = Supervisor::new(vec![a.clone()], 100);
    within("a ready", sup.ensure_ready("a")).await.unwrap();
    let before = pid(&sup, "a");

    // A new health-check limit is not a new process.
    let mut a_again = a.clone();
    a_again.health_check_timeout = Duration::from_secs(60);
    let done = sup.reconfigure(vec![a_again, mock_spec("b", free_port(), "")], None);
    assert_eq!(done.added, ["b"]);
    assert!(
        done.changed.is_empty() && done.removed.is_empty(),
        "{done:?}"
    );

    assert_eq!(sup.status("a").unwrap().state, ProcessState::Ready);
    assert_eq!(pid(&sup, "a"), before);
    assert_eq!(sup.models(), ["a", "b"]);
    within("b ready", sup.ensure_ready("b")).await.unwrap();
    assert!(sup.logs().history("b").is_some());
    within("a still ready", sup.ensure_ready("a"))
        .await
        .unwrap();
    assert_eq!(pid(&sup, "a"), before);
    within("shutdown", sup.shutdown(Duration::from_secs(5))).await;
}

#[tokio::test]
async fn a_changed_model_keeps_its_old_process_until_stopped_then_starts_the_new_definition() {
    let old = mock_spec("a", free_port(), "");
    let new = mock_spec("a", free_port(), "--load-time 10ms");
    let (sup, _events) = Supervisor::new(vec![old.clone()], 100);
    within("a ready", sup.ensure_ready("a")).await.unwrap();
    let first = pid(&sup, "a");

    let done = sup.reconfigure(vec![new.clone()], None);
    assert_eq!(done.changed, ["a"]);
    // Still the old process: stopping it is the router's call.
    assert_eq!(pid(&sup, "a"), first);
    within("ready again", sup.ensure_ready("a")).await.unwrap();
    assert_eq!(pid(&sup, "a"), first);

    within("stop", sup.stop("a", Duration::from_secs(10))).await;
    assert_gone(first);
    within("start the new one", sup.ensure_ready("a"))
        .await
        .unwrap();
    let second = pid(&sup, "a");
    assert_ne!(second, first);
    let health = reqwest::get(format!("{}/health", new.proxy)).await.unwrap();
    assert_eq!(health.status(), 200, "the new definition's port answers");
    within("shutdown", sup.shutdown(Duration::from_secs(5))).await;
    assert_gone(second);
}

#[tokio::test]
async fn a_removed_model_is_unlisted_but_runs_until_stopped_and_its_task_then_ends() {
    // (an idle removed model's task ends at once: see the next test)
    let a = mock_spec("a", free_port(), "");
    let b = mock_spec("b", free_port(), "");
    let (sup, _events) = Supervisor::new(vec![a.clone(), b.clone()], 100);
    within("a ready", sup.ensure_ready("a")).await.unwrap();
    let running = pid(&sup, "a");

    let done = sup.reconfigure(vec![b.clone()], None);
    assert_eq!(done.removed, ["a"]);
    assert_eq!(sup.models(), ["b"]);
    assert!(
        is_alive(running),
        "a removed model is not stopped by the reconfigure"
    );
    assert_eq!(sup.status("a").unwrap().state, ProcessState::Ready);

    let mut ended = sup.watch_status("a").unwrap();
    within("stop a", sup.stop("a", Duration::from_secs(10))).await;
    assert_gone(running);
    // Stopped and removed: its task ends.
    within(
        "a's task to end",
        ended.wait_for(|s| s.state == ProcessState::ShutDown),
    )
    .await
    .unwrap();
    // The next reconfigure forgets it.
    assert_eq!(sup.reconfigure(vec![b], None), Default::default());
    assert!(sup.status("a").is_none());
    let unknown = within("a unknown", sup.ensure_ready("a")).await;
    assert!(
        matches!(unknown, Err(LaunchError::UnknownModel { .. })),
        "{unknown:?}"
    );
    within("shutdown", sup.shutdown(Duration::from_secs(5))).await;
}

#[tokio::test]
async fn a_removed_model_configured_again_before_its_task_ended_is_added_back() {
    let a = mock_spec("a", free_port(), "");
    let (sup, _events) = Supervisor::new(vec![a.clone()], 100);
    within("a ready", sup.ensure_ready("a")).await.unwrap();
    let running = pid(&sup, "a");
    assert_eq!(sup.reconfigure(vec![], None).removed, ["a"]);
    let back = sup.reconfigure(vec![a], None);
    assert_eq!(back.added, ["a"]);
    assert_eq!(sup.models(), ["a"]);
    assert_eq!(pid(&sup, "a"), running, "its process was never stopped");
    within("shutdown", sup.shutdown(Duration::from_secs(5))).await;
}

#[tokio::test]
async fn a_reconfigure_after_shutdown_changes_nothing() {
    let (sup, _events) = Supervisor::new(vec![mock_spec("a", free_port(), "")], 100);
    within("shutdown", sup.shutdown(Duration::from_secs(5))).await;
    let done = sup.reconfigure(vec![mock_spec("b", free_port(), "")], None);
    assert_eq!(done, Default::default());
    assert_eq!(sup.models(), ["a"]);
}

#[tokio::test]
async fn a_new_definition_on_the_port_of_a_leaving_one_is_told_to_wait_for_it() {
    let (pa, pb) = (free_port(), free_port());
    let (sup, _events) = Supervisor::new(vec![mock_spec("a", pa, ""), mock_spec("b", pb, "")], 100);
    // a moves to b's port, b to a new one, c arrives on a's old port.
    let pc = free_port();
    let done = sup.reconfigure(
        vec![
            mock_spec("a", pb, ""),
            mock_spec("b", pc, ""),
            mock_spec("c", pa, ""),
        ],
        None,
    );
    assert_eq!(done.changed, ["a", "b"]);
    assert_eq!(done.added, ["c"]);
    let mut waits = done.waits.clone();
    waits.sort();
    assert_eq!(
        waits,
        [
            ("a".to_owned(), "b".to_owned()),
            ("c".to_owned(), "a".to_owned())
        ]
    );
    within("shutdown", sup.shutdown(Duration::from_secs(5))).await;
}

#[tokio::test]
async fn the_task_of_a_removed_model_without_a_process_ends_at_once() {
    let (sup, _events) = Supervisor::new(vec![mock_spec("a", free_port(), "")], 100);
    let mut status = sup.watch_status("a").unwrap();
    assert_eq!(sup.reconfigure(vec![], None).removed, ["a"]);
    within(
        "a's task to end",
        status.wait_for(|s| s.state == ProcessState::ShutDown),
    )
    .await
    .unwrap();
    within("shutdown", sup.shutdown(Duration::from_secs(5))).await;
}
