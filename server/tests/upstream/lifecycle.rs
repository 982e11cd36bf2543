//! The supervisor's state machine driven with plain shell processes as upstreams:
//! spawning, failing, stopping, escalation, aborts, restarts and teardown.

use std::time::Duration;

use llama_swap_server::testing::launcher::{LaunchError, Launcher, UpstreamEvent};
use llama_swap_server::testing::upstream::{
    LogStream, Monitor, ProcessSpec, ProcessState, Supervisor,
};

use crate::support::{assert_gone, free_port, is_alive, wait_gone, within};

fn spec(model: &str, cmd: &str) -> ProcessSpec {
    ProcessSpec {
        model: model.into(),
        cmd: cmd.into(),
        cmd_stop: None,
        env: vec![],
        proxy: format!("http://127.0.0.1:{}", free_port()),
        check_endpoint: None,
        health_check_timeout: Duration::from_secs(60),
        sleep: None,
        monitor: Monitor::default(),
    }
}

/// Waits until `model`'s output has a line equal to `text` and returns it.
async fn wait_for_line(sup: &Supervisor, model: &str, text: &str) {
    let mut sub = sup.logs().subscribe(model).unwrap();
    if sub.history.iter().any(|l| l.text == text) {
        return;
    }
    within(&format!("output line {text:?}"), async {
        loop {
            let line = sub.live.recv().await.unwrap();
            if line.text == text {
                return;
            }
        }
    })
    .await;
}

/// The first line of `model`'s output parsed as a pid (scripts echo `$!`).
fn pid_from_output(sup: &Supervisor, model: &str, prefix: &str) -> u32 {
    sup.logs()
        .history(model)
        .unwrap()
        .iter()
        .find_map(|l| l.text.strip_prefix(prefix)?.trim().parse().ok())
        .unwrap()
}

async fn wait_state(sup: &Supervisor, model: &str, state: ProcessState) -> Option<u32> {
    let mut rx = sup.watch_status(model).unwrap();
    let status = within(
        &format!("{model} to be {state:?}"),
        rx.wait_for(|s| s.state == state),
    )
    .await
    .unwrap();
    status.pid
}

#[tokio::test]
async fn model_without_check_endpoint_is_ready_once_spawned_and_stops_on_request() {
    let (sup, _events) = Supervisor::new(vec![spec("m", "sleep 300")], 100);
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);

    within("ready", sup.ensure_ready("m")).await.unwrap();
    let status = sup.status("m").unwrap();
    assert_eq!(status.state, ProcessState::Ready);
    let pid = status.pid.unwrap();
    assert!(is_alive(pid));

    // Ready already: answered without a new process.
    within("ready again", sup.ensure_ready("m")).await.unwrap();
    assert_eq!(sup.status("m").unwrap().pid, Some(pid));

    within("stop", sup.stop("m", Duration::from_secs(10))).await;
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    assert_gone(pid);
}

#[tokio::test]
async fn unknown_model_is_refused_and_its_stop_is_a_no_op() {
    let (sup, _events) = Supervisor::new(vec![spec("m", "sleep 300")], 100);
    assert_eq!(
        sup.ensure_ready("nope").await,
        Err(LaunchError::UnknownModel {
            model: "nope".into()
        })
    );
    within("stop of unknown", sup.stop("nope", Duration::from_secs(1))).await;
    assert!(sup.status("nope").is_none());
}

#[tokio::test]
async fn missing_binary_is_a_spawn_failure_naming_the_command() {
    let (sup, _events) =
        Supervisor::new(vec![spec("m", "/nonexistent/llama-server --port 1")], 100);
    let err = within("spawn", sup.ensure_ready("m")).await.unwrap_err();
    let LaunchError::SpawnFailed { model, reason } = err else {
        panic!("expected SpawnFailed, got {err:?}");
    };
    assert_eq!(model, "m");
    assert!(
        reason.contains("/nonexistent/llama-server --port 1"),
        "{reason}"
    );
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
}

#[tokio::test]
async fn unparsable_command_is_a_spawn_failure() {
    let (sup, _events) = Supervisor::new(vec![spec("m", "echo 'unterminated")], 100);
    let err = within("spawn", sup.ensure_ready("m")).await.unwrap_err();
    assert!(
        matches!(&err, LaunchError::SpawnFailed { reason, .. } if reason.contains("unterminated")),
        "{err:?}"
    );
}

#[tokio::test]
async fn env_entries_are_added_to_the_inherited_environment() {
    let mut s = spec(
        "m",
        r#"sh -c 'echo "x=$EXTRA_VAR path=${PATH:+set}"; exec sleep 300'"#,
    );
    s.env = vec![("EXTRA_VAR".into(), "hello world".into())];
    let (sup, _events) = Supervisor::new(vec![s], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    wait_for_line(&sup, "m", "x=hello world path=set").await;
    sup.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn process_exiting_during_start_fails_fast_with_status_and_last_output() {
    let mut s = spec(
        "m",
        "sh -c 'echo loading weights; echo \"error: out of memory\" >&2; exit 3'",
    );
    s.check_endpoint = Some("/health".into());
    s.health_check_timeout = Duration::from_secs(600);
    let (sup, _events) = Supervisor::new(vec![s], 100);

    let err = within("start failure", sup.ensure_ready("m"))
        .await
        .unwrap_err();
    let LaunchError::ExitedDuringStart {
        model,
        status,
        last_output,
    } = err
    else {
        panic!("expected ExitedDuringStart, got {err:?}");
    };
    assert_eq!(model, "m");
    assert_eq!(status, "exit status: 3");
    assert!(last_output.contains("loading weights"), "{last_output}");
    assert!(
        last_output.contains("error: out of memory"),
        "{last_output}"
    );
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    let history = sup.logs().history("m").unwrap();
    assert!(
        history
            .iter()
            .any(|l| l.stream == LogStream::Stderr && l.text == "error: out of memory")
    );
}

#[tokio::test]
async fn health_check_timeout_fails_the_start_and_stops_the_process() {
    let mut s = spec("m", "sleep 300");
    // Nobody listens on this port: probes are refused until the limit.
    s.check_endpoint = Some("/health".into());
    s.health_check_timeout = Duration::from_millis(200);
    let (sup, _events) = Supervisor::new(vec![s], 100);

    let starting = tokio::spawn(sup.ensure_ready("m"));
    let pid = wait_state(&sup, "m", ProcessState::Starting).await.unwrap();
    let err = within("health timeout", starting)
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(
        err,
        LaunchError::HealthCheckTimeout {
            model: "m".into(),
            timeout: Duration::from_millis(200)
        }
    );
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    assert_gone(pid);
}

#[tokio::test]
async fn stop_during_start_aborts_the_start_and_reaps_the_process() {
    let mut s = spec("m", "sleep 300");
    s.check_endpoint = Some("/health".into());
    s.health_check_timeout = Duration::from_secs(600);
    let (sup, _events) = Supervisor::new(vec![s], 100);

    let start = sup.ensure_ready("m");
    let starting = tokio::spawn(start);
    let pid = wait_state(&sup, "m", ProcessState::Starting).await.unwrap();

    within("stop", sup.stop("m", Duration::from_secs(10))).await;
    let result = within("aborted start", starting).await.unwrap();
    assert_eq!(result, Err(LaunchError::Aborted { model: "m".into() }));
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    assert_gone(pid);
}

/// A script that ignores SIGTERM (and so do its children, `trap ''` is inherited),
/// announces it, and idles.
const IGNORES_SIGTERM: &str = "sh -c 'trap \"\" TERM; echo armed; while :; do sleep 1; done'";

#[tokio::test]
async fn stop_escalates_to_sigkill_when_sigterm_is_ignored() {
    let (sup, _events) = Supervisor::new(vec![spec("m", IGNORES_SIGTERM)], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    wait_for_line(&sup, "m", "armed").await;
    let pid = sup.status("m").unwrap().pid.unwrap();

    within("stop", sup.stop("m", Duration::from_millis(200))).await;
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    // The shell and its `sleep` both ignored SIGTERM: only SIGKILL to the group ends them.
    wait_gone(pid).await;
}

#[tokio::test]
async fn start_during_stop_waits_for_the_stop_then_starts_a_new_process() {
    let (sup, _events) = Supervisor::new(vec![spec("m", IGNORES_SIGTERM)], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    wait_for_line(&sup, "m", "armed").await;
    let old_pid = sup.status("m").unwrap().pid.unwrap();

    let stopping = tokio::spawn(sup.stop("m", Duration::from_millis(300)));
    wait_state(&sup, "m", ProcessState::Stopping).await;
    let restarted = within("start after stop", sup.ensure_ready("m")).await;
    assert_eq!(restarted, Ok(()));
    within("stop task", stopping).await.unwrap();

    let status = sup.status("m").unwrap();
    assert_eq!(status.state, ProcessState::Ready);
    let new_pid = status.pid.unwrap();
    assert_ne!(new_pid, old_pid);
    wait_gone(old_pid).await;
    assert!(is_alive(new_pid));
    sup.shutdown(Duration::from_millis(100)).await;
    wait_gone(new_pid).await;
}

#[tokio::test]
async fn ready_process_that_exits_is_reported_and_started_again_on_demand() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("crash");
    let cmd = format!(
        "sh -c 'echo up; while [ ! -e {} ]; do sleep 0.01; done; exit 7'",
        flag.display()
    );
    let (sup, mut events) = Supervisor::new(vec![spec("m", &cmd)], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let first_pid = sup.status("m").unwrap().pid.unwrap();

    std::fs::write(&flag, b"").unwrap();
    let event = within("exit event", events.recv()).await.unwrap();
    assert_eq!(
        event,
        UpstreamEvent::Exited {
            model: "m".into(),
            status: "exit status: 7".into()
        }
    );
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    assert_gone(first_pid);

    std::fs::remove_file(&flag).unwrap();
    within("restart", sup.ensure_ready("m")).await.unwrap();
    let status = sup.status("m").unwrap();
    assert_eq!(status.state, ProcessState::Ready);
    assert_ne!(status.pid, Some(first_pid));
    sup.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn stragglers_left_in_the_group_by_an_exiting_leader_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("go");
    let cmd = format!(
        "sh -c 'sleep 300 & echo child $!; while [ ! -e {} ]; do sleep 0.01; done; exit 0'",
        flag.display()
    );
    let (sup, mut events) = Supervisor::new(vec![spec("m", &cmd)], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let leader = sup.status("m").unwrap().pid.unwrap();
    wait_for_line_prefix(&sup, "m", "child ").await;
    let child = pid_from_output(&sup, "m", "child ");
    assert!(is_alive(child));

    std::fs::write(&flag, b"").unwrap();
    within("exit event", events.recv()).await.unwrap();
    wait_gone(leader).await;
    assert!(!is_alive(child));
}

async fn wait_for_line_prefix(sup: &Supervisor, model: &str, prefix: &str) {
    let mut sub = sup.logs().subscribe(model).unwrap();
    if sub.history.iter().any(|l| l.text.starts_with(prefix)) {
        return;
    }
    within(&format!("output line starting {prefix:?}"), async {
        loop {
            if sub.live.recv().await.unwrap().text.starts_with(prefix) {
                return;
            }
        }
    })
    .await;
}

#[tokio::test]
async fn cmd_stop_runs_with_the_pid_substituted_instead_of_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("stopped-pid");
    let mut s = spec("m", IGNORES_SIGTERM);
    // The upstream ignores SIGTERM, so only the stop command's SIGKILL ends it before
    // the (long) grace period; it also records the pid it was given.
    s.cmd_stop = Some(format!(
        "sh -c 'echo ${{PID}} > {}; kill -KILL ${{PID}}'",
        record.display()
    ));
    let (sup, _events) = Supervisor::new(vec![s], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    wait_for_line(&sup, "m", "armed").await;
    let pid = sup.status("m").unwrap().pid.unwrap();

    within("stop", sup.stop("m", Duration::from_secs(600))).await;
    let recorded = std::fs::read_to_string(&record).unwrap();
    assert_eq!(recorded.trim(), pid.to_string());
    wait_gone(pid).await;
}

#[tokio::test]
async fn shutdown_reaps_every_process_group_and_refuses_later_starts() {
    let specs = vec![
        spec("a", "sh -c 'sleep 300 & echo child $!; wait'"),
        spec("b", IGNORES_SIGTERM),
        spec("c", "sleep 300"),
    ];
    let (sup, mut events) = Supervisor::new(specs, 100);
    for m in ["a", "b", "c"] {
        within("ready", sup.ensure_ready(m)).await.unwrap();
    }
    wait_for_line_prefix(&sup, "a", "child ").await;
    wait_for_line(&sup, "b", "armed").await;
    let grandchild = pid_from_output(&sup, "a", "child ");
    let pids: Vec<u32> = ["a", "b", "c"]
        .iter()
        .map(|m| sup.status(m).unwrap().pid.unwrap())
        .collect();

    within("shutdown", sup.shutdown(Duration::from_millis(300))).await;
    for m in ["a", "b", "c"] {
        assert_eq!(sup.status(m).unwrap().state, ProcessState::ShutDown);
    }
    for pid in &pids {
        wait_gone(*pid).await;
    }
    assert!(!is_alive(grandchild));
    assert_eq!(sup.ensure_ready("a").await, Err(LaunchError::ShuttingDown));
    within("stop after shutdown", sup.stop("a", Duration::from_secs(1))).await;
    // Shutdown exits are not "unexpected": no events, and the channel is closed.
    assert_eq!(within("events end", events.recv()).await, None);
    // A second shutdown returns at once.
    within("second shutdown", sup.shutdown(Duration::from_secs(1))).await;
}

#[tokio::test]
async fn shutdown_cuts_short_a_stop_in_progress_with_a_long_grace() {
    let (sup, _events) = Supervisor::new(vec![spec("m", IGNORES_SIGTERM)], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    wait_for_line(&sup, "m", "armed").await;
    let pid = sup.status("m").unwrap().pid.unwrap();

    // An eviction with llama-swap's long default grace, ignored by the process.
    let stopping = tokio::spawn(sup.stop("m", Duration::from_secs(600)));
    wait_state(&sup, "m", ProcessState::Stopping).await;
    within("shutdown", sup.shutdown(Duration::from_millis(100))).await;
    within("stop", stopping).await.unwrap();
    assert_eq!(sup.status("m").unwrap().state, ProcessState::ShutDown);
    wait_gone(pid).await;
}

#[tokio::test]
async fn dropping_the_supervisor_kills_every_process_group() {
    let (sup, _events) = Supervisor::new(
        vec![spec("a", "sh -c 'sleep 300 & echo child $!; wait'")],
        100,
    );
    within("ready", sup.ensure_ready("a")).await.unwrap();
    wait_for_line_prefix(&sup, "a", "child ").await;
    let leader = sup.status("a").unwrap().pid.unwrap();
    let child = pid_from_output(&sup, "a", "child ");
    let mut status = sup.watch_status("a").unwrap();

    drop(sup);
    within(
        "teardown",
        status.wait_for(|s| s.state == ProcessState::ShutDown),
    )
    .await
    .unwrap();
    wait_gone(leader).await;
    assert!(!is_alive(child));
}

/// Answers every request with 200 and counts them, until aborted.
async fn always_healthy() -> (u16, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            let _ = sock.read(&mut buf).await;
            let _ = sock
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                .await;
        }
    });
    (port, task)
}

#[tokio::test]
async fn a_process_that_is_not_listening_is_not_ready_because_something_else_answers_on_its_port() {
    // The model's own process never listens; a foreign server on its port answers
    // the health check. Before the port check this was "ready".
    let (port, server) = always_healthy().await;
    // The command is given the port (as `--port ${PORT}` would give it), so it
    // is expected to bind it.
    let mut s = spec(
        "m",
        &format!("sh -c 'echo spawned for port {port}; exec sleep 300'"),
    );
    s.proxy = format!("http://127.0.0.1:{port}");
    s.check_endpoint = Some("/health".into());
    let (sup, _events) = Supervisor::new(vec![s], 100);
    let err = within("start failure", sup.ensure_ready("m"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, LaunchError::PortInUse { port: p, reason, .. } if *p == port && reason.contains(&format!("port {port}"))),
        "{err:?}"
    );
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    sup.shutdown(Duration::from_secs(5)).await;
    server.abort();
}

#[tokio::test]
async fn concurrent_starts_share_one_process() {
    // The health check passes only once the process listens itself (mockswap
    // after its load time), so the other requests join a start in progress.
    let port = free_port();
    let mut s = spec(
        "m",
        &format!(
            "sh -c 'echo spawned; exec {} --listen 127.0.0.1:{port} --load-time 200ms'",
            crate::support::mockswap_bin().display()
        ),
    );
    s.proxy = format!("http://127.0.0.1:{port}");
    s.check_endpoint = Some("/health".into());
    let (sup, _events) = Supervisor::new(vec![s], 100);
    // join_all polls every future once before yielding, so all five requests are
    // queued before the owner task handles the first: four join a start in progress.
    let results = within(
        "starts",
        futures_util::future::join_all((0..5).map(|_| sup.ensure_ready("m"))),
    )
    .await;
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    wait_for_line(&sup, "m", "spawned").await;
    let spawns = sup
        .logs()
        .history("m")
        .unwrap()
        .iter()
        .filter(|l| l.text == "spawned")
        .count();
    assert_eq!(spawns, 1);
    let pid = sup.status("m").unwrap().pid.unwrap();
    sup.shutdown(Duration::from_secs(5)).await;
    wait_gone(pid).await;
}

#[tokio::test]
async fn a_command_not_given_its_port_attaches_to_the_server_already_listening_there() {
    // `cmd` is a placeholder beside an upstream managed elsewhere: the port is
    // meant to be taken, so it is not refused.
    let (port, server) = always_healthy().await;
    let mut s = spec("m", "sleep 300");
    s.proxy = format!("http://127.0.0.1:{port}");
    s.check_endpoint = Some("/health".into());
    let (sup, _events) = Supervisor::new(vec![s], 100);
    within("attached", sup.ensure_ready("m")).await.unwrap();
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Ready);
    sup.shutdown(Duration::from_secs(5)).await;
    server.abort();
}
