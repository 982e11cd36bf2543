//! Profiles over HTTP with mockswap upstreams: `GET /api/profiles`,
//! `PUT /api/profiles/active`, pins on body requests and on `/upstream`, the
//! pin rows of `/v1/models`, switching mid-traffic and reloads.

use serde_json::{Value, json};

use crate::support::{Harness, LIMIT, ModelSpec, model};

const PROFILES: &str = "
profiles:
  coding:
    description: Coding profile
    pins:
      public: b
      disabled: ~
      a: b
  chat:
    pins:
      public: a
";

async fn put_active(h: &Harness, body: &str) -> (u16, Value) {
    let response = h
        .http
        .put(h.url("/api/profiles/active"))
        .header("Content-Type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn get_json(h: &Harness, path: &str) -> Value {
    h.http
        .get(h.url(path))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// The model names a model's upstream received, in order.
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

#[tokio::test]
async fn the_profile_api_lists_profiles_and_switches_the_active_one() {
    let h = Harness::start(&[model("a", ""), model("b", "")], PROFILES).await;
    let listed = get_json(&h, "/api/profiles").await;
    assert_eq!(listed["active"], Value::Null, "none is active at start");
    assert_eq!(
        listed["profiles"],
        json!([
            {"id": "chat", "description": "", "pins": {"public": "a"}},
            {"id": "coding", "description": "Coding profile",
             "pins": {"public": "b", "disabled": "", "a": "b"}},
        ])
    );

    assert_eq!(
        put_active(&h, r#"{"name":"coding"}"#).await,
        (200, json!({"active": "coding"}))
    );
    let (status, body) = put_active(&h, r#"{"name":"missing"}"#).await;
    assert_eq!(status, 404);
    assert_eq!(body["error"]["code"], "profile_not_found");
    assert_eq!(get_json(&h, "/api/profiles").await["active"], "coding");

    for malformed in ["not json", "{}", r#"{"name": 5}"#, "[]"] {
        let (status, body) = put_active(&h, malformed).await;
        assert_eq!(status, 400, "{malformed}");
        assert_eq!(body["error"]["code"], "invalid_profile_request");
    }
    assert_eq!(get_json(&h, "/api/profiles").await["active"], "coding");

    assert_eq!(
        put_active(&h, r#"{"name":null}"#).await,
        (200, json!({"active": null}))
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_pinned_name_is_served_by_its_target_under_the_target_name() {
    let h = Harness::start(&[model("a", ""), model("b", "")], PROFILES).await;
    let before = h.chat("public", None, false).send().await.unwrap();
    assert_eq!(before.status(), 404, "no profile, no pin");

    put_active(&h, r#"{"name":"coding"}"#).await;
    let response = h.chat("public", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(received(&h, "b").await, ["b"]);

    // A pin may shadow a model while its profile is active.
    let shadowed = h.chat("a", None, false).send().await.unwrap();
    assert_eq!(shadowed.status(), 200);
    assert_eq!(received(&h, "b").await, ["b", "b"]);
    assert!(received(&h, "a").await.is_empty());
    h.shutdown().await;
}

#[tokio::test]
async fn a_pin_without_a_target_disables_the_name_with_404() {
    let h = Harness::start(
        &[model("a", ""), model("b", ""), model("disabled", "")],
        PROFILES,
    )
    .await;
    assert_eq!(
        h.chat("disabled", None, false)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    put_active(&h, r#"{"name":"coding"}"#).await;
    let response = h.chat("disabled", None, false).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_not_found");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("active profile 'coding'"), "{message}");
    h.shutdown().await;
}

#[tokio::test]
async fn upstream_paths_follow_the_longest_pin_and_keep_the_body() {
    let h = Harness::start(
        &[
            model("a", ""),
            ModelSpec {
                id: "b",
                args: "--models b,author/public",
                yaml: "",
            },
        ],
        "
profiles:
  nested:
    pins:
      author: a
      author/public: b
      off: ''
",
    )
    .await;
    put_active(&h, r#"{"name":"nested"}"#).await;
    let response = h
        .http
        .post(h.url("/upstream/author/public/v1/chat/completions"))
        .json(&json!({"model": "author/public", "messages": []}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let journal = h.journal("b").await.unwrap();
    assert_eq!(journal.len(), 1);
    assert_eq!(journal[0]["path"], "/v1/chat/completions");
    assert_eq!(
        journal[0]["model"], "author/public",
        "the body is not rewritten"
    );

    let off = h
        .http
        .post(h.url("/upstream/off/v1/chat/completions"))
        .json(&json!({"model": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(off.status(), 404);
    h.shutdown().await;
}

#[tokio::test]
async fn switching_profiles_mid_traffic_routes_new_requests_and_lets_running_ones_finish() {
    let h = Harness::start(
        &[model("a", "--gate-closed"), model("b", "--gate-closed")],
        &format!("groups:\n  both: {{ swap: false, members: [a, b] }}\n{PROFILES}"),
    )
    .await;
    put_active(&h, r#"{"name":"chat"}"#).await;
    let first = h.spawn(h.chat("public", None, false));
    h.wait_held("a", 1).await;

    put_active(&h, r#"{"name":"coding"}"#).await;
    let second = h.spawn(h.chat("public", None, false));
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
async fn a_reload_turns_the_active_profile_off() {
    let h = Harness::start(&[model("a", ""), model("b", "")], PROFILES).await;
    put_active(&h, r#"{"name":"coding"}"#).await;
    h.reload_same().await;
    h.wait_for(|h| async move {
        let active = get_json(h, "/api/profiles").await["active"].clone();
        active.is_null().then_some(())
    })
    .await;
    assert_eq!(
        h.chat("public", None, false).send().await.unwrap().status(),
        404
    );
    h.shutdown().await;
}

#[tokio::test]
async fn the_model_list_shows_the_active_profiles_pins_that_shadow_nothing() {
    let h = Harness::start(&[model("a", ""), model("b", "")], PROFILES).await;
    let ids = |models: &Value| -> Vec<String> {
        models["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&get_json(&h, "/v1/models").await), ["a", "b"]);
    put_active(&h, r#"{"name":"coding"}"#).await;
    let models = get_json(&h, "/v1/models").await;
    // `a` shadows a model and `disabled` has no target: neither gets a row.
    assert_eq!(ids(&models), ["a", "b", "public"]);
    let public = &models["data"][2];
    assert_eq!(public["meta"]["llamaswap"], json!({"type": "profile"}));
    assert_eq!(public["status"]["value"], "unloaded");
    assert_eq!(public["object"], "model");
    h.shutdown().await;
}

#[tokio::test]
async fn model_management_names_the_configured_model_not_the_pin() {
    let h = Harness::start(
        &[model("a", ""), model("b", "")],
        &format!("groups:\n  both: {{ swap: false, members: [a, b] }}\n{PROFILES}"),
    )
    .await;
    for m in ["a", "b"] {
        assert_eq!(h.chat(m, None, false).send().await.unwrap().status(), 200);
    }
    assert_eq!(h.running().await, ["a", "b"]);
    // coding pins `a` to `b`: requests for a go to b, but unloading a unloads a.
    put_active(&h, r#"{"name":"coding"}"#).await;
    let response = h
        .http
        .post(h.url("/api/models/unload/a"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(h.running().await, ["b"]);
    h.shutdown().await;
}
