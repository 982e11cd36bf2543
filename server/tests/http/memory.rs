//! The memory router over HTTP with real mockswap upstreams: models that fit
//! run together on one GPU or several, the GPU chosen reaches the process
//! (`${GPU}`, `CUDA_VISIBLE_DEVICES`), what stops is chosen by the eviction
//! order (idle before busy, least recently used first), a model spanning two
//! GPUs frees both.

use crate::support::{Harness, ModelSpec, model};

async fn ok(h: &Harness, model: &str) {
    let response = h.chat(model, None, false).send().await.unwrap();
    assert_eq!(response.status(), 200, "{model}");
}

/// Two 24 GiB GPUs, 1 GiB kept free on each.
const TWO_GPUS: &str = "
routing:
  router:
    use: memory
    settings:
      memory:
        gpus: [{id: 0, memory: 24GiB}, {id: 1, memory: 24GiB}]
        reserve: 1GiB
";

fn sized(id: &'static str, yaml: &'static str) -> ModelSpec {
    ModelSpec {
        yaml,
        ..model(id, "")
    }
}

/// The value of `var` in the environment of `model`'s process.
fn env_of(h: &Harness, model: &str, var: &str) -> Option<String> {
    let pid = h.upstream_pid(model)?;
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    environ.split(|&b| b == 0).find_map(|entry| {
        let entry = String::from_utf8_lossy(entry);
        entry.strip_prefix(&format!("{var}=")).map(str::to_owned)
    })
}

/// The command line of `model`'s process, arguments joined by spaces.
fn cmdline_of(h: &Harness, model: &str) -> String {
    let pid = h.upstream_pid(model).expect("model runs");
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    raw.split(|&b| b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

#[tokio::test]
async fn models_that_fit_run_together_each_on_the_gpu_it_was_given() {
    let h = Harness::start(
        &[
            sized("a", "memory: 20GiB"),
            sized("b", "memory: 20GiB"),
            sized("c", "memory: 2GiB"),
        ],
        TWO_GPUS,
    )
    .await;
    ok(&h, "a").await;
    ok(&h, "b").await;
    // 20 + 20 do not fit one GPU: b went to the other; c fits beside either.
    ok(&h, "c").await;
    assert_eq!(h.running().await, ["a", "b", "c"]);
    assert_eq!(
        env_of(&h, "a", "CUDA_VISIBLE_DEVICES").as_deref(),
        Some("0")
    );
    assert_eq!(
        env_of(&h, "b", "CUDA_VISIBLE_DEVICES").as_deref(),
        Some("1")
    );
    assert_eq!(env_of(&h, "b", "HIP_VISIBLE_DEVICES").as_deref(), Some("1"));
    h.shutdown().await;
}

#[tokio::test]
async fn a_model_spanning_two_gpus_stops_what_holds_them_and_gets_both() {
    let h = Harness::start(
        &[
            sized("a", "memory: 20GiB"),
            sized("b", "memory: 20GiB"),
            sized("big", "memory: 40GiB\ngpus: 2"),
        ],
        TWO_GPUS,
    )
    .await;
    ok(&h, "a").await;
    ok(&h, "b").await;
    ok(&h, "big").await;
    assert_eq!(h.running().await, ["big"]);
    assert_eq!(
        env_of(&h, "big", "CUDA_VISIBLE_DEVICES").as_deref(),
        Some("0,1")
    );
    // a needs one GPU, and big holds 20 GiB of both: big stops.
    ok(&h, "a").await;
    assert_eq!(h.running().await, ["a"]);
    h.shutdown().await;
}

#[tokio::test]
async fn gpu_in_the_command_is_the_placement_and_a_device_variable_the_model_sets_is_kept() {
    let h = Harness::start(
        &[
            ModelSpec {
                // The served name carries the GPU, so the command line shows it.
                args: "--models a,on-gpu-${GPU}",
                yaml: "memory: 20GiB",
                id: "a",
            },
            ModelSpec {
                args: "",
                yaml: "memory: 20GiB\nenv: [CUDA_VISIBLE_DEVICES=7]",
                id: "b",
            },
        ],
        TWO_GPUS,
    )
    .await;
    ok(&h, "a").await;
    ok(&h, "b").await;
    assert!(
        cmdline_of(&h, "a").contains("on-gpu-0"),
        "{}",
        cmdline_of(&h, "a")
    );
    assert_eq!(
        env_of(&h, "b", "CUDA_VISIBLE_DEVICES").as_deref(),
        Some("7")
    );
    assert_eq!(env_of(&h, "b", "HIP_VISIBLE_DEVICES").as_deref(), Some("1"));
    h.shutdown().await;
}

#[tokio::test]
async fn the_least_recently_used_model_is_stopped_first() {
    let h = Harness::start(
        &[
            sized("a", "memory: 20GiB"),
            sized("b", "memory: 20GiB"),
            sized("c", "memory: 20GiB"),
        ],
        TWO_GPUS,
    )
    .await;
    ok(&h, "a").await;
    ok(&h, "b").await;
    // a is used again after b: b is the least recently used.
    ok(&h, "a").await;
    ok(&h, "c").await;
    assert_eq!(h.running().await, ["a", "c"]);
    h.shutdown().await;
}

#[tokio::test]
async fn a_model_with_work_in_flight_is_not_stopped_when_another_frees_enough() {
    let h = Harness::start(
        &[
            ModelSpec {
                args: "--gate-closed",
                ..sized("a", "memory: 20GiB")
            },
            sized("b", "memory: 20GiB"),
            sized("c", "memory: 20GiB"),
        ],
        TWO_GPUS,
    )
    .await;
    let held = h.spawn(h.chat("a", None, false));
    h.wait_held("a", 1).await;
    ok(&h, "b").await;
    // a started first, but it is serving: the idle b stops instead.
    ok(&h, "c").await;
    assert_eq!(h.running().await, ["a", "c"]);
    h.open_gate("a").await;
    let (status, _) = tokio::time::timeout(crate::support::LIMIT, held)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn running_and_metrics_show_each_model_gpu_and_the_memory_used_and_free_per_gpu() {
    let h = Harness::start(
        &[sized("a", "memory: 20GiB"), sized("b", "memory: 2GiB")],
        TWO_GPUS,
    )
    .await;
    ok(&h, "a").await;
    // The tightest fit: b goes beside a on GPU 0.
    ok(&h, "b").await;
    let body: serde_json::Value = h
        .http
        .get(h.url("/running"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let row = |id: &str| {
        body["running"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["model"] == id)
            .cloned()
            .unwrap()
    };
    const GIB: u64 = 1 << 30;
    assert_eq!(row("a")["gpus"], serde_json::json!([0]));
    assert_eq!(row("a")["memory"], 20 * GIB);
    assert_eq!(row("b")["gpus"], serde_json::json!([0]));
    assert_eq!(
        body["gpus"],
        serde_json::json!([
            {"id": 0, "memory": 24 * GIB, "reserve": GIB, "used": 22 * GIB, "free": GIB},
            {"id": 1, "memory": 24 * GIB, "reserve": GIB, "used": 0, "free": 23 * GIB},
        ])
    );
    let metrics = h.metrics().await;
    for line in [
        format!(
            "llamaswap_placement_gpu_memory_bytes{{gpu=\"0\",kind=\"used\"}} {}\n",
            22 * GIB
        ),
        format!(
            "llamaswap_placement_gpu_memory_bytes{{gpu=\"1\",kind=\"free\"}} {}\n",
            23 * GIB
        ),
        format!(
            "llamaswap_model_gpu_memory_bytes{{model=\"a\",gpu=\"0\"}} {}\n",
            20 * GIB
        ),
    ] {
        assert!(metrics.contains(&line), "missing {line}in\n{metrics}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn a_sleeping_model_keeps_only_its_sleep_memory_and_is_stopped_for_good_when_that_is_needed()
{
    let h = Harness::start(
        &[
            sized(
                "a",
                "memory: 20GiB\nsleep: {sleep: \"POST /sleep?level=1\", wake: \"POST /wake_up\", memory: 2GiB}",
            ),
            sized("b", "memory: 20GiB"),
            sized("c", "memory: 3GiB"),
        ],
        "
routing:
  router:
    use: memory
    settings:
      memory:
        gpus: [{id: 0, memory: 24GiB}]
        reserve: 1GiB
",
    )
    .await;
    ok(&h, "a").await;
    let pid = h.upstream_pid("a").unwrap();
    ok(&h, "b").await;
    // a sleeps with 2 GiB: b's 20 fit beside it.
    assert_eq!(h.upstream_pid("a"), Some(pid));
    assert_eq!(h.running().await, ["a", "b"]);
    // c's 3 GiB do not fit in the 1 GiB left: the sleeping a (used least
    // recently) is stopped, and its 2 GiB are enough.
    ok(&h, "c").await;
    assert_eq!(h.running().await, ["b", "c"]);
    assert_eq!(h.upstream_pid("a"), None);
    h.shutdown().await;
}
