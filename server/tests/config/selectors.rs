//! `selectors` and `profiles`: what loads, with which defaults, and every way a
//! definition is refused (llama-swap's `selectors_test.go` and `profile_test.go`,
//! without peers; peer targets are in peers.rs).

use llama_swap_server::config::{
    Config, ConfigError, Loaded, Reason, SelectorStrategy, WarningKind,
};

const BASE: &str = "
models:
  a:
    cmd: srv --port ${PORT}
    aliases: [alias-a]
  b:
    cmd: srv --port ${PORT}
";

fn load(yaml: &str) -> Loaded {
    match Config::loader()
        .yaml("config.yaml", &format!("{BASE}{yaml}"))
        .env(&|_| None)
        .load()
    {
        Ok(loaded) => loaded,
        Err(err) => panic!("should load:\n{err}"),
    }
}

fn only_issue(yaml: &str) -> (String, Reason) {
    match Config::loader()
        .yaml("config.yaml", &format!("{BASE}{yaml}"))
        .env(&|_| None)
        .load()
    {
        Ok(loaded) => panic!("should fail, loaded {:#?}", loaded.config),
        Err(err @ ConfigError::Invalid { .. }) => {
            let issues = err.issues();
            assert_eq!(issues.len(), 1, "{issues:#?}");
            (issues[0].path.to_string(), issues[0].reason.clone())
        }
        Err(other) => panic!("expected invalid values, got {other}"),
    }
}

#[test]
fn selectors_load_with_their_fields_and_spillover_defaults_to_one() {
    let Loaded { config, .. } = load(
        "
groups:
  balanced:
    swap: false
    members: [a, b]
selectors:
  coding:
    strategy: warm
    targets: [alias-a, b]
    name: Coding Model
    description: Best available coding model
    unlisted: true
    metadata:
      family: coding
  workers:
    strategy: spillover
    targets: [a, b]
",
    );
    let coding = &config.selectors[0];
    assert_eq!(coding.id, "coding");
    assert_eq!(coding.strategy, SelectorStrategy::Warm);
    assert_eq!(coding.targets, ["alias-a", "b"]);
    assert_eq!(coding.target_ids, ["a", "b"]);
    assert_eq!(coding.spillover, 1);
    assert_eq!(coding.name.as_deref(), Some("Coding Model"));
    assert_eq!(
        coding.description.as_deref(),
        Some("Best available coding model")
    );
    assert!(coding.unlisted);
    assert_eq!(
        coding.metadata,
        Some(serde_json::json!({"family": "coding"}))
    );
    assert_eq!(config.selectors[1].spillover, 1);
    assert_eq!(config.selectors[1].strategy, SelectorStrategy::Spillover);
}

#[test]
fn invalid_selectors_are_refused_with_the_key_and_reason() {
    type Check = fn(&Reason) -> bool;
    let cases: &[(&str, &str, &str, Check)] = &[
        (
            "empty id",
            "selectors:\n  \" \":\n    strategy: pin\n    targets: [a]\n",
            r#"selectors." ""#,
            |r| *r == Reason::Empty,
        ),
        (
            "missing strategy",
            "selectors:\n  public:\n    targets: [a]\n",
            "selectors.public.strategy",
            |r| *r == Reason::Missing,
        ),
        (
            "unknown strategy",
            "selectors:\n  public:\n    strategy: random\n    targets: [a]\n",
            "selectors.public.strategy",
            |r| matches!(r, Reason::NotOneOf { .. }),
        ),
        (
            "missing targets",
            "selectors:\n  public:\n    strategy: pin\n",
            "selectors.public.targets",
            |r| *r == Reason::Missing,
        ),
        (
            "empty targets",
            "selectors:\n  public:\n    strategy: pin\n    targets: []\n",
            "selectors.public.targets",
            |r| *r == Reason::Empty,
        ),
        (
            "unknown target",
            "selectors:\n  public:\n    strategy: pin\n    targets: [missing]\n",
            "selectors.public.targets[0]",
            |r| matches!(r, Reason::UnknownTarget { name } if name == "missing"),
        ),
        (
            "selector chaining",
            "selectors:\n  first:\n    strategy: pin\n    targets: [a]\n  second:\n    strategy: pin\n    targets: [first]\n",
            "selectors.second.targets[0]",
            |r| matches!(r, Reason::SelectorChain { .. }),
        ),
        (
            "model id collision",
            "selectors:\n  a:\n    strategy: pin\n    targets: [b]\n",
            "selectors.a",
            |r| r.to_string() == "is already a model ID; a selector needs a name of its own",
        ),
        (
            "alias collision",
            "selectors:\n  alias-a:\n    strategy: pin\n    targets: [b]\n",
            "selectors.alias-a",
            |r| r.to_string().contains("an alias of model \"a\""),
        ),
        (
            "spillover below one",
            "selectors:\n  public:\n    strategy: spillover\n    targets: [a]\n    settings:\n      spillover: 0\n",
            "selectors.public.settings.spillover",
            |r| matches!(r, Reason::TooSmall { min: 1, got: 0 }),
        ),
        (
            "duplicate resolved spillover target",
            "selectors:\n  public:\n    strategy: spillover\n    targets: [a, alias-a]\n",
            "selectors.public.targets[1]",
            |r| matches!(r, Reason::DuplicateTarget { model, first } if model == "a" && first == "a"),
        ),
        (
            "spillover targets in a swapping group",
            "selectors:\n  public:\n    strategy: spillover\n    targets: [a, b]\n",
            "selectors.public.targets",
            |r| r.to_string().contains("one group with swap: false"),
        ),
    ];
    for (name, yaml, path, check) in cases {
        let (found_path, reason) = only_issue(yaml);
        assert_eq!(found_path, *path, "{name}");
        assert!(check(&reason), "{name}: {reason:?}");
    }
}

#[test]
fn a_selector_id_that_is_a_set_params_by_id_name_is_refused_as_an_alias_collision() {
    let yaml = "
models:
  a:
    cmd: srv --port ${PORT}
    filters: { setParamsByID: { variant: { thinking: true } } }
selectors:
  variant: { strategy: pin, targets: [a] }
";
    let err = match Config::loader()
        .yaml("config.yaml", yaml)
        .env(&|_| None)
        .load()
    {
        Ok(loaded) => panic!("should fail, loaded {:#?}", loaded.config),
        Err(err) => err,
    };
    let issues = err.issues();
    assert_eq!(issues.len(), 1, "{issues:#?}");
    assert_eq!(issues[0].path.to_string(), "selectors.variant");
    let reason = issues[0].reason.to_string();
    assert!(reason.contains("an alias of model \"a\""), "{reason}");
}

#[test]
fn spillover_targets_may_share_a_non_swapping_group_with_any_spillover() {
    let Loaded { config, .. } = load(
        "
groups:
  pool:
    swap: false
    members: [a, b]
selectors:
  public:
    strategy: spillover
    targets: [a, b]
    settings:
      spillover: 4
",
    );
    assert_eq!(config.selectors[0].spillover, 4);
}

#[test]
fn spillover_targets_in_two_groups_are_refused() {
    let (path, _) = only_issue(
        "
groups:
  one: { swap: false, members: [a] }
  two: { swap: false, members: [b] }
selectors:
  public:
    strategy: spillover
    targets: [a, b]
",
    );
    assert_eq!(path, "selectors.public.targets");
}

#[test]
fn spillover_targets_under_a_matrix_must_share_a_combination() {
    load(
        "
matrix:
  vars: { A: a, B: b }
  sets:
    pool: A & B
selectors:
  public:
    strategy: spillover
    targets: [a, b]
",
    );
    let (path, reason) = only_issue(
        "
matrix:
  vars: { A: a, B: b }
  sets:
    pool: A | B
selectors:
  public:
    strategy: spillover
    targets: [a, b]
",
    );
    assert_eq!(path, "selectors.public.targets");
    assert!(
        reason
            .to_string()
            .contains("one combination of a matrix set"),
        "{reason}"
    );
}

#[test]
fn spillover_settings_on_another_strategy_warn_that_they_do_nothing() {
    let Loaded { warnings, .. } = load(
        "selectors:\n  p:\n    strategy: pin\n    targets: [a]\n    settings: { spillover: 3 }\n",
    );
    assert!(warnings.iter().any(|w| {
        w.path.to_string() == "selectors.p.settings.spillover"
            && matches!(w.kind, WarningKind::NoEffect { .. })
    }));
}

#[test]
fn profiles_load_pins_to_models_aliases_and_selectors_and_null_or_empty_disables() {
    let Loaded { config, .. } = load(
        "
selectors:
  public:
    strategy: pin
    targets: [a]
profiles:
  coding:
    description: Coding profile
    pins:
      direct: a
      alias: alias-a
      llm-code: public
      disabled-empty: \"\"
      disabled-null: ~
      a: b
",
    );
    let coding = &config.profiles[0];
    assert_eq!(coding.name, "coding");
    assert_eq!(coding.description.as_deref(), Some("Coding profile"));
    let target = |name: &str| coding.pin(name).map(|p| p.target.clone());
    assert_eq!(target("direct"), Some(Some("a".into())));
    assert_eq!(target("alias"), Some(Some("alias-a".into())));
    assert_eq!(target("llm-code"), Some(Some("public".into())));
    assert_eq!(target("disabled-empty"), Some(None));
    assert_eq!(target("disabled-null"), Some(None));
    assert_eq!(
        target("a"),
        Some(Some("b".into())),
        "a pin may shadow a model"
    );
    assert_eq!(
        coding
            .pins
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>(),
        [
            "direct",
            "alias",
            "llm-code",
            "disabled-empty",
            "disabled-null",
            "a"
        ]
    );
}

#[test]
fn invalid_profiles_are_refused_with_the_key_and_reason() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "profiles:\n  old: [a]\n",
            "profiles.old",
            "the list form of older llama-swap releases",
        ),
        (
            "profiles:\n  empty:\n    pins: {}\n",
            "profiles.empty.pins",
            "must not be empty",
        ),
        (
            "profiles:\n  none: {}\n",
            "profiles.none.pins",
            "is required",
        ),
        (
            "profiles:\n  bad:\n    pins:\n      public: missing\n",
            "profiles.bad.pins.public",
            "\"missing\" is neither a model ID, an alias, a peer model nor a selector",
        ),
        (
            "profiles:\n  test:\n    pins:\n      first: a\n      second: first\n",
            "profiles.test.pins.second",
            "pins do not chain",
        ),
    ];
    for (yaml, path, message) in cases {
        let (found_path, reason) = only_issue(yaml);
        assert_eq!(found_path, *path, "{yaml}");
        assert!(reason.to_string().contains(message), "{yaml}: {reason}");
    }
}

#[test]
fn check_config_lists_selectors_and_profiles() {
    let Loaded { config, .. } = load(
        "
groups:
  pool: { swap: false, members: [a, b] }
selectors:
  pool-sel: { strategy: spillover, targets: [a, b], settings: { spillover: 2 } }
profiles:
  night: { pins: { chat: pool-sel, old: ~ } }
",
    );
    let summary = config.summary().to_string();
    assert!(
        summary.contains("  pool-sel: spillover [a, b] spillover=2"),
        "{summary}"
    );
    assert!(
        summary.contains("  night: chat -> pool-sel, old -> (disabled)"),
        "{summary}"
    );
}
