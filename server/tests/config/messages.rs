//! Messages that say what is actually wrong: exponential macros are refused at once
//! with the key path (not expanded), a long plain value is not a "macro
//! expansion", a too-large integer is not "fractional", a duplicate key does not
//! point at parser options nobody can set.

use llama_swap_server::config::{Config, ConfigError, Reason};

fn from_yaml(yaml: &str) -> Result<llama_swap_server::config::Loaded, ConfigError> {
    Config::loader()
        .yaml("config.yaml", yaml)
        .env(&|_| None)
        .load()
}

/// 40 macros, each twice the one before: a terabyte when expanded, 1 KB of YAML.
fn doubling_macros(levels: usize) -> String {
    let mut yaml = String::from("macros:\n  a0: \"x\"\n");
    for i in 1..levels {
        yaml.push_str(&format!("  a{i}: \"${{a{}}}${{a{}}}\"\n", i - 1, i - 1));
    }
    yaml
}

#[test]
fn exponential_macros_are_refused_with_the_key_path_without_being_expanded() {
    let yaml = doubling_macros(64)
        + "models:\n  m:\n    cmd: \"srv --port ${PORT}\"\n    env: [\"X=${a63}\"]\n";
    let err = from_yaml(&yaml).unwrap_err();
    let issues = err.issues();
    assert_eq!(issues.len(), 1, "{err}");
    assert_eq!(issues[0].path.to_string(), "models.m.env[0]");
    assert!(
        matches!(issues[0].reason, Reason::ExpansionTooLarge { adds, .. } if adds > 1 << 62),
        "{:?}",
        issues[0].reason
    );
    assert!(
        err.to_string().contains("macro expansion would add"),
        "{err}"
    );
}

/// Each macro is expanded once per value, not once per use: a chain of empty
/// macros each using the one before twice adds nothing (so the size guard
/// lets it through) and would otherwise take 2^64 steps.
#[test]
fn a_chain_of_empty_macros_expands_at_once() {
    let mut yaml = String::from("macros:\n  a0: \"\"\n");
    for i in 1..64 {
        yaml.push_str(&format!("  a{i}: \"${{a{}}}${{a{}}}\"\n", i - 1, i - 1));
    }
    yaml.push_str("models:\n  m:\n    cmd: \"srv --port ${PORT}\"\n    env: [\"X=${a63}\"]\n");
    let loaded = from_yaml(&yaml).unwrap();
    let env = &loaded.config.models[0].env;
    assert_eq!(env, &[("X".to_owned(), String::new())]);
}

#[test]
fn a_long_plain_value_is_accepted_and_not_called_a_macro_expansion() {
    let long = "x".repeat(10 * 1024 * 1024);
    let yaml = format!("models:\n  m:\n    cmd: \"srv {long} --port ${{PORT}}\"\n");
    let loaded = from_yaml(&yaml).unwrap();
    assert!(loaded.config.models[0].cmd.len() > long.len());
}

#[test]
fn an_integer_beyond_64_bits_is_called_too_large_not_fractional() {
    let err = from_yaml("healthCheckTimeout: 99999999999999999999\nmodels:\n  m:\n    cmd: srv\n")
        .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("healthCheckTimeout"), "{text}");
    assert!(text.contains("too large for a 64-bit integer"), "{text}");
    assert!(!text.contains("fractional"), "{text}");
    // A real fraction still says so.
    let err = from_yaml("healthCheckTimeout: 1.5\nmodels:\n  m:\n    cmd: srv\n").unwrap_err();
    assert!(err.to_string().contains("fractional"), "{err}");
}

#[test]
fn a_duplicate_key_names_the_key_and_line_without_parser_options() {
    let err = from_yaml("models:\n  a:\n    cmd: x\n  a:\n    cmd: y\n").unwrap_err();
    assert!(matches!(err, ConfigError::Yaml { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("duplicate mapping key `a`"), "{text}");
    assert!(text.contains("line 4"), "{text}");
    assert!(
        !text.contains("DuplicateKeyPolicy") && !text.contains("Options"),
        "{text}"
    );
}
