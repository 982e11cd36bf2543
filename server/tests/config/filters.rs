//! `filters` in the config: the three settings, the legacy key, macro-expanded
//! `setParamsByID` names registered as aliases, and their collisions.

use bytes::Bytes;
use llama_swap_server::config::{Config, ConfigError, Loaded, Reason, WarningKind};
use serde_json::{Value, json};

fn load(yaml: &str) -> Loaded {
    Config::loader()
        .yaml("test.yaml", yaml)
        .env(&|_: &str| None)
        .load()
        .unwrap_or_else(|e| panic!("should load:\n{e}\n{yaml}"))
}

fn issues(yaml: &str) -> Vec<(String, Reason)> {
    match Config::loader()
        .yaml("test.yaml", yaml)
        .env(&|_: &str| None)
        .load()
    {
        Err(ConfigError::Invalid { issues, .. }) => issues
            .into_iter()
            .map(|i| (i.path.to_string(), i.reason))
            .collect(),
        other => panic!("expected invalid, got {other:?}"),
    }
}

fn filtered(config: &Config, model: &str, requested: &str, body: Value) -> Value {
    let filters = &config.model(model).unwrap().filters;
    let out = filters
        .apply(requested, Bytes::from(body.to_string()))
        .unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn filters_load_and_rewrite_bodies_without_a_not_supported_warning() {
    let Loaded { config, warnings } = load(
        r#"
models:
  qwen:
    cmd: server --port ${PORT}
    filters:
      stripParams: "temperature, top_k, model"
      setParams:
        top_p: 0.95
        chat_template_kwargs.enable_thinking: false
      setParamsByID:
        "qwen:creative":
          temperature: 1.3
"#,
    );
    assert!(
        warnings
            .iter()
            .all(|w| !matches!(w.kind, WarningKind::NotSupported)),
        "{warnings:?}"
    );
    let out = filtered(
        &config,
        "qwen",
        "qwen",
        json!({"model": "qwen", "temperature": 0.2, "top_k": 5, "messages": []}),
    );
    assert_eq!(
        out,
        json!({"model": "qwen", "messages": [], "top_p": 0.95,
               "chat_template_kwargs": {"enable_thinking": false}})
    );
    let out = filtered(
        &config,
        "qwen",
        "qwen:creative",
        json!({"model": "qwen:creative"}),
    );
    assert_eq!(out["temperature"], json!(1.3));
    // `model` in stripParams is protected, and said so.
    assert!(
        warnings
            .iter()
            .any(|w| w.path.to_string() == "models.qwen.filters.stripParams"
                && matches!(w.kind, WarningKind::Protected { .. })),
        "{warnings:?}"
    );
}

#[test]
fn set_params_by_id_names_become_aliases_of_the_model() {
    let Loaded { config, .. } = load(
        r#"
models:
  qwen:
    cmd: server --port ${PORT}
    aliases: [chat]
    filters:
      setParamsByID:
        chat: {temperature: 0.1}
        qwen: {temperature: 0.2}
        "qwen:hot": {temperature: 1.5}
"#,
    );
    let qwen = config.model("qwen").unwrap();
    // Listed once each; the model's own ID is not an alias.
    assert_eq!(qwen.aliases, ["chat", "qwen:hot"]);
    assert_eq!(config.resolve("qwen:hot"), Some("qwen"));
    assert_eq!(
        config.scheduler_settings().models[0].aliases,
        ["chat", "qwen:hot"]
    );
    assert_eq!(
        filtered(&config, "qwen", "qwen", json!({}))["temperature"],
        json!(0.2)
    );
}

#[test]
fn set_params_by_id_names_are_macro_expanded() {
    let Loaded { config, .. } = load(
        r#"
macros:
  flavour: hot
models:
  qwen:
    cmd: server --port ${PORT}
    filters:
      setParamsByID:
        "${MODEL_ID}:${flavour}": {temperature: 1.5}
"#,
    );
    assert_eq!(config.resolve("qwen:hot"), Some("qwen"));
    let out = filtered(&config, "qwen", "qwen:hot", json!({"model": "qwen:hot"}));
    assert_eq!(out["temperature"], json!(1.5));
}

#[test]
fn a_set_params_by_id_name_that_is_another_model_is_refused() {
    let found = issues(
        r#"
models:
  a:
    cmd: server --port ${PORT}
    filters:
      setParamsByID:
        b: {x: 1}
  b:
    cmd: server --port ${PORT}
"#,
    );
    assert!(
        found
            .iter()
            .any(|(path, reason)| path == "models.a.filters.setParamsByID.b"
                && matches!(reason, Reason::AliasIsModelId { alias } if alias == "b")),
        "{found:?}"
    );
}

#[test]
fn a_set_params_by_id_name_that_is_another_models_alias_is_refused() {
    let found = issues(
        r#"
models:
  a:
    cmd: server --port ${PORT}
    aliases: [shared]
  b:
    cmd: server --port ${PORT}
    filters:
      setParamsByID:
        shared: {x: 1}
"#,
    );
    assert!(
        found.iter().any(|(path, reason)| path == "models.b.filters.setParamsByID.shared"
            && matches!(reason, Reason::DuplicateAlias { alias, model } if alias == "shared" && model == "a")),
        "{found:?}"
    );
}

#[test]
fn two_set_params_by_id_names_expanding_to_one_are_refused() {
    let found = issues(
        r#"
macros:
  v: x
models:
  a:
    cmd: server --port ${PORT}
    filters:
      setParamsByID:
        "a-${v}": {t: 1}
        "a-x": {t: 2}
"#,
    );
    assert!(
        found
            .iter()
            .any(|(_, reason)| matches!(reason, Reason::Duplicate { item } if item == "a-x")),
        "{found:?}"
    );
}

#[test]
fn the_legacy_strip_params_key_is_read_and_loses_to_strip_params() {
    let Loaded { config, warnings } = load(
        r#"
models:
  old:
    cmd: server --port ${PORT}
    filters:
      strip_params: "seed"
  both:
    cmd: server --port ${PORT}
    filters:
      stripParams: [a, b]
      strip_params: "seed"
"#,
    );
    let old = &config.model("old").unwrap().filters;
    assert_eq!(old.strip_params().collect::<Vec<_>>(), ["seed"]);
    let both = &config.model("both").unwrap().filters;
    assert_eq!(both.strip_params().collect::<Vec<_>>(), ["a", "b"]);
    assert!(
        warnings
            .iter()
            .any(|w| w.path.to_string() == "models.both.filters.strip_params"
                && matches!(w.kind, WarningKind::NoEffect { .. })),
        "{warnings:?}"
    );
}

#[test]
fn malformed_filters_are_errors_naming_the_key() {
    let found = issues(
        r#"
models:
  a:
    cmd: server --port ${PORT}
    filters:
      setParams: [1, 2]
      setParamsByID:
        x: 5
"#,
    );
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert!(paths.contains(&"models.a.filters.setParams"), "{found:?}");
    assert!(
        paths.contains(&"models.a.filters.setParamsByID.x"),
        "{found:?}"
    );
}
