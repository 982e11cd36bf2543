//! The `priority:` section of the config: trust caps, bands, aging and queue
//! bounds load with their defaults, and bad values name their key path
//! without ever showing an API key.

use std::time::Duration;

use llama_swap_server::config::{Config, Reason};
use llama_swap_server::testing::priority::KeyIndex;

use crate::support::fixture;

#[test]
fn priority_section_loads_every_key() {
    let loaded = Config::loader()
        .file(fixture("trust/priority-section.yaml"))
        .env(&|_| None)
        .load()
        .unwrap();
    let config = loaded.config;
    let rules = &config.priority_rules;
    assert!(!rules.ignore_header);
    assert_eq!(rules.max_header_priority, Some(10));
    assert_eq!(rules.key_caps, vec![(1, -10)]);
    assert_eq!(rules.bands.name_of(-5), "batch");
    assert_eq!(rules.bands.name_of(7), "urgent");
    assert_eq!(rules.aging_after, Some(Duration::from_secs(120)));
    // The alias resolves to its model.
    assert_eq!(rules.max_queued.get("qwen"), Some(&20));
    let settings = config.scheduler_settings();
    assert_eq!(settings.aging_after, Some(Duration::from_secs(120)));
    let qwen = settings.models.iter().find(|m| m.id == "qwen").unwrap();
    assert_eq!(qwen.max_queued, Some(20));

    let trust = config.trust();
    assert_eq!(trust.cap(50, None).capped(), 10);
    assert_eq!(trust.cap(5, Some(KeyIndex(1))).capped(), -10);
    assert_eq!(trust.cap(5, Some(KeyIndex(0))).capped(), 5);

    let summary = config.summary().to_string();
    assert!(
        summary.contains("X-Priority capped at 10, apiKeys[1] capped at -10"),
        "{summary}"
    );
    assert!(summary.contains("aging: after 120s"), "{summary}");
    assert!(summary.contains("maxQueued: qwen=20"), "{summary}");
    assert!(!summary.contains("sk-batch"), "{summary}");
}

#[test]
fn without_a_priority_section_nothing_is_capped_and_aging_is_off() {
    let yaml = "models:\n  a:\n    cmd: x --port ${PORT}\n";
    let config = Config::loader()
        .yaml("t.yaml", yaml)
        .env(&|_: &str| None)
        .load()
        .unwrap()
        .config;
    let trust = config.trust();
    assert_eq!(trust.cap(i32::MAX, None).capped(), i32::MAX);
    assert_eq!(config.priority_rules.aging_after, None);
    assert!(config.priority_rules.max_queued.is_empty());
    assert_eq!(config.priority_rules.bands.name_of(0), "normal");
}

#[test]
fn bad_priority_values_name_their_key_path_and_never_the_key() {
    let err = Config::loader()
        .file(fixture("trust/priority-errors.yaml"))
        .env(&|_| None)
        .load()
        .unwrap_err();
    let issues: Vec<(String, Reason)> = err
        .issues()
        .iter()
        .map(|i| (i.path.to_string(), i.reason.clone()))
        .collect();
    let paths: Vec<&str> = issues.iter().map(|(p, _)| p.as_str()).collect();
    for want in [
        "priority.maxHeaderPriority",
        "priority.apiKeys[0].key",
        "priority.apiKeys[1].key",
        "priority.bands",
        "priority.agingAfter",
        "priority.maxQueued.nope",
    ] {
        assert!(paths.contains(&want), "no issue at {want}: {issues:#?}");
    }
    assert!(
        issues
            .iter()
            .any(|(p, r)| p == "priority.apiKeys[0].key" && *r == Reason::NotAnApiKey)
    );
    let text = err.to_string();
    assert!(!text.contains("sk-not-configured"), "{text}");
    assert!(!text.contains("sk-chat"), "{text}");
}

fn load_yaml(yaml: &str) -> Result<Config, llama_swap_server::config::ConfigError> {
    Config::loader()
        .yaml("t.yaml", yaml)
        .env(&|_: &str| None)
        .load()
        .map(|l| l.config)
}

#[test]
fn min_resident_applies_globally_and_a_model_replaces_or_lifts_it() {
    let config = load_yaml(
        "
priority:
  minResident: 30
  minResidentYieldsTo: none
models:
  a:
    cmd: x --port ${PORT}
  b:
    cmd: x --port ${PORT}
    minResident: 90
  c:
    cmd: x --port ${PORT}
    minResident: 0
",
    )
    .unwrap();
    let settings = config.scheduler_settings();
    let of = |id: &str| {
        settings
            .models
            .iter()
            .find(|m| m.id == id)
            .unwrap()
            .min_resident
    };
    assert_eq!(of("a"), Some(Duration::from_secs(30)));
    assert_eq!(of("b"), Some(Duration::from_secs(90)));
    assert_eq!(of("c"), None, "0 lifts the global minimum for the model");
    assert_eq!(
        settings.min_resident_yields_to,
        llama_swap_server::testing::scheduler::ResidencyYield::Nobody
    );
    let summary = config.summary().to_string();
    assert!(
        summary.contains("minResident: 30s, yields to none"),
        "{summary}"
    );
}

#[test]
fn min_resident_is_off_by_default_and_yields_to_higher_waiters() {
    let settings = load_yaml("models:\n  a:\n    cmd: x --port ${PORT}\n")
        .unwrap()
        .scheduler_settings();
    assert_eq!(settings.models[0].min_resident, None);
    assert_eq!(
        settings.min_resident_yields_to,
        llama_swap_server::testing::scheduler::ResidencyYield::Higher
    );
}

#[test]
fn a_bad_min_resident_yields_to_names_its_key() {
    let err = load_yaml(
        "priority:\n  minResidentYieldsTo: lower\nmodels:\n  a:\n    cmd: x --port ${PORT}\n",
    )
    .unwrap_err();
    assert!(
        err.issues()
            .iter()
            .any(|i| i.path.to_string() == "priority.minResidentYieldsTo"
                && matches!(i.reason, Reason::NotOneOf { .. })),
        "{err}"
    );
}
