//! The benchmark's floor reference, `bare-hyper-proxy` (benches/budget/bare_proxy.rs):
//! it must forward faithfully, or the figures measured through it would compare the
//! server against a proxy that does less than proxying.

use std::net::SocketAddr;
use std::process::Stdio;

use llama_swap_suite::harness::{LIMIT, free_port};
use mockswap::MockSwap;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::process::{Child, Command};

const BIN: &str = env!("CARGO_BIN_EXE_bare-hyper-proxy");

/// Starts the proxy in front of `upstream` and returns it with the address it announced.
async fn start(upstream: SocketAddr) -> (Child, SocketAddr) {
    let mut child = Command::new(BIN)
        .args(["--listen", "127.0.0.1:0", "--upstream"])
        .arg(upstream.to_string())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("bare-hyper-proxy starts");
    let stdout = child.stdout.take().expect("stdout is piped");
    let line = tokio::time::timeout(LIMIT, BufReader::new(stdout).lines().next_line())
        .await
        .expect("bare-hyper-proxy announces its address within the limit")
        .expect("stdout is readable")
        .expect("bare-hyper-proxy printed a line");
    let addr = line
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .parse()
        .expect("the announced address parses");
    (child, addr)
}

/// SIGTERM, then the exit status within the limit.
async fn terminate(mut child: Child) -> std::process::ExitStatus {
    let pid = child.id().expect("still running");
    kill(
        Pid::from_raw(i32::try_from(pid).expect("pid fits")),
        Signal::SIGTERM,
    )
    .expect("SIGTERM delivered");
    tokio::time::timeout(LIMIT, child.wait())
        .await
        .expect("exits on SIGTERM within the limit")
        .expect("reaped")
}

#[tokio::test]
async fn bare_proxy_forwards_method_path_query_headers_and_body_and_exits_on_sigterm() {
    let mock = MockSwap::start().await;
    let (child, addr) = start(mock.address()).await;
    let body = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/chat/completions?trace=1"))
        .header("content-type", "application/json")
        .header("x-test", "kept")
        .body(body)
        .send()
        .await
        .expect("the proxy answers");
    assert_eq!(response.status(), 200);
    let answer: serde_json::Value = response.json().await.expect("a JSON answer");
    assert_eq!(answer["choices"][0]["message"]["content"], "[m] hi");

    let requests = mock.requests();
    assert_eq!(requests.len(), 1, "{}", mock.requests_table());
    let seen = &requests[0];
    assert_eq!(seen.method, http::Method::POST);
    assert_eq!(seen.path, "/v1/chat/completions");
    assert_eq!(seen.query.as_deref(), Some("trace=1"));
    assert_eq!(seen.body.as_ref(), body.as_bytes());
    assert_eq!(seen.headers["x-test"], "kept");
    assert_eq!(seen.headers["content-type"], "application/json");
    // The client's Host named the proxy; the upstream sees its own address.
    assert_eq!(seen.headers["host"], mock.address().to_string());

    assert!(terminate(child).await.success());
}

#[tokio::test]
async fn bare_proxy_streams_an_event_stream_through() {
    let mock = MockSwap::start().await;
    let (child, addr) = start(mock.address()).await;
    let response = reqwest::Client::new()
        .post(format!("http://{addr}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#)
        .send()
        .await
        .expect("the proxy answers");
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.expect("the stream ends");
    assert!(text.contains(r#""content":"[m]""#), "{text}");
    assert!(text.trim_end().ends_with("data: [DONE]"), "{text}");
    assert!(terminate(child).await.success());
}

#[tokio::test]
async fn bare_proxy_answers_502_when_the_upstream_is_down() {
    let nothing: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("an address");
    let (child, addr) = start(nothing).await;
    let response = reqwest::get(format!("http://{addr}/health"))
        .await
        .expect("the proxy answers");
    assert_eq!(response.status(), 502);
    assert!(terminate(child).await.success());
}

#[tokio::test]
async fn bare_proxy_names_the_address_it_cannot_bind() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("bound address");
    let mut child = Command::new(BIN)
        .args(["--listen", &addr.to_string(), "--upstream", "127.0.0.1:9"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("bare-hyper-proxy starts");
    let mut stderr = String::new();
    let mut pipe = child.stderr.take().expect("stderr is piped");
    tokio::time::timeout(LIMIT, pipe.read_to_string(&mut stderr))
        .await
        .expect("stderr closes within the limit")
        .expect("stderr is readable");
    let status = tokio::time::timeout(LIMIT, child.wait())
        .await
        .expect("exits within the limit")
        .expect("reaped");
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {addr}")),
        "{stderr}"
    );
}
