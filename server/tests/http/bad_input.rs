//! Bad input gets a clear, typed answer; a bad `X-Priority` never fails a request.

use llama_swap_server::{HttpOptions, ServeOptions};
use serde_json::{Value, json};

use crate::support::{Harness, LIMIT, model};

async fn error_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    assert_eq!(
        response.headers()["content-type"],
        "application/json",
        "error responses are JSON"
    );
    (status, response.json().await.unwrap())
}

#[tokio::test]
async fn malformed_priority_headers_are_served_at_zero_and_not_forwarded() {
    let h = Harness::start(&[model("a", "--gate-closed"), model("b", "")], "").await;
    let busy = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let huge = "9".repeat(4000);
    let variants: Vec<Vec<&str>> = vec![
        vec!["garbage"],
        vec![huge.as_str()],
        vec![""],
        vec!["10", "-10"],
        vec!["10, -10"],
        vec!["1.5"],
    ];
    let mut waiting = Vec::new();
    for values in &variants {
        let mut request = h.chat("b", None, false);
        for v in values {
            request = request.header("X-Priority", *v);
        }
        waiting.push(h.spawn(request));
    }
    let queue = h.wait_queue_len(variants.len()).await;
    for entry in &queue {
        assert_eq!(entry["requested_priority"], 0, "{entry}");
        assert_eq!(entry["effective_priority"], 0, "{entry}");
    }
    h.open_gate("a").await;
    assert_eq!(
        tokio::time::timeout(LIMIT, busy).await.unwrap().unwrap().0,
        200
    );
    for handle in waiting {
        let (status, body) = tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap();
        assert_eq!(status, 200, "{body}");
    }
    for entry in h.journal("b").await.unwrap() {
        assert_eq!(entry["priority"]["state"], "absent", "{entry}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn malformed_missing_and_unknown_models_get_typed_errors() {
    let h = Harness::start(&[model("a", "")], "").await;
    let post = |body: &'static str| {
        h.http
            .post(h.url("/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let (status, body) = error_of(post("{\"model\": \"a\",").await.unwrap()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_json"))
    );
    let (status, body) = error_of(post("{\"messages\": []}").await.unwrap()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("model_missing"))
    );
    // Routed by one `model`, forwarded with both: the upstream could read the other.
    let (status, body) =
        error_of(post("{\"model\": \"a\", \"model\": \"b\"}").await.unwrap()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("duplicate_field"))
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`model` more than once")
    );
    let (status, body) = error_of(post("{\"model\": \"nope\"}").await.unwrap()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("model_not_found"))
    );
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(body["error"]["message"].as_str().unwrap().contains("nope"));

    let response = h
        .http
        .get(h.url("/v1/chat/completions"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["allow"], "POST");
    let (status, body) = error_of(response).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (405, Some("method_not_allowed"))
    );

    let (status, body) = error_of(h.http.get(h.url("/no/such/path")).send().await.unwrap()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found"))
    );

    let response = h
        .http
        .post(h.url("/upstream/nope/v1/models"))
        .send()
        .await
        .unwrap();
    let (status, body) = error_of(response).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("model_not_found"))
    );
    // Nothing above started a model.
    assert!(h.running().await.is_empty());
    h.shutdown().await;
}

#[tokio::test]
async fn oversized_body_is_refused_with_413() {
    let options = ServeOptions::default().http(HttpOptions::default().max_body_bytes(1024));
    let h = Harness::start_with(&[model("a", "")], "", options).await;
    let big = json!({"model": "a", "prompt": "x".repeat(4096)});
    let (status, body) = error_of(
        h.http
            .post(h.url("/v1/completions"))
            .json(&big)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("body_too_large"))
    );
    // Streamed without Content-Length: refused as it arrives.
    let chunked = || {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            (0..8).map(|_| Ok(vec![b'x'; 512])).collect();
        reqwest::Body::wrap_stream(futures_util::stream::iter(chunks))
    };
    let response = h
        .http
        .post(h.url("/v1/completions"))
        .body(chunked())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 413);
    assert!(h.running().await.is_empty());
    // Through /upstream the body streams to the model and is cut at the limit.
    let response = h
        .http
        .post(h.url("/upstream/a/v1/completions"))
        .body(chunked())
        .send()
        .await
        .unwrap();
    let (status, body) = error_of(response).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("body_too_large"))
    );
    h.shutdown().await;
}

#[tokio::test]
async fn the_request_body_limit_key_in_the_config_refuses_bigger_bodies_with_413() {
    let h = Harness::start(&[model("a", "")], "requestBodyLimit: 1KiB\n").await;
    let big = json!({"model": "a", "prompt": "x".repeat(4096)});
    let response = h
        .http
        .post(h.url("/v1/completions"))
        .json(&big)
        .send()
        .await
        .unwrap();
    let (status, body) = error_of(response).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (413, Some("body_too_large"))
    );
    // Under the limit the same route serves.
    let small = json!({"model": "a", "prompt": "hi"});
    let response = h
        .http
        .post(h.url("/v1/completions"))
        .json(&small)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    h.shutdown().await;
}

#[tokio::test]
async fn api_keys_are_required_checked_and_not_forwarded() {
    let h = Harness::start(&[model("a", "")], "apiKeys:\n  - sk-test-key\n").await;
    let response = h.chat("a", None, false).send().await.unwrap();
    let challenges: Vec<&str> = response
        .headers()
        .get_all("www-authenticate")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    // Bearer for API clients; llama-swap's Basic challenge makes a browser ask.
    assert_eq!(challenges, ["Bearer", "Basic realm=\"llama-swap\""]);
    let (status, body) = error_of(response).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("invalid_api_key"))
    );
    let response = h
        .chat("a", None, false)
        .bearer_auth("sk-wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    // /health and CORS preflights stay open.
    assert_eq!(
        h.http.get(h.url("/health")).send().await.unwrap().status(),
        200
    );
    let preflight = h
        .http
        .request(reqwest::Method::OPTIONS, h.url("/v1/chat/completions"))
        .header("access-control-request-headers", "content-type, x-priority")
        .send()
        .await
        .unwrap();
    assert_eq!(preflight.status(), 204);
    assert_eq!(preflight.headers()["access-control-allow-origin"], "*");
    assert_eq!(
        preflight.headers()["access-control-allow-headers"],
        "content-type, x-priority"
    );

    let ok = h
        .chat("a", None, false)
        .bearer_auth("sk-test-key")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let ok = h
        .chat("a", None, false)
        .header("x-api-key", "sk-test-key")
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let ok = h
        .chat("a", None, false)
        .basic_auth("user", Some("sk-test-key"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    for entry in h.journal("a").await.unwrap() {
        let headers = entry["headers"].to_string().to_ascii_lowercase();
        assert!(!headers.contains("sk-test-key"), "key forwarded: {headers}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn serial_scheduler_rejects_nonzero_priority() {
    let h = Harness::start(
        &[model("a", "")],
        "routing:\n  scheduler:\n    use: serial\n",
    )
    .await;
    let (status, body) = error_of(h.chat("a", Some("5"), false).send().await.unwrap()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("priority_not_supported"))
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("serial")
    );
    assert_eq!(
        h.chat("a", Some("0"), false).send().await.unwrap().status(),
        200
    );
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    h.shutdown().await;
}

#[tokio::test]
async fn undecodable_path_parameters_and_queries_answer_the_json_envelope() {
    let h = Harness::start(&[model("a", "")], "").await;
    for request in [
        h.http.post(h.url("/api/models/unload/%FF")),
        h.http.get(h.url("/logs/stream/%FF%FE")),
    ] {
        let (status, body) = error_of(request.send().await.unwrap()).await;
        assert_eq!(
            (status, body["error"]["code"].as_str()),
            (400, Some("invalid_path")),
            "{body}"
        );
    }
    let (status, body) = error_of(
        h.http
            .get(h.url("/logs/stream/a?no-history=1&no-history=2"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    h.shutdown().await;
}

#[tokio::test]
async fn bad_parameters_of_the_activity_endpoints_answer_the_json_envelope_naming_them() {
    let h = Harness::start(&[model("a", "")], "").await;
    // (request, status, code, param)
    let cases = [
        (
            h.http.get(h.url("/api/activity?limit=ten")),
            400,
            "invalid_parameter",
            Some("limit"),
        ),
        (
            h.http.get(h.url("/api/activity?limit=-1")),
            400,
            "invalid_parameter",
            Some("limit"),
        ),
        (
            h.http.get(h.url("/api/activity?limit=1&limit=2")),
            400,
            "invalid_query",
            None,
        ),
        (
            h.http.get(h.url("/api/activity?model=nobody")),
            404,
            "model_not_found",
            None,
        ),
        (
            h.http.get(h.url("/api/metrics/activity?limit=ten")),
            400,
            "invalid_parameter",
            Some("limit"),
        ),
        (
            h.http.get(h.url("/api/captures/%FF")),
            400,
            "invalid_parameter",
            Some("id"),
        ),
        (
            h.http.get(h.url("/api/captures/ten")),
            400,
            "invalid_parameter",
            Some("id"),
        ),
        (
            h.http.post(h.url("/api/inflight/%FF/cancel")),
            400,
            "invalid_parameter",
            Some("id"),
        ),
        (
            h.http.post(h.url("/api/inflight/ten/cancel")),
            404,
            "inflight_not_found",
            None,
        ),
        (
            h.http.post(h.url("/api/models/load/%FF")),
            400,
            "invalid_path",
            None,
        ),
    ];
    for (request, status, code, param) in cases {
        let request = request.build().unwrap();
        let url = request.url().to_string();
        let (got, body) = error_of(h.http.execute(request).await.unwrap()).await;
        assert_eq!(
            (
                got,
                body["error"]["code"].as_str(),
                body["error"]["param"].as_str()
            ),
            (status, Some(code), param),
            "{url}: {body}"
        );
        assert_eq!(body["src"], "llama-swap", "{url}: {body}");
    }
    // The good ones still answer.
    let ok = h
        .http
        .get(h.url("/api/activity?limit=0"))
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    h.shutdown().await;
}
