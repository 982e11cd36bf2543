//! `capabilities` rendered into `/v1/models` as llama-swap does.

use serde_json::{Value, json};

use crate::support::{Harness, ModelSpec};

#[tokio::test]
async fn capabilities_become_openai_style_fields_in_the_model_list() {
    let spec = ModelSpec {
        id: "vl",
        args: "",
        yaml: "capabilities: {in: [text, image], out: [text], tools: true, context: 32768}\nmetadata: {capabilities: old, family: qwen}",
    };
    let h = Harness::start(&[spec], "").await;
    let list: Value = h
        .http
        .get(h.url("/v1/models"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let row = &list["data"][0];
    assert_eq!(
        row["architecture"],
        json!({"input_modalities": ["text", "image"], "output_modalities": ["text"], "modality": "text+image->text"})
    );
    assert_eq!(
        row["capabilities"],
        json!({"vision": true, "function_calling": true})
    );
    assert_eq!(row["supported_parameters"], json!(["tools", "tool_choice"]));
    assert_eq!(row["context_length"], json!(32768));
    assert_eq!(row["meta"]["n_ctx"], json!(32768));
    // The rendered names win over metadata keys of the same name.
    assert_eq!(row["meta"]["llamaswap"].get("capabilities"), None);
    assert_eq!(row["meta"]["llamaswap"]["family"], "qwen");
    h.shutdown().await;
}

#[tokio::test]
async fn an_unknown_modality_is_a_load_error() {
    let yaml = "models:\n  m:\n    cmd: srv --port ${PORT}\n    capabilities: {in: [smell]}\n";
    let err = llama_swap_server::config::Config::loader()
        .yaml("t.yaml", yaml)
        .env(&|_: &str| None)
        .load()
        .unwrap_err()
        .to_string();
    assert!(err.contains("models.m.capabilities.in[0]"), "{err}");
}
