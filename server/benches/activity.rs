//! What recording a request's activity costs on the proxy path: scanning a
//! streamed answer for usage as its frames pass, and one request's whole
//! record (begin, grant, answer, body end) including the in-flight table and
//! the finished ring; then the same with captures on (the default 5 MB buffer:
//! the request's headers and body and the response's copied into its
//! recorder, handed to the capture thread at the end).
//!
//! Run: `cargo bench -p llama-swap-server --bench activity`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use bytes::Bytes;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use http::{HeaderMap, HeaderValue, StatusCode, header};
use http_body_util::{BodyExt, Full};
use llama_swap_server::testing::activity::{Activity, MeteredBody, UsageScanner};
use llama_swap_server::testing::capture::Captures;
use llama_swap_server::testing::priority::Priority;

/// A chat stream of `tokens` content frames, then the usage frame and `[DONE]`,
/// one frame per chunk as an upstream sends them.
fn chat_stream(tokens: usize) -> Vec<Bytes> {
    let mut frames: Vec<Bytes> = (0..tokens)
        .map(|i| {
            Bytes::from(format!(
                "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"tok{i} \"}},\"finish_reason\":null}}]}}\n\n"
            ))
        })
        .collect();
    frames.push(Bytes::from_static(
        b"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":500,\"total_tokens\":512}}\n\n",
    ));
    frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    frames
}

fn scan(c: &mut Criterion) {
    let frames = chat_stream(500);
    let bytes: usize = frames.iter().map(Bytes::len).sum();
    let mut group = c.benchmark_group("usage_scan");
    group.throughput(Throughput::Bytes(bytes as u64));
    group.bench_function("500_frame_stream", |b| {
        b.iter(|| {
            let mut scanner = UsageScanner::new();
            for frame in &frames {
                scanner.feed(black_box(frame));
            }
            black_box(scanner.finish())
        });
    });
    group.finish();
}

fn record(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let activity = Arc::new(Activity::default());
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let body = Bytes::from_static(
        br#"{"id":"x","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":3,"completion_tokens":1}}"#,
    );
    c.bench_function("activity_record_one_request", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut tracked =
                    activity.begin("model", "/v1/chat/completions", "req-id", Priority::new(10));
                tracked.admitted(1, 10);
                tracked.granted();
                tracked.answered(StatusCode::OK, false);
                let metered = MeteredBody::new(Full::new(body.clone()), &headers, tracked);
                black_box(metered.collect().await.unwrap());
            });
        });
    });
    // A client's request and an upstream's answer as they usually come.
    let request_headers = header_map(&[
        ("host", "127.0.0.1:8080"),
        ("user-agent", "OpenAI/Python 1.99.0"),
        ("accept", "application/json"),
        ("content-type", "application/json"),
        ("content-length", "60"),
        ("authorization", "Bearer sk-not-a-real-key"),
        ("x-priority", "10"),
    ]);
    let request_body =
        Bytes::from_static(br#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#);
    let mut answer_headers = headers.clone();
    answer_headers.extend(header_map(&[
        ("content-length", "104"),
        ("date", "Thu, 03 Dec 2026 06:40:00 GMT"),
        ("server", "llama.cpp"),
        ("access-control-allow-origin", "*"),
    ]));
    let captured = Arc::new(Activity::default().with_captures(Captures::new(5 * 1024 * 1024)));
    c.bench_function("activity_record_one_request_captured", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut tracked =
                    captured.begin("model", "/v1/chat/completions", "req-id", Priority::new(10));
                tracked.capture_request(&request_headers, Some(&request_body));
                tracked.admitted(1, 10);
                tracked.granted();
                tracked.answered(StatusCode::OK, false);
                let metered = MeteredBody::new(Full::new(body.clone()), &answer_headers, tracked);
                black_box(metered.collect().await.unwrap());
            });
        });
    });
}

fn header_map(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
    pairs
        .iter()
        .map(|(name, value)| {
            (
                header::HeaderName::from_static(name),
                HeaderValue::from_static(value),
            )
        })
        .collect()
}

criterion_group!(benches, scan, record);
criterion_main!(benches);
