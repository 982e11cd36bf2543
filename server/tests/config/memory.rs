//! The memory router's configuration (`routing.router.use: memory`): GPUs
//! listed or `auto`, `reserve`, `evict_costs`, and each model's `memory`,
//! `gpus`, `persistent` and `sleep`; errors name the key.

use llama_swap_server::config::{
    Config, ConfigError, GpuList, Loaded, Reason, SleepConfig, WarningKind,
};
use llama_swap_server::testing::policy::memory::{Gpu, MemoryError};

const GIB: u64 = 1 << 30;

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

const ROUTER: &str = "
routing:
  router:
    use: memory
    settings:
      memory:
        gpus: [{id: 1, memory: 24GiB}, {id: 0, memory: 24GiB}]
        reserve: 1GiB
        evict_costs: {chat: 5}
";

#[test]
fn the_memory_router_reads_gpus_reserve_costs_and_each_models_needs() {
    let text = format!(
        "models:
  qwen:
    cmd: srv --port ${{PORT}} --device ${{GPU}}
    aliases: [chat]
    memory: 21GiB
    sleep: vllm
  big:
    cmd: srv --port ${{PORT}}
    memory: 40GiB
    gpus: 2
    persistent: true
    sleep: {{sleep: 'POST /sleep?level=2', wake: /wake, memory: 512MiB}}
{ROUTER}"
    );
    let Loaded { config, warnings } = load(&text).unwrap();
    assert!(warnings.is_empty(), "{warnings:#?}");
    let memory = config.memory.as_ref().unwrap();
    assert_eq!(
        memory.gpus,
        GpuList::Listed(vec![
            Gpu {
                id: 0,
                memory: 24 * GIB
            },
            Gpu {
                id: 1,
                memory: 24 * GIB
            },
        ])
    );
    assert_eq!(memory.reserve, GIB);
    assert_eq!(memory.evict_costs, [("qwen".to_owned(), 5)]);
    let qwen = config.model("qwen").unwrap();
    assert_eq!(
        (qwen.memory, qwen.gpus, qwen.persistent),
        (Some(21 * GIB), 1, false)
    );
    // ${GPU} stays for the supervisor to fill in at each start.
    assert!(qwen.cmd.ends_with("--device ${GPU}"), "{}", qwen.cmd);
    let big = config.model("big").unwrap();
    assert_eq!(
        (big.memory, big.gpus, big.persistent),
        (Some(40 * GIB), 2, true)
    );
    let SleepConfig { mode, memory, .. } = big.sleep.clone().unwrap();
    assert_eq!(
        (mode.sleep.path.as_str(), mode.wake.path.as_str()),
        ("/sleep?level=2", "/wake")
    );
    assert_eq!(memory, 512 << 20);
    assert_eq!(qwen.sleep.as_ref().unwrap().mode.wake.path, "/wake_up");
}

#[test]
fn a_model_larger_than_any_gpu_is_a_load_error_naming_it() {
    let text = format!(
        "models:
  small:
    cmd: srv --port ${{PORT}}
    memory: 4GiB
  huge:
    cmd: srv --port ${{PORT}}
    memory: 30GiB
{ROUTER}"
    );
    let all = issues(&text.replace("chat: 5", "small: 5"));
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].0, "models.huge.memory");
    assert!(
        matches!(&all[0].1, Reason::Memory(MemoryError::TooLarge { model, .. }) if model == "huge")
    );
}

#[test]
fn every_model_needs_its_memory_under_the_memory_router() {
    let text = format!("models:\n  a:\n    cmd: srv --port ${{PORT}}\n{ROUTER}")
        .replace("evict_costs: {chat: 5}", "");
    let all = issues(&text);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].0, "models.a.memory");
    assert!(matches!(
        all[0].1,
        Reason::RequiredBy {
            value: "memory",
            ..
        }
    ));
}

#[test]
fn more_gpus_than_listed_and_bad_sizes_name_their_keys() {
    let text = format!(
        "models:
  a:
    cmd: srv --port ${{PORT}}
    memory: 10GiB
    gpus: 3
  b:
    cmd: srv --port ${{PORT}}
    memory: lots
{ROUTER}"
    )
    .replace("evict_costs: {chat: 5}", "");
    let paths: Vec<String> = issues(&text).into_iter().map(|(p, _)| p).collect();
    assert!(paths.contains(&"models.b.memory".to_owned()), "{paths:?}");
    let text = text.replace("memory: lots", "memory: 1GiB");
    let all = issues(&text);
    assert_eq!(all[0].0, "models.a.gpus");
    assert!(matches!(
        all[0].1,
        Reason::Memory(MemoryError::NotEnoughGpus {
            wants: 3,
            have: 2,
            ..
        })
    ));
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
fn gpu_in_a_key_that_starts_no_process_is_an_error() {
    let text = format!(
        "models:\n  a:\n    cmd: srv --port ${{PORT}}\n    memory: 1GiB\n    name: on ${{GPU}}\n{ROUTER}"
    )
    .replace("evict_costs: {chat: 5}", "");
    let all = issues(&text);
    assert_eq!(all.len(), 1, "{all:#?}");
    assert_eq!(all[0].0, "models.a.name");
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
fn gpus_auto_is_resolved_at_start_and_none_found_is_an_error() {
    let text = "models:\n  a:\n    cmd: srv --port ${PORT}\n    memory: 30GiB\nrouting:\n  router:\n    use: memory\n";
    let config = load(text).unwrap().config;
    assert!(config.detects_gpus());
    assert_eq!(
        config.clone().on_detected_gpus(Vec::new()).unwrap_err(),
        MemoryError::NoGpus
    );
    let small = vec![Gpu {
        id: 0,
        memory: 24 * GIB,
    }];
    assert!(matches!(
        config.clone().on_detected_gpus(small).unwrap_err(),
        MemoryError::TooLarge { ref model, .. } if model == "a"
    ));
    let found = config
        .on_detected_gpus(vec![Gpu {
            id: 0,
            memory: 48 * GIB,
        }])
        .unwrap();
    assert!(!found.detects_gpus());
}

/// The YAML blocks of the README's memory router section.
fn readme_memory_blocks() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
    let start = readme
        .find("### Placement by GPU memory")
        .expect("the README section");
    let section = &readme[start..];
    let section = &section[..section[4..].find("\n### ").map_or(section.len(), |e| e + 4)];
    section
        .split("```yaml\n")
        .skip(1)
        .map(|block| block[..block.find("```").unwrap()].to_owned())
        .collect()
}

#[test]
fn the_readme_memory_examples_load_without_warnings_and_mean_what_they_say() {
    let blocks = readme_memory_blocks();
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    for block in &blocks {
        let loaded = load(block).unwrap_or_else(|e| panic!("{e}\n{block}"));
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }
    let config = load(&blocks[1]).unwrap().config;
    let model = |id: &str| config.models.iter().find(|m| m.id == id).unwrap();
    assert_eq!(
        config.priority_rules.min_resident,
        Some(std::time::Duration::from_secs(30))
    );
    assert_eq!(model("embed").min_resident, Some(std::time::Duration::ZERO));
    assert_eq!(
        model("coder").min_resident,
        Some(std::time::Duration::from_secs(120))
    );
    assert_eq!(model("tools").sleep.as_ref().unwrap().memory, GIB);
    assert!(model("chat").sleep.is_some());
    let memory = config.memory.as_ref().expect("the memory router");
    assert_eq!(memory.reserve, GIB);
    assert_eq!(
        memory.gpus,
        GpuList::Listed(vec![
            Gpu {
                id: 0,
                memory: 24 * GIB
            },
            Gpu {
                id: 1,
                memory: 24 * GIB
            }
        ])
    );
}
