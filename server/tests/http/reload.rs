//! Reloads that keep models: a reload that does not change a model's process
//! definition keeps its upstream process and its requests (in flight and
//! queued, in their order); a changed model restarts only after its request in
//! flight ends; a removed model's queued requests get `model_removed`.

use serde_json::{Value, json};

use crate::support::{Harness, LIMIT, model};

async fn finish(handle: tokio::task::JoinHandle<(u16, String)>) -> (u16, String) {
    tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap()
}

fn numbered(h: &Harness, model: &str, n: usize, priority: &str) -> reqwest::RequestBuilder {
    h.http
        .post(h.url("/v1/chat/completions"))
        .header("X-Priority", priority)
        .json(&json!({
            "model": model,
            "messages": [{"role": "user", "content": format!("request {n}")}],
        }))
}

#[tokio::test]
async fn a_reload_that_adds_an_unrelated_model_keeps_the_running_upstream() {
    let mut h = Harness::start(&[model("a", "")], "").await;
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    let before = h.upstream_pid("a").expect("a runs");

    h.reload(&[model("a", ""), model("b", "")], "").await;
    assert_eq!(h.upstream_pid("a"), Some(before));
    assert_eq!(h.running().await, ["a"]);
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    assert_eq!(
        h.upstream_pid("a"),
        Some(before),
        "served by the same process"
    );
    assert_eq!(h.chat("b", None, false).send().await.unwrap().status(), 200);
    h.shutdown().await;
}

#[tokio::test]
async fn a_changed_command_restarts_that_model_only_after_its_request_in_flight() {
    let group = "groups:\n  both:\n    swap: false\n    members: [a, b]\n";
    let mut h = Harness::start(&[model("a", "--gate-closed"), model("b", "")], group).await;
    assert_eq!(h.chat("b", None, false).send().await.unwrap().status(), 200);
    let b_pid = h.upstream_pid("b").expect("b runs");
    let held = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let old = h.upstream_pid("a").expect("a runs");

    // a's command changes (a new flag); b's does not.
    h.reload(
        &[model("a", "--gate-closed --load-time 1ms"), model("b", "")],
        group,
    )
    .await;
    assert_eq!(
        h.upstream_pid("a"),
        Some(old),
        "not stopped under its request"
    );
    h.open_gate("a").await;
    let (status, body) = finish(held).await;
    assert_eq!(status, 200, "{body}");

    // The next request starts the new definition once the old process is gone.
    let next = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let new = h.upstream_pid("a").expect("a runs again");
    assert_ne!(new, old);
    assert!(!crate::support::is_alive(old), "the old process is gone");
    h.open_gate("a").await;
    assert_eq!(finish(next).await.0, 200);
    assert_eq!(h.upstream_pid("b"), Some(b_pid), "b was not touched");
    h.shutdown().await;
}

#[tokio::test]
async fn queued_requests_of_a_kept_model_are_served_in_their_order_across_a_reload() {
    let a = || crate::support::ModelSpec {
        id: "a",
        args: "--gate-closed",
        yaml: "parallel: 1",
    };
    let mut h = Harness::start(&[a()], "").await;
    let first = h.spawn(numbered(&h, "a", 0, "0"));
    h.wait_held("a", 1).await;
    let mut queued = Vec::new();
    for (n, priority) in [(1, "0"), (2, "5"), (3, "0")] {
        queued.push(h.spawn(numbered(&h, "a", n, priority)));
        h.wait_queue_len(queued.len()).await;
    }
    let before: Vec<Value> = h.queue().await.iter().map(|e| e["seq"].clone()).collect();

    h.reload(&[a(), model("b", "")], "").await;
    let after: Vec<Value> = h.queue().await.iter().map(|e| e["seq"].clone()).collect();
    assert_eq!(after, before, "the queue kept its order");

    h.open_gate("a").await;
    assert_eq!(finish(first).await.0, 200);
    for handle in queued {
        let (status, body) = finish(handle).await;
        assert_eq!(status, 200, "a kept model's queued request: {body}");
    }
    let journal = h.journal("a").await.expect("a's journal");
    let order: Vec<String> = journal
        .iter()
        .filter_map(|e| {
            e["json"]["messages"][0]["content"]
                .as_str()
                .map(str::to_owned)
        })
        .collect();
    assert_eq!(order, ["request 0", "request 2", "request 1", "request 3"]);
    h.shutdown().await;
}

#[tokio::test]
async fn queued_requests_of_a_removed_model_get_model_removed_and_it_stops_after_its_request() {
    let a = || crate::support::ModelSpec {
        id: "a",
        args: "--gate-closed",
        yaml: "parallel: 1",
    };
    let mut h = Harness::start(&[a(), model("b", "")], "").await;
    let held = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let pid = h.upstream_pid("a").expect("a runs");
    let queued = h.spawn(h.chat("a", None, false));
    h.wait_queue_len(1).await;

    h.reload(&[model("b", "")], "").await;
    let (status, body) = finish(queued).await;
    assert_eq!(status, 404, "{body}");
    let error: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(error["error"]["code"], "model_removed", "{body}");
    assert!(
        crate::support::is_alive(pid),
        "its request in flight is not cut"
    );
    h.open_gate("a").await;
    assert_eq!(finish(held).await.0, 200);
    h.wait_for(|h| async move { h.upstream_pid("a").is_none().then_some(()) })
        .await;
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 404);
    h.shutdown().await;
}

#[tokio::test]
async fn a_reload_that_changes_only_ttl_and_aliases_keeps_the_process() {
    let mut h = Harness::start(&[model("a", "")], "").await;
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    let pid = h.upstream_pid("a").expect("a runs");
    let settings_only = crate::support::ModelSpec {
        id: "a",
        args: "",
        yaml: "ttl: 600\naliases: [alpha]\nuseModelName: a",
    };
    h.reload(&[settings_only], "").await;
    assert_eq!(h.upstream_pid("a"), Some(pid));
    let response = h.chat("alpha", None, false).send().await.unwrap();
    let status = response.status();
    assert_eq!(status, 200, "{}", response.text().await.unwrap());
    assert_eq!(
        h.upstream_pid("a"),
        Some(pid),
        "the alias reaches the same process"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_request_queued_for_a_model_whose_address_changed_is_sent_to_the_new_process() {
    let a = || crate::support::ModelSpec {
        id: "a",
        args: "--gate-closed",
        yaml: "parallel: 1",
    };
    let mut h = Harness::start(&[a()], "").await;
    let held = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    let queued = h.spawn(numbered(&h, "a", 1, "0"));
    h.wait_queue_len(1).await;
    let old_port = h.move_port("a");
    let old_gate = format!("http://127.0.0.1:{old_port}/__mockswap/gate");

    h.reload(&[a(), model("b", "")], "").await;
    let opened = h
        .http
        .post(old_gate)
        .json(&json!({"open": true}))
        .send()
        .await
        .unwrap();
    assert!(opened.status().is_success());
    assert_eq!(finish(held).await.0, 200);
    // The queued request waits for the new definition, on its new port.
    h.wait_held("a", 1).await;
    h.open_gate("a").await;
    let (status, body) = finish(queued).await;
    assert_eq!(status, 200, "{body}");
    let journal = h.journal("a").await.expect("the new process's journal");
    assert_eq!(
        journal.len(),
        1,
        "the queued request reached the new process"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn the_event_stream_ends_at_a_reload_and_a_new_one_lists_the_new_models() {
    use futures_util::StreamExt;
    let mut h = Harness::start(&[model("a", "")], "").await;
    let response = h.http.get(h.url("/api/events")).send().await.unwrap();
    let mut stream = response.bytes_stream();
    // The first events arrive (the stream is open).
    tokio::time::timeout(LIMIT, stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    h.reload(&[model("a", ""), model("b", "")], "").await;
    tokio::time::timeout(LIMIT, async {
        while let Some(chunk) = stream.next().await {
            if chunk.is_err() {
                break;
            }
        }
    })
    .await
    .expect("the old stream ends");
    let response = h.http.get(h.url("/api/events")).send().await.unwrap();
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    tokio::time::timeout(LIMIT, async {
        while !text.contains("modelStatus") || !text.contains(r#"\"id\":\"b\""#) {
            let chunk = stream.next().await.unwrap().unwrap();
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no modelStatus with b: {text}"));
    drop(stream);
    h.shutdown().await;
}

#[tokio::test]
async fn metrics_keep_kept_models_and_add_new_models_and_bands_after_a_reload() {
    let mut h = Harness::start(&[model("a", "")], "").await;
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    let before = h.metrics().await;
    let served = |text: &str| {
        text.lines()
            .find(|l| {
                l.starts_with("llamaswap_model_queue_wait_seconds_count{")
                    && l.contains("model=\"a\"")
            })
            .map(str::to_owned)
    };
    let a_before = served(&before).unwrap_or_else(|| panic!("a's request counted: {before}"));
    h.reload(
        &[model("a", ""), model("b", "")],
        "priority:\n  bands: { background: -2147483648, urgent: 1 }\n",
    )
    .await;
    let after = h.metrics().await;
    assert_eq!(
        served(&after).as_deref(),
        Some(a_before.as_str()),
        "a's series kept"
    );
    assert!(
        after.contains("llamaswap_model_queue_depth{model=\"b\",band=\"urgent\"} 0"),
        "b has series: {after}"
    );
    assert!(
        after.contains("band=\"urgent\""),
        "the new bands label: {after}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_shutdown_after_a_reload_lets_a_response_started_before_it_finish() {
    let group = "groups:\n  one:\n    swap: true\n    members: [a, b]\n";
    let mut h = Harness::start(&[model("a", "--gate-closed"), model("b", "")], group).await;
    let in_flight = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    h.reload(&[model("a", "--gate-closed"), model("b", "")], group)
        .await;
    let queued = h.spawn(h.chat("b", None, false));
    h.wait_queue_len(1).await;
    h.begin_shutdown();
    // The drain has begun once the queued request is refused.
    let (status, body) = finish(queued).await;
    assert_eq!(status, 503, "{body}");
    // Admitted under the configuration the reload replaced, the held request
    // is still one of the server's responses in flight: its upstream is not
    // stopped under it (a new connection to it is accepted) and it finishes.
    let fresh = reqwest::Client::new();
    let opened = fresh
        .post(format!("{}/__mockswap/gate", h.upstream("a")))
        .json(&json!({"open": true}))
        .send()
        .await
        .expect("a's upstream was stopped under its response in flight");
    assert_eq!(opened.status(), 200);
    let (status, body) = finish(in_flight).await;
    assert_eq!(status, 200, "{body}");
    h.shutdown().await;
}
