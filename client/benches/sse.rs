//! Cost of decoding a chat stream: SSE framing alone, and framing plus typed chunk
//! parsing, for a 1 000-frame body arriving in network-sized pieces.
//!
//! Run: `cargo bench -p llama-swap-client --bench sse`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use llama_swap_client::ChatChunk;
use llama_swap_client::sse::SseDecoder;

const FRAMES: usize = 1000;
const PIECE: usize = 1460;

fn body() -> Vec<u8> {
    let mut out = String::new();
    for i in 0..FRAMES {
        out.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"qwen\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"token {i} é\"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

fn decode(body: &[u8], parse: bool) -> usize {
    let mut decoder = SseDecoder::new(1 << 20);
    let mut seen = 0;
    for piece in body.chunks(PIECE) {
        decoder.push(piece);
        while let Some(event) = decoder.next_event().unwrap() {
            if parse && event.data != "[DONE]" {
                let chunk: ChatChunk = serde_json::from_str(&event.data).unwrap();
                seen += chunk.choices.len();
            } else {
                seen += 1;
            }
        }
    }
    seen
}

fn bench(c: &mut Criterion) {
    let body = body();
    let mut group = c.benchmark_group("sse");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("frame_only", |b| b.iter(|| decode(black_box(&body), false)));
    group.bench_function("frame_and_parse", |b| {
        b.iter(|| decode(black_box(&body), true))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
