//! The loader never panics and never fails without saying why, whatever the input.

use llama_swap_server::config::{Config, ConfigError};
use proptest::prelude::*;

/// Keys llama-swap knows, at any level, plus a few it does not, so generated
/// documents reach deep into the loader rather than stopping at "unknown key".
const KEYS: &[&str] = &[
    "models",
    "cmd",
    "cmdStop",
    "proxy",
    "aliases",
    "env",
    "ttl",
    "globalTTL",
    "macros",
    "startPort",
    "healthCheckTimeout",
    "unloadTimeout",
    "concurrencyLimit",
    "checkEndpoint",
    "routing",
    "router",
    "scheduler",
    "use",
    "settings",
    "fifo",
    "priority",
    "drainFence",
    "groups",
    "members",
    "swap",
    "exclusive",
    "persistent",
    "hooks",
    "on_startup",
    "preload",
    "apiKeys",
    "metadata",
    "unlisted",
    "a",
    "b",
    "zz",
];

const MODEL_KEYS: &[&str] = &[
    "cmd",
    "cmd",
    "cmdStop",
    "proxy",
    "aliases",
    "env",
    "ttl",
    "macros",
    "unloadTimeout",
    "concurrencyLimit",
    "checkEndpoint",
    "metadata",
    "unlisted",
    "useModelName",
    "filters",
];

const SCALARS: &[&str] = &[
    "srv --port ${PORT}",
    "${PORT}",
    "${MODEL_ID}",
    "${PID}",
    "${env.HOME}",
    "${a}",
    "${b}",
    "${zz",
    "'",
    "\"unterminated",
    "http://localhost:${PORT}",
    "none",
    "/health",
    "serial",
    "fifo",
    "matrix",
    "group",
    "a",
    "b",
    "-1",
    "0",
    "5",
    "-5",
    "70000",
    "true",
    "false",
    "~",
    "1.5",
    "A=1",
    "=x",
    "x y",
];

fn yaml_value(depth: u32) -> BoxedStrategy<String> {
    let scalar = prop::sample::select(SCALARS).prop_map(|s| {
        // Quote strings that would otherwise not be valid plain YAML scalars.
        if s.starts_with(['\'', '"', '$', '~', '=']) || s.contains(": ") {
            format!("{s:?}")
        } else {
            s.to_owned()
        }
    });
    if depth == 0 {
        return scalar.boxed();
    }
    prop_oneof![
        3 => scalar,
        1 => prop::collection::vec(yaml_value(depth - 1), 0..4)
            .prop_map(|items| format!("[{}]", items.join(", "))),
        2 => prop::collection::btree_map(prop::sample::select(KEYS), yaml_value(depth - 1), 0..5)
            .prop_map(|entries| {
                let body: Vec<String> = entries.into_iter().map(|(k, v)| format!("{k}: {v}")).collect();
                format!("{{{}}}", body.join(", "))
            }),
    ]
    .boxed()
}

fn check(yaml: &str) {
    let env = |name: &str| (name == "HOME").then(|| "/home/test".to_owned());
    match Config::loader().yaml("fuzz.yaml", yaml).env(&env).load() {
        Ok(loaded) => {
            // Whatever loaded must map onto the other modules' inputs.
            let _ = loaded.config.scheduler_settings();
            let _ = loaded.config.process_specs();
            let _ = loaded.config.summary().to_string();
        }
        Err(ConfigError::Invalid { issues, .. }) => assert!(!issues.is_empty()),
        Err(err) => assert!(!err.to_string().is_empty()),
    }
}

proptest! {
    #[test]
    fn structured_documents_load_or_fail_with_reasons(
        top in prop::collection::btree_map(prop::sample::select(KEYS), yaml_value(3), 0..6)
    ) {
        let yaml: String = top.into_iter().map(|(k, v)| format!("{k}: {v}\n")).collect();
        check(&yaml);
    }

    #[test]
    fn generated_models_load_or_fail_with_reasons(
        models in prop::collection::btree_map(
            prop::sample::select(&["a", "b", "zz"][..]),
            prop::collection::btree_map(prop::sample::select(MODEL_KEYS), yaml_value(1), 1..6),
            1..4,
        ),
        rest in prop::collection::btree_map(prop::sample::select(KEYS), yaml_value(3), 0..3),
    ) {
        let mut yaml = String::from("models:\n");
        for (id, body) in models {
            yaml.push_str(&format!("  {id}:\n"));
            for (k, v) in body {
                yaml.push_str(&format!("    {k}: {v}\n"));
            }
        }
        for (k, v) in rest.into_iter().filter(|(k, _)| *k != "models") {
            yaml.push_str(&format!("{k}: {v}\n"));
        }
        check(&yaml);
    }

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,200}") {
        check(&text);
    }
}
