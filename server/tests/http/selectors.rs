//! Selectors over HTTP with mockswap upstreams: pin, warm and spillover
//! choices, profiles pinning to a selector, `/upstream` ignoring selectors, and
//! the selector rows of `/v1/models`.

use serde_json::{Value, json};

use crate::support::{Harness, LIMIT, ModelSpec, model};

async fn received(h: &Harness, model: &str) -> Vec<String> {
    h.journal(model)
        .await
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e["model"].as_str().map(str::to_owned))
        .collect()
}

async fn finish(handle: tokio::task::JoinHandle<(u16, String)>) -> (u16, String) {
    tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap()
}

async fn status(h: &Harness, model: &str) -> u16 {
    h.chat(model, None, false)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_pin_selector_serves_its_first_target_under_that_name() {
    let h = Harness::start(
        &[model("a", ""), model("b", "")],
        "selectors:\n  public: { strategy: pin, targets: [b, a] }\n",
    )
    .await;
    assert_eq!(status(&h, "public").await, 200);
    assert_eq!(received(&h, "b").await, ["b"]);
    assert!(received(&h, "a").await.is_empty());
    h.shutdown().await;
}

#[tokio::test]
async fn a_warm_selector_prefers_the_model_already_running() {
    // One model at a time (the default group): warm avoids a swap.
    let h = Harness::start(
        &[model("a", ""), model("b", "")],
        "selectors:\n  coder: { strategy: warm, targets: [a, b] }\n",
    )
    .await;
    assert_eq!(
        status(&h, "coder").await,
        200,
        "nothing runs: the first target"
    );
    assert_eq!(received(&h, "a").await, ["a"]);
    assert_eq!(status(&h, "b").await, 200);
    assert_eq!(h.running().await, ["b"]);
    assert_eq!(status(&h, "coder").await, 200);
    assert_eq!(received(&h, "b").await, ["b", "b"], "b was warm");
    assert_eq!(h.running().await, ["b"], "no swap");
    h.shutdown().await;
}

#[tokio::test]
async fn a_spillover_selector_spreads_concurrent_requests_over_its_targets() {
    let h = Harness::start(
        &[model("a", "--gate-closed"), model("b", "--gate-closed")],
        "
groups:
  pool: { swap: false, members: [a, b] }
selectors:
  workers: { strategy: spillover, targets: [a, b] }
",
    )
    .await;
    let first = h.spawn(h.chat("workers", None, false));
    h.wait_held("a", 1).await;
    // a has one request of this selector in flight (spillover 1): b starts.
    let second = h.spawn(h.chat("workers", None, false));
    h.wait_held("b", 1).await;
    h.open_gate("a").await;
    h.open_gate("b").await;
    assert_eq!(finish(first).await.0, 200);
    assert_eq!(finish(second).await.0, 200);
    assert_eq!(received(&h, "a").await, ["a"]);
    assert_eq!(received(&h, "b").await, ["b"]);
    h.shutdown().await;
}

#[tokio::test]
async fn spillover_keeps_filling_the_running_target_up_to_the_spillover_setting() {
    let h = Harness::start(
        &[model("a", "--gate-closed"), model("b", "--gate-closed")],
        "
groups:
  pool: { swap: false, members: [a, b] }
selectors:
  workers: { strategy: spillover, targets: [a, b], settings: { spillover: 2 } }
",
    )
    .await;
    let first = h.spawn(h.chat("workers", None, false));
    h.wait_held("a", 1).await;
    let second = h.spawn(h.chat("workers", None, false));
    h.wait_held("a", 2).await;
    let third = h.spawn(h.chat("workers", None, false));
    h.wait_held("b", 1).await;
    h.open_gate("a").await;
    h.open_gate("b").await;
    for handle in [first, second, third] {
        assert_eq!(finish(handle).await.0, 200);
    }
    assert_eq!(received(&h, "a").await.len(), 2);
    assert_eq!(received(&h, "b").await.len(), 1);
    h.shutdown().await;
}

#[tokio::test]
async fn a_profile_can_pin_a_name_to_a_selector() {
    let h = Harness::start(
        &[model("a", ""), model("b", "")],
        "
selectors:
  public: { strategy: pin, targets: [b] }
profiles:
  coding: { pins: { llm-code: public } }
",
    )
    .await;
    assert_eq!(status(&h, "llm-code").await, 404);
    h.http
        .put(h.url("/api/profiles/active"))
        .json(&json!({"name": "coding"}))
        .send()
        .await
        .unwrap();
    assert_eq!(status(&h, "llm-code").await, 200);
    assert_eq!(received(&h, "b").await, ["b"]);
    h.shutdown().await;
}

#[tokio::test]
async fn selectors_do_not_apply_on_upstream_paths() {
    let h = Harness::start(
        &[model("a", "")],
        "selectors:\n  public: { strategy: pin, targets: [a] }\n",
    )
    .await;
    let response = h
        .http
        .post(h.url("/upstream/public/v1/chat/completions"))
        .json(&json!({"model": "public"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    assert!(received(&h, "a").await.is_empty());
    h.shutdown().await;
}

#[tokio::test]
async fn the_model_list_shows_listed_selectors_with_strategy_targets_and_status() {
    let h = Harness::start(
        &[model("a", ""), model("b", "")],
        "
groups:
  pool: { swap: false, members: [a, b] }
selectors:
  public:
    strategy: pin
    targets: [a, b]
    name: ' Public Model '
    description: Public selector
    metadata: { purpose: testing }
  workers: { strategy: spillover, targets: [a, b] }
  hidden: { strategy: pin, targets: [a], unlisted: true }
",
    )
    .await;
    assert_eq!(status(&h, "b").await, 200);
    let models: Value = h
        .http
        .get(h.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let row = |id: &str| {
        models["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .cloned()
    };
    let public = row("public").expect("public is listed");
    assert_eq!(public["name"], "Public Model");
    assert_eq!(public["description"], "Public selector");
    assert_eq!(
        public["meta"]["llamaswap"],
        json!({"purpose": "testing", "type": "selector", "strategy": "pin", "targets": ["a", "b"]})
    );
    assert_eq!(
        public["status"]["value"], "unloaded",
        "a pin selector is loaded only when its first target is"
    );
    let workers = row("workers").expect("workers is listed");
    assert_eq!(workers["meta"]["llamaswap"]["spillover"], 1);
    assert_eq!(workers["status"]["value"], "loaded", "b runs");
    assert!(row("hidden").is_none());
    h.shutdown().await;
}

#[tokio::test]
async fn activity_records_name_the_selector_that_chose_the_model() {
    let h = Harness::start(
        &[model("a", ""), model("b", "")],
        "selectors:\n  public: { strategy: pin, targets: [b] }\n",
    )
    .await;
    assert_eq!(status(&h, "public").await, 200);
    assert_eq!(status(&h, "a").await, 200);
    let body: Value = h
        .wait_for(|h| async move {
            let body: Value = h
                .http
                .get(h.url("/api/activity"))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            (body["activity"].as_array()?.len() == 2).then_some(body)
        })
        .await;
    let rows = body["activity"].as_array().unwrap();
    let by_model = |m: &str| rows.iter().find(|r| r["model"] == m).unwrap();
    assert_eq!(by_model("b")["metadata"]["selector"], "public");
    assert!(by_model("a").get("selector").is_none());
    h.shutdown().await;
}

#[tokio::test]
async fn a_selector_or_pin_naming_a_set_params_by_id_name_sends_that_name_with_its_params() {
    let hot = ModelSpec {
        id: "a",
        args: "--models a,a:hot",
        yaml: r#"filters: {setParamsByID: {"a:hot": {temperature: 1.5}}}"#,
    };
    let h = Harness::start(
        &[hot],
        "
selectors:
  public: { strategy: pin, targets: ['a:hot'] }
profiles:
  coding: { pins: { llm-code: 'a:hot' } }
",
    )
    .await;
    assert_eq!(status(&h, "public").await, 200);
    h.http
        .put(h.url("/api/profiles/active"))
        .json(&json!({"name": "coding"}))
        .send()
        .await
        .unwrap();
    assert_eq!(status(&h, "llm-code").await, 200);
    let journal = h.journal("a").await.unwrap();
    assert_eq!(journal.len(), 2);
    for forwarded in &journal {
        // The filters see the name after the renaming step, as llama-swap's do.
        assert_eq!(forwarded["model"], "a:hot");
        assert_eq!(forwarded["json"]["temperature"], json!(1.5));
    }
    h.shutdown().await;
}
