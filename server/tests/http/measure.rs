//! The memory router learns what a model really holds on its GPU: after a
//! start it reads the process's GPU memory (`nvidia-smi`'s per-process
//! query, here a fake `nvidia-smi` first on the server's `PATH` that reports
//! a model's mockswap process), counts the larger of that and the model's
//! `memory` for placement from then on, says so in the log, and
//! `--check-config` hints at the model while it runs.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::cli::Server;
use crate::support::{LIMIT, config_yaml, free_port, model};

/// A fake `nvidia-smi` in `dir` that answers the per-process query with
/// `mib` MiB for each process whose command line contains `needle`.
fn fake_nvidia_smi(dir: &Path, needle: &str, mib: u64) {
    let script = format!(
        r#"#!/bin/sh
case "$*" in
  *--query-compute-apps=pid,used_memory*) ;;
  *) exit 1 ;;
esac
for dir in /proc/[0-9]*; do
  case "$(tr '\0' ' ' < "$dir/cmdline" 2>/dev/null)" in
    *"{needle} "*) echo "${{dir#/proc/}}, {mib}" ;;
  esac
done
"#
    );
    let path = dir.join("nvidia-smi");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

async fn running_body(server: &Server) -> serde_json::Value {
    reqwest::get(format!("{}/running", server.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn running(server: &Server) -> Vec<String> {
    running_body(server).await["running"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["model"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_model_measured_above_its_estimate_is_logged_hinted_and_placed_by_its_measure() {
    let dir = tempfile::tempdir().unwrap();
    let (pa, pb) = (free_port(), free_port());
    // One 24 GiB GPU with 1 GiB kept free: a and b (10 GiB each) fit
    // together, but not once a is known to hold 14 GiB.
    let mut yaml = config_yaml(&[(model("a", ""), pa), (model("b", ""), pb)]);
    yaml = yaml.replacen(
        &format!("proxy: http://127.0.0.1:{pa}\n"),
        &format!("proxy: http://127.0.0.1:{pa}\n    memory: 10GiB\n"),
        1,
    );
    yaml = yaml.replacen(
        &format!("proxy: http://127.0.0.1:{pb}\n"),
        &format!("proxy: http://127.0.0.1:{pb}\n    memory: 10GiB\n"),
        1,
    );
    yaml.push_str(
        "routing:\n  router:\n    use: memory\n    settings:\n      memory:\n        gpus: [{id: 0, memory: 24GiB}]\n        reserve: 1GiB\n",
    );
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let tools = dir.path().join("bin");
    std::fs::create_dir(&tools).unwrap();
    fake_nvidia_smi(&tools, &format!("--listen 127.0.0.1:{pa}"), 14 * 1024);
    let path = format!(
        "{}:{}",
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );

    let config = file.to_str().unwrap();
    let mut server = Server::start_args_env(
        &["--config", config, "--listen", "127.0.0.1:0"],
        &[("PATH", &path)],
    )
    .await;
    assert_eq!(server.chat("a").await, 200);
    let line = server
        .wait_log("uses more GPU memory than its memory estimate")
        .await;
    assert!(line.contains("measured_mib=14336"), "{line}");
    // /running shows the measure beside the memory counted on its GPU.
    let body = running_body(&server).await;
    let a = &body["running"][0];
    assert_eq!(a["model"], "a");
    assert_eq!(a["memory_measured"], 14u64 << 30, "{body}");
    assert_eq!(a["memory"], 14u64 << 30, "{body}");

    // While a runs, --check-config on this machine hints at it.
    let check = tokio::time::timeout(
        LIMIT,
        tokio::process::Command::new(env!("CARGO_BIN_EXE_llama-swap-server"))
            .args(["--config", config, "--check-config"])
            .env("PATH", &path)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(check.status.success());
    let out = String::from_utf8_lossy(&check.stdout);
    assert!(
        out.contains(
            "hint: models.a.memory is 10.0 GiB, but its process running now uses 14.0 GiB"
        ),
        "{out}"
    );

    // 14 + 10 GiB do not fit in 23: b's start stops a.
    assert_eq!(server.chat("b").await, 200);
    assert_eq!(running(&server).await, ["b"]);
    server.terminate().await;
}
