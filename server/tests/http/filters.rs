//! Request filters on the wire: what the upstream's journal shows it received.

use serde_json::{Value, json};

use crate::support::{Harness, ModelSpec};

const FILTERED: ModelSpec = ModelSpec {
    id: "qwen",
    args: "--models qwen,qwen:hot",
    // The harness indents each line alike, so nested settings go in flow style.
    yaml: r#"filters: {stripParams: "temperature, top_k", setParams: {top_p: 0.9, chat_template_kwargs.enable_thinking: false}, setParamsByID: {"qwen:hot": {temperature: 1.5}}}"#,
};

async fn post_raw(h: &Harness, path: &str, body: &'static str) -> reqwest::Response {
    h.http
        .post(h.url(path))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap()
}

async fn last_forwarded(h: &Harness) -> Value {
    let journal = h.journal("qwen").await.unwrap();
    journal.last().cloned().unwrap()
}

#[tokio::test]
async fn strip_and_set_params_reach_the_upstream_and_other_bytes_do_not_change() {
    let h = Harness::start(&[FILTERED], "").await;
    let response = post_raw(
        &h,
        "/v1/chat/completions",
        r#"{"model":"qwen", "temperature": 0.2,"messages": [ {"role":"user","content":"a  \u00e9"} ],"top_k":3}"#,
    )
    .await;
    assert_eq!(response.status(), 200);
    let forwarded = last_forwarded(&h).await;
    assert_eq!(
        forwarded["body"],
        r#"{"model":"qwen","messages": [ {"role":"user","content":"a  \u00e9"} ],"chat_template_kwargs":{"enable_thinking":false},"top_p":0.9}"#
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_set_params_by_id_name_routes_to_its_model_with_its_params() {
    let h = Harness::start(&[FILTERED], "").await;
    let response = h.chat("qwen:hot", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let hot = last_forwarded(&h).await;
    assert_eq!(hot["model"], "qwen:hot");
    assert_eq!(hot["json"]["temperature"], json!(1.5));
    assert_eq!(hot["json"]["top_p"], json!(0.9));

    let response = h.chat("qwen", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let plain = last_forwarded(&h).await;
    assert_eq!(plain["json"].get("temperature"), None);
    assert_eq!(plain["json"]["top_p"], json!(0.9));
    h.shutdown().await;
}

#[tokio::test]
async fn upstream_passthrough_is_not_filtered() {
    let h = Harness::start(&[FILTERED], "").await;
    let body = r#"{"model":"qwen","temperature":0.2,"messages":[]}"#;
    let response = post_raw(&h, "/upstream/qwen/v1/chat/completions", body).await;
    assert_eq!(response.status(), 200);
    assert_eq!(last_forwarded(&h).await["body"], body);
    h.shutdown().await;
}

#[tokio::test]
async fn a_body_the_filters_cannot_apply_to_is_refused_before_any_start() {
    let spec = ModelSpec {
        id: "qwen",
        args: "",
        yaml: "filters: {setParams: {messages.role: system}}",
    };
    let h = Harness::start(&[spec], "").await;
    let response = h.chat("qwen", None, false).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "filter_failed");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("messages.role"),
        "{error}"
    );
    assert!(
        h.running().await.is_empty(),
        "a refused request started its model"
    );
    h.shutdown().await;
}
