//! What recording a request's activity costs on the proxy path: scanning a
//! streamed answer for usage as its frames pass, and one request's whole
//! record (begin, grant, answer, body end) including the in-flight table and
//! the finished ring.
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
}

criterion_group!(benches, scan, record);
criterion_main!(benches);
