//! The resolved configuration maps onto the scheduler settings and the process specs.

use std::time::Duration;

use llama_swap_server::config::Config;
use llama_swap_server::testing::scheduler::{Scheduler, SchedulerKind};
use llama_swap_server::testing::upstream::split_command;

use crate::support::fixture;

fn load(name: &str) -> Config {
    let path = fixture(name);
    let env = |name: &str| match name {
        "LLAMA_CPP_DIR" => Some("/opt/llama.cpp".to_owned()),
        "LLAMA_SWAP_API_KEY" => Some("sk-test".to_owned()),
        _ => None,
    };
    Config::loader().file(path).env(&env).load().unwrap().config
}

#[test]
fn example_maps_to_scheduler_settings_the_scheduler_accepts() {
    let settings = load("example.yaml").scheduler_settings();
    assert_eq!(settings.kind, SchedulerKind::Fifo { drain_fence: true });

    let chat = settings
        .models
        .iter()
        .find(|m| m.id == "qwen3-14b")
        .unwrap();
    assert_eq!(chat.aliases, ["chat", "gpt-4o-mini"]);
    assert_eq!(
        chat.priority,
        Some(10),
        "priority keyed by the alias `chat` applies"
    );
    assert_eq!(chat.ttl, Some(Duration::from_secs(600)));
    assert_eq!(chat.concurrency_limit, 10);
    assert_eq!(chat.unload_timeout, Duration::from_secs(10));
    let coder = settings
        .models
        .iter()
        .find(|m| m.id == "qwen2.5-coder-7b")
        .unwrap();
    assert_eq!(coder.concurrency_limit, 4);
    assert_eq!(coder.priority, None, "no floor configured");

    assert_eq!(settings.groups.len(), 2);
    assert_eq!(settings.groups[0].name, "llm");
    assert_eq!(
        settings.groups[0].members,
        ["qwen3-14b", "qwen2.5-coder-7b"]
    );
    assert!(settings.groups[1].persistent);

    let scheduler = Scheduler::new(&settings).unwrap();
    assert_eq!(scheduler.resolve("coder"), Some("qwen2.5-coder-7b"));
}

#[test]
fn serial_and_disabled_fence_map_to_their_kinds() {
    assert_eq!(
        load("serial.yaml").scheduler_settings().kind,
        SchedulerKind::Serial
    );
    assert_eq!(
        load("priority.yaml").scheduler_settings().kind,
        SchedulerKind::Fifo { drain_fence: false }
    );
}

#[test]
fn every_valid_fixture_maps_to_settings_the_scheduler_accepts() {
    for name in [
        "defaults.yaml",
        "ports.yaml",
        "ttl.yaml",
        "check_endpoint.yaml",
        "groups.yaml",
        "legacy_groups.yaml",
        "priority.yaml",
        "serial.yaml",
        "cmd_stop.yaml",
        "empty.yaml",
    ] {
        let settings = load(name).scheduler_settings();
        if let Err(err) = Scheduler::new(&settings) {
            panic!("{name}: {err}");
        }
    }
}

#[test]
fn example_maps_to_process_specs_with_expanded_commands() {
    let specs = load("example.yaml").process_specs();
    let ids: Vec<&str> = specs.iter().map(|s| s.model.as_str()).collect();
    assert_eq!(ids, ["nomic-embed", "qwen2.5-coder-7b", "qwen3-14b"]);
    let chat = &specs[2];
    assert_eq!(chat.proxy, "http://localhost:10003");
    assert!(
        chat.cmd
            .starts_with("/opt/llama.cpp/build/bin/llama-server --host 127.0.0.1 --port 10003")
    );
    assert_eq!(
        chat.env,
        [("CUDA_VISIBLE_DEVICES".to_owned(), "0".to_owned())]
    );
    assert_eq!(chat.check_endpoint.as_deref(), Some("/health"));
    assert_eq!(chat.health_check_timeout, Duration::from_secs(300));
    let argv = split_command(&chat.cmd).unwrap();
    assert_eq!(argv[0], "/opt/llama.cpp/build/bin/llama-server");
    assert_eq!(argv.last().map(String::as_str), Some("99"));
    assert!(
        !argv.iter().any(|a| a.contains("40")),
        "comment line was dropped: {argv:?}"
    );
}

#[test]
fn cmd_stop_and_disabled_health_check_reach_the_process_spec() {
    let specs = load("cmd_stop.yaml").process_specs();
    let docker = specs.iter().find(|s| s.model == "docker").unwrap();
    assert_eq!(docker.cmd_stop.as_deref(), Some("docker stop vllm ${PID}"));
    assert_eq!(docker.proxy, "http://127.0.0.1:8000");
    let unchecked = load("check_endpoint.yaml").process_specs();
    let unchecked = unchecked.iter().find(|s| s.model == "unchecked").unwrap();
    assert_eq!(unchecked.check_endpoint, None);
}
