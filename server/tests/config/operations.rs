//! The keys for running the server for months (issue 29): `maxQueueWait`,
//! `hooks.on_idle`.

use std::time::Duration;

use llama_swap_server::config::{Config, ConfigError, Loaded, Reason};

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

#[test]
fn max_queue_wait_is_global_with_a_per_model_override_and_zero_lifts_it() {
    let Loaded { config, warnings } = load(
        "maxQueueWait: 120\nmodels:\n  a:\n    cmd: srv --port ${PORT}\n  b:\n    cmd: srv --port ${PORT}\n    maxQueueWait: 5\n  c:\n    cmd: srv --port ${PORT}\n    maxQueueWait: 0\n",
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.max_queue_wait, Some(Duration::from_secs(120)));
    let bound = |id: &str| config.model(id).unwrap().max_queue_wait;
    assert_eq!(bound("a"), Some(Duration::from_secs(120)), "the global one");
    assert_eq!(bound("b"), Some(Duration::from_secs(5)));
    assert_eq!(bound("c"), None, "0 = no bound for this model");
    let summary = config.summary().to_string();
    assert!(summary.contains("queue wait:  at most 5s"), "{summary}");
}

#[test]
fn max_queue_wait_is_off_by_default() {
    let Loaded { config, .. } = load("models:\n  a:\n    cmd: srv --port ${PORT}\n");
    assert_eq!(config.max_queue_wait, None);
    assert_eq!(config.model("a").unwrap().max_queue_wait, None);
}

#[test]
fn negative_or_non_numeric_max_queue_wait_names_its_key() {
    let found = issues(
        "maxQueueWait: -1\nmodels:\n  a:\n    cmd: srv --port ${PORT}\n    maxQueueWait: soon\n",
    );
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert!(paths.contains(&"maxQueueWait"), "{found:?}");
    assert!(paths.contains(&"models.a.maxQueueWait"), "{found:?}");
}

#[test]
fn on_idle_reads_after_and_the_models_to_load_back_by_id_or_alias() {
    let Loaded { config, warnings } = load(
        "models:\n  qwen:\n    cmd: srv --port ${PORT}\n    aliases: [chat]\nhooks:\n  on_idle: {after: 60, preload: [chat]}\n",
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    let idle = config.hooks.on_idle.expect("on_idle");
    assert_eq!(idle.after, Duration::from_secs(60));
    assert_eq!(idle.preload, ["qwen"]);
}

#[test]
fn on_idle_without_after_or_with_zero_names_its_key() {
    let models = "models:\n  qwen:\n    cmd: srv --port ${PORT}\n";
    let found = issues(&format!("{models}hooks:\n  on_idle: {{preload: [qwen]}}\n"));
    assert!(
        found.iter().any(|(p, _)| p == "hooks.on_idle.after"),
        "{found:?}"
    );
    let found = issues(&format!(
        "{models}hooks:\n  on_idle: {{after: 0, preload: [qwen]}}\n"
    ));
    assert!(
        found.iter().any(|(p, _)| p == "hooks.on_idle.after"),
        "{found:?}"
    );
}
