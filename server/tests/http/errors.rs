//! Scheduling and start failures reach the client with the documented status,
//! type and code (docs/ERRORS.md), also inside an already-started loading stream.

use futures_util::StreamExt;
use serde_json::Value;

use crate::support::{Harness, LIMIT, ModelSpec, model};

async fn error_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn over_the_concurrency_limit_is_429_with_retry_after() {
    let h = Harness::start(
        &[ModelSpec {
            id: "a",
            args: "--gate-closed",
            yaml: "concurrencyLimit: 1",
        }],
        "",
    )
    .await;
    let first = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let response = h.chat("a", Some("10"), false).send().await.unwrap();
    assert!(response.headers().contains_key("retry-after"));
    let (status, body) = error_of(response).await;
    assert_eq!((status, code(&body)), (429, "concurrency_limit"));
    assert_eq!(body["error"]["type"], "rate_limit_error");
    // llama-swap writes this one as JSON whatever the client accepts.
    let plain = h
        .chat("a", Some("10"), false)
        .header("Accept", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(plain.headers()["content-type"], "application/json");
    assert_eq!(code(&error_of(plain).await.1), "concurrency_limit");
    h.open_gate("a").await;
    assert_eq!(
        tokio::time::timeout(LIMIT, first).await.unwrap().unwrap().0,
        200
    );
    h.shutdown().await;
}

#[tokio::test]
async fn unloading_a_model_fails_its_waiters_with_503_model_unloaded() {
    let h = Harness::start(&[model("a", "--gate-closed"), model("b", "")], "").await;
    let busy = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let waiting = h.spawn(h.chat("b", None, false));
    h.wait_queue_len(1).await;
    let unload = h
        .http
        .post(h.url("/api/models/unload/b"))
        .send()
        .await
        .unwrap();
    assert_eq!(unload.status(), 200);
    let (status, body) = tokio::time::timeout(LIMIT, waiting).await.unwrap().unwrap();
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((status, code(&body)), (503, "model_unloaded"));
    h.open_gate("a").await;
    assert_eq!(
        tokio::time::timeout(LIMIT, busy).await.unwrap().unwrap().0,
        200
    );
    h.shutdown().await;
}

#[tokio::test]
async fn command_that_cannot_run_is_503_model_start_failed() {
    // A model whose command does not exist at all.
    let yaml = "models:\n  ghost:\n    cmd: /nonexistent/llama-server --port ${PORT}\n";
    let h = Harness::start_yaml(yaml).await;
    let (status, body) = error_of(h.chat("ghost", None, false).send().await.unwrap()).await;
    assert_eq!((status, code(&body)), (503, "model_start_failed"));
    assert_eq!(body["error"]["type"], "server_error");
    h.shutdown().await;
}

#[tokio::test]
async fn a_model_whose_port_another_process_holds_is_503_naming_the_port() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let yaml = format!(
        "models:\n  a:\n    cmd: env PORT={port} sleep 300\n    proxy: http://127.0.0.1:{port}\n    checkEndpoint: none\n"
    );
    let h = Harness::start_yaml(&yaml).await;
    let (status, body) = error_of(h.chat("a", None, false).send().await.unwrap()).await;
    assert_eq!((status, code(&body)), (503, "model_start_failed"));
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&format!("port {port}")), "{message}");
    assert!(h.running().await.is_empty(), "nothing was started");
    h.shutdown().await;
    drop(taken);
}

#[tokio::test]
async fn upstream_that_exits_while_starting_is_502_model_start_failed() {
    // mockswap refuses an unknown flag and exits before it is healthy.
    let h = Harness::start(&[model("a", "--no-such-flag")], "").await;
    let (status, body) = error_of(h.chat("a", None, false).send().await.unwrap()).await;
    assert_eq!((status, code(&body)), (502, "model_start_failed"));
    assert_eq!(body["error"]["type"], "server_error");
    h.shutdown().await;
}

#[tokio::test]
async fn start_failure_after_loading_stream_began_is_a_final_error_frame() {
    let h = Harness::start(
        &[ModelSpec {
            id: "a",
            args: "--no-such-flag",
            yaml: "sendLoadingState: true",
        }],
        "",
    )
    .await;
    let response = h.chat("a", None, true).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut text = String::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = tokio::time::timeout(LIMIT, stream.next()).await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(text.contains("\"status\":\"loading\""), "{text}");
    let frames: Vec<&str> = text
        .split("\n\n")
        .filter_map(|f| f.strip_prefix("data: "))
        .collect();
    assert_eq!(frames.last(), Some(&"[DONE]"), "{text}");
    let error: Value = serde_json::from_str(frames[frames.len() - 2]).unwrap();
    assert_eq!(code(&error), "model_start_failed");
    h.shutdown().await;
}

#[tokio::test]
async fn use_model_name_rewrites_the_forwarded_model() {
    let h = Harness::start(
        &[ModelSpec {
            id: "short",
            // The upstream only knows the long name.
            args: "--models org/long-name-q4",
            yaml: "useModelName: org/long-name-q4\naliases: [s]",
        }],
        "",
    )
    .await;
    let response = h.chat("s", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let journal = h.journal("short").await.unwrap();
    assert_eq!(journal[0]["model"], "org/long-name-q4");
    h.shutdown().await;
}

#[tokio::test]
async fn errors_are_text_or_html_when_the_client_accepts_them_as_in_llama_swap() {
    let h = Harness::start(&[model("a", "")], "apiKeys: [sk-accept-test]\n").await;
    let unknown = |accept: Option<&str>| {
        let mut request = h
            .http
            .post(h.url("/v1/chat/completions"))
            .bearer_auth("sk-accept-test")
            .json(&serde_json::json!({"model": "nobody's", "messages": []}));
        if let Some(accept) = accept {
            request = request.header("Accept", accept);
        }
        request.send()
    };
    let json = unknown(None).await.unwrap();
    assert_eq!(json.headers()["content-type"], "application/json");
    let message = error_of(json).await.1["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();

    let plain = unknown(Some("text/plain")).await.unwrap();
    assert_eq!(plain.status(), 404);
    assert_eq!(plain.headers()["content-type"], "text/plain");
    assert!(plain.headers().contains_key("x-request-id"));
    assert_eq!(
        plain.text().await.unwrap(),
        format!("llama-swap: {message}")
    );

    let page = unknown(Some("text/html,application/xhtml+xml,*/*;q=0.8"))
        .await
        .unwrap();
    assert_eq!(page.status(), 404);
    assert_eq!(page.headers()["content-type"], "text/html");
    let escaped = message.replace('\'', "&#39;");
    assert_eq!(
        page.text().await.unwrap(),
        format!("<html><body><h1>llama-swap</h1><p>{escaped}</p></body></html>")
    );

    // The management endpoints too, and the challenge of a 401 stays.
    let capture = h
        .http
        .get(h.url("/api/captures/ten"))
        .bearer_auth("sk-accept-test")
        .header("Accept", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(capture.status(), 400);
    assert!(capture.text().await.unwrap().starts_with("llama-swap: "));
    let denied = h
        .http
        .get(h.url("/api/activity"))
        .header("Accept", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status(), 401);
    assert!(denied.headers().contains_key("www-authenticate"));
    assert_eq!(denied.headers()["content-type"], "text/plain");

    // An answer that is not an error is left alone.
    let ok = h
        .http
        .get(h.url("/v1/models"))
        .bearer_auth("sk-accept-test")
        .header("Accept", "text/plain")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.headers()["content-type"], "application/json");
    h.shutdown().await;
}
