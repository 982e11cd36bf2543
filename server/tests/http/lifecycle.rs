//! Disconnects, crashes, loading state, shutdown and the status endpoints.

use futures_util::StreamExt;
use serde_json::Value;

use crate::support::{
    Harness, LIMIT, ModelSpec, model, read_until_seen, self_signed, small_window, stalled_request,
    tls_connector, wait_exit,
};

async fn finish(handle: tokio::task::JoinHandle<(u16, String)>) -> (u16, String) {
    tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap()
}

#[tokio::test]
async fn client_that_disconnects_while_queued_never_causes_a_load() {
    let h = Harness::start(&[model("a", "--gate-closed"), model("b", "")], "").await;
    let busy = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let queued = h.spawn(h.chat("b", None, false));
    h.wait_queue_len(1).await;
    queued.abort();
    h.wait_queue_len(0).await;
    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    // A later request is served by a, which the scheduler only does after it
    // handled everything before it: b was never started.
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    assert_eq!(h.running().await, vec!["a"]);
    assert!(h.journal("b").await.is_none(), "b's process was started");
    h.shutdown().await;
}

#[tokio::test]
async fn client_that_disconnects_mid_stream_releases_its_lease() {
    let h = Harness::start(&[model("a", "--tokens-per-second 5"), model("b", "")], "").await;
    let response = h.chat("a", None, true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let first = tokio::time::timeout(LIMIT, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(!first.is_empty());
    drop(stream);
    // b must evict a; that only happens once a's lease is released.
    let response = tokio::time::timeout(LIMIT, h.chat("b", None, false).send())
        .await
        .expect("the dropped stream kept its lease")
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(h.running().await, vec!["b"]);
    h.shutdown().await;
}

#[tokio::test]
async fn upstream_crash_mid_stream_reports_an_error_and_next_request_restarts() {
    let h = Harness::start(&[model("a", "--crash-mid-stream")], "").await;
    let response = h.chat("a", None, true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    let mut transport_error = false;
    while let Some(chunk) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        match chunk {
            Ok(bytes) => body.extend_from_slice(&bytes),
            Err(_) => {
                transport_error = true;
                break;
            }
        }
    }
    let text = String::from_utf8_lossy(&body);
    assert!(
        transport_error || text.contains("\"code\":\"upstream_unreachable\""),
        "the client was not told the stream failed: {text}"
    );
    assert!(!text.contains("finish_reason\":\"stop"), "{text}");
    // The crashed upstream is marked stopped (the supervisor reaps it and tells
    // the router); the next request, sent as soon as the process is gone (the
    // router may not have heard yet: the proxy's refused connection hands the
    // request back to it), starts it again. Sent while the process is still
    // exiting, the request could reach its dying listener and get a 502.
    if let Some(dying) = h.upstream_pid("a") {
        crate::support::wait_exit(dying).await;
    }
    let response = tokio::time::timeout(LIMIT, h.chat("a", None, false).send())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(response.status(), 200);
    h.shutdown().await;
}

/// Issue 31 #7: a swap stopped the model in its way with `healthCheckTimeout`
/// as its grace, so a model ignoring SIGTERM held the swap for that long (two
/// minutes by default; an hour here, far past the test's bound). It gets its
/// `unloadTimeout`, as an unload or shutdown gives it.
#[tokio::test]
async fn a_swap_kills_a_model_ignoring_sigterm_after_its_unload_timeout() {
    let stubborn = ModelSpec {
        id: "a",
        args: "--ignore-sigterm",
        yaml: "unloadTimeout: 1",
    };
    let h = Harness::start(&[stubborn, model("b", "")], "healthCheckTimeout: 3600\n").await;
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    let pid = h.upstream_pid("a").expect("a runs");
    let response = tokio::time::timeout(LIMIT, h.chat("b", None, false).send())
        .await
        .expect("the swap waited longer than a's unloadTimeout to stop it")
        .unwrap();
    assert_eq!(response.status(), 200);
    wait_exit(pid).await;
    assert_eq!(h.running().await, vec!["b"]);
    h.shutdown().await;
}

#[tokio::test]
async fn shutdown_answers_queued_503_lets_in_flight_finish_and_leaves_no_process() {
    let mut h = Harness::start(&[model("a", "--gate-closed"), model("b", "")], "").await;
    let in_flight = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let queued = h.spawn(h.chat("b", None, false));
    h.wait_queue_len(1).await;
    h.begin_shutdown();
    let (status, body) = finish(queued).await;
    assert_eq!(status, 503, "{body}");
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["error"]["code"], "shutting_down");
    // The in-flight response is allowed to finish.
    h.open_gate("a").await;
    let (status, body) = finish(in_flight).await;
    assert_eq!(status, 200, "{body}");
    h.shutdown().await;
}

#[tokio::test]
async fn loading_state_streams_progress_then_the_real_stream() {
    let h = Harness::start(
        &[
            model("a", "--gate-closed"),
            crate::support::ModelSpec {
                id: "b",
                args: "--load-time 300ms",
                yaml: "sendLoadingState: true",
            },
        ],
        "",
    )
    .await;
    let busy = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let response = h.chat("b", Some("5"), true).send().await.unwrap();
    // Answered at once although b cannot run yet.
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    while !text.contains("\"status\":\"queued\"") {
        let chunk = tokio::time::timeout(LIMIT, stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.contains("\"position\":1"), "{text}");
    assert!(text.contains("reasoning_content"), "{text}");
    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    while let Some(chunk) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(text.contains("\"status\":\"loading\""), "{text}");
    assert!(text.contains("Done!"), "{text}");
    assert!(text.contains("chat.completion.chunk"), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    h.shutdown().await;
}

#[tokio::test]
async fn models_running_unload_and_logs_endpoints() {
    let h = Harness::start(
        &[
            model("a", ""),
            crate::support::ModelSpec {
                id: "hidden",
                args: "",
                yaml: "unlisted: true",
            },
        ],
        "",
    )
    .await;
    let models: Value = h
        .http
        .get(h.url("/v1/models"))
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
    assert_eq!(ids, vec!["a"]);
    assert_eq!(models["data"][0]["status"]["value"], "unloaded");

    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    assert_eq!(h.running().await, vec!["a"]);
    let models: Value = h
        .http
        .get(h.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(models["data"][0]["status"]["value"], "loaded");

    let logs = h
        .http
        .get(h.url("/logs"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(logs.contains("[a]"), "{logs}");
    let mut live = h
        .http
        .get(h.url("/logs/stream/a"))
        .send()
        .await
        .unwrap()
        .bytes_stream();
    let first = tokio::time::timeout(LIMIT, live.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let first = String::from_utf8_lossy(&first);
    assert!(
        !first.is_empty() && !first.starts_with("[a]"),
        "a model's own stream is its output as written, as llama-swap's: {first}"
    );
    drop(live);

    let response = h
        .http
        .post(h.url("/api/models/unload/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(h.running().await.is_empty());
    let response = h
        .http
        .post(h.url("/api/models/unload/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    h.shutdown().await;
}

#[tokio::test]
async fn preload_hook_starts_models_without_a_request() {
    let h = Harness::start(
        &[model("a", ""), model("b", "")],
        "hooks:\n  on_startup:\n    preload: [b]\n",
    )
    .await;
    h.wait_for(|h| async move {
        let mut body: Value = h.http.get(h.url("/running")).send().await.ok()?.json().await.ok()?;
        let cmd = body["running"][0].as_object_mut()?.remove("cmd")?;
        assert!(cmd.as_str()?.contains("mockswap"), "{cmd}");
        (body["running"] == serde_json::json!([{"model": "b", "state": "ready", "proxy": h.upstream("b"), "ttl": 0, "name": "", "description": ""}]))
            .then_some(())
    })
    .await;
    assert_eq!(
        h.journal("b").await.unwrap().len(),
        0,
        "preload sent no request upstream"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn loading_stream_position_goes_up_when_higher_priority_work_arrives() {
    let loading = |id| crate::support::ModelSpec {
        id,
        args: "",
        yaml: "sendLoadingState: true",
    };
    let h = Harness::start(
        &[model("a", "--gate-closed"), loading("b"), loading("c")],
        "",
    )
    .await;
    let busy = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let response = h.chat("b", None, true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    while !text.contains("\"position\":1") {
        let chunk = tokio::time::timeout(LIMIT, stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let elevated = h.spawn(h.chat("c", Some("10"), false));
    while !text.contains("\"position\":2") {
        let chunk = tokio::time::timeout(LIMIT, stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    assert!(text.contains("Queue position: #2"), "{text}");
    h.open_gate("a").await;
    assert_eq!(finish(busy).await.0, 200);
    assert_eq!(finish(elevated).await.0, 200);
    while let Some(chunk) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    h.shutdown().await;
}

#[tokio::test]
async fn a_reload_of_the_same_configuration_serves_in_flight_and_new_requests_with_the_same_process()
 {
    let h = Harness::start(&[model("a", "--gate-closed")], "").await;
    let old = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    h.reload_same().await;
    // Nothing changed: the new request goes to the process already running.
    let new = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 2).await;
    h.open_gate("a").await;
    let (status, body) = finish(old).await;
    assert_eq!(
        status, 200,
        "the in-flight request was cut by the reload: {body}"
    );
    let (status, body) = finish(new).await;
    assert_eq!(status, 200, "{body}");
    h.shutdown().await;
}

#[tokio::test]
async fn a_shutdown_closes_a_response_whose_client_stopped_reading_before_the_drain_deadline() {
    // A drain deadline beyond the harness's wait: only closing the stalled
    // connection lets the shutdown finish in time.
    let options = llama_swap_server::ServeOptions::default().drain_deadline(LIMIT * 4);
    let h = Harness::start_with(&[model("a", "")], "", options).await;
    let request = long_streamed_chat(&h);
    let mut stalled = stalled_request(&h, request.as_bytes()).await;
    read_until_seen(&mut stalled, "200 OK").await;
    shutdown_cuts(h, &mut stalled).await;
}

/// Shuts `h` down and checks that it closed `stalled` (a client that stopped
/// reading an answer) in time: what the buffers held comes, then the end of
/// the connection, without the end of the answer. Fails with "serve did not
/// return after shutdown" when the server waits for the drain deadline.
async fn shutdown_cuts(h: Harness, stalled: &mut (impl tokio::io::AsyncRead + Unpin)) {
    h.shutdown().await;
    let mut rest = Vec::new();
    let read = tokio::time::timeout(
        LIMIT,
        tokio::io::AsyncReadExt::read_to_end(stalled, &mut rest),
    )
    .await
    .expect("the socket was left open");
    if let Err(error) = read {
        // A cut TLS connection ends without TLS's close_notify.
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::UnexpectedEof,
            "not the connection's end: {error}"
        );
    }
    assert!(
        !String::from_utf8_lossy(&rest).contains("[DONE]"),
        "the answer was sent whole ({} bytes)",
        rest.len()
    );
}

/// A streamed chat whose answer (one frame per word of the message, some
/// 30 MB) cannot fit in the socket buffers of a client with a 4 KiB receive
/// window that stops reading after the headers: a whole HTTP/1.1 request.
fn long_streamed_chat(h: &Harness) -> String {
    let words = "w ".repeat(200_000);
    let body = format!(
        r#"{{"model":"a","stream":true,"messages":[{{"role":"user","content":"{words}"}}]}}"#
    );
    let address = h.base.trim_start_matches("http://");
    format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn a_shutdown_closes_an_https_response_whose_client_stopped_reading_before_the_drain_deadline()
 {
    use tokio::io::AsyncWriteExt as _;
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, trusted) = self_signed(dir.path());
    let tls = llama_swap_server::TlsFiles::load(&cert, &key).unwrap();
    // A drain deadline beyond the harness's wait, as above: only closing the
    // stalled connection (its socket, under TLS) lets the shutdown finish.
    let options = llama_swap_server::ServeOptions::default()
        .drain_deadline(LIMIT * 4)
        .tls(tls);
    let h = Harness::start_with(&[model("a", "")], "", options).await;
    let tcp = small_window(&h).await;
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let mut stalled = tls_connector(&trusted).connect(name, tcp).await.unwrap();
    stalled
        .write_all(long_streamed_chat(&h).as_bytes())
        .await
        .unwrap();
    read_until_seen(&mut stalled, "200 OK").await;
    shutdown_cuts(h, &mut stalled).await;
}

#[tokio::test]
async fn log_stream_ends_when_the_server_shuts_down() {
    // A drain deadline beyond the harness's wait: only the stream ending lets
    // shutdown finish in time.
    let options = llama_swap_server::ServeOptions::default().drain_deadline(LIMIT * 4);
    let mut h = Harness::start_with(&[model("a", "")], "", options).await;
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    let response = h.http.get(h.url("/logs/stream")).send().await.unwrap();
    let mut stream = response.bytes_stream();
    tokio::time::timeout(LIMIT, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    h.begin_shutdown();
    while let Some(chunk) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        chunk.unwrap();
    }
    h.shutdown().await;
}
