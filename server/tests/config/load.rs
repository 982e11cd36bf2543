//! Valid configurations: one fixture per feature, asserting the resolved values.

use std::collections::BTreeMap;
use std::time::Duration;

use llama_swap_server::config::{
    Config, Loaded, LogLevel, LogToStdout, ModelConfig, SchedulerConfig, WarningKind,
};

use crate::support::fixture;

fn load_with(name: &str, vars: &[(&str, &str)]) -> Loaded {
    let vars: BTreeMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let env = move |name: &str| vars.get(name).cloned();
    match Config::loader().file(fixture(name)).env(&env).load() {
        Ok(loaded) => loaded,
        Err(err) => panic!("{name} should load:\n{err}"),
    }
}

fn load(name: &str) -> Loaded {
    load_with(name, &[])
}

fn model<'a>(config: &'a Config, id: &str) -> &'a ModelConfig {
    config
        .model(id)
        .unwrap_or_else(|| panic!("model {id} missing"))
}

#[test]
fn minimal_config_gets_llama_swap_defaults() {
    let Loaded { config, warnings } = load("defaults.yaml");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.health_check_timeout, Duration::from_secs(120));
    assert_eq!(config.global_ttl, None);
    assert_eq!(config.unload_timeout, Duration::from_secs(10));
    assert_eq!(config.start_port, 5800);
    assert!(!config.send_loading_state);
    assert!(!config.include_aliases_in_list);
    assert!(config.api_keys.is_empty());
    assert!(config.groups.is_empty());
    assert!(config.hooks.preload.is_empty());
    assert_eq!(config.log_level, LogLevel::Info);
    assert_eq!(config.log_to_stdout, LogToStdout::Proxy);
    assert_eq!(
        config.scheduler,
        SchedulerConfig::Fifo {
            priorities: BTreeMap::new(),
            drain_fence: true
        }
    );

    let tiny = model(&config, "tiny");
    assert_eq!(tiny.cmd, "llama-server --port 5800 -m tiny.gguf");
    assert_eq!(tiny.proxy, "http://localhost:5800");
    assert_eq!(tiny.port, Some(5800));
    assert_eq!(tiny.check_endpoint.as_deref(), Some("/health"));
    assert_eq!(tiny.ttl, None);
    assert_eq!(tiny.unload_timeout, Duration::from_secs(10));
    assert_eq!(tiny.concurrency_limit, 10);
    assert_eq!(tiny.cmd_stop, None);
    assert!(tiny.aliases.is_empty());
    assert!(tiny.env.is_empty());
    assert!(!tiny.unlisted);
    assert!(!tiny.send_loading_state);
    assert_eq!(config.priority("tiny"), None);
}

#[test]
fn realistic_llama_cpp_example_resolves_fully() {
    let Loaded { config, warnings } = load_with(
        "example.yaml",
        &[
            ("LLAMA_CPP_DIR", "/opt/llama.cpp"),
            ("LLAMA_SWAP_API_KEY", "sk-local-1234"),
        ],
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.health_check_timeout, Duration::from_secs(300));
    assert_eq!(config.global_ttl, Some(Duration::from_secs(1800)));
    assert!(config.send_loading_state);
    assert_eq!(config.api_keys.len(), 1);
    assert!(config.api_keys[0].matches("sk-local-1234"));

    let ids: Vec<&str> = config.models.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids, ["nomic-embed", "qwen2.5-coder-7b", "qwen3-14b"]);

    let chat = model(&config, "qwen3-14b");
    assert_eq!(chat.port, Some(10003));
    assert_eq!(
        chat.cmd,
        "/opt/llama.cpp/build/bin/llama-server --host 127.0.0.1 --port 10003 --flash-attn on --jinja\n\
         --model /srv/models/Qwen3-14B-Q4_K_M.gguf\n\
         --ctx-size 16384\n\
         --n-gpu-layers 99"
    );
    assert_eq!(chat.proxy, "http://localhost:10003");
    assert_eq!(chat.aliases, ["chat", "gpt-4o-mini"]);
    assert_eq!(chat.ttl, Some(Duration::from_secs(600)));
    assert_eq!(
        chat.env,
        [("CUDA_VISIBLE_DEVICES".to_owned(), "0".to_owned())]
    );
    assert_eq!(chat.name.as_deref(), Some("Qwen3 14B Instruct"));
    assert_eq!(chat.description.as_deref(), Some("everyday chat"));
    assert!(chat.send_loading_state);

    let coder = model(&config, "qwen2.5-coder-7b");
    assert_eq!(coder.port, Some(10002));
    assert!(coder.cmd.ends_with("--ctx-size 32768"), "{}", coder.cmd);
    assert_eq!(coder.concurrency_limit, 4);
    assert_eq!(coder.use_model_name.as_deref(), Some("qwen2.5-coder"));
    assert_eq!(coder.ttl, Some(Duration::from_secs(1800)));

    let embed = model(&config, "nomic-embed");
    assert_eq!(embed.port, Some(10001));
    assert_eq!(embed.ttl, None);
    assert_eq!(
        embed.metadata,
        Some(serde_json::json!({"dims": 768, "port": 10001}))
    );

    assert_eq!(config.groups.len(), 2);
    let llm = &config.groups[0];
    assert_eq!(llm.name, "llm");
    assert_eq!(llm.members, ["qwen3-14b", "qwen2.5-coder-7b"]);
    assert!(llm.swap && !llm.exclusive && !llm.persistent);
    let embeddings = &config.groups[1];
    assert!(!embeddings.swap && !embeddings.exclusive && embeddings.persistent);

    assert_eq!(config.priority("qwen3-14b"), Some(10));
    assert_eq!(config.priority("nomic-embed"), Some(5));
    assert_eq!(config.priority("qwen2.5-coder-7b"), None);
    assert_eq!(config.hooks.preload, ["nomic-embed"]);
    assert_eq!(config.resolve("gpt-4o-mini"), Some("qwen3-14b"));
    assert_eq!(config.resolve("nope"), None);
}

#[test]
fn macros_expand_globally_per_model_and_from_the_environment() {
    let Loaded { config, warnings } = load_with(
        "macros.yaml",
        &[
            ("LLAMA_BIN", "/usr/local/bin/llama-server"),
            ("HOME", "/home/ai"),
        ],
    );
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.start_port, 9000);
    assert_eq!(config.health_check_timeout, Duration::from_secs(60));

    let a = model(&config, "a");
    assert_eq!(
        a.cmd,
        "/usr/local/bin/llama-server --port 9000 --alias a -m a.gguf -t 8"
    );
    assert_eq!(a.ttl, Some(Duration::from_secs(120)));
    assert_eq!(a.name.as_deref(), Some("model a on 9000"));

    let b = model(&config, "b");
    assert_eq!(b.cmd, "/opt/other/llama-server --port 9001 --alias b");
    assert_eq!(b.ttl, Some(Duration::from_secs(30)));
    assert_eq!(
        b.env,
        [("HF_HOME".to_owned(), "/home/ai/.cache/hf".to_owned())]
    );
}

#[test]
fn ports_are_allocated_in_model_id_order_only_where_cmd_uses_them() {
    let config = load("ports.yaml").config;
    let port = |id: &str| model(&config, id).port;
    assert_eq!(port("alpha"), Some(7000));
    assert_eq!(port("fixed"), None);
    assert_eq!(port("mid"), Some(7001));
    assert_eq!(port("zeta"), Some(7002));
    assert_eq!(model(&config, "fixed").proxy, "http://127.0.0.1:9999");
    assert_eq!(model(&config, "mid").proxy, "http://127.0.0.1:7001/base");
    assert_eq!(model(&config, "mid").cmd, "srv --listen 127.0.0.1:7001");
}

#[test]
fn ttl_falls_back_to_global_and_zero_means_never() {
    let config = load("ttl.yaml").config;
    let ttl = |id: &str| model(&config, id).ttl;
    assert_eq!(ttl("inherits"), Some(Duration::from_secs(300)));
    assert_eq!(ttl("minus-one"), Some(Duration::from_secs(300)));
    assert_eq!(ttl("never"), None);
    assert_eq!(ttl("own"), Some(Duration::from_secs(45)));
    assert_eq!(
        model(&config, "inherits").unload_timeout,
        Duration::from_secs(20)
    );
    assert_eq!(model(&config, "own").unload_timeout, Duration::from_secs(3));
}

#[test]
fn check_endpoint_defaults_to_health_and_none_disables_it() {
    let config = load("check_endpoint.yaml").config;
    let check = |id: &str| model(&config, id).check_endpoint.clone();
    assert_eq!(check("default").as_deref(), Some("/health"));
    assert_eq!(check("custom").as_deref(), Some("/v1/models"));
    assert_eq!(check("unchecked"), None);
}

#[test]
fn groups_have_llama_swap_defaults_and_resolve_alias_members() {
    let config = load("groups.yaml").config;
    assert_eq!(config.groups.len(), 2);
    let big = &config.groups[0];
    assert_eq!(big.name, "big");
    assert!(big.swap && big.exclusive && !big.persistent);
    assert_eq!(big.members, ["llama", "mistral"]);
    let side = &config.groups[1];
    assert!(!side.swap && !side.exclusive && side.persistent);
    assert_eq!(side.members, ["embed"]);
    assert_eq!(
        config.group_of("llama").map(|g| g.name.as_str()),
        Some("big")
    );
    assert!(config.group_of("loner").is_none());
}

#[test]
fn legacy_top_level_groups_are_read() {
    let config = load("legacy_groups.yaml").config;
    assert_eq!(config.groups.len(), 1);
    assert_eq!(config.groups[0].members, ["a", "b"]);
    assert!(!config.groups[0].swap);
    assert!(config.groups[0].exclusive);
}

#[test]
fn priority_keys_resolve_aliases_and_drain_fence_can_be_disabled() {
    let config = load("priority.yaml").config;
    let SchedulerConfig::Fifo {
        priorities,
        drain_fence,
    } = &config.scheduler
    else {
        panic!("expected fifo, got {:?}", config.scheduler);
    };
    assert!(!drain_fence);
    assert_eq!(
        priorities,
        &BTreeMap::from([
            ("batch-model".to_owned(), -10),
            ("chat-model".to_owned(), 10)
        ])
    );
    assert_eq!(config.priority("chat-model"), Some(10));
    assert_eq!(config.priority("batch-model"), Some(-10));
    assert_eq!(config.priority("plain"), None);
}

#[test]
fn serial_scheduler_is_selected() {
    assert_eq!(
        load("serial.yaml").config.scheduler,
        SchedulerConfig::Serial
    );
}

#[test]
fn unknown_and_unsupported_keys_warn_with_their_path() {
    let Loaded { config, warnings } = load("warnings.yaml");
    let found: Vec<(String, WarningKind)> = warnings
        .iter()
        .map(|w| (w.path.to_string(), w.kind.clone()))
        .collect();
    let expect = |p: &str, kind: WarningKind| {
        assert!(
            found.contains(&(p.to_owned(), kind.clone())),
            "missing warning {p}: {kind}; got {found:#?}"
        );
    };
    expect(
        "healthCheckTimeout",
        WarningKind::Raised { got: 5, used: 15 },
    );
    expect("colour", WarningKind::UnknownKey);
    assert!(
        found.iter().any(|(p, _)| p == "logRequests"),
        "logRequests: true has no effect: {found:#?}"
    );
    expect("models.a.cmdd", WarningKind::UnknownKey);
    expect(
        "routing.scheduler.settings.fifo.drainFence",
        WarningKind::NoEffect {
            because: "routing.scheduler.use is serial",
        },
    );
    assert_eq!(found.len(), 5, "{found:#?}");
    // `profiles` and `peers` are implemented: read, not warned about.
    assert_eq!(config.profiles[0].name, "fast");
    assert_eq!(config.peers[0].id, "other");
    // `filters` and `timeouts` are implemented: read, not warned about.
    let a = config.model("a").unwrap();
    assert_eq!(a.timeouts.connect, Some(Duration::from_secs(5)));
    assert_eq!(
        a.filters.strip_params().collect::<Vec<_>>(),
        ["temperature"]
    );
    assert_eq!(config.health_check_timeout, Duration::from_secs(15));
    assert_eq!(config.log_to_stdout, LogToStdout::Both);
    assert_eq!(
        warnings[0].to_string(),
        "healthCheckTimeout: 5 is below the minimum, 15 is used"
    );
}

#[test]
fn cmd_stop_keeps_pid_and_commented_port_allocates_nothing() {
    let config = load("cmd_stop.yaml").config;
    let docker = model(&config, "docker");
    assert_eq!(docker.cmd_stop.as_deref(), Some("docker stop vllm ${PID}"));
    assert_eq!(
        docker.cmd,
        "docker run --rm --name vllm -p 8000:8000 vllm/vllm-openai"
    );
    assert_eq!(docker.port, None);
    assert_eq!(model(&config, "local").port, Some(5800));
}

#[test]
fn api_keys_come_from_the_file_and_the_environment_and_never_show_in_debug() {
    let config = load_with("api_keys.yaml", &[("SECRET_KEY", "0042")]).config;
    assert_eq!(config.api_keys.len(), 2);
    assert!(config.api_keys[0].matches("sk-plain-key"));
    // The environment's text is used verbatim, not re-typed as the number 42.
    assert!(config.api_keys[1].matches("0042"));
    let debug = format!("{config:?}");
    assert!(
        !debug.contains("sk-plain-key") && !debug.contains("0042"),
        "{debug}"
    );
}

#[test]
fn empty_file_is_a_config_without_models_and_says_so() {
    let Loaded { config, warnings } = load("empty.yaml");
    assert!(config.models.is_empty());
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].kind, WarningKind::NoModels);
    assert_eq!(warnings[0].path.to_string(), "models");
}

#[test]
fn missing_file_is_a_read_error_naming_it() {
    let err = Config::loader()
        .file(fixture("does-not-exist.yaml"))
        .env(&|_| None)
        .load()
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("does-not-exist.yaml") && text.contains("cannot read"),
        "{text}"
    );
}

/// Every key the loader reads is known, so global macros expand in it: the
/// hand-kept list of known keys once lacked `requestBodyTimeout`, whose
/// `${macro}` then stayed unexpanded text and failed the load.
#[test]
fn global_macros_expand_in_every_top_level_key_the_loader_reads() {
    let yaml = "macros:\n  body_secs: 45\n  ttl: 300\nrequestBodyTimeout: ${body_secs}\nglobalTTL: ${ttl}\nmodels:\n  m:\n    cmd: srv --port ${PORT}\n";
    let loaded = match Config::loader().yaml("t.yaml", yaml).env(&|_| None).load() {
        Ok(loaded) => loaded,
        Err(err) => panic!("should load:\n{err}"),
    };
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    assert_eq!(
        loaded.config.request_body_timeout,
        Some(Duration::from_secs(45))
    );
    assert_eq!(loaded.config.global_ttl, Some(Duration::from_secs(300)));
}
