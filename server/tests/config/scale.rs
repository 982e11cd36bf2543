//! Configurations of tens of thousands of models load (issue 31 #3), and a
//! file past one of the YAML reader's limits is refused with the limit named.

use llama_swap_server::config::{Config, ConfigError, YamlLimit};

fn load(yaml: &str) -> Result<usize, ConfigError> {
    Config::loader()
        .yaml("big.yaml", yaml)
        .env(&|_: &str| None)
        .load()
        .map(|loaded| loaded.config.scheduler_settings().models.len())
}

/// 1 000 models of `cmd`, `proxy` and one alias, and one of them with a
/// `metadata` list of 300 000 numbers: more YAML nodes than the parser's
/// default limit (250 000), which refused 50 000 models with `proxy` and
/// `aliases` with an undocumented message. (The figures of 50 000 models
/// are `scripts/scale`'s.)
#[test]
fn a_file_of_more_nodes_than_the_parsers_default_limit_loads() {
    let mut yaml = String::from("startPort: 10000\nmodels:\n");
    for i in 0..1_000 {
        yaml.push_str(&format!(
            "  m{i}:\n    cmd: server --port ${{PORT}}\n    proxy: http://127.0.0.1:${{PORT}}\n    aliases: [a{i}]\n"
        ));
    }
    yaml.push_str("    metadata: {numbers: [");
    yaml.push_str(&"0,".repeat(299_999));
    yaml.push('0');
    yaml.push_str("]}\n");
    assert_eq!(load(&yaml).unwrap(), 1_000);
}

#[test]
fn a_file_past_a_yaml_limit_is_refused_with_the_limit_named() {
    let depth = YamlLimit::Depth.max() + 1;
    let yaml = format!(
        "models: {{}}\nmetadata: {}1{}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    );
    let error = load(&yaml).unwrap_err();
    assert!(
        matches!(
            error,
            ConfigError::YamlLimit {
                limit: YamlLimit::Depth,
                line: 2,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.starts_with("big.yaml: line 2: lists and maps nested more than 32 deep"),
        "{message}"
    );
    assert!(message.contains("--config-dir"), "{message}");
}
