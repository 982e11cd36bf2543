//! Slow and aborted request bodies: a body that does not arrive in time is
//! answered 408 and its connection closed (also on `/upstream`), an aborted
//! upload counts as cancelled, and (benchmark, ignored) what a slow body costs.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{Harness, LIMIT, model};

/// Opens a connection and sends a request head declaring `length` body bytes,
/// then `sent` of them.
async fn partial_request(h: &Harness, path: &str, length: usize, sent: &[u8]) -> TcpStream {
    let addr = h.base.strip_prefix("http://").unwrap();
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(sent).await.unwrap();
    stream
}

/// Reads until the server closes the connection.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    tokio::time::timeout(LIMIT, stream.read_to_end(&mut out))
        .await
        .expect("the server neither answered nor closed the connection")
        .unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_is_answered_408_and_the_connection_closed() {
    let h = Harness::start(&[model("a", "")], "requestBodyTimeout: 1\n").await;
    let mut stream = partial_request(&h, "/v1/chat/completions", 100, b"{\"model\":").await;
    let answer = read_to_close(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"code\":\"request_timeout\""), "{answer}");
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );

    // A body streamed to /upstream is cut at the same deadline.
    let mut stream = partial_request(&h, "/upstream/a/v1/chat/completions", 100, b"{").await;
    let answer = read_to_close(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    // Nothing was left running for the request.
    assert!(h.queue().await.is_empty());
    h.shutdown().await;
}

#[tokio::test]
async fn an_aborted_upload_is_counted_as_cancelled_not_as_an_internal_error() {
    let h = Harness::start(&[model("a", "")], "").await;
    let stream = partial_request(&h, "/v1/chat/completions", 1000, b"{\"model\":\"a\"").await;
    drop(stream);
    // The cancelled request is recorded in the activity log, which is an event.
    h.wait_for(|h| async move {
        let metrics = h.metrics().await;
        assert!(!metrics.contains("internal_error"), "{metrics}");
        metrics
            .contains("llamaswap_requests_total{outcome=\"cancelled\",code=\"\",band=\"normal\"} 1")
            .then_some(())
    })
    .await;
    h.shutdown().await;
}

/// Resident set size of this process (the server runs in it), in bytes.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Benchmark: 50 connections each declare a 1 MB body and send it one byte per
/// TCP segment. Prints what the server holds per connection and per byte sent.
/// `cargo nextest run -p llama-swap-server --test http --run-ignored only --no-capture slow_body_memory`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: prints memory figures"]
async fn slow_body_memory() {
    const CONNECTIONS: usize = 50;
    const PHASE_BYTES: usize = 200;
    let h = Harness::start(&[model("a", "")], "").await;
    let before = rss_bytes();
    let mut streams = Vec::new();
    for _ in 0..CONNECTIONS {
        let stream = partial_request(&h, "/v1/chat/completions", 1_000_000, b"").await;
        stream.set_nodelay(true).unwrap();
        streams.push(stream);
    }
    // Paced, so that each byte is its own segment and its own read.
    let send_phase = |mut streams: Vec<TcpStream>| async move {
        let mut tasks = tokio::task::JoinSet::new();
        for mut stream in streams.drain(..) {
            tasks.spawn(async move {
                for _ in 0..PHASE_BYTES {
                    stream.write_all(b" ").await.unwrap();
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                stream
            });
        }
        tasks.join_all().await
    };
    let streams = send_phase(streams).await;
    let after_first = rss_bytes();
    let streams = send_phase(streams).await;
    let after_second = rss_bytes();
    let sent = (CONNECTIONS * PHASE_BYTES) as f64;
    println!(
        "slow bodies: {CONNECTIONS} connections, {PHASE_BYTES} bytes each per phase: \
         RSS +{:.1} KiB after the first phase ({:.0} B per connection), \
         +{:.1} KiB over the second ({:.1} B per byte sent)",
        (after_first.saturating_sub(before)) as f64 / 1024.0,
        after_first.saturating_sub(before) as f64 / CONNECTIONS as f64,
        (after_second.saturating_sub(after_first)) as f64 / 1024.0,
        after_second.saturating_sub(after_first) as f64 / sent,
    );
    drop(streams);
    h.shutdown().await;
}
