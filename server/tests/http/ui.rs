//! What the web UI stands on: `/api/events`, `/api/activity`,
//! `/api/models/load/<model>`, and the embedded page under `/ui`.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::support::{Harness, LIMIT, model, read_until_seen, stalled_reader};

/// Reads `/api/events` one event at a time.
pub(crate) struct Events {
    stream: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buffer: String,
    /// The last payload of each type read so far.
    latest: std::collections::HashMap<String, Value>,
}

impl Events {
    pub(crate) async fn connect(h: &Harness, key: Option<&str>) -> Self {
        Self::connect_to(&h.base, key).await
    }

    async fn connect_to(base: &str, key: Option<&str>) -> Self {
        let mut request = reqwest::Client::new().get(format!("{base}/api/events"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            response.headers()["content-type"].to_str().unwrap(),
            "text/event-stream"
        );
        Self {
            stream: response.bytes_stream().boxed(),
            buffer: String::new(),
            latest: std::collections::HashMap::new(),
        }
    }

    /// The next event as (type, payload); `None` at the end of the stream.
    pub(crate) async fn next(&mut self) -> Option<(String, Value)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                if block.starts_with(':') {
                    continue;
                }
                assert!(block.starts_with("event: message\n"), "{block:?}");
                let data = block
                    .lines()
                    .find_map(|l| l.strip_prefix("data: "))
                    .unwrap_or_else(|| panic!("no data in {block:?}"));
                let envelope: Value = serde_json::from_str(data).unwrap();
                let payload: Value =
                    serde_json::from_str(envelope["data"].as_str().expect("data is a string"))
                        .unwrap();
                let kind = envelope["type"].as_str().unwrap().to_owned();
                self.latest.insert(kind.clone(), payload.clone());
                return Some((kind, payload));
            }
            let chunk = tokio::time::timeout(LIMIT, self.stream.next())
                .await
                .expect("an event within LIMIT")?
                .unwrap();
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }

    /// The state `kind` (a snapshot type) is in now, or will be: the last one
    /// read if it satisfies `pred`, else the next one that does.
    async fn state(&mut self, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
        match self.latest.get(kind) {
            Some(last) if pred(last) => last.clone(),
            _ => self.until(kind, pred).await,
        }
    }

    /// Skips events until one of `kind` satisfies `pred` (within `LIMIT`), and
    /// returns its payload.
    pub(crate) async fn until(&mut self, kind: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let mut seen = Vec::new();
        let found = tokio::time::timeout(LIMIT, async {
            loop {
                let (k, payload) = self.next().await.expect("stream ended early");
                if k == kind && pred(&payload) {
                    return payload;
                }
                seen.push(format!("{k}: {payload}"));
            }
        })
        .await;
        found.unwrap_or_else(|_| panic!("no matching {kind} event; saw:\n{}", seen.join("\n")))
    }
}

fn state_of<'a>(models: &'a Value, id: &str) -> &'a str {
    models
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .and_then(|m| m["state"].as_str())
        .unwrap_or("missing")
}

#[tokio::test]
async fn events_open_with_the_config_every_model_the_queue_and_the_requests_in_flight() {
    let h = Harness::start(&[model("a", ""), model("b", "")], "").await;
    let mut events = Events::connect(&h, None).await;
    let (kind, config) = events.next().await.unwrap();
    assert_eq!(kind, "uiConfig");
    let bands: Vec<&str> = config["bands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(bands, ["low", "normal", "elevated"]);
    let (kind, profiles) = events.next().await.unwrap();
    assert_eq!(
        (kind.as_str(), &profiles),
        ("profileChanged", &json!({"active": null, "profiles": []}))
    );
    let (kind, models) = events.next().await.unwrap();
    assert_eq!(kind, "modelStatus");
    assert_eq!(models[0]["id"], "a");
    assert_eq!(models[1]["id"], "b");
    assert_eq!(state_of(&models, "a"), "stopped");
    assert_eq!(models[0]["waiting"], 0);
    let (kind, queue) = events.next().await.unwrap();
    assert_eq!(
        (kind.as_str(), &queue),
        ("queue", &json!({"total": 0, "queue": []}))
    );
    let (kind, in_flight) = events.next().await.unwrap();
    assert_eq!(
        (kind.as_str(), &in_flight),
        (
            "inflight",
            &json!({"operation": "snapshot", "requests": [], "total": 0})
        )
    );
    h.shutdown().await;
}

#[tokio::test]
async fn events_list_selectors_with_their_targets_and_follow_profile_switches() {
    let h = Harness::start(
        &[model("a", ""), model("b", "")],
        "selectors:\n  coder: { strategy: warm, targets: [b, a], name: Coder }\n\
         profiles:\n  night: { description: Night shift, pins: { coder: a } }\n",
    )
    .await;
    let mut events = Events::connect(&h, None).await;
    let profiles = events.until("profileChanged", |_| true).await;
    assert_eq!(profiles["active"], Value::Null);
    assert_eq!(profiles["profiles"][0]["id"], "night");
    assert_eq!(profiles["profiles"][0]["pins"]["coder"], "a");
    let models = events.until("modelStatus", |_| true).await;
    let coder = models
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "coder")
        .expect("the selector is listed");
    assert_eq!(coder["kind"], "selector");
    assert_eq!(coder["name"], "Coder");
    assert_eq!(coder["strategy"], "warm");
    assert_eq!(coder["targets"], json!(["b", "a"]));
    assert_eq!(coder["state"], "stopped");
    assert_eq!(models[0]["kind"], "model");
    // The selector is as warm as its warmest target.
    let loaded = h
        .http
        .post(h.url("/api/models/load/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(loaded.status(), 200);
    events
        .state("modelStatus", |m| state_of(m, "coder") == "ready")
        .await;
    let switched = h
        .http
        .put(h.url("/api/profiles/active"))
        .json(&json!({"name": "night"}))
        .send()
        .await
        .unwrap();
    assert_eq!(switched.status(), 200);
    let profiles = events.until("profileChanged", |_| true).await;
    assert_eq!(profiles["active"], "night");
    // As llama-swap's: the models' status follows, though none changed.
    events.until("modelStatus", |_| true).await;
    h.shutdown().await;
}

#[tokio::test]
async fn events_follow_a_swap_the_queue_and_finished_requests_live() {
    let h = Harness::start(&[model("a", "--gate-closed"), model("b", "")], "").await;
    let mut events = Events::connect(&h, None).await;
    let held = h.spawn(h.chat("a", Some("-3"), false));
    let in_flight = events
        .until("inflight", |p| p["request"]["state"] == "running")
        .await;
    let running = &in_flight["request"];
    assert_eq!(running["model"], "a");
    assert_eq!(running["requested_priority"], -3);
    assert_eq!(running["band"], "low");
    let waiting = h.spawn(h.chat("b", Some("10"), false));
    let queue = events.until("queue", |p| p["total"] == 1).await;
    let row = &queue["queue"][0];
    assert_eq!(row["model"], "b");
    assert_eq!(row["position"], 1);
    assert_eq!(
        (
            &row["requested_priority"],
            &row["capped_priority"],
            &row["effective_priority"]
        ),
        (&json!(10), &json!(10), &json!(10))
    );
    assert_eq!(row["band"], "elevated");
    assert_eq!(row["aged"], false);
    assert_eq!(row["reason"], "swap", "b waits for a to stop");
    assert!(row["waited_ms"].is_u64());
    // Sent with the same snapshot, just before the queue.
    let models = &events.latest["modelStatus"];
    let b = models
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == "b")
        .unwrap();
    assert_eq!(b["waiting"], 1, "{models}");
    assert_eq!(state_of(models, "a"), "ready");
    h.wait_held("a", 1).await;
    h.open_gate("a").await;
    assert_eq!(held.await.unwrap().0, 200);
    assert_eq!(waiting.await.unwrap().0, 200);
    let first = events.until("activity", |_| true).await;
    assert_eq!(first["model"], "a");
    assert_eq!(first["resp_status_code"], 200);
    assert_eq!(first["effective_priority"], -3);
    let second = events.until("activity", |_| true).await;
    assert_eq!(second["model"], "b");
    assert!(second["queue_ms"].as_u64().is_some());
    let models = events
        .state("modelStatus", |m| state_of(m, "b") == "ready")
        .await;
    assert_eq!(state_of(&models, "a"), "stopped");
    events.state("queue", |p| p["total"] == 0).await;
    h.shutdown().await;
}

#[tokio::test]
async fn events_replay_recent_activity_and_logs_to_a_new_subscriber() {
    let h = Harness::start(&[model("a", "")], "").await;
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    let mut events = Events::connect(&h, None).await;
    let row = events.until("activity", |_| true).await;
    assert_eq!(row["model"], "a");
    assert_eq!(row["id"], 1);
    // mockswap's first line names its address; the hub tags it with the model.
    let line = events
        .until("logData", |l| {
            l["model"] == "a" && l["source"] == "upstream"
        })
        .await;
    assert!(line["data"].as_str().unwrap().ends_with('\n'));
    h.shutdown().await;
}

#[tokio::test]
async fn the_proxy_log_streams_beside_upstream_output_tagged_with_the_model_it_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let yaml = crate::support::config_yaml(&[(model("a", ""), crate::support::free_port())]);
    std::fs::write(&file, yaml).unwrap();
    let server = crate::cli::Server::start(&file, &[]).await;
    let mut events = Events::connect_to(&server.base, None).await;
    assert_eq!(server.chat("a").await, 200);
    // The swap line of the proxy's log names the model it starts.
    let swap = events
        .until("logData", |l| {
            l["source"] == "proxy" && l["data"].as_str().unwrap().contains("swap: starting a")
        })
        .await;
    assert_eq!(swap["model"], "a");
    assert!(swap["seq"].is_u64());
    events
        .until("logData", |l| {
            l["source"] == "upstream" && l["model"] == "a"
        })
        .await;
    // A later subscriber gets both in its history, in the order they were
    // written: the swap line before the output of the process it started.
    let mut late = Events::connect_to(&server.base, None).await;
    let mut lines = Vec::new();
    loop {
        let line = late.until("logData", |_| true).await;
        let upstream = line["source"] == "upstream";
        lines.push(line);
        if upstream {
            break;
        }
    }
    let seqs: Vec<u64> = lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert!(
        lines
            .iter()
            .any(|l| l["source"] == "proxy"
                && l["data"].as_str().unwrap().contains("swap: starting a")),
        "{lines:?}"
    );
}

#[tokio::test]
async fn activity_lists_finished_requests_newest_first_with_the_usage_upstreams_report() {
    let h = Harness::start(&[model("a", ""), model("b", "")], "").await;
    let stream = h
        .http
        .post(h.url("/v1/chat/completions"))
        .header("X-Request-Id", "streamed-1")
        .header("X-Priority", "10")
        .json(
            &json!({"model": "a", "stream": true, "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "one two three"}]}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    stream.text().await.unwrap();
    assert_eq!(h.chat("b", None, false).send().await.unwrap().status(), 200);
    let missing = h.chat("nope", None, false).send().await.unwrap();
    assert_eq!(missing.status(), 404);

    let body: Value = h
        .http
        .get(h.url("/api/activity"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let rows = body["activity"].as_array().unwrap();
    assert_eq!(
        rows.len(),
        3,
        "a POST naming an unknown model is a 404 row, as in llama-swap: {rows:?}"
    );
    assert_eq!(rows[0]["model"], "nope");
    assert_eq!(rows[0]["resp_status_code"], 404);
    let rows = &rows[1..];
    assert_eq!(rows[0]["model"], "b");
    let streamed = &rows[1];
    assert_eq!(streamed["request_id"], "streamed-1");
    assert_eq!(streamed["stream"], true);
    assert_eq!(streamed["resp_status_code"], 200);
    assert_eq!(streamed["requested_priority"], 10);
    assert_eq!(streamed["req_path"], "/v1/chat/completions");
    assert!(
        streamed["tokens"]["output_tokens"].as_u64().unwrap() > 0,
        "{streamed}"
    );
    assert!(
        streamed["tokens"]["input_tokens"].as_u64().unwrap() > 0,
        "{streamed}"
    );
    assert!(streamed["tokens"]["tokens_per_second"].as_f64().unwrap() > 0.0);
    assert!(
        rows[0]["tokens"]["output_tokens"].as_u64().unwrap() > 0,
        "non-streamed JSON usage"
    );

    let only_a: Value = h
        .http
        .get(h.url("/api/activity?model=a&limit=5"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(only_a["activity"].as_array().unwrap().len(), 1);
    let unknown = h
        .http
        .get(h.url("/api/activity?model=zzz"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    h.shutdown().await;
}

#[tokio::test]
async fn a_request_refused_while_queued_is_recorded_with_its_error_code() {
    let h = Harness::start(&[model("a", "--gate-closed"), model("b", "")], "").await;
    let held = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let waiting = h.spawn(h.chat("b", Some("-10"), false));
    h.wait_queue_len(1).await;
    // Unloading b fails its waiter; the held one on a goes on.
    let unload = h
        .http
        .post(h.url("/api/models/unload/b"))
        .send()
        .await
        .unwrap();
    assert_eq!(unload.status(), 200);
    assert_eq!(waiting.await.unwrap().0, 503);
    h.open_gate("a").await;
    assert_eq!(held.await.unwrap().0, 200);
    let body: Value = h
        .http
        .get(h.url("/api/activity?model=b"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let row = &body["activity"][0];
    assert_eq!(row["resp_status_code"], 503);
    assert_eq!(row["error"], "model_unloaded");
    assert_eq!(row["effective_priority"], -10);
    assert!(row["queue_ms"].is_null(), "never granted: {row}");
    h.shutdown().await;
}

#[tokio::test]
async fn the_load_endpoint_answers_once_the_model_is_ready() {
    let h = Harness::start(&[model("a", "--load-time 300ms"), model("b", "")], "").await;
    let response = h
        .http
        .post(h.url("/api/models/load/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.json::<Value>().await.unwrap(),
        json!({"msg": "ok"})
    );
    assert_eq!(h.running().await, ["a"]);
    let unknown = h
        .http
        .post(h.url("/api/models/load/zzz"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    let get = h
        .http
        .get(h.url("/api/models/load/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 405);
    h.shutdown().await;
}

#[tokio::test]
async fn a_stalled_event_subscriber_never_holds_up_requests() {
    let h = Harness::start(&[model("a", "")], "").await;
    // A subscriber that sends its request and never reads a byte, with a
    // small window, so the server's writes to it block early.
    let stalled = stalled_reader(&h, "/api/events").await;
    // Each request is bounded on its own: a slow machine makes the 600 slow
    // together, a request held up by the reader hangs.
    for _ in 0..600 {
        let request = async {
            let response = h.chat("a", None, true).send().await.unwrap();
            assert_eq!(response.status(), 200);
            assert!(response.text().await.unwrap().contains("[DONE]"));
        };
        tokio::time::timeout(LIMIT, request)
            .await
            .expect("a request was held up by a reader that does not read");
    }
    // And the reader can still connect afresh and see the newest rows.
    let mut events = Events::connect(&h, None).await;
    events.until("activity", |row| row["id"] == 600).await;
    drop(stalled);
    h.shutdown().await;
}

#[tokio::test]
async fn the_event_stream_ends_when_the_server_shuts_down() {
    let mut h = Harness::start(&[model("a", "")], "").await;
    let mut events = Events::connect(&h, None).await;
    events.until("inflight", |_| true).await;
    h.begin_shutdown();
    let ended = tokio::time::timeout(LIMIT, async { while events.next().await.is_some() {} }).await;
    assert!(ended.is_ok(), "the stream outlived the shutdown");
    h.shutdown().await;
}

#[tokio::test]
async fn with_api_keys_the_events_need_a_key_and_the_page_does_not() {
    let h = Harness::start(&[model("a", "")], "apiKeys: [\"sk-ui\"]\n").await;
    let refused = h.http.get(h.url("/api/events")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let refused = h.http.get(h.url("/api/activity")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let refused = h
        .http
        .post(h.url("/api/models/load/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let mut events = Events::connect(&h, Some("sk-ui")).await;
    assert_eq!(events.next().await.unwrap().0, "uiConfig");
    for path in [
        "/ui",
        "/ui/",
        "/ui/queue",
        "/ui/js/app.js",
        "/ui/css/base.css",
        "/ui/vendor/marked/marked.esm.js",
        "/favicon.ico",
    ] {
        let response = h.http.get(h.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn deep_links_get_the_page_files_their_type_and_missing_files_a_404() {
    let h = Harness::start(&[model("a", "")], "").await;
    for path in [
        "/ui",
        "/ui/models",
        "/ui/queue",
        "/ui/playground",
        "/ui/playground/load-test",
        "/ui/models/a",
        "/ui/models/qwen2.5-7b",
    ] {
        let response = h.http.get(h.url(path)).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let headers = response.headers().clone();
        assert_eq!(
            headers["content-type"], "text/html; charset=utf-8",
            "{path}"
        );
        let csp = headers["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("connect-src 'self'"), "{csp}");
        assert!(csp.contains("style-src 'self';"), "no inline styles: {csp}");
        assert!(csp.contains("media-src 'self' blob:"), "{csp}");
        assert!(response.text().await.unwrap().contains("<nav"), "{path}");
    }
    let script = h
        .http
        .get(h.url("/ui/js/views/queue.js"))
        .send()
        .await
        .unwrap();
    assert_eq!(
        script.headers()["content-type"],
        "text/javascript; charset=utf-8"
    );
    let etag = script.headers()["etag"].clone();
    let again = h
        .http
        .get(h.url("/ui/js/views/queue.js"))
        .header("If-None-Match", etag)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 304);
    let icon = h.http.get(h.url("/favicon.ico")).send().await.unwrap();
    assert_eq!(icon.headers()["content-type"], "image/x-icon");
    let licence = h
        .http
        .get(h.url("/ui/vendor/uplot/LICENSE"))
        .send()
        .await
        .unwrap();
    assert_eq!(licence.status(), 200);
    assert_eq!(
        licence.headers()["content-type"],
        "text/plain; charset=utf-8"
    );
    for path in ["/ui/js/nope.js", "/ui/vendor/x/y.js", "/ui/robots.txt"] {
        let missing = h.http.get(h.url(path)).send().await.unwrap();
        assert_eq!(missing.status(), 404, "{path}");
        assert_eq!(
            missing.json::<Value>().await.unwrap()["error"]["code"],
            "not_found"
        );
    }
    h.shutdown().await;
}

#[tokio::test]
async fn a_models_resolved_config_is_shown_by_id_or_alias_without_its_env_values() {
    let h = Harness::start(
        &[crate::support::ModelSpec {
            id: "a",
            args: "",
            yaml: "aliases: [first]
ttl: 90
env: [\"HF_TOKEN=hf_secret\", \"CUDA_VISIBLE_DEVICES=0\"]
capabilities: { in: [text, image], out: [text], context: 8192 }
metadata: { family: test }",
        }],
        "",
    )
    .await;
    for name in ["a", "first"] {
        let response = h
            .http
            .get(h.url(&format!("/api/models/config/{name}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{name}");
        let text = response.text().await.unwrap();
        assert!(!text.contains("hf_secret"), "{text}");
        let config: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(config["id"], "a");
        assert_eq!(config["aliases"], json!(["first"]));
        assert_eq!(config["ttl"], 90.0);
        assert_eq!(config["env"], json!(["HF_TOKEN", "CUDA_VISIBLE_DEVICES"]));
        assert!(config["cmd"].as_str().unwrap().contains("mockswap"));
        assert_eq!(config["capabilities"]["context"], 8192);
        assert_eq!(config["metadata"], json!({"family": "test"}));
        assert_eq!(config["parallel"], "unlimited");
    }
    let unknown = h
        .http
        .get(h.url("/api/models/config/nope"))
        .send()
        .await
        .unwrap();
    assert_eq!(unknown.status(), 404);
    assert_eq!(
        unknown.json::<Value>().await.unwrap()["error"]["code"],
        "model_not_found"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_streamed_request_that_waited_behind_loading_frames_is_recorded_once_it_ends() {
    let h = Harness::start(
        &[crate::support::ModelSpec {
            id: "a",
            args: "--load-time 300ms",
            yaml: "sendLoadingState: true",
        }],
        "",
    )
    .await;
    let mut events = Events::connect(&h, None).await;
    let response = h.chat("a", Some("10"), true).send().await.unwrap();
    let text = response.text().await.unwrap();
    assert!(
        text.contains("llama-swap loading model: a"),
        "loading frames expected: {text}"
    );
    let row = events.until("activity", |_| true).await;
    assert_eq!(row["resp_status_code"], 200);
    assert_eq!(row["stream"], true);
    assert!(row["queue_ms"].as_u64().unwrap() > 0);
    assert!(
        row["tokens"]["output_tokens"].as_u64().unwrap() > 0,
        "{row}"
    );
    // Waited at least the load time, measured by the record, not asserted to the millisecond.
    assert!(
        Duration::from_millis(row["duration_ms"].as_u64().unwrap()) >= Duration::from_millis(300)
    );
    h.shutdown().await;
}

/// Reads `/api/loadtest`'s events until the stream ends.
async fn loadtest_events(response: reqwest::Response) -> Vec<Value> {
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = tokio::time::timeout(LIMIT, response.text())
        .await
        .expect("the run ends within LIMIT")
        .unwrap();
    text.split("\n\n")
        .filter_map(|block| block.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[tokio::test]
async fn a_load_test_run_by_the_server_queues_its_requests_and_elevated_ones_finish_first() {
    let h = Harness::start(
        &[crate::support::ModelSpec {
            id: "a",
            args: "--gate-closed",
            yaml: "parallel: 1\nsendLoadingState: true",
        }],
        "",
    )
    .await;
    // One request holds the only slot: every request of the run must queue.
    let held = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let plan = json!({
        "requests": [
            {"model": "a", "priority": -10}, {"model": "a", "priority": -10},
            {"model": "a"}, {"model": "a", "priority": 10}, {"model": "a", "priority": 10},
        ],
        "prompt": "load",
        "max_tokens": 4,
        "session": "lspg-test1",
    });
    let run = tokio::spawn(h.http.post(h.url("/api/loadtest")).json(&plan).send());
    h.wait_queue_len(5).await;
    h.open_gate("a").await;
    assert_eq!(held.await.unwrap().0, 200);
    let events = loadtest_events(run.await.unwrap().unwrap()).await;
    assert_eq!(events[0], json!({"event": "start", "requests": 5}));
    assert_eq!(events.last().unwrap()["event"], "end");
    let done: Vec<&Value> = events.iter().filter(|e| e["event"] == "done").collect();
    assert_eq!(done.len(), 5);
    assert!(
        done.iter()
            .all(|e| e["status"] == 200 && e["error"].is_null()),
        "{done:?}"
    );
    assert!(
        done.iter().all(|e| e["tokens"].as_u64().unwrap() > 0),
        "{done:?}"
    );
    // Served by priority although sent Low first: 3 and 4 (Elevated), 2, then 0 and 1 (Low).
    let order: Vec<u64> = done.iter().map(|e| e["index"].as_u64().unwrap()).collect();
    let sorted = |mut v: Vec<u64>| {
        v.sort_unstable();
        v
    };
    assert_eq!(sorted(order[..2].to_vec()), [3, 4], "{order:?}");
    assert_eq!(order[2], 2, "{order:?}");
    assert_eq!(sorted(order[3..].to_vec()), [0, 1], "{order:?}");
    // Each waited in the queue and said so; each is in the history under its request id.
    let queued = events.iter().filter(|e| e["event"] == "queued").count();
    assert!(queued >= 5, "{events:?}");
    let rows: Value = h
        .http
        .get(h.url("/api/activity?limit=10"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&Value> = rows["activity"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["request_id"])
        .collect();
    for e in &done {
        assert!(ids.contains(&&e["request_id"]), "{e} not in {rows}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn a_load_test_plan_that_is_not_one_says_which_field_is_wrong() {
    let h = Harness::start(&[model("a", "")], "").await;
    for (plan, param) in [
        (json!({"requests": [], "prompt": "x"}), "requests"),
        (
            json!({"requests": [{"model": ""}], "prompt": "x"}),
            "requests",
        ),
        (
            json!({"requests": [{"model": "a"}], "prompt": "x".repeat(9000)}),
            "prompt",
        ),
        (
            json!({"requests": [{"model": "a", "extra": 1}], "prompt": "x"}),
            "body",
        ),
        (json!({"prompt": "x"}), "body"),
    ] {
        let response = h
            .http
            .post(h.url("/api/loadtest"))
            .json(&plan)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400, "{plan}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["param"], param, "{body}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn a_load_test_needs_the_api_key_and_its_requests_carry_the_keys_cap() {
    let h = Harness::start(
        &[model("a", "")],
        "apiKeys: [\"sk-low\"]\npriority:\n  apiKeys:\n    - { key: \"sk-low\", maxPriority: 0 }\n",
    )
    .await;
    let plan = json!({"requests": [{"model": "a", "priority": 10}], "prompt": "x"});
    let refused = h
        .http
        .post(h.url("/api/loadtest"))
        .json(&plan)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let response = h
        .http
        .post(h.url("/api/loadtest"))
        .bearer_auth("sk-low")
        .json(&plan)
        .send()
        .await
        .unwrap();
    let events = loadtest_events(response).await;
    let done = events.iter().find(|e| e["event"] == "done").unwrap();
    assert_eq!(done["status"], 200, "{events:?}");
    let rows: Value = h
        .http
        .get(h.url("/api/activity?limit=1"))
        .bearer_auth("sk-low")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let row = &rows["activity"][0];
    assert_eq!(row["requested_priority"], 10);
    assert_eq!(row["capped_priority"], 0, "{row}");
    h.shutdown().await;
}

#[tokio::test]
async fn log_subscribers_that_never_read_lose_lines_and_are_told_instead_of_queueing_them() {
    // A model that writes ~10 MB of output at once (100 000 lines of 100
    // bytes), then waits. Its health check is off: loading it starts it.
    let port = crate::support::free_port();
    let yaml = format!(
        "models:\n  chatty:\n    cmd: sh -c 'yes 0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789 | head -n 100000; echo all-written; exec sleep 600'\n    proxy: http://127.0.0.1:{port}\n    checkEndpoint: none\n"
    );
    let h = Harness::start_yaml(&yaml).await;
    let mut logs = stalled_reader(&h, "/logs/stream/chatty?no-history").await;
    let mut events = stalled_reader(&h, "/api/events").await;
    // Both subscriptions are made before the output starts: the first bytes
    // of each response arrived.
    read_until_seen(&mut logs, "\r\n\r\n").await;
    read_until_seen(&mut events, "uiConfig").await;
    let loaded = h
        .http
        .post(h.url("/api/models/load/chatty"))
        .send()
        .await
        .unwrap();
    assert!(loaded.status().is_success(), "{}", loaded.status());
    h.wait_for(|h| async move {
        let text = h
            .http
            .get(h.url("/logs"))
            .send()
            .await
            .ok()?
            .text()
            .await
            .ok()?;
        text.contains("all-written").then_some(())
    })
    .await;
    // Neither held 10 MB for its reader: each skipped what it could not keep
    // and says how much, then goes on with the newest lines.
    let read = read_until_seen(&mut logs, "lines dropped: this reader fell behind").await;
    assert!(read < 10_000_000, "{read} bytes were queued for the reader");
    let read = read_until_seen(&mut events, "log lines dropped: this reader fell behind").await;
    assert!(read < 10_000_000, "{read} bytes were queued for the reader");
    read_until_seen(&mut logs, "all-written").await;
    h.shutdown().await;
}

#[tokio::test]
async fn an_event_subscriber_that_fell_behind_gets_every_activity_row_it_missed() {
    // More finished requests than the feed buffers (256) and the stalled
    // connection holds (some 3 000 rows in the socket buffers here): the
    // subscriber falls behind, then catches up from the in-memory history,
    // which keeps them all.
    const REQUESTS: u64 = 8_000;
    let h = Harness::start(&[model("a", "")], "metricsMaxInMemory: 10000\n").await;
    let mut events = stalled_reader(&h, "/api/events").await;
    read_until_seen(&mut events, "uiConfig").await;
    let sent = futures_util::stream::iter(0..REQUESTS)
        .map(|_| async { h.chat("a", None, false).send().await.map(|r| r.status()) })
        .buffer_unordered(8)
        .collect::<Vec<_>>()
        .await;
    let failed: Vec<_> = sent
        .iter()
        .filter(|s| !matches!(s, Ok(s) if s.as_u16() == 200))
        .take(3)
        .collect();
    assert!(failed.is_empty(), "requests failed: {failed:?}");
    let (ids, text) = read_activity_until(&mut events, REQUESTS).await;
    let breaks: Vec<(u64, u64)> = ids
        .windows(2)
        .filter(|w| w[1] != w[0] + 1)
        .map(|w| (w[0], w[1]))
        .take(5)
        .collect();
    assert!(
        breaks.is_empty() && ids.first() == Some(&1) && ids.len() as u64 == REQUESTS,
        "{} rows from {:?} to {:?}; the first breaks in the sequence: {breaks:?}",
        ids.len(),
        ids.first(),
        ids.last()
    );
    assert!(
        !text.contains("activity rows not sent"),
        "the history held them all"
    );
    // It did fall behind (else this test proves nothing): /metrics counts it.
    let metrics = h
        .http
        .get(h.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("llamaswap_subscriber_lags_total{feed=\"activity\"} "),
        "the reader never fell behind the activity feed"
    );
    h.shutdown().await;
}

/// Reads `/api/events` from `stream` until the `activity` frame of row `last`;
/// returns the rows' ids in the order they came, and all the text read.
async fn read_activity_until(stream: &mut tokio::net::TcpStream, last: u64) -> (Vec<u64>, String) {
    use tokio::io::AsyncReadExt;
    let mut text = String::new();
    let mut ids = Vec::new();
    let mut parsed = 0;
    let mut chunk = vec![0u8; 64 * 1024];
    let found = tokio::time::timeout(LIMIT, async {
        loop {
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the stream ended before row {last}");
            text.push_str(&String::from_utf8_lossy(&chunk[..n]));
            // Whole lines only; a frame's line may end in the next read.
            let complete = text.rfind('\n').map_or(parsed, |i| i + 1);
            for line in text[parsed..complete].lines() {
                let Some(data) = line.strip_prefix("data: ") else {
                    continue;
                };
                let Ok(envelope) = serde_json::from_str::<Value>(data) else {
                    continue;
                };
                if envelope["type"] == "activity" {
                    let row: Value =
                        serde_json::from_str(envelope["data"].as_str().unwrap()).unwrap();
                    ids.push(row["id"].as_u64().unwrap());
                }
            }
            parsed = complete;
            if ids.last() == Some(&last) {
                return;
            }
        }
    })
    .await;
    assert!(
        found.is_ok(),
        "no activity row {last} in {} bytes",
        text.len()
    );
    (ids, text)
}
