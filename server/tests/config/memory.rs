//! The models' keys for memory and sleep: `sleep` (vLLM, SGLang, custom calls),
//! and `memory`, `gpus`, `persistent` and `${GPU}`, which only the memory router
//! (not accepted yet) acts on; errors name the key.

use llama_swap_server::config::{Config, ConfigError, Loaded, Reason, SleepConfig, WarningKind};

fn load(text: &str) -> Result<Loaded, ConfigError> {
    Config::loader()
        .yaml("config.yaml", text)
        .env(&|_| None)
        .load()
}

fn issues(text: &str) -> Vec<(String, Reason)> {
    match load(text) {
        Ok(loaded) => panic!("should fail, loaded {:#?}", loaded.config),
        Err(err @ ConfigError::Invalid { .. }) => err
            .issues()
            .iter()
            .map(|i| (i.path.to_string(), i.reason.clone()))
            .collect(),
        Err(other) => panic!("expected invalid values, got {other}"),
    }
}

#[test]
fn gpu_outside_the_memory_router_is_an_error_and_memory_keys_warn() {
    let all = issues("models:\n  a:\n    cmd: srv --port ${PORT} --device ${GPU}\n");
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].0, "models.a.cmd");
    assert!(matches!(
        all[0].1,
        Reason::MacroNotAvailable { name: "GPU", .. }
    ));
    let Loaded { warnings, .. } = load(
        "models:\n  a:\n    cmd: srv --port ${PORT}\n    memory: 4GiB\n    persistent: true\n",
    )
    .unwrap();
    let paths: Vec<String> = warnings
        .iter()
        .filter(|w| matches!(w.kind, WarningKind::NoEffect { .. }))
        .map(|w| w.path.to_string())
        .collect();
    assert_eq!(paths, ["models.a.memory", "models.a.persistent"]);
}

#[test]
fn a_bad_sleep_call_names_its_key() {
    let all = issues(
        "models:\n  a:\n    cmd: srv --port ${PORT}\n    sleep: {sleep: 'sleep now', wake: /w}\n",
    );
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].0, "models.a.sleep.sleep");
    assert!(matches!(all[0].1, Reason::InvalidSleepCall { .. }));
}

#[test]
fn sleep_reads_vllm_sglang_and_custom_calls_with_the_memory_kept() {
    let Loaded { config, warnings } = load(
        "models:
  v:
    cmd: srv --port ${PORT}
    sleep: vllm
  s:
    cmd: srv --port ${PORT}
    sleep: sglang
  c:
    cmd: srv --port ${PORT}
    sleep: {sleep: 'PUT /sleep?level=2', wake: /wake, memory: 512MiB}
",
    )
    .unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let mode = |id: &str| config.model(id).unwrap().sleep.clone().unwrap();
    assert_eq!(mode("v").mode.sleep.path, "/sleep?level=1");
    assert_eq!(mode("v").mode.wake.path, "/wake_up");
    assert_eq!(mode("s").mode.sleep.path, "/release_memory_occupation");
    let SleepConfig {
        mode: custom,
        memory,
        ..
    } = mode("c");
    assert_eq!(
        (custom.sleep.method.as_str(), custom.sleep.path.as_str()),
        ("PUT", "/sleep?level=2")
    );
    assert_eq!(
        (custom.wake.method.as_str(), custom.wake.path.as_str()),
        ("POST", "/wake")
    );
    assert_eq!(memory, 512 << 20);
}

#[test]
fn the_memory_router_is_not_accepted_until_the_scheduler_places_by_memory() {
    let all = issues(
        "models:\n  a:\n    cmd: srv --port ${PORT}\nrouting:\n  router:\n    use: memory\n",
    );
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].0, "routing.router.use");
}
