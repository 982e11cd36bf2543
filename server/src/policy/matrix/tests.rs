//! The behaviours llama-swap's matrix tests assert (`internal/matrix/dsl_test.go`,
//! `internal/config/matrix_test.go`, the solver half of `internal/router/matrix_test.go`),
//! restated here, plus the rules llama-swap leaves implicit.

use super::*;

fn ids(names: &[&str]) -> Vec<String> {
    names.iter().map(|s| (*s).to_owned()).collect()
}

/// Settings with `sets` (name, expression), `vars` and `costs`.
fn settings(sets: &[(&str, &str)], vars: &[(&str, &str)], costs: &[(&str, u32)]) -> MatrixSettings {
    MatrixSettings {
        vars: vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        evict_costs: costs.iter().map(|(k, c)| ((*k).to_owned(), *c)).collect(),
        sets: sets.iter().map(|(n, e)| MatrixSet::new(*n, *e)).collect(),
    }
}

/// Compiles over `models`, where a name resolves when it is one of them.
fn compile_over(models: &[&str], settings: &MatrixSettings) -> Result<Matrix, MatrixError> {
    let models = ids(models);
    let known = models.clone();
    Matrix::new(&models, settings, move |n| {
        known.iter().find(|m| *m == n).cloned()
    })
}

fn matrix(models: &[&str], sets: &[(&str, &str)]) -> Matrix {
    compile_over(models, &settings(sets, &[], &[])).unwrap()
}

fn proj(m: &Matrix, set: &str, relevant: &[&str]) -> Vec<Vec<String>> {
    m.projections(set, relevant)
}

fn combos(list: &[&[&str]]) -> Vec<Vec<String>> {
    list.iter().map(|c| ids(c)).collect()
}

#[test]
fn expressions_enumerate_their_combinations_in_order() {
    let all = ["a", "b", "c", "d"];
    let cases: &[(&str, &[&[&str]])] = &[
        ("a", &[&["a"]]),
        ("a & b", &[&["a", "b"]]),
        ("a | b | c", &[&["a"], &["b"], &["c"]]),
        (
            "(a | b) & (c | d)",
            &[&["a", "c"], &["a", "d"], &["b", "c"], &["b", "d"]],
        ),
        ("a | b & c", &[&["a"], &["b", "c"]]),
        ("a & a", &[&["a"]]),
    ];
    for (expr, expected) in cases {
        let m = matrix(&all, &[("test", expr)]);
        assert_eq!(proj(&m, "test", &all), combos(expected), "{expr}");
    }
}

#[test]
fn references_inline_other_sets() {
    let models = ["g", "q", "m", "v", "e"];
    let m = matrix(
        &models,
        &[
            ("llms", "g | q | m"),
            ("with_tts", "+llms & v"),
            ("mega", "+with_tts & e"),
        ],
    );
    assert_eq!(
        proj(&m, "mega", &models),
        combos(&[&["e", "g", "v"], &["e", "q", "v"], &["e", "m", "v"]])
    );
}

#[test]
fn overlapping_references_keep_every_running_model() {
    let m = matrix(
        &["target", "a", "b"],
        &[("base", "a & b"), ("extended", "target & +base & b")],
    );
    let choice = m.choose("target", &["a", "b"]);
    assert!(choice.evict.is_empty());
    assert_eq!(choice.set, Some("extended"));
}

#[test]
fn malformed_expressions_unknown_names_and_loops_are_rejected() {
    let cases: &[(&[(&str, &str)], fn(&MatrixError) -> bool)] = &[
        (&[("s", "")], |e| {
            matches!(
                e,
                MatrixError::Syntax {
                    error: SyntaxError::Empty,
                    ..
                }
            )
        }),
        (&[("s", "(a")], |e| {
            matches!(
                e,
                MatrixError::Syntax {
                    error: SyntaxError::Unclosed { .. },
                    ..
                }
            )
        }),
        (&[("s", "a)")], |e| {
            matches!(
                e,
                MatrixError::Syntax {
                    error: SyntaxError::Trailing { .. },
                    ..
                }
            )
        }),
        (&[("s", "()")], |e| {
            matches!(
                e,
                MatrixError::Syntax {
                    error: SyntaxError::ExpectedOperand { .. },
                    ..
                }
            )
        }),
        (
            &[("s", "missing")],
            |e| matches!(e, MatrixError::UnknownName { name, .. } if name == "missing"),
        ),
        (
            &[("s", "+missing")],
            |e| matches!(e, MatrixError::UndefinedSet { reference, .. } if reference == "missing"),
        ),
        (
            &[("a", "+b"), ("b", "+a")],
            |e| matches!(e, MatrixError::Cycle { cycle, .. } if cycle == &ids(&["a", "b", "a"])),
        ),
        (
            &[("a", "x & +a")],
            |e| matches!(e, MatrixError::Cycle { cycle, .. } if cycle == &ids(&["a", "a"])),
        ),
    ];
    for (sets, check) in cases {
        let err = compile_over(&["a", "x"], &settings(sets, &[], &[])).unwrap_err();
        assert!(check(&err), "{sets:?}: {err:?}");
        assert!(matches!(err.location(), MatrixKey::Set(_)));
    }
}

#[test]
fn a_loop_names_its_path_in_the_message() {
    let err = compile_over(
        &["a"],
        &settings(&[("x", "a | +y"), ("y", "+z"), ("z", "+x")], &[], &[]),
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "sets reference each other in a loop: x -> y -> z -> x"
    );
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let errors = Matrix::compile(
        &ids(&["a"]),
        &settings(
            &[("s", "a & nope"), ("t", "+gone")],
            &[("bad_name", "a")],
            &[("a", 0)],
        ),
        |n| (n == "a").then(|| n.to_owned()),
    )
    .unwrap_err();
    assert_eq!(errors.len(), 4, "{errors:?}");
    assert!(matches!(errors[0], MatrixError::BadVarName { .. }));
    assert!(matches!(errors[1], MatrixError::ZeroCost { .. }));
    assert!(matches!(errors[2], MatrixError::UnknownName { .. }));
    assert!(matches!(errors[3], MatrixError::UndefinedSet { .. }));
}

/// `dimensions` groups of `choices` alternatives, all beside `target`.
fn product(dimensions: usize, choices: usize) -> (Vec<String>, String) {
    let mut models = vec!["target".to_owned()];
    let mut groups = Vec::new();
    for d in 0..dimensions {
        let alternatives: Vec<String> = (0..choices).map(|c| format!("model-{d}-{c}")).collect();
        groups.push(format!("({})", alternatives.join(" | ")));
        models.extend(alternatives);
    }
    (models, format!("target & {}", groups.join(" & ")))
}

#[test]
fn a_product_of_ten_to_the_sixth_combinations_solves_without_expanding_it() {
    let (mut models, expr) = product(6, 10);
    models.push("outside".to_owned());
    let names: Vec<&str> = models.iter().map(String::as_str).collect();
    let m = matrix(&names, &[("large", &expr)]);
    let mut running: Vec<String> = (0..6).map(|d| format!("model-{d}-9")).collect();
    running.push("outside".to_owned());
    let choice = m.choose("target", &running);
    assert_eq!(choice.evict, ["outside"]);
    assert_eq!(choice.set, Some("large"));
}

#[test]
fn more_than_64_running_models_are_handled() {
    let mut models: Vec<String> = vec!["target".into()];
    models.extend((0..70).map(|i| format!("model-{i}")));
    let expr = models.join(" & ");
    models.push("outside".into());
    let names: Vec<&str> = models.iter().map(String::as_str).collect();
    let m = matrix(&names, &[("wide", &expr)]);
    let running: Vec<&str> = names[1..].to_vec();
    assert_eq!(m.evict_for("target", &running), ["outside"]);
}

#[test]
fn a_combination_contained_in_another_never_wins_over_it() {
    let m = matrix(
        &["target", "a", "b"],
        &[("preferred", "target & (a | (a & b))")],
    );
    assert!(m.evict_for("target", &["a", "b"]).is_empty());
}

#[test]
fn a_model_in_no_set_runs_alone() {
    let m = matrix(&["a", "b", "loner"], &[("known", "a & b")]);
    let choice = m.choose("loner", &["a", "b"]);
    assert_eq!(choice.evict, ["a", "b"]);
    assert_eq!((choice.set, choice.cost), (None, 2));
}

#[test]
fn a_running_target_evicts_nothing_even_beside_models_it_cannot_share_a_set_with() {
    let m = matrix(&["a", "b"], &[("a_only", "a"), ("b_only", "b")]);
    assert!(m.evict_for("a", &["a", "b"]).is_empty());
}

#[test]
fn unknown_targets_and_unknown_running_names_are_ignored() {
    let m = matrix(&["a", "b"], &[("s", "a | b")]);
    assert!(m.evict_for("zzz", &["a"]).is_empty());
    assert_eq!(m.evict_for("a", &["zzz", "b"]), ["b"]);
}

#[test]
fn sets_that_can_hold_both_models_evict_neither_and_others_evict_the_conflict() {
    let basic = compile_over(
        &["gemma", "qwen", "mistral", "voxtral", "llama70B"],
        &settings(
            &[("standard", "(g | q | m) & v"), ("full", "L")],
            &[
                ("g", "gemma"),
                ("q", "qwen"),
                ("m", "mistral"),
                ("v", "voxtral"),
                ("L", "llama70B"),
            ],
            &[("L", 30), ("v", 50)],
        ),
    )
    .unwrap();
    let choice = basic.choose("gemma", &["voxtral"]);
    assert_eq!((choice.set, choice.evict.len()), (Some("standard"), 0));
    let choice = basic.choose("llama70B", &["voxtral"]);
    assert_eq!(choice.set, Some("full"));
    assert_eq!(choice.evict, ["voxtral"]);
    assert_eq!(choice.cost, 50);
    assert_eq!(basic.cost_of("llama70B"), Some(30));
    assert_eq!(basic.cost_of("gemma"), Some(1));
}

#[test]
fn references_reach_the_set_that_keeps_every_running_model() {
    let m = compile_over(
        &["gemma", "qwen", "mistral", "voxtral", "reranker"],
        &settings(
            &[
                ("llms", "g | q | m"),
                ("with_tts", "+llms & v"),
                ("mega", "+with_tts & e"),
            ],
            &[
                ("g", "gemma"),
                ("q", "qwen"),
                ("m", "mistral"),
                ("v", "voxtral"),
                ("e", "reranker"),
            ],
            &[],
        ),
    )
    .unwrap();
    let choice = m.choose("reranker", &["gemma", "voxtral"]);
    assert_eq!(choice.set, Some("mega"));
    assert!(choice.evict.is_empty());
}

#[test]
fn model_ids_vars_and_aliases_can_be_mixed_and_vars_win() {
    let models = ids(&["gemma", "qwen", "voxtral"]);
    let resolve = |n: &str| match n {
        "chat" => Some("qwen".to_owned()),
        _ => models.iter().find(|m| *m == n).cloned(),
    };
    let direct = Matrix::new(
        &models,
        &settings(&[("combo", "gemma & voxtral")], &[], &[]),
        resolve,
    )
    .unwrap();
    assert!(direct.evict_for("gemma", &["voxtral"]).is_empty());

    let mixed = Matrix::new(
        &models,
        &settings(
            &[("base", "g | chat"), ("combo", "+base & voxtral")],
            &[("g", "gemma")],
            &[],
        ),
        resolve,
    )
    .unwrap();
    let choice = mixed.choose("qwen", &["voxtral"]);
    assert_eq!((choice.set, choice.evict.len()), (Some("combo"), 0));

    let dedup = Matrix::new(
        &models,
        &settings(&[("combo", "g & gemma")], &[("g", "gemma")], &[]),
        resolve,
    )
    .unwrap();
    assert_eq!(
        dedup.projections("combo", &["gemma"]),
        combos(&[&["gemma"]])
    );

    // A var named like a model means the var's model.
    let shadow = Matrix::new(
        &models,
        &settings(&[("combo", "qwen")], &[("qwen", "gemma")], &[]),
        resolve,
    )
    .unwrap();
    assert_eq!(shadow.choose("gemma", &["qwen"]).set, Some("combo"));
    assert_eq!(shadow.choose("qwen", &["gemma"]).set, None);
}

#[test]
fn var_names_are_one_to_32_letters_digits_hyphens_or_dots() {
    for good in ["abcdefghijklmnopqrstuvwxyzABCDEF", "model-var", "model.var"] {
        let s = settings(&[("s", good)], &[(good, "gemma")], &[]);
        assert!(compile_over(&["gemma"], &s).is_ok(), "{good}");
    }
    for bad in ["abcdefghijklmnopqrstuvwxyzABCDEFG", "a_b", ""] {
        let s = settings(&[("s", "gemma")], &[(bad, "gemma")], &[]);
        let err = compile_over(&["gemma"], &s).unwrap_err();
        assert_eq!(err, MatrixError::BadVarName { var: bad.into() });
        assert_eq!(err.location(), MatrixKey::Var(bad));
    }
}

#[test]
fn a_var_must_name_a_model() {
    let err = compile_over(
        &["gemma"],
        &settings(&[("s", "x")], &[("x", "nonexistent")], &[]),
    )
    .unwrap_err();
    assert!(
        matches!(err, MatrixError::UnknownVarTarget { ref target, .. } if target == "nonexistent")
    );
}

#[test]
fn evict_costs_must_be_positive_and_name_a_var_or_model_once() {
    let zero = compile_over(
        &["gemma"],
        &settings(&[("s", "g")], &[("g", "gemma")], &[("g", 0)]),
    );
    assert!(matches!(zero, Err(MatrixError::ZeroCost { .. })));
    let unknown = compile_over(
        &["gemma"],
        &settings(&[("s", "g")], &[("g", "gemma")], &[("unknown", 5)]),
    );
    assert_eq!(unknown.unwrap_err().location(), MatrixKey::Cost("unknown"));
    let direct = compile_over(
        &["gemma"],
        &settings(&[("s", "gemma")], &[], &[("gemma", 5)]),
    )
    .unwrap();
    assert_eq!(direct.cost_of("gemma"), Some(5));
    let twice = compile_over(
        &["gemma"],
        &settings(&[("s", "g")], &[("g", "gemma")], &[("g", 2), ("gemma", 3)]),
    );
    assert!(matches!(twice, Err(MatrixError::DuplicateCost { ref first, .. }) if first == "g"));
}

#[test]
fn a_matrix_needs_at_least_one_set() {
    let err = compile_over(&["gemma"], &MatrixSettings::default()).unwrap_err();
    assert_eq!(err, MatrixError::NoSets);
    assert_eq!(err.location(), MatrixKey::Sets);
}

#[test]
fn var_costs_apply_to_the_model_they_name() {
    let m = compile_over(
        &["gemma", "llama70B", "mistral"],
        &settings(
            &[("s", "g | L | mistral")],
            &[("g", "gemma"), ("L", "llama70B")],
            &[("L", 30), ("g", 5), ("mistral", 10)],
        ),
    )
    .unwrap();
    assert_eq!(m.cost_of("llama70B"), Some(30));
    assert_eq!(m.cost_of("gemma"), Some(5));
    assert_eq!(m.cost_of("mistral"), Some(10));
}

#[test]
fn on_equal_cost_the_earlier_defined_set_wins() {
    let m = matrix(&["a", "b", "c"], &[("first", "a & b"), ("second", "a & c")]);
    assert_eq!(m.choose("a", &[] as &[&str]).set, Some("first"));
}

#[test]
fn higher_evict_costs_steer_towards_keeping_that_model() {
    let m = compile_over(
        &["a", "b", "c"],
        &settings(
            &[("a_with_c", "a & c"), ("a_with_b", "a & b")],
            &[],
            &[("b", 10), ("c", 1)],
        ),
    )
    .unwrap();
    let choice = m.choose("a", &["b", "c"]);
    assert_eq!(choice.set, Some("a_with_b"));
    assert_eq!(choice.evict, ["c"]);
    assert_eq!(choice.cost, 1);
}

#[test]
fn on_equal_cost_inside_a_set_the_first_listed_combination_wins() {
    let m = matrix(&["a", "b", "c"], &[("s", "a & (b | c)")]);
    assert_eq!(m.evict_for("a", &["c", "b"]), ["c"]);
}

#[test]
fn referenced_sets_are_tried_before_the_sets_that_use_them() {
    // x is defined first but references y, so y is tried first and wins the tie.
    let m = matrix(&["a", "b", "c"], &[("x", "(a & b) | +y"), ("y", "a & c")]);
    assert_eq!(m.set_names().collect::<Vec<_>>(), ["y", "x"]);
    let choice = m.choose("a", &["b", "c"]);
    assert_eq!(choice.set, Some("y"));
    assert_eq!(choice.evict, ["b"]);
}

#[test]
fn a_cheaper_combination_in_a_later_set_beats_an_earlier_set() {
    let m = matrix(
        &["a", "b", "c"],
        &[("pair", "a & b"), ("trio", "a & b & c")],
    );
    let choice = m.choose("a", &["b", "c"]);
    assert_eq!((choice.set, choice.cost), (Some("trio"), 0));
}

#[test]
fn coexistence_checks_find_a_common_combination() {
    let together = matrix(&["a", "b"], &[("pool", "a & b")]);
    assert!(together.can_coexist(&["a", "b"]));
    let apart = matrix(&["a", "b"], &[("pool", "a | b")]);
    assert!(!apart.can_coexist(&["a", "b"]));
    assert!(apart.can_coexist(&["a"]));
    assert!(apart.can_coexist(&[] as &[&str]));
    assert!(!apart.can_coexist(&["zzz"]));

    let (models, expr) = product(4, 11);
    let names: Vec<&str> = models.iter().map(String::as_str).collect();
    let large = matrix(&names, &[("large", &expr)]);
    assert!(large.can_coexist(&["target", "model-0-0"]));
    assert!(!large.can_coexist(&["model-0-0", "model-0-1"]));
}
