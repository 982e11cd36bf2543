//! The proxy's own log as llama-swap keeps it, run against the binary:
//! `/logs` and `/logs/stream` carry it beside the upstreams' output,
//! `/logs/stream/proxy` and `/logs/stream/upstream` split them, a bad id is
//! 400; `logToStdout` picks what reaches stdout, `logTimeFormat` stamps the
//! lines, and the level is coloured only on a terminal.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;

use futures_util::StreamExt;
use serde_json::Value;

use crate::cli::Server;
use crate::support::{LIMIT, config_yaml, free_port, model};

fn config(dir: &Path, extra: &str) -> std::path::PathBuf {
    let file = dir.join("config.yaml");
    let mut yaml = config_yaml(&[(model("a", ""), free_port())]);
    yaml.push_str(extra);
    std::fs::write(&file, yaml).unwrap();
    file
}

/// Reads a streaming text response until it holds `needle`.
async fn read_until(response: reqwest::Response, needle: &str) -> String {
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    while !text.contains(needle) {
        let chunk = tokio::time::timeout(LIMIT, stream.next())
            .await
            .unwrap_or_else(|_| panic!("no {needle:?} in {text:?}"))
            .expect("the stream ended")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    text
}

#[tokio::test]
async fn logs_carry_the_proxy_log_beside_upstream_output_and_split_by_id() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&config(dir.path(), ""), &[]).await;
    let http = reqwest::Client::new();
    let live_proxy = http
        .get(format!("{}/logs/stream/proxy?no-history", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(live_proxy.status(), 200);
    assert_eq!(server.chat("a").await, 200);

    // The request's access log line arrives live on the proxy's stream.
    let text = read_until(live_proxy, "path=/v1/chat/completions").await;
    assert!(text.contains("[INFO] request"), "{text}");
    assert!(
        !text.contains("[a] "),
        "upstream output on the proxy stream: {text}"
    );

    let all = http
        .get(format!("{}/logs", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(all.contains("[INFO] "), "no proxy lines in /logs: {all}");
    assert!(
        all.contains("[a] listening on"),
        "no upstream output in /logs: {all}"
    );

    let upstream = http
        .get(format!("{}/logs/stream/upstream", server.base))
        .send()
        .await
        .unwrap();
    let text = read_until(upstream, "[a] listening on").await;
    assert!(
        !text.contains("[INFO]"),
        "proxy lines on the upstream stream: {text}"
    );
    let combined = http
        .get(format!("{}/logs/stream", server.base))
        .send()
        .await
        .unwrap();
    let text = read_until(combined, "[a] listening on").await;
    assert!(text.contains("[INFO] "), "{text}");

    let bad = http
        .get(format!("{}/logs/stream/nobody", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: Value = bad.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_log");

    let html = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/logs", server.base))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap();
    assert_eq!(html.status(), 302);
    assert_eq!(html.headers()["location"], "/ui/");
    server.terminate().await;
}

#[tokio::test]
async fn keyless_requests_with_huge_paths_are_logged_cut_and_the_history_stays_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&config(dir.path(), "apiKeys: [sk-test]\n"), &[]).await;
    let http = reqwest::Client::new();
    let path = format!("/v1/{}", "p".repeat(60 * 1024));
    for _ in 0..40 {
        let refused = http
            .get(format!("{}{path}", server.base))
            .send()
            .await
            .unwrap();
        assert_eq!(refused.status(), 401);
    }
    let all = http
        .get(format!("{}/logs/stream/proxy", server.base))
        .bearer_auth("sk-test")
        .send()
        .await
        .unwrap();
    // The history, then the live access line of this very request.
    let text = read_until(all, "path=/logs/stream/proxy").await;
    let refused: Vec<&str> = text.lines().filter(|l| l.contains("status=401")).collect();
    assert!(!refused.is_empty(), "{text}");
    for line in &refused {
        assert!(line.len() < 2048, "a line of {} bytes", line.len());
        assert!(line.contains(" more bytes] "), "{line}");
    }
    // 40 requests with 60 KiB paths: 2.4 MB if they were kept whole.
    assert!(text.len() < 1024 * 1024, "{} bytes of history", text.len());
    server.terminate().await;
}

/// What reaches stdout after one chat request, for a `logToStdout` value.
async fn stdout_for(log_to_stdout: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let extra = format!("logToStdout: {log_to_stdout}\n");
    let server = Server::start(&config(dir.path(), &extra), &[]).await;
    assert_eq!(server.chat("a").await, 200);
    server.terminate_with_output().await
}

fn has_proxy_line(lines: &[String]) -> bool {
    lines.iter().any(|l| l.starts_with("[INFO] "))
}

fn has_upstream_line(lines: &[String]) -> bool {
    lines.iter().any(|l| l.starts_with("[a] "))
}

#[tokio::test]
async fn log_to_stdout_picks_the_proxy_log_the_upstreams_both_or_none() {
    let proxy = stdout_for("proxy").await;
    assert!(
        has_proxy_line(&proxy) && !has_upstream_line(&proxy),
        "{proxy:?}"
    );
    let upstream = stdout_for("upstream").await;
    assert!(
        !has_proxy_line(&upstream) && has_upstream_line(&upstream),
        "{upstream:?}"
    );
    let both = stdout_for("both").await;
    assert!(
        has_proxy_line(&both) && has_upstream_line(&both),
        "{both:?}"
    );
    let none = stdout_for("none").await;
    assert!(none.is_empty(), "{none:?}");
}

#[tokio::test]
async fn log_time_format_stamps_each_proxy_line_and_pipes_get_no_colour() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&config(dir.path(), "logTimeFormat: rfc3339\n"), &[]).await;
    assert_eq!(server.chat("a").await, 200);
    let lines = server.terminate_with_output().await;
    let proxy: Vec<&String> = lines.iter().filter(|l| l.contains("[INFO] ")).collect();
    assert!(!proxy.is_empty(), "{lines:?}");
    for line in proxy {
        let (stamp, _) = line.split_once(" [INFO] ").unwrap();
        // 2006-01-02T15:04:05Z07:00
        assert_eq!(stamp.as_bytes()[4], b'-', "{line}");
        assert_eq!(stamp.as_bytes()[10], b'T', "{line}");
        assert!(
            stamp.ends_with('Z') || stamp[19..].starts_with(['+', '-']),
            "{line}"
        );
    }
    assert!(
        lines.iter().all(|l| !l.contains('\u{1b}')),
        "colour in a pipe: {lines:?}"
    );
}

#[tokio::test]
async fn output_to_a_terminal_colours_the_level() {
    let pty = nix::pty::openpty(None, None).unwrap();
    let (master, slave): (OwnedFd, OwnedFd) = (pty.master, pty.slave);
    let dir = tempfile::tempdir().unwrap();
    let file = config(dir.path(), "");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_llama-swap-server"))
        .arg("--config")
        .arg(&file)
        .args(["--listen", "127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .stdout(Stdio::from(slave))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The startup hint is an INFO line; read until its coloured level shows.
    let reader = tokio::task::spawn_blocking(move || {
        let mut master = std::fs::File::from(master);
        let mut seen = Vec::new();
        let mut buf = [0_u8; 4096];
        while !String::from_utf8_lossy(&seen).contains("\u{1b}[32mINFO\u{1b}[0m") {
            match master.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    let seen = tokio::time::timeout(LIMIT, reader).await;
    let _ = child.kill();
    let _ = child.wait();
    let seen = seen.expect("no coloured line within the limit").unwrap();
    assert!(seen.contains("\u{1b}[32mINFO\u{1b}[0m"), "{seen:?}");
}

/// What `/logs` holds and what reaches stdout (after a failed preload, a
/// chat and a polled `/health`) for a `logLevel` value.
async fn proxy_lines_at(log_level: &str) -> (String, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    let mut yaml = config_yaml(&[(model("a", ""), free_port())]);
    // A preloaded model that cannot start gives a warning at run time.
    yaml.push_str("  broken:\n    cmd: /bin/false\n    proxy: http://127.0.0.1:9\n");
    yaml.push_str(&format!(
        "logToStdout: proxy\nlogLevel: {log_level}\nhooks:\n  on_startup:\n    preload: [broken]\n"
    ));
    std::fs::write(&file, yaml).unwrap();
    let mut server = Server::start(&file, &[]).await;
    let mut stdout = vec![server.wait_log("preload failed").await];
    assert_eq!(server.chat("a").await, 200);
    let http = reqwest::Client::new();
    let health = http
        .get(format!("{}/health", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let history = http
        .get(format!("{}/logs", server.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    stdout.extend(server.terminate_with_output().await);
    (history, stdout)
}

#[tokio::test]
async fn log_level_sets_which_proxy_lines_are_kept_and_printed() {
    let (history, stdout) = proxy_lines_at("warn").await;
    let printed = stdout.join("\n");
    for text in [&history, &printed] {
        assert!(
            text.contains("[WARN] preload failed"),
            "the warning is kept: {text}"
        );
        assert!(
            !text.contains("[INFO] ") && !text.contains("[DEBUG] "),
            "below warn is dropped: {text}"
        );
    }

    let (history, stdout) = proxy_lines_at("debug").await;
    let printed = stdout.join("\n");
    for text in [&history, &printed] {
        // The polled /health is logged at debug level only.
        assert!(
            text.lines()
                .any(|l| l.contains("[DEBUG] request") && l.contains("path=/health")),
            "{text}"
        );
        assert!(text.contains("[INFO] request"), "{text}");
    }
}
