//! The keys for running the server for months (issue 29): `maxQueueWait`,
//! `hooks.on_idle`, the health monitor's keys.

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

#[test]
fn health_monitoring_is_off_by_default_with_documented_defaults() {
    let Loaded { config, .. } = load("models:\n  a:\n    cmd: srv --port ${PORT}\n");
    let monitor = config.model("a").unwrap().monitor;
    assert_eq!(monitor.interval, None, "healthCheckInterval: off");
    assert_eq!(monitor.failures, 3, "healthCheckFailures");
    assert_eq!(monitor.max_restarts, 5, "maxRestarts");
    assert_eq!(
        monitor.restart_window,
        Duration::from_secs(300),
        "restartWindow"
    );
}

#[test]
fn health_keys_are_global_with_per_model_overrides_and_zero_turns_polling_off() {
    let Loaded { config, warnings } = load(concat!(
        "healthCheckInterval: 10\nhealthCheckFailures: 4\nmaxRestarts: 2\nrestartWindow: 60\n",
        "unloadTimeout: 7\n",
        "models:\n",
        "  a:\n    cmd: srv --port ${PORT}\n",
        "  b:\n    cmd: srv --port ${PORT}\n    healthCheckInterval: 2\n    healthCheckFailures: 1\n",
        "    maxRestarts: 9\n    restartWindow: 30\n    unloadTimeout: 3\n",
        "  c:\n    cmd: srv --port ${PORT}\n    healthCheckInterval: 0\n",
    ));
    assert!(warnings.is_empty(), "{warnings:?}");
    let monitor = |id: &str| config.model(id).unwrap().monitor;
    let a = monitor("a");
    assert_eq!(
        (a.interval, a.failures, a.max_restarts, a.restart_window),
        (Some(Duration::from_secs(10)), 4, 2, Duration::from_secs(60))
    );
    let b = monitor("b");
    assert_eq!(
        (b.interval, b.failures, b.max_restarts, b.restart_window),
        (Some(Duration::from_secs(2)), 1, 9, Duration::from_secs(30))
    );
    assert_eq!(monitor("c").interval, None, "0 = not polled");
    // An unhealthy process is stopped with the model's unloadTimeout.
    let specs = config.process_specs();
    let grace = |id: &str| {
        specs
            .iter()
            .find(|s| s.model == id)
            .unwrap()
            .monitor
            .stop_grace
    };
    assert_eq!(grace("a"), Duration::from_secs(7));
    assert_eq!(grace("b"), Duration::from_secs(3));
    let summary = config.summary().to_string();
    assert!(summary.contains("polled every 2s"), "{summary}");
}

#[test]
fn health_keys_below_their_minimum_name_their_key() {
    let found = issues(concat!(
        "healthCheckFailures: 0\nrestartWindow: 0\n",
        "models:\n  a:\n    cmd: srv --port ${PORT}\n    maxRestarts: 0\n",
        "    healthCheckInterval: -1\n",
    ));
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    for key in [
        "healthCheckFailures",
        "restartWindow",
        "models.a.maxRestarts",
        "models.a.healthCheckInterval",
    ] {
        assert!(paths.contains(&key), "{key}: {found:?}");
    }
}

#[test]
fn a_health_check_interval_without_a_check_endpoint_warns_that_it_has_no_effect() {
    let Loaded { config, warnings } = load(
        "models:\n  a:\n    cmd: srv --port ${PORT}\n    checkEndpoint: none\n    healthCheckInterval: 5\n",
    );
    let shown = format!("{warnings:?}");
    assert!(shown.contains("healthCheckInterval"), "{shown}");
    assert!(shown.contains("nothing to poll"), "{shown}");
    assert_eq!(config.model("a").unwrap().check_endpoint, None);
}

#[test]
fn the_readme_health_section_loads() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = &readme[readme
        .find("### Running it for months: health checks and crash loops")
        .expect("the README section")..];
    let start = section.find("```yaml\n").unwrap() + "```yaml\n".len();
    let yaml = &section[start..start + section[start..].find("```").unwrap()];
    let Loaded { config, warnings } = load(yaml);
    assert!(warnings.is_empty(), "{warnings:?}");
    let chat = config.model("chat").unwrap().monitor;
    assert_eq!(chat.interval, Some(Duration::from_secs(5)));
    assert_eq!(chat.failures, 3);
}
