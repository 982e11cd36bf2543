//! Names are kept as written: YAML types plain scalars (`y`, `on`, `no` as
//! booleans in YAML 1.1; `1.20`, `0x10`, `07` as numbers), and a model ID,
//! alias, peer model, selector target or pin read back from the type would be
//! another name (`true`, `false`, `1.2`, `16`, `7`), so requests naming the
//! model as written would get 404.

use std::time::Duration;

use llama_swap_server::config::{Config, Loaded};
use llama_swap_server::testing::names::Lead;

const YAML: &str = r#"
macros:
  version: 1.20
models:
  y:
    cmd: srv --port ${PORT}
    aliases: [on, 2.50, 0x20, 010, yes, True]
  no:
    cmd: srv --port ${PORT}
  1.20:
    cmd: srv --port ${PORT} --tag v${version}
    useModelName: 1.30
  0x10:
    cmd: srv --port ${PORT}
    ttl: 0x10
    unlisted: on
  07:
    cmd: srv --port ${PORT}
groups:
  g:
    swap: false
    members: [on, no]
peers:
  p:
    proxy: http://127.0.0.1:9
    models: [off, 3.10, 0x30, 011]
selectors:
  pick:
    strategy: pin
    targets: [1.20, p/3.10]
profiles:
  work:
    pins:
      fast: 0x10
"#;

fn load() -> Loaded {
    match Config::loader()
        .yaml("names.yaml", YAML)
        .env(&|_| None)
        .load()
    {
        Ok(loaded) => loaded,
        Err(err) => panic!("should load:\n{err}"),
    }
}

#[test]
fn model_ids_aliases_and_peer_models_keep_their_written_text() {
    let Loaded { config, warnings } = load();
    assert!(warnings.is_empty(), "{warnings:?}");
    let ids: Vec<&str> = config.models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["07", "0x10", "1.20", "no", "y"]);
    let y = config.model("y").unwrap();
    assert_eq!(y.aliases, ["on", "2.50", "0x20", "010", "yes", "True"]);
    assert_eq!(config.peers[0].models, ["off", "3.10", "0x30", "011"]);
    assert_eq!(config.groups[0].members, ["y", "no"]);
    assert_eq!(config.selectors[0].target_ids, ["1.20", "p/3.10"]);
    assert_eq!(config.profiles[0].pins[0].target.as_deref(), Some("0x10"));
    let names = config.names();
    for name in ["on", "2.50", "0x20", "True"] {
        assert!(
            matches!(names.lead(name), Some(Lead::Model { id: "y", .. })),
            "{name}"
        );
    }
    assert!(matches!(names.lead("p/3.10"), Some(Lead::Peer(_))));
    assert!(names.lead("1.2").is_none() && names.lead("16").is_none());
}

#[test]
fn text_values_keep_their_written_text_and_typed_values_their_type() {
    let Loaded { config, .. } = load();
    let model = config.model("1.20").unwrap();
    assert_eq!(model.use_model_name.as_deref(), Some("1.30"));
    assert_eq!(model.cmd, "srv --port 5802 --tag v1.20");
    // Where a number or a boolean is meant, the written form is read as one.
    let hex = config.model("0x10").unwrap();
    assert_eq!(hex.ttl, Some(Duration::from_secs(16)));
    assert!(hex.unlisted);
}

#[test]
fn check_config_prints_a_name_holding_a_newline_escaped_on_one_line() {
    let yaml = r#"
models:
  "a\nb":
    cmd: srv --port ${PORT}
    aliases: ["c\rd"]
groups:
  g:
    members: ["a\nb"]
hooks:
  on_startup:
    preload: ["a\nb"]
"#;
    let loaded = Config::loader()
        .yaml("t.yaml", yaml)
        .env(&|_| None)
        .load()
        .unwrap();
    let text = loaded.config.summary().to_string();
    assert!(text.contains("  \"a\\nb\"\n"), "{text}");
    assert!(text.contains("aliases:     \"c\\rd\""), "{text}");
    assert!(text.contains("members=[\"a\\nb\"]"), "{text}");
    assert!(text.contains("preload: \"a\\nb\""), "{text}");
    assert!(!text.contains('\r'), "{text:?}");
    assert!(
        !text.lines().any(|line| line == "b"),
        "the ID's second half is a line of its own: {text}"
    );
}
