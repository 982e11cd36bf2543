//! The supervisor running real `mockswap` processes as upstream model servers: health
//! checks against a loading server, crashes, SIGTERM-ignoring servers, cmdStop,
//! aborts, a start asked for during a stop (llama-swap issue 946), and shutdown.

use std::time::Duration;

use llama_swap_server::testing::launcher::{LaunchError, Launcher, PortHolder, UpstreamEvent};
use llama_swap_server::testing::upstream::{
    LogStream, Monitor, ProcessSpec, ProcessState, Supervisor,
};

use crate::support::{assert_gone, free_port, mockswap_bin, wait_gone, within};

/// A spec running mockswap for `model` on a free port with extra `flags`.
fn mock_spec(model: &str, flags: &str) -> ProcessSpec {
    mock_spec_on(model, flags, free_port())
}

fn mock_spec_on(model: &str, flags: &str, port: u16) -> ProcessSpec {
    let bin = mockswap_bin();
    ProcessSpec {
        model: model.into(),
        // Quoted: the path may contain blanks, and the splitter must handle it.
        cmd: format!(
            "'{}' \\\n  --listen 127.0.0.1:{port} \\\n  # one model per upstream\n  --models {model} {flags}",
            bin.display()
        ),
        cmd_stop: None,
        env: vec![("MOCKSWAP_LOG".into(), "info".into())],
        proxy: format!("http://127.0.0.1:{port}"),
        check_endpoint: Some("/health".into()),
        health_check_timeout: Duration::from_secs(30),
        sleep: None,
        monitor: Monitor::default(),
    }
}

async fn health_status(spec: &ProcessSpec) -> Option<u16> {
    let url = format!("{}/health", spec.proxy);
    let resp = reqwest::get(url).await.ok()?;
    Some(resp.status().as_u16())
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

/// Waits until a line of `model`'s output contains `needle`.
async fn wait_for_output(sup: &Supervisor, model: &str, needle: &str) {
    let mut sub = sup.logs().subscribe(model).unwrap();
    if sub.history.iter().any(|l| l.text.contains(needle)) {
        return;
    }
    within(&format!("output containing {needle:?}"), async {
        while !sub.live.recv().await.unwrap().text.contains(needle) {}
    })
    .await;
}

#[tokio::test]
async fn mockswap_upstream_starts_passes_its_health_check_and_stops() {
    let spec = mock_spec("m", "");
    let (sup, _events) = Supervisor::new(vec![spec.clone()], 100);

    within("ready", sup.ensure_ready("m")).await.unwrap();
    let pid = sup.status("m").unwrap().pid.unwrap();
    assert_eq!(health_status(&spec).await, Some(200));
    let port = spec.proxy.rsplit(':').next().unwrap();
    // Its health check can pass before the line reaches the log ring.
    wait_for_output(&sup, "m", "listening on").await;
    let first = sup.logs().history("m").unwrap();
    let first = first
        .iter()
        .find(|l| l.stream == LogStream::Stdout)
        .unwrap();
    assert_eq!(first.text, format!("listening on http://127.0.0.1:{port}"));

    within("stop", sup.stop("m", Duration::from_secs(10))).await;
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    assert_gone(pid);
    assert_eq!(health_status(&spec).await, None);
}

#[tokio::test]
async fn slow_loading_upstream_is_ready_only_once_healthy() {
    // Loading long enough for a loaded machine to see it loading.
    let spec = mock_spec("m", "--load-time 5s");
    let (sup, _events) = Supervisor::new(vec![spec.clone()], 100);

    let start = tokio::spawn(sup.ensure_ready("m"));
    wait_state(&sup, "m", ProcessState::Starting).await;
    wait_for_output(&sup, "m", "listening on").await;
    // Listening but still loading: 503, and the supervisor still says Starting.
    assert_eq!(health_status(&spec).await, Some(503));
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Starting);

    within("ready", start).await.unwrap().unwrap();
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Ready);
    assert_eq!(health_status(&spec).await, Some(200));
    sup.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn never_healthy_upstream_times_out_and_is_stopped() {
    let mut spec = mock_spec("m", "--never-healthy");
    spec.health_check_timeout = Duration::from_millis(500);
    let (sup, _events) = Supervisor::new(vec![spec], 100);

    let start = tokio::spawn(sup.ensure_ready("m"));
    let pid = wait_state(&sup, "m", ProcessState::Starting).await.unwrap();
    let err = within("timeout", start).await.unwrap().unwrap_err();
    assert_eq!(
        err,
        LaunchError::HealthCheckTimeout {
            model: "m".into(),
            timeout: Duration::from_millis(500)
        }
    );
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    assert_gone(pid);
}

#[tokio::test]
async fn upstream_crashing_during_load_fails_fast_with_its_status_and_output() {
    // mockswap cannot read its fixture file and exits with status 2.
    let spec = mock_spec("m", "--load-time 60s --fixture /nonexistent/fixture.json");
    let (sup, _events) = Supervisor::new(vec![spec], 100);

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
    assert_eq!(status, "exit status: 2");
    assert!(last_output.contains("mockswap:"), "{last_output}");
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
}

#[tokio::test]
async fn a_port_another_server_listens_on_is_a_start_error_naming_the_port() {
    // Another mockswap (say, an upstream left by a killed server) holds the port and
    // answers /health with 200: it must not be taken for the model.
    let port = free_port();
    let foreign = mock_spec_on("foreign", "", port);
    let (other, _other_events) = Supervisor::new(vec![foreign], 100);
    within("foreign ready", other.ensure_ready("foreign"))
        .await
        .unwrap();

    let (sup, _events) = Supervisor::new(vec![mock_spec_on("m", "", port)], 100);
    let err = within("start failure", sup.ensure_ready("m"))
        .await
        .unwrap_err();
    let LaunchError::PortInUse {
        model,
        port: in_use,
        holder,
        reason,
    } = &err
    else {
        panic!("expected PortInUse, got {err:?}");
    };
    assert_eq!(*in_use, port);
    assert_eq!(model, "m");
    assert_eq!(*holder, PortHolder::Listener);
    assert!(
        reason.contains(&format!("port {port} is already in use")),
        "{reason}"
    );
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    sup.shutdown(Duration::from_secs(5)).await;
    other.shutdown(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_port_that_is_a_connections_local_end_is_a_start_error_saying_so() {
    // The system gave an outgoing connection the model's port (issue 31 #9):
    // nothing listens there, and the error must not blame another server.
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let client = std::net::TcpStream::connect(server.local_addr().unwrap()).unwrap();
    let port = client.local_addr().unwrap().port();
    let (sup, _events) = Supervisor::new(vec![mock_spec_on("m", "", port)], 100);
    let err = within("start failure", sup.ensure_ready("m"))
        .await
        .unwrap_err();
    let LaunchError::PortInUse { holder, reason, .. } = &err else {
        panic!("expected PortInUse, got {err:?}");
    };
    assert_eq!(*holder, PortHolder::Connection);
    assert!(
        reason.contains("not by a server: it is the local end of a connection to"),
        "{reason}"
    );
    assert!(!reason.contains("another process listens"), "{reason}");
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    sup.shutdown(Duration::from_secs(5)).await;
    drop(client);
}

#[tokio::test]
async fn upstream_crashing_while_ready_is_reported_then_restarted_on_demand() {
    let spec = mock_spec("m", "--crash-after 1");
    let (sup, mut events) = Supervisor::new(vec![spec.clone()], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let first_pid = sup.status("m").unwrap().pid.unwrap();

    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", spec.proxy))
        .json(&serde_json::json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);

    let event = within("exit event", events.recv()).await.unwrap();
    assert_eq!(
        event,
        UpstreamEvent::Exited {
            model: "m".into(),
            status: "exit status: 1".into()
        }
    );
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    assert_gone(first_pid);

    within("restart", sup.ensure_ready("m")).await.unwrap();
    let status = sup.status("m").unwrap();
    assert_eq!(status.state, ProcessState::Ready);
    assert_ne!(status.pid, Some(first_pid));
    assert_eq!(health_status(&spec).await, Some(200));
    sup.shutdown(Duration::from_secs(10)).await;
}

#[tokio::test]
async fn upstream_ignoring_sigterm_is_killed_after_the_grace_period() {
    let (sup, _events) = Supervisor::new(vec![mock_spec("m", "--ignore-sigterm")], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let pid = sup.status("m").unwrap().pid.unwrap();

    // A grace long enough for a loaded machine to schedule mockswap and let
    // it log the refusal before the SIGKILL.
    within("stop", sup.stop("m", Duration::from_secs(2))).await;
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    assert_gone(pid);
    // It did get the SIGTERM and refused it; SIGKILL ended it.
    let history = sup.logs().history("m").unwrap();
    assert!(
        history
            .iter()
            .any(|l| l.text.contains("SIGTERM received and ignored")),
        "{history:?}"
    );
}

#[tokio::test]
async fn cmd_stop_is_run_with_the_upstream_pid() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("pid");
    let mut spec = mock_spec("m", "--ignore-sigterm");
    // mockswap ignores SIGTERM here and the grace period is longer than the test's
    // bound, so the stop only completes if cmdStop ran and killed the right pid.
    spec.cmd_stop = Some(format!(
        "sh -c 'echo ${{PID}} > {}; kill -KILL ${{PID}}'",
        record.display()
    ));
    let (sup, _events) = Supervisor::new(vec![spec], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let pid = sup.status("m").unwrap().pid.unwrap();

    within("stop", sup.stop("m", Duration::from_secs(600))).await;
    assert_eq!(
        std::fs::read_to_string(&record).unwrap().trim(),
        pid.to_string()
    );
    assert_gone(pid);
}

#[tokio::test]
async fn stop_during_a_slow_load_aborts_the_start() {
    let (sup, _events) = Supervisor::new(vec![mock_spec("m", "--load-time 60s")], 100);
    let start = tokio::spawn(sup.ensure_ready("m"));
    let pid = wait_state(&sup, "m", ProcessState::Starting).await.unwrap();
    wait_for_output(&sup, "m", "listening on").await;

    within("stop", sup.stop("m", Duration::from_secs(10))).await;
    assert_eq!(
        within("start", start).await.unwrap(),
        Err(LaunchError::Aborted { model: "m".into() })
    );
    assert_eq!(sup.status("m").unwrap().state, ProcessState::Stopped);
    assert_gone(pid);
}

#[tokio::test]
async fn start_during_stop_waits_for_the_stop_then_starts_on_the_same_port() {
    let spec = mock_spec("m", "--ignore-sigterm");
    let (sup, _events) = Supervisor::new(vec![spec.clone()], 100);
    within("ready", sup.ensure_ready("m")).await.unwrap();
    let old_pid = sup.status("m").unwrap().pid.unwrap();

    let stopping = tokio::spawn(sup.stop("m", Duration::from_millis(500)));
    wait_state(&sup, "m", ProcessState::Stopping).await;
    // Asked while the old process still holds the port: must wait, then start.
    within("start after stop", sup.ensure_ready("m"))
        .await
        .unwrap();
    within("stop", stopping).await.unwrap();

    let status = sup.status("m").unwrap();
    assert_eq!(status.state, ProcessState::Ready);
    assert_ne!(status.pid, Some(old_pid));
    assert_gone(old_pid);
    assert_eq!(health_status(&spec).await, Some(200));
    sup.shutdown(Duration::from_millis(300)).await;
}

#[tokio::test]
async fn shutdown_leaves_no_upstream_process_behind() {
    let specs = vec![
        mock_spec("ready", ""),
        mock_spec("loading", "--load-time 60s"),
        mock_spec("stubborn", "--ignore-sigterm"),
    ];
    let (sup, _events) = Supervisor::new(specs, 100);
    within("ready", sup.ensure_ready("ready")).await.unwrap();
    within("stubborn", sup.ensure_ready("stubborn"))
        .await
        .unwrap();
    let loading = tokio::spawn(sup.ensure_ready("loading"));
    wait_state(&sup, "loading", ProcessState::Starting).await;
    let pids: Vec<u32> = ["ready", "loading", "stubborn"]
        .iter()
        .map(|m| sup.status(m).unwrap().pid.unwrap())
        .collect();

    within("shutdown", sup.shutdown(Duration::from_millis(300))).await;
    assert_eq!(
        within("loading", loading).await.unwrap(),
        Err(LaunchError::ShuttingDown)
    );
    for pid in pids {
        // Reaped leaders and empty groups: nothing left in the process table.
        wait_gone(pid).await;
        assert!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None).is_err(),
            "pid {pid} still exists"
        );
        assert!(
            nix::sys::signal::killpg(nix::unistd::Pid::from_raw(pid as i32), None).is_err(),
            "process group {pid} still exists"
        );
    }
    assert_eq!(
        sup.ensure_ready("ready").await,
        Err(LaunchError::ShuttingDown)
    );
}

/// Median time from the upstream answering its health check with 200 to the
/// supervisor reporting ready, over 20 starts of `mockswap --load-time 200ms`.
/// A note figure, not an assertion:
/// `cargo nextest run -p llama-swap-server --test upstream --run-ignored only --no-capture health_to_ready`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement for the notes; prints a figure"]
async fn health_to_ready_latency_median() {
    const RUNS: usize = 20;
    let spec = mock_spec("m", "--load-time 200ms");
    let (sup, _events) = Supervisor::new(vec![spec.clone()], 100);
    let client = reqwest::Client::new();
    let url = format!("{}/health", spec.proxy);
    let mut samples = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let start = tokio::spawn(sup.ensure_ready("m"));
        wait_state(&sup, "m", ProcessState::Starting).await;
        // Our own tight poller sees the moment the upstream turns healthy (to about
        // one probe round trip), independently of the supervisor's backoff.
        let healthy_at = within("upstream healthy", async {
            loop {
                if let Ok(r) = client.get(&url).send().await
                    && r.status() == 200
                {
                    return tokio::time::Instant::now();
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
        .await;
        within("ready", start).await.unwrap().unwrap();
        let ready_at = tokio::time::Instant::now();
        samples.push(ready_at.saturating_duration_since(healthy_at));
        within("stop", sup.stop("m", Duration::from_secs(5))).await;
    }
    samples.sort();
    let median = samples[RUNS / 2];
    println!(
        "health-to-ready over {RUNS} starts (--load-time 200ms): median {median:?}, min {:?}, max {:?}",
        samples[0],
        samples[RUNS - 1]
    );
    sup.shutdown(Duration::from_secs(5)).await;
}
