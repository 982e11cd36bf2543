//! Configurations llama-swap loads load here too, and the ones it refuses are
//! refused: environment variables everywhere, macro order, helper keys
//! holding anchors, full-URL checkEndpoint, preload of a non-model, both
//! groups and matrix under routing.router.settings, the log keys, the body
//! limit, and `--config-dir` merging.

use std::path::Path;

use llama_swap_server::config::{
    Config, ConfigError, Loaded, LogLevel, LogTimeFormat, MergeConflict, Reason, WarningKind,
};

fn env(name: &str) -> Option<String> {
    match name {
        "MODELS" => Some("/srv/models".into()),
        "MULTILINE" => Some("one\ntwo".into()),
        "KEY" => Some("sk-from-env".into()),
        _ => None,
    }
}

fn load(yaml: &str) -> Loaded {
    Config::loader()
        .yaml("c.yaml", yaml)
        .env(&env)
        .load()
        .unwrap_or_else(|e| panic!("{e}\n{yaml}"))
}

fn reasons(yaml: &str) -> Vec<Reason> {
    match Config::loader().yaml("c.yaml", yaml).env(&env).load() {
        Ok(_) => panic!("should fail:\n{yaml}"),
        Err(err) => err.issues().iter().map(|i| i.reason.clone()).collect(),
    }
}

fn warnings(loaded: &Loaded) -> Vec<(String, WarningKind)> {
    loaded
        .warnings
        .iter()
        .map(|w| (w.path.to_string(), w.kind.clone()))
        .collect()
}

#[test]
fn an_unset_variable_in_an_unused_macro_fails_the_load() {
    let yaml = "macros:\n  unused: ${env.NOT_SET_ANYWHERE}\nmodels:\n  a:\n    cmd: srv\n    proxy: http://127.0.0.1:9\n";
    assert_eq!(
        reasons(yaml),
        [Reason::EnvNotSet {
            name: "NOT_SET_ANYWHERE".into()
        }]
    );
}

#[test]
fn a_variable_holding_a_line_break_fails_the_load() {
    let yaml = "models:\n  a:\n    cmd: srv ${env.MULTILINE}\n    proxy: http://127.0.0.1:9\n";
    assert_eq!(
        reasons(yaml),
        [Reason::EnvLineBreak {
            name: "MULTILINE".into()
        }]
    );
}

#[test]
fn a_flow_list_with_an_env_reference_loads() {
    let config = load("apiKeys: [${env.KEY}]\n").config;
    assert_eq!(config.api_keys.len(), 1);
    assert!(config.api_keys[0].matches("sk-from-env"));
}

#[test]
fn a_forward_macro_reference_is_refused_and_a_backward_one_expands() {
    let forward = "macros:\n  first: value-${second}\n  second: later\nmodels:\n  a:\n    cmd: echo ${first}\n    proxy: http://127.0.0.1:9\n";
    assert_eq!(
        reasons(forward),
        [Reason::MacroDeclaredLater {
            user: "first".into(),
            name: "second".into()
        }]
    );
    let backward = "macros:\n  base: ${env.MODELS}\n  path: ${base}/llama\n  full: ${path}/m.gguf\nmodels:\n  a:\n    cmd: load ${full}\n    proxy: http://127.0.0.1:9\n";
    let config = load(backward).config;
    assert_eq!(
        config.model("a").unwrap().cmd,
        "load /srv/models/llama/m.gguf"
    );
}

#[test]
fn a_self_referencing_macro_is_refused_even_unused() {
    let yaml = "macros:\n  loop: x-${loop}\n";
    assert_eq!(
        reasons(yaml),
        [Reason::MacroSelfReference {
            name: "loop".into()
        }]
    );
}

#[test]
fn a_helper_key_holding_an_anchor_with_port_and_model_id_loads() {
    let yaml = r#"
x-defaults: &defaults
  cmd: llama-server --port ${PORT} -m /m/${MODEL_ID}.gguf ${LOCAL}
  proxy: http://127.0.0.1:${PORT}
models:
  first:
    <<: *defaults
    macros: {LOCAL: --first}
  second:
    <<: *defaults
    macros: {LOCAL: --second}
"#;
    let loaded = load(yaml);
    let first = loaded.config.model("first").unwrap();
    assert_eq!(
        first.cmd,
        "llama-server --port 5800 -m /m/first.gguf --first"
    );
    let second = loaded.config.model("second").unwrap();
    assert_eq!(second.proxy, "http://127.0.0.1:5801");
    assert_eq!(
        warnings(&loaded),
        [("x-defaults".to_owned(), WarningKind::UnknownKey)]
    );
}

#[test]
fn a_full_url_check_endpoint_polls_its_path_on_the_proxy() {
    let same_host = "models:\n  a:\n    cmd: srv\n    proxy: http://127.0.0.1:9000\n    checkEndpoint: http://127.0.0.1:9000/v1/models?x=1\n";
    let loaded = load(same_host);
    assert_eq!(
        loaded.config.model("a").unwrap().check_endpoint.as_deref(),
        Some("/v1/models?x=1")
    );
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);

    let other_host = "models:\n  a:\n    cmd: srv\n    proxy: http://127.0.0.1:9000\n    checkEndpoint: http://elsewhere/health\n";
    let loaded = load(other_host);
    assert_eq!(
        loaded.config.model("a").unwrap().check_endpoint.as_deref(),
        Some("/health")
    );
    assert_eq!(
        warnings(&loaded),
        [(
            "models.a.checkEndpoint".to_owned(),
            WarningKind::CheckEndpointHostIgnored {
                path: "/health".into(),
                proxy: "http://127.0.0.1:9000".into()
            }
        )]
    );
}

#[test]
fn a_preload_entry_that_is_not_a_model_is_a_warning() {
    let yaml = "models:\n  a:\n    cmd: srv\n    proxy: http://127.0.0.1:9\n    aliases: [chat]\nhooks:\n  on_startup:\n    preload: [chat, ghost, ' ']\n";
    let loaded = load(yaml);
    assert_eq!(loaded.config.hooks.preload, ["a"]);
    assert_eq!(
        warnings(&loaded),
        [(
            "hooks.on_startup.preload[1]".to_owned(),
            WarningKind::PreloadNotAModel {
                name: "ghost".into()
            }
        )]
    );
}

#[test]
fn router_settings_may_hold_groups_and_matrix_and_use_picks_one() {
    let yaml = "models:\n  a: {cmd: srv, proxy: 'http://127.0.0.1:9'}\n  b: {cmd: srv, proxy: 'http://127.0.0.1:8'}\nrouting:\n  router:\n    use: group\n    settings:\n      groups:\n        g: {members: [a, b]}\n      matrix:\n        sets: {s: a}\n";
    let loaded = load(yaml);
    assert_eq!(loaded.config.groups.len(), 1);
    assert_eq!(
        warnings(&loaded),
        [(
            "routing.router.settings.matrix".to_owned(),
            WarningKind::NoEffect {
                because: "routing.router.use is not matrix"
            }
        )]
    );
    let no_matrix = "routing:\n  router:\n    use: matrix\n";
    assert_eq!(
        reasons(no_matrix),
        [Reason::RequiredBy {
            key: llama_swap_server::config::KeyPath::from_keys(["routing", "router", "use"]),
            value: "matrix"
        }]
    );
}

#[test]
fn log_keys_are_read_as_llama_swap_reads_them() {
    const MODEL: &str = "models:\n  a: {cmd: srv, proxy: 'http://127.0.0.1:9'}\n";
    let loaded = load(&format!(
        "logLevel: ' DEBUG '\nlogTimeFormat: RFC3339\nlogToStdout: none\n{MODEL}"
    ));
    assert_eq!(loaded.config.log_level, LogLevel::Debug);
    assert_eq!(loaded.config.log_time_format, Some(LogTimeFormat::Rfc3339));
    assert!(loaded.warnings.is_empty());
    let loaded = load(&format!(
        "logLevel: verbose\nlogTimeFormat: iso8601\n{MODEL}"
    ));
    assert_eq!(loaded.config.log_level, LogLevel::Info);
    assert_eq!(loaded.config.log_time_format, None);
    assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
    assert!(matches!(
        reasons("logToStdout: stderr\n").as_slice(),
        [Reason::NotOneOf { .. }]
    ));
}

#[test]
fn the_request_body_limit_is_a_config_key() {
    assert_eq!(load("").config.request_body_limit, None);
    assert_eq!(
        load("requestBodyLimit: 64MiB\n").config.request_body_limit,
        Some(64 << 20)
    );
    assert_eq!(
        load("requestBodyLimit: 1000\n").config.request_body_limit,
        Some(1000)
    );
    assert!(matches!(
        reasons("requestBodyLimit: lots\n").as_slice(),
        [Reason::InvalidSize { .. }]
    ));
}

fn write(dir: &Path, name: &str, text: &str) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn model(id: &str) -> String {
    format!("models:\n  {id}:\n    cmd: echo {id}\n    proxy: http://127.0.0.1:9999\n")
}

#[test]
fn config_dir_files_merge_in_name_order_after_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "main.yaml",
        &format!("{}globalTTL: 100\nmacros: {{LOW: 1}}\n", model("base")),
    );
    let conf_d = dir.path().join("conf.d");
    std::fs::create_dir(&conf_d).unwrap();
    write(
        &conf_d,
        "b.yml",
        &format!("{}globalTTL: 100\napiKeys: [kb]\n", model("zed")),
    );
    write(
        &conf_d,
        "a.yaml",
        &format!(
            "{}macros: {{HIGH: 2}}\napiKeys: [ka]\n",
            model("uses").replace("echo uses", "echo ${LOW}${HIGH}")
        ),
    );
    write(&conf_d, "ignored.txt", "not: yaml: at all");
    std::fs::create_dir(conf_d.join("sub.yaml")).unwrap();
    let config = Config::loader()
        .file(&file)
        .dir(&conf_d)
        .env(&env)
        .load()
        .unwrap()
        .config;
    let ids: Vec<&str> = config.models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["base", "uses", "zed"]);
    assert_eq!(config.model("uses").unwrap().cmd, "echo 12");
    assert_eq!(config.api_keys.len(), 2);
    assert!(
        config.api_keys[0].matches("ka"),
        "a.yaml comes before b.yml"
    );
}

#[test]
fn config_dir_conflicts_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "a.yaml",
        &format!("{}globalTTL: 100\n", model("m")),
    );
    write(
        dir.path(),
        "b.yaml",
        &format!("{}globalTTL: 200\n", model("n")),
    );
    let err = Config::loader()
        .dir(dir.path())
        .env(&env)
        .load()
        .unwrap_err();
    match &err {
        ConfigError::Merge {
            file,
            path,
            conflict,
        } => {
            assert!(file.ends_with("b.yaml"), "{err}");
            assert_eq!(path.to_string(), "globalTTL");
            assert_eq!(*conflict, MergeConflict::DifferentValue);
        }
        other => panic!("{other}"),
    }
    write(dir.path(), "b.yaml", &model("m"));
    let err = Config::loader()
        .dir(dir.path())
        .env(&env)
        .load()
        .unwrap_err();
    assert!(
        matches!(&err, ConfigError::Merge { conflict: MergeConflict::Duplicate { key }, .. } if key == "m"),
        "{err}"
    );
}

#[test]
fn config_dir_errors_for_an_empty_dir_a_shared_file_and_nothing_given() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        Config::loader().dir(dir.path()).env(&env).load(),
        Err(ConfigError::EmptyDir { .. })
    ));
    let file = write(dir.path(), "main.yaml", &model("m"));
    assert!(matches!(
        Config::loader()
            .file(&file)
            .dir(dir.path())
            .env(&env)
            .load(),
        Err(ConfigError::FileInDir { .. })
    ));
    assert!(matches!(
        Config::loader().env(&env).load(),
        Err(ConfigError::NoSources)
    ));
    // An empty directory beside a file adds nothing and is fine.
    let other = tempfile::tempdir().unwrap();
    let loaded = Config::loader()
        .file(&file)
        .dir(other.path())
        .env(&env)
        .load()
        .unwrap();
    assert_eq!(loaded.config.models.len(), 1);
}

#[test]
fn a_group_member_that_is_not_a_model_is_a_warning() {
    let yaml = "models:\n  a:\n    cmd: srv\n    proxy: http://127.0.0.1:9\nrouting:\n  router:\n    settings:\n      groups:\n        one:\n          members: [a, ghost]\n";
    let loaded = load(yaml);
    assert_eq!(loaded.config.groups[0].members, ["a"]);
    assert_eq!(
        warnings(&loaded),
        [(
            "routing.router.settings.groups.one.members[1]".to_owned(),
            WarningKind::MemberNotAModel {
                name: "ghost".into()
            }
        )]
    );
}

#[test]
fn log_requests_true_warns_that_it_has_no_effect_and_false_loads_quietly() {
    let on = load("models:\n  a: {cmd: srv, proxy: 'http://127.0.0.1:9'}\nlogRequests: true\n");
    assert_eq!(
        warnings(&on),
        [(
            "logRequests".to_owned(),
            WarningKind::NoEffect {
                because: "every request is logged anyway (one INFO line each; logLevel: warn drops them), as llama-swap ignores it too"
            }
        )]
    );
    let off = load("models:\n  a: {cmd: srv, proxy: 'http://127.0.0.1:9'}\nlogRequests: false\n");
    assert!(warnings(&off).is_empty());
}

#[test]
fn a_model_without_a_command_loads_with_a_warning_as_in_llama_swap() {
    let yaml = "models:\n  a:\n    proxy: http://localhost:8080\n  b:\n    cmd: |\n      # just a comment\n    proxy: http://localhost:8081\n  c:\n    cmd: srv\n    proxy: http://localhost:8082\n";
    let loaded = load(yaml);
    assert_eq!(
        warnings(&loaded),
        [
            ("models.a.cmd".to_owned(), WarningKind::NoCommand),
            ("models.b.cmd".to_owned(), WarningKind::NoCommand),
        ]
    );
    let cmd = |id: &str| {
        let model = loaded.config.models.iter().find(|m| m.id == id).unwrap();
        model.cmd.clone()
    };
    assert_eq!(
        (cmd("a"), cmd("b"), cmd("c")),
        (String::new(), String::new(), "srv".to_owned())
    );
}
