//! Listings and the small endpoints as llama-swap shows them: `/v1/models`
//! with `meta.llamaswap` and the `Origin` echo, `/running` with `cmd`, the
//! redirects of `/` and `/upstream` to the web UI, and `/wol-health`.

use serde_json::{Value, json};

use crate::support::{Harness, ModelSpec, model};

async fn get(h: &Harness, path: &str) -> reqwest::Response {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    client.get(h.url(path)).send().await.unwrap()
}

fn row<'a>(models: &'a Value, id: &str) -> &'a Value {
    models["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no row {id} in {models}"))
}

#[tokio::test]
async fn model_rows_carry_meta_llamaswap_with_type_metadata_and_aliases() {
    let h = Harness::start(
        &[
            ModelSpec {
                id: "qwen",
                args: "",
                yaml: "aliases: [chat, coder]\nname: ' Qwen 7B '\nmetadata: {family: qwen, ctx: 8192}",
            },
            model("plain", ""),
        ],
        "includeAliasesInList: true\n",
    )
    .await;
    let models: Value = get(&h, "/v1/models").await.json().await.unwrap();
    let ids: Vec<&str> = models["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["chat", "coder", "plain", "qwen"]);

    let qwen = row(&models, "qwen");
    assert_eq!(qwen["name"], "Qwen 7B", "names are trimmed: {qwen}");
    assert_eq!(
        qwen["meta"]["llamaswap"],
        json!({"family": "qwen", "ctx": 8192, "type": "model", "aliases": ["chat", "coder"]})
    );
    let alias = row(&models, "chat");
    assert_eq!(
        alias["meta"]["llamaswap"],
        json!({"family": "qwen", "ctx": 8192, "type": "alias", "modelID": "qwen"})
    );
    assert_eq!(alias["name"], "Qwen 7B");
    let plain = row(&models, "plain");
    assert_eq!(plain["meta"]["llamaswap"], json!({"type": "model"}));
    assert!(plain.get("name").is_none(), "{plain}");
    h.shutdown().await;
}

#[tokio::test]
async fn model_listing_echoes_the_origin_for_browsers() {
    let h = Harness::start(&[model("a", "")], "").await;
    let response = h
        .http
        .get(h.url("/v1/models"))
        .header("Origin", "http://chat.example:3000")
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.headers()["access-control-allow-origin"],
        "http://chat.example:3000"
    );
    let without = h.http.get(h.url("/v1/models")).send().await.unwrap();
    assert!(
        !without
            .headers()
            .contains_key("access-control-allow-origin")
    );
    h.shutdown().await;
}

#[tokio::test]
async fn running_lists_the_command_of_each_model() {
    let h = Harness::start(&[model("a", "")], "").await;
    assert_eq!(h.chat("a", None, false).send().await.unwrap().status(), 200);
    let running: Value = get(&h, "/running").await.json().await.unwrap();
    let entry = &running["running"][0];
    assert_eq!(entry["model"], "a");
    let cmd = entry["cmd"].as_str().unwrap();
    assert!(
        cmd.contains("mockswap") && cmd.contains("--models a"),
        "{cmd}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn root_and_upstream_redirect_to_the_ui_and_wol_health_needs_no_key() {
    let h = Harness::start(&[model("a", "")], "apiKeys: [sk-test]\n").await;
    let root = get(&h, "/").await;
    assert_eq!(root.status(), 302);
    assert_eq!(root.headers()["location"], "/ui");
    let health = get(&h, "/wol-health").await;
    assert_eq!(health.status(), 200);
    assert_eq!(health.text().await.unwrap(), "OK");

    // `/upstream` is behind the key, as in llama-swap.
    assert_eq!(get(&h, "/upstream").await.status(), 401);
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let upstream = client
        .get(h.url("/upstream"))
        .bearer_auth("sk-test")
        .send()
        .await
        .unwrap();
    assert_eq!(upstream.status(), 302);
    assert_eq!(upstream.headers()["location"], "/ui/models");
    h.shutdown().await;
}
