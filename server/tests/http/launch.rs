//! llama-swap's launch lines, run against the binary: Go-style single-dash
//! flags, `-listen :PORT` on every interface, `--config-dir` with a reload
//! that watches the directory, and HTTPS with a certificate made in the test
//! (and renewed by a reload).

use std::path::Path;

use nix::sys::signal::Signal;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cli::Server;
use crate::support::{
    LIMIT, ServerEvents, config_yaml, free_port, model, self_signed, tls_connector,
};

async fn model_ids(base: &str) -> Vec<String> {
    let body: serde_json::Value = reqwest::get(format!("{base}/v1/models"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect()
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

/// One mockswap model as a standalone `models:` document.
fn models_file(id: &'static str) -> String {
    config_yaml(&[(model(id, ""), free_port())])
}

#[tokio::test]
async fn llama_swaps_own_launch_line_with_single_dash_flags_serves() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    write(&file, &models_file("a"));
    let file = file.to_str().unwrap();
    // As llama-swap's Docker entrypoint and systemd unit write it.
    let mut server =
        Server::start_args(&["-config", file, "-listen", "127.0.0.1:0", "-watch-config"]).await;
    assert!(
        server.base.starts_with("http://127.0.0.1:"),
        "{}",
        server.base
    );
    assert_eq!(model_ids(&server.base).await, ["a"]);
    server.wait_log("-listen :").await;
    server.terminate().await;

    // `-flag=value` and `--flag value` are read the same way.
    let server = Server::start_args(&[&format!("-config={file}"), "--listen", "127.0.0.1:0"]).await;
    assert_eq!(model_ids(&server.base).await, ["a"]);
    server.terminate().await;
}

#[tokio::test]
async fn listen_colon_port_listens_on_every_interface() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    write(&file, &models_file("a"));
    let port = free_port();
    let mut server = Server::start_args(&[
        "-config",
        file.to_str().unwrap(),
        "-listen",
        &format!(":{port}"),
    ])
    .await;
    let host = server
        .base
        .strip_prefix("http://")
        .and_then(|a| a.rsplit_once(':'))
        .map(|(h, p)| (h.to_owned(), p.to_owned()))
        .unwrap();
    assert!(host.0 == "[::]" || host.0 == "0.0.0.0", "{}", server.base);
    assert_eq!(host.1, port.to_string());
    // Reached over IPv4 loopback although nothing named it.
    assert_eq!(model_ids(&format!("http://127.0.0.1:{port}")).await, ["a"]);
    server.wait_log("reachable by all hosts").await;
    // Beyond this machine with no apiKeys: said at WARN level.
    server.wait_log("[WARN] no apiKeys are configured").await;
    server.terminate().await;
}

#[tokio::test]
async fn without_listen_it_listens_on_port_8080_of_every_interface() {
    use tokio::io::AsyncBufReadExt as _;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    write(&file, &models_file("a"));
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_llama-swap-server"))
        .args(["-config", file.to_str().unwrap()])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(LIMIT, stdout.next_line())
        .await
        .expect("no first line")
        .unwrap();
    match first {
        Some(line) => {
            assert!(
                line == "listening on http://[::]:8080"
                    || line == "listening on http://0.0.0.0:8080",
                "{line}"
            );
            let pid = i32::try_from(child.id().unwrap()).unwrap();
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), Signal::SIGTERM).unwrap();
            let status = tokio::time::timeout(LIMIT, child.wait())
                .await
                .unwrap()
                .unwrap();
            assert!(status.success(), "{status}");
        }
        None => {
            // Something else on this machine holds 8080: the start fails naming it.
            let output = tokio::time::timeout(LIMIT, child.wait_with_output())
                .await
                .unwrap()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(1), "{stderr}");
            assert!(stderr.contains(":8080"), "{stderr}");
        }
    }
}

#[tokio::test]
async fn config_dir_is_merged_after_config_and_watched_for_new_files() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("main.yaml");
    write(&file, &models_file("base"));
    let conf_d = dir.path().join("conf.d");
    std::fs::create_dir(&conf_d).unwrap();
    write(&conf_d.join("10-a.yaml"), &models_file("a"));
    let server = Server::start_args(&[
        "-config",
        file.to_str().unwrap(),
        "-config-dir",
        conf_d.to_str().unwrap(),
        "-listen",
        "127.0.0.1:0",
        "-watch-config",
    ])
    .await;
    assert_eq!(model_ids(&server.base).await, ["a", "base"]);

    // A new file in the directory is a change to the configuration.
    write(&conf_d.join("20-b.yml"), &models_file("b"));
    // The reload retires the instance whose event stream the wait follows;
    // the subscription renews itself on the new one.
    ServerEvents::subscribe(&server.base, None)
        .await
        .until(|| async { (model_ids(&server.base).await == ["a", "b", "base"]).then_some(()) })
        .await;
    server.terminate().await;
}

/// `GET /health` over TLS trusting only `trusted`; the status line and the
/// certificate the server presented.
async fn https_health(addr: &str, trusted: &CertificateDer<'static>) -> (String, Vec<u8>) {
    tokio::time::timeout(LIMIT, https_health_unbounded(addr, trusted))
        .await
        .unwrap_or_else(|_| panic!("GET https://{addr}/health: no answer within {LIMIT:?}"))
}

async fn https_health_unbounded(
    addr: &str,
    trusted: &CertificateDer<'static>,
) -> (String, Vec<u8>) {
    let connector = tls_connector(trusted);
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let presented = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    tls.write_all(b"GET /health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    tls.read_to_string(&mut response).await.unwrap();
    let status = response.lines().next().unwrap_or_default().to_owned();
    assert!(response.ends_with("OK"), "{response}");
    (status, presented)
}

/// The server on HTTPS with a fresh certificate in `dir`: the server, its
/// address, the certificate's path and the certificate.
async fn start_https(dir: &Path) -> (Server, String, std::path::PathBuf, CertificateDer<'static>) {
    let file = dir.join("config.yaml");
    write(&file, &models_file("a"));
    let (cert, key, first) = self_signed(dir);
    let server = Server::start_args(&[
        "-config",
        file.to_str().unwrap(),
        "-listen",
        "127.0.0.1:0",
        "-tls-cert-file",
        cert.to_str().unwrap(),
        "-tls-key-file",
        key.to_str().unwrap(),
    ])
    .await;
    let addr = server.base.strip_prefix("https://").unwrap().to_owned();
    (server, addr, cert, first)
}

#[tokio::test]
async fn tls_flags_serve_https_and_a_reload_rereads_the_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr, _, first) = start_https(dir.path()).await;
    let (status, presented) = https_health(&addr, &first).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(presented, first.to_vec());

    // Renewed on disk, picked up by SIGHUP without a restart.
    let (_, _, second) = self_signed(dir.path());
    server.signal(Signal::SIGHUP);
    server.wait_log("TLS certificate reloaded").await;
    let (status, presented) = https_health(&addr, &second).await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert_eq!(presented, second.to_vec());
    server.terminate().await;
}

#[tokio::test]
async fn a_certificate_that_never_finishes_reading_stalls_neither_serving_nor_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr, cert, first) = start_https(dir.path()).await;
    assert_eq!(https_health(&addr, &first).await.0, "HTTP/1.1 200 OK");

    // Opening a FIFO with no writer blocks until one comes: a read that never ends.
    std::fs::remove_file(&cert).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&cert)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo failed");
    server.signal(Signal::SIGHUP);
    server.wait_log("SIGHUP: reloading").await;
    // Both workers still serve (a runtime thread stuck in the read would
    // take one), with the certificate in use.
    for _ in 0..4 {
        let (status, presented) = https_health(&addr, &first).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(presented, first.to_vec());
    }
    server.terminate().await;
}

#[tokio::test]
async fn one_tls_flag_without_the_other_is_a_command_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.yaml");
    write(&file, &models_file("a"));
    let (cert, key, _) = self_signed(dir.path());
    for (flag, path, missing) in [
        ("-tls-cert-file", &cert, "--tls-key-file"),
        ("-tls-key-file", &key, "--tls-cert-file"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_llama-swap-server"))
            .args([
                "-config",
                file.to_str().unwrap(),
                flag,
                path.to_str().unwrap(),
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(missing), "{stderr}");
    }
}
