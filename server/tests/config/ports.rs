//! `${PORT}` numbers across a reload: the running configuration's models keep
//! theirs, new models are numbered past them.

use std::path::Path;

use llama_swap_server::config::{Config, KeptPorts};

fn yaml(start_port: u16, ids: &[&str]) -> String {
    let mut text = format!("startPort: {start_port}\nmodels:\n");
    for id in ids {
        text.push_str(&format!(
            "  {id}:\n    cmd: llama-server --port ${{PORT}} -m {id}.gguf\n"
        ));
    }
    text
}

fn load(dir: &Path, text: &str, kept: Option<&KeptPorts>) -> Config {
    let file = dir.join("config.yaml");
    std::fs::write(&file, text).unwrap();
    let env = |_: &str| None;
    let loaded = match kept {
        Some(kept) => Config::loader()
            .file(&file)
            .env(&env)
            .keep_ports(kept)
            .load(),
        None => Config::loader().file(&file).env(&env).load(),
    };
    loaded
        .unwrap_or_else(|err| panic!("should load:\n{err}"))
        .config
}

fn ports(config: &Config) -> Vec<(String, Option<u16>, String)> {
    config
        .models
        .iter()
        .map(|m| (m.id.clone(), m.port, m.proxy.clone()))
        .collect()
}

fn port_of(config: &Config, id: &str) -> Option<u16> {
    config.model(id).and_then(|m| m.port)
}

#[test]
fn a_model_added_before_the_others_in_id_order_does_not_renumber_them() {
    let dir = tempfile::tempdir().unwrap();
    let running = load(dir.path(), &yaml(5800, &["b", "c"]), None);
    assert_eq!(port_of(&running, "b"), Some(5800));
    assert_eq!(port_of(&running, "c"), Some(5801));

    let kept = KeptPorts::of(&running);
    let next = load(dir.path(), &yaml(5800, &["a", "b", "c"]), Some(&kept));
    assert_eq!(port_of(&next, "b"), Some(5800));
    assert_eq!(port_of(&next, "c"), Some(5801));
    assert_eq!(
        port_of(&next, "a"),
        Some(5802),
        "numbered past the kept ones"
    );
    let a = next.model("a").unwrap();
    assert!(a.cmd.contains("--port 5802"), "{}", a.cmd);
    assert_eq!(a.proxy, "http://localhost:5802");

    // A fresh start numbers in ID order, as llama-swap does.
    let fresh = load(dir.path(), &yaml(5800, &["a", "b", "c"]), None);
    assert_eq!(port_of(&fresh, "a"), Some(5800));
    assert_eq!(port_of(&fresh, "b"), Some(5801));
}

#[test]
fn a_removed_models_number_stays_reserved_across_reloads_and_comes_back_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let running = load(dir.path(), &yaml(5800, &["a", "b", "c"]), None);
    let kept = KeptPorts::of(&running);
    // a is removed; its process may still be serving its last requests on 5800.
    let first = load(dir.path(), &yaml(5800, &["b", "c", "d"]), Some(&kept));
    assert_eq!(port_of(&first, "b"), Some(5801));
    assert_eq!(port_of(&first, "c"), Some(5802));
    assert_eq!(port_of(&first, "d"), Some(5803), "not a's number");
    // A second reload still does not hand a's number out, and a gets it back.
    let kept = kept.then(KeptPorts::of(&first));
    let second = load(
        dir.path(),
        &yaml(5800, &["a", "b", "c", "d", "e"]),
        Some(&kept),
    );
    assert_eq!(port_of(&second, "e"), Some(5804));
    assert_eq!(port_of(&second, "a"), Some(5800));
    assert_eq!(port_of(&second, "d"), Some(5803));
}

#[test]
fn a_new_start_port_numbers_every_model_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let running = load(dir.path(), &yaml(5800, &["b", "c"]), None);
    let kept = KeptPorts::of(&running);
    let next = load(dir.path(), &yaml(6000, &["a", "b", "c"]), Some(&kept));
    assert_eq!(
        ports(&next)
            .into_iter()
            .map(|(id, port, _)| (id, port))
            .collect::<Vec<_>>(),
        [
            ("a".to_owned(), Some(6000)),
            ("b".to_owned(), Some(6001)),
            ("c".to_owned(), Some(6002))
        ]
    );
}

fn warnings_with(range: Option<std::ops::RangeInclusive<u16>>, text: &str) -> Vec<String> {
    let loaded = Config::loader()
        .yaml("config.yaml", text)
        .env(&|_| None)
        .ephemeral_ports(range)
        .load()
        .unwrap_or_else(|err| panic!("should load:\n{err}"));
    loaded.warnings.iter().map(ToString::to_string).collect()
}

/// Outgoing connections take their local port from the system's ephemeral
/// range; a model whose `${PORT}` an outgoing connection holds cannot start
/// (under load, hundreds of starts failed that way).
#[test]
fn ports_in_the_systems_ephemeral_range_are_warned_about_at_load() {
    let linux = Some(32768..=60999);
    let warnings = warnings_with(linux.clone(), &yaml(60998, &["a", "b", "c"]));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with("startPort: 2 model port(s) given by ${PORT} (60998-60999) lie in the system's ephemeral port range 32768-60999"),
        "{warnings:?}"
    );
    assert!(warnings[0].contains("below 32768"), "{warnings:?}");
    assert!(warnings_with(linux, &yaml(5800, &["a", "b"])).is_empty());
    assert!(warnings_with(None, &yaml(40000, &["a"])).is_empty());
}
