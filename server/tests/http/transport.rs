//! Reaching upstreams: `https://` with a test CA (health checks and proxying),
//! per-model `timeouts` against a hung upstream, and `upstream.ignorePaths`.

use std::io::Write as _;

use serde_json::{Value, json};

use crate::support::{Harness, ModelSpec, free_port, model};
use crate::tls_upstream::{TestCa, TlsUpstream};

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn an_https_upstream_signed_by_a_trusted_ca_file_is_health_checked_and_proxied() {
    let ca = TestCa::new();
    let mut ca_file = tempfile::NamedTempFile::new().unwrap();
    ca_file.write_all(ca.pem.as_bytes()).unwrap();
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let spawned = dir.path().join("spawned");
    // A shell that marks its start, says so on stdout (the line reaches
    // `/api/events`, which wakes the wait) and then sleeps stands in for the
    // model's server; the upstream is the in-test TLS server, which binds the port only
    // once the process runs (the supervisor refuses to start a model whose port
    // is already taken).
    let yaml = format!(
        "healthCheckTimeout: 15\nupstream:\n  caFile: {ca}\nmodels:\n  secure:\n    cmd: sh -c 'touch {marker}; echo started; exec sleep 600'\n    proxy: https://localhost:{port}\n",
        ca = ca_file.path().display(),
        marker = spawned.display(),
    );
    let h = Harness::start_yaml(&yaml).await;
    let call = h.spawn(h.chat("secure", None, false));
    h.wait_for(|_| {
        let spawned = spawned.clone();
        async move { spawned.exists().then_some(()) }
    })
    .await;
    let _upstream = TlsUpstream::start_on(&ca, port).await;
    // Ready only once the health check passed over TLS; then proxied.
    let (status, body) = call.await.unwrap();
    assert_eq!(status, 200, "{body}");
    let echo: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(echo["via"], "https");
    assert_eq!(echo["path"], "/v1/chat/completions");
    assert_eq!(
        serde_json::from_str::<Value>(echo["body"].as_str().unwrap()).unwrap()["model"],
        "secure"
    );
    // /upstream goes the same way.
    let response = h
        .http
        .get(h.url("/upstream/secure/props"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.json::<Value>().await.unwrap()["path"], "/props");
    h.shutdown().await;
}

#[tokio::test]
async fn a_hung_upstream_hits_the_response_header_timeout() {
    let spec = ModelSpec {
        id: "slow",
        args: "",
        yaml: "timeouts: {responseHeader: 1}",
    };
    let h = Harness::start(&[spec], "").await;
    // Start it, then make its next chat call hang.
    assert_eq!(
        h.chat("slow", None, false).send().await.unwrap().status(),
        200
    );
    let fault = h
        .http
        .post(format!("{}/__mockswap/faults", h.upstream("slow")))
        .json(&json!({"fault": {"type": "hang"}, "match": {"path": "/v1/chat/completions"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(fault.status(), 200);
    let response = h.chat("slow", None, false).send().await.unwrap();
    assert_eq!(response.status(), 504);
    let body: Value = response.json().await.unwrap();
    assert_eq!(code(&body), "upstream_timeout", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("timeouts.responseHeader"), "{message}");
    // The model is still usable: the timeout released the request's lease.
    assert_eq!(
        h.chat("slow", None, false).send().await.unwrap().status(),
        200
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_stream_stalled_mid_way_ends_at_body_idle_and_frees_its_model_for_a_swap() {
    let stalled = ModelSpec {
        id: "stalled",
        args: "",
        yaml: "timeouts: {bodyIdle: 1}",
    };
    let h = Harness::start(&[stalled, model("other", "")], "").await;
    assert_eq!(
        h.chat("stalled", None, false)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let fault = h
        .http
        .post(format!("{}/__mockswap/faults", h.upstream("stalled")))
        .json(&json!({"fault": {"type": "stall_after", "after": 1}, "match": {"path": "/v1/chat/completions"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(fault.status(), 200);
    let response = h.chat("stalled", None, true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // A request for another model needs the stalled one stopped: it waits for
    // the stalled stream, which the idle timeout ends.
    let swap = h.spawn(h.chat("other", Some("100"), false));
    let text = tokio::time::timeout(crate::support::LIMIT, response.text())
        .await
        .expect("the stalled stream was never ended")
        .unwrap();
    assert!(text.starts_with("data: {"), "{text}");
    assert!(text.contains("\"upstream_timeout\""), "{text}");
    assert!(text.contains("timeouts.bodyIdle"), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let (status, body) = tokio::time::timeout(crate::support::LIMIT, swap)
        .await
        .expect("the swap waited past the limit")
        .unwrap();
    assert_eq!(status, 200, "{body}");
    h.shutdown().await;
}

#[tokio::test]
async fn an_ignored_path_to_a_model_that_is_not_loaded_is_409_and_starts_nothing() {
    let h = Harness::start(&[model("m", "")], "").await;
    let response = h
        .http
        .get(h.url("/upstream/m/static/app.js?v=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    let body: Value = response.json().await.unwrap();
    assert_eq!(code(&body), "model_not_loaded");
    assert_eq!(
        body["error"]["message"],
        "model m is not loaded; path matches upstream.ignorePaths"
    );
    assert!(
        h.running().await.is_empty(),
        "an ignored path started the model"
    );
    assert!(h.journal("m").await.is_none(), "the upstream was started");

    // Once the model is ready, the same path is proxied.
    assert_eq!(h.chat("m", None, false).send().await.unwrap().status(), 200);
    let response = h
        .http
        .get(h.url("/upstream/m/static/app.js?v=1"))
        .send()
        .await
        .unwrap();
    assert_ne!(response.status(), 409);
    let journal = h.journal("m").await.unwrap();
    assert_eq!(journal.last().unwrap()["path"], "/static/app.js");
    h.shutdown().await;
}

#[tokio::test]
async fn configured_ignore_paths_replace_the_default() {
    let h = Harness::start(&[model("m", "")], "upstream:\n  ignorePaths: ['^/ui/']\n").await;
    let response = h.http.get(h.url("/upstream/m/ui/x")).send().await.unwrap();
    assert_eq!(response.status(), 409);
    assert!(h.running().await.is_empty());
    // The default pattern no longer applies: a .js path starts the model.
    let response = h
        .http
        .get(h.url("/upstream/m/app.js"))
        .send()
        .await
        .unwrap();
    assert_ne!(response.status(), 409);
    assert_eq!(h.running().await, ["m"]);
    h.shutdown().await;
}
