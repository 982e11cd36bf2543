//! `llama-swap-server --config FILE --check-config` and `--version`, run as a process.

use std::process::{Command, Output};

use crate::support::fixture;

fn server() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_llama-swap-server"));
    cmd.env_remove("LLAMA_CPP_DIR")
        .env_remove("LLAMA_SWAP_API_KEY")
        .env_remove("RUST_BACKTRACE");
    cmd
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn check(cmd: &mut Command, name: &str) -> Output {
    cmd.arg("--config")
        .arg(fixture(name))
        .arg("--check-config")
        .output()
        .unwrap()
}

#[test]
fn check_config_prints_resolved_models_groups_and_scheduler_and_exits_zero() {
    let out = check(
        server()
            .env("LLAMA_CPP_DIR", "/opt/llama.cpp")
            .env("LLAMA_SWAP_API_KEY", "sk-never-print-me"),
        "example.yaml",
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for expected in [
        "configuration OK:",
        "scheduler: fifo (priority queue, drain fence on)",
        "models (3):",
        "  qwen3-14b\n    port:        10003\n    proxy:       http://localhost:10003\n",
        "    aliases:     chat, gpt-4o-mini\n    priority:    10 (floor; X-Priority may raise it)\n    ttl:         600s\n    concurrency: 10\n",
        "    concurrency: 4\n",
        "groups (2):",
        "  llm: swap=true exclusive=false persistent=false members=[qwen3-14b, qwen2.5-coder-7b]",
        "preload: nomic-embed",
    ] {
        assert!(
            stdout.contains(expected),
            "missing {expected:?} in:\n{stdout}"
        );
    }
    assert!(stderr.is_empty(), "{stderr}");
    assert!(!stdout.contains("sk-never-print-me"));
}

#[test]
fn check_config_prints_path_tagged_errors_and_exits_one() {
    let out = check(&mut server(), "errors/negative_ttl.yaml");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("negative_ttl.yaml: models.qwen.ttl: must be >= 0, got -5"),
        "{stderr}"
    );
    assert!(
        stderr.contains("configuration invalid: 1 problem"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(text(&out.stdout).is_empty());
}

#[test]
fn check_config_names_a_missing_environment_variable() {
    let out = check(&mut server(), "example.yaml");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("apiKeys[0]: environment variable LLAMA_SWAP_API_KEY is not set"),
        "{stderr}"
    );
    assert!(stderr.contains("LLAMA_CPP_DIR"), "{stderr}");
}

#[test]
fn check_config_prints_warnings_with_file_and_path_and_still_exits_zero() {
    let out = check(&mut server(), "warnings.yaml");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: ")
            && stderr.contains("warnings.yaml: models.a.cmdd: unknown key, ignored"),
        "{stderr}"
    );
    assert!(
        stderr.contains("warnings.yaml: logRequests: has no effect"),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("scheduler: serial"));
}

#[test]
fn unreadable_and_malformed_files_fail_cleanly() {
    for name in ["does-not-exist.yaml", "errors/not_yaml.yaml"] {
        let out = check(&mut server(), name);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{name}: {stderr}");
        assert!(stderr.starts_with("error: "), "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: {stderr}");
        assert!(!stderr.contains("panicked"), "{name}: {stderr}");
    }
}

#[test]
fn version_prints_the_crate_version_in_llama_swaps_words_with_one_or_two_dashes() {
    let line = llama_swap_server::version::line();
    assert!(
        line.starts_with(&format!("version: {} (", env!("CARGO_PKG_VERSION")))
            && line.contains("), built at "),
        "{line}"
    );
    for flag in ["--version", "-version", "-version=true"] {
        let out = server().arg(flag).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}");
        assert_eq!(
            text(&out.stdout).trim(),
            llama_swap_server::version::line(),
            "{flag}"
        );
    }
}

#[test]
fn check_config_reads_a_config_dir_and_reports_a_duplicate_model_by_file() {
    let dir = tempfile::tempdir().unwrap();
    let model = |id: &str| {
        format!("models:\n  {id}:\n    cmd: echo {id}\n    proxy: http://127.0.0.1:9999\n")
    };
    std::fs::write(dir.path().join("a.yaml"), model("alpha")).unwrap();
    std::fs::write(dir.path().join("b.yml"), model("beta")).unwrap();
    let out = server()
        .args(["-config-dir"])
        .arg(dir.path())
        .arg("-check-config")
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("models (2):"), "{stdout}");
    assert!(
        stdout.contains("  alpha\n") && stdout.contains("  beta\n"),
        "{stdout}"
    );

    std::fs::write(dir.path().join("c.yaml"), model("alpha")).unwrap();
    let out = server()
        .arg("--config-dir")
        .arg(dir.path())
        .arg("--check-config")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("c.yaml: models.alpha: \"alpha\" is already defined"),
        "{stderr}"
    );
}

#[test]
fn neither_config_nor_config_dir_is_a_command_line_error() {
    let out = server().arg("--check-config").output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("--config-dir"), "{stderr}");
}

/// `--check-config` of `yaml` with extra arguments.
fn check_yaml(yaml: &str, extra: &[&str]) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, yaml).unwrap();
    server()
        .arg("--config")
        .arg(&file)
        .arg("--check-config")
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn check_config_refuses_a_model_whose_proxy_is_the_listen_address_naming_it() {
    let yaml = "models:\n  fine:\n    cmd: llama-server --port 9001\n    proxy: http://127.0.0.1:9001\n  \
                looper:\n    cmd: llama-server --port 9000\n    proxy: http://localhost:9000\n";
    let out = check_yaml(yaml, &["--listen", "127.0.0.1:9000"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: model looper: proxy http://localhost:9000 is this server's own listen address (127.0.0.1:9000)"),
        "{stderr}"
    );
    assert!(!stderr.contains("model fine"), "{stderr}");

    // Another listen address (as a changed -listen gives) is fine, and `:PORT`
    // (every interface) includes loopback.
    let out = check_yaml(yaml, &["--listen", "127.0.0.1:9002"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = check_yaml(yaml, &["-listen", ":9001"]);
    assert!(
        text(&out.stderr).contains("error: model fine:"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn check_config_names_start_port_when_the_looping_port_was_allocated() {
    let yaml = "startPort: 8080\nmodels:\n  m:\n    cmd: llama-server --port ${PORT}\n";
    // Without -listen, --check-config does not know where the server will listen.
    let out = check_yaml(yaml, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = check_yaml(yaml, &["-listen", ":8080"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("error: model m: proxy http://localhost:8080"),
        "{stderr}"
    );
    assert!(stderr.contains("allocated from startPort 8080"), "{stderr}");
}

#[test]
fn a_store_path_that_is_not_a_history_database_stops_the_start_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.txt");
    std::fs::write(
        &db,
        "not a database, and not to be overwritten\n".repeat(200),
    )
    .unwrap();
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!("models: {{}}\nstore:\n  path: {}\n", db.display()),
    )
    .unwrap();
    let out = server()
        .arg("--config")
        .arg(&config)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("error: ") && l.contains(db.to_str().unwrap())),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(&db).unwrap(),
        "not a database, and not to be overwritten\n".repeat(200),
        "the file was changed"
    );
}
