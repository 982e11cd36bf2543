//! The matrix router's configuration: `routing.router.use: matrix` with
//! `routing.router.settings.matrix`, or the legacy top-level `matrix`.

use llama_swap_server::config::{Config, ConfigError, Loaded, Reason, WarningKind};
use llama_swap_server::testing::policy::matrix::{Matrix, MatrixError, MatrixSet, SyntaxError};

const MODELS: &str = "
models:
  gemma:
    cmd: srv --port ${PORT}
    aliases: [chat]
  qwen:
    cmd: srv --port ${PORT}
  voxtral:
    cmd: srv --port ${PORT}
  llama70b:
    cmd: srv --port ${PORT}
";

fn load(yaml: &str) -> Loaded {
    let text = format!("{MODELS}{yaml}");
    match Config::loader()
        .yaml("config.yaml", &text)
        .env(&|_| None)
        .load()
    {
        Ok(loaded) => loaded,
        Err(err) => panic!("should load:\n{err}"),
    }
}

/// Every issue as (`key.path`, reason).
fn issues(yaml: &str) -> Vec<(String, Reason)> {
    let text = format!("{MODELS}{yaml}");
    match Config::loader()
        .yaml("config.yaml", &text)
        .env(&|_| None)
        .load()
    {
        Ok(loaded) => panic!("should fail, loaded {:#?}", loaded.config),
        Err(err @ ConfigError::Invalid { .. }) => err
            .issues()
            .iter()
            .map(|i| (i.path.to_string(), i.reason.clone()))
            .collect(),
        Err(other) => panic!("expected invalid values, got {other}"),
    }
}

fn only_issue(yaml: &str) -> (String, Reason) {
    let mut all = issues(yaml);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.remove(0)
}

const ROUTED: &str = "
routing:
  router:
    use: matrix
    settings:
      matrix:
        vars: { g: gemma, q: qwen, v: voxtral, L: llama70b }
        evict_costs: { L: 30, v: 50 }
        sets:
          standard: (g | q) & v
          full: L
";

#[test]
fn routing_router_matrix_loads_vars_costs_and_sets_in_file_order() {
    let Loaded { config, .. } = load(ROUTED);
    let matrix = config.matrix.as_ref().expect("matrix router selected");
    assert!(config.groups.is_empty());
    assert_eq!(
        matrix.sets,
        vec![
            MatrixSet::new("standard", "(g | q) & v"),
            MatrixSet::new("full", "L")
        ]
    );
    assert_eq!(matrix.vars[0], ("g".to_owned(), "gemma".to_owned()));
    assert_eq!(
        matrix.evict_costs,
        vec![("L".to_owned(), 30), ("v".to_owned(), 50)]
    );
}

#[test]
fn the_legacy_top_level_matrix_loads_the_same_way() {
    let Loaded { config, .. } = load(
        "
matrix:
  vars: { g: gemma, q: qwen }
  sets:
    combo: g | q
",
    );
    let matrix = config.matrix.expect("legacy matrix selected");
    assert_eq!(matrix.sets, vec![MatrixSet::new("combo", "g | q")]);
    assert!(config.groups.is_empty());
}

#[test]
fn aliases_and_model_ids_work_in_sets_without_vars() {
    let Loaded { config, .. } = load(
        "
matrix:
  sets:
    combo: chat & voxtral
",
    );
    assert!(config.matrix.is_some());
}

#[test]
fn check_config_summary_shows_the_sets_in_order() {
    let Loaded { config, .. } = load(ROUTED);
    let summary = config.summary().to_string();
    assert!(summary.contains("router: matrix (2 sets"), "{summary}");
    let standard = summary.find("  standard: (g | q) & v").expect(&summary);
    let full = summary.find("  full: L").expect(&summary);
    assert!(standard < full);
    assert!(
        summary.contains("evict_costs: L=30, v=50 (others 1)"),
        "{summary}"
    );
    assert!(!summary.contains("groups:"), "{summary}");
}

#[test]
fn groups_beside_the_selected_matrix_have_no_effect() {
    let Loaded { config, warnings } = load(
        "
routing:
  router:
    use: matrix
    settings:
      groups:
        g: { members: [gemma] }
      matrix:
        sets: { s: gemma }
",
    );
    assert!(config.groups.is_empty());
    assert!(warnings.iter().any(|w| {
        w.path.to_string() == "routing.router.settings.groups"
            && matches!(w.kind, WarningKind::NoEffect { .. })
    }));
}

#[test]
fn a_matrix_beside_group_routing_has_no_effect_and_is_not_checked() {
    let Loaded { config, warnings } = load(
        "
routing:
  router:
    use: group
    settings:
      groups:
        g: { members: [gemma, qwen] }
      matrix:
        sets: { s: not-a-model }
",
    );
    assert!(config.matrix.is_none());
    assert_eq!(config.groups.len(), 1);
    assert!(warnings.iter().any(|w| {
        w.path.to_string() == "routing.router.settings.matrix"
            && matches!(w.kind, WarningKind::NoEffect { .. })
    }));
}

#[test]
fn use_matrix_without_a_matrix_is_an_error() {
    let (path, reason) = only_issue("routing:\n  router:\n    use: matrix\n");
    assert_eq!(path, "routing.router.settings.matrix");
    assert!(matches!(
        reason,
        Reason::RequiredBy {
            value: "matrix",
            ..
        }
    ));
}

#[test]
fn the_legacy_matrix_conflicts_with_routing_router_and_with_legacy_groups() {
    let (path, reason) = only_issue(
        "
matrix:
  sets: { s: gemma }
routing:
  router:
    use: group
",
    );
    assert_eq!(path, "matrix");
    assert!(
        matches!(reason, Reason::ConflictsWith { ref other } if other.to_string() == "routing.router")
    );

    let (path, reason) = only_issue(
        "
matrix:
  sets: { s: gemma }
groups:
  g: { members: [gemma] }
",
    );
    assert_eq!(path, "groups");
    assert!(matches!(reason, Reason::ConflictsWith { ref other } if other.to_string() == "matrix"));
}

#[test]
fn an_unknown_name_in_a_set_is_reported_at_the_set() {
    let (path, reason) =
        only_issue("matrix:\n  vars: { g: gemma }\n  sets:\n    s: g & nonexistent\n");
    assert_eq!(path, "matrix.sets.s");
    assert_eq!(
        reason,
        Reason::Matrix(MatrixError::UnknownName {
            set: "s".into(),
            name: "nonexistent".into()
        })
    );
    assert_eq!(
        reason.to_string(),
        "\"nonexistent\" is neither a var, a model ID nor an alias"
    );
}

#[test]
fn loops_and_undefined_references_are_reported_at_their_sets() {
    let found = issues(
        "
routing:
  router:
    use: matrix
    settings:
      matrix:
        sets:
          a: +b
          b: +a
          c: +nonexistent
",
    );
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "routing.router.settings.matrix.sets.c",
            "routing.router.settings.matrix.sets.a"
        ]
    );
    assert!(
        matches!(&found[0].1, Reason::Matrix(MatrixError::UndefinedSet { reference, .. }) if reference == "nonexistent")
    );
    assert_eq!(
        found[1].1.to_string(),
        "sets reference each other in a loop: a -> b -> a"
    );
}

#[test]
fn syntax_errors_name_the_set_and_the_column() {
    let (path, reason) = only_issue("matrix:\n  sets:\n    s: gemma & (qwen | \n");
    assert_eq!(path, "matrix.sets.s");
    assert!(matches!(
        reason,
        Reason::Matrix(MatrixError::Syntax {
            error: SyntaxError::ExpectedOperand { .. },
            ..
        })
    ));
    let (_, slash) = only_issue("matrix:\n  sets:\n    s: org/gemma\n");
    assert!(
        slash.to_string().contains("map other names through vars"),
        "{slash}"
    );
}

#[test]
fn bad_var_names_and_var_targets_are_reported_at_the_var() {
    let found = issues(
        "
matrix:
  vars:
    a_b: gemma
    x: nonexistent
    abcdefghijklmnopqrstuvwxyzABCDEFG: qwen
  sets:
    s: gemma
",
    );
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "matrix.vars.a_b",
            "matrix.vars.x",
            "matrix.vars.abcdefghijklmnopqrstuvwxyzABCDEFG"
        ]
    );
    assert!(
        found[0]
            .1
            .to_string()
            .contains("1 to 32 letters, digits, '-' or '.'")
    );
}

#[test]
fn evict_costs_must_be_positive_integers_naming_a_var_or_model() {
    let found = issues(
        "
matrix:
  vars: { g: gemma }
  evict_costs: { g: 0, qwen: -1, voxtral: 1.5 }
  sets: { s: g }
",
    );
    let paths: Vec<&str> = found.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "matrix.evict_costs.g",
            "matrix.evict_costs.qwen",
            "matrix.evict_costs.voxtral"
        ]
    );
    assert!(matches!(
        found[0].1,
        Reason::OutOfRange { min: 1, got: 0, .. }
    ));
    assert!(matches!(found[2].1, Reason::WrongType { .. }));

    let (path, reason) =
        only_issue("matrix:\n  evict_costs: { unknown: 5 }\n  sets: { s: gemma }\n");
    assert_eq!(path, "matrix.evict_costs.unknown");
    assert!(matches!(
        reason,
        Reason::Matrix(MatrixError::UnknownCostName { .. })
    ));
}

#[test]
fn a_matrix_without_sets_is_an_error() {
    let (path, reason) = only_issue("matrix:\n  vars: { g: gemma }\n");
    assert_eq!(path, "matrix.sets");
    assert_eq!(reason, Reason::Matrix(MatrixError::NoSets));
}

#[test]
fn unknown_keys_inside_the_matrix_warn() {
    let Loaded { warnings, .. } =
        load("matrix:\n  sets: { s: gemma }\n  evict_cost: { gemma: 2 }\n");
    assert!(warnings.iter().any(|w| {
        w.path.to_string() == "matrix.evict_cost" && w.kind == WarningKind::UnknownKey
    }));
}

#[test]
fn the_readme_matrix_selectors_and_profiles_example_loads_and_decides_as_it_says() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let section = &readme[readme
        .find("### Which models run together: the matrix router, selectors and profiles")
        .expect("the README section")..];
    let start = section.find("```yaml\n").unwrap() + "```yaml\n".len();
    let yaml = &section[start..start + section[start..].find("```").unwrap()];
    let Loaded { config, warnings } = Config::loader()
        .yaml("README.md", yaml)
        .env(&|_| None)
        .load()
        .unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");

    let ids: Vec<String> = config.models.iter().map(|m| m.id.clone()).collect();
    let settings = config.matrix.as_ref().expect("the matrix router");
    let matrix = Matrix::new(&ids, settings, |name| {
        ids.iter().find(|id| *id == name).cloned()
    })
    .unwrap();
    // The README's log line: llama70b fits only in `all`, alone.
    let choice = matrix.choose("llama70b", &["gemma", "embed"]);
    assert_eq!(choice.evict, ["embed", "gemma"]);
    assert_eq!(
        (choice.set, choice.expr, choice.cost),
        (Some("all"), Some("+small | big"), 2)
    );
    // qwen beside gemma: `both` costs nothing, so nothing stops.
    assert!(matrix.evict_for("qwen", &["gemma"]).is_empty());

    let selectors: Vec<(&str, &str)> = config
        .selectors
        .iter()
        .map(|s| (s.id.as_str(), s.strategy.as_str()))
        .collect();
    assert_eq!(
        selectors,
        [
            ("assistant", "warm"),
            ("batch", "spillover"),
            ("writer", "pin")
        ]
    );
    assert_eq!(config.selectors[1].spillover, 4);
    let coding = &config.profiles[0];
    assert_eq!(coding.name, "coding");
    assert_eq!(
        coding.pin("chat").and_then(|p| p.target.as_deref()),
        Some("qwen")
    );
    assert_eq!(
        coding.pin("llama70b").map(|p| p.target.as_deref()),
        Some(None)
    );
}
