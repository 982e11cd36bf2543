//! Scheduler cost with a deep queue (docs/DESIGN.md section 7 budget: with 10 000 waiting,
//! admitting one more ≤ 50 µs median; draining all after one swap ≤ 20 ms).
//!
//! Run: `cargo bench -p llama-swap-server --bench scheduler`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use llama_swap_server::testing::priority::Priority;
use llama_swap_server::testing::scheduler::{
    Effect, ModelSettings, RequestId, Scheduler, SchedulerSettings, Tick,
};

/// Models a and b in the default group (each evicts the other), a ready and serving
/// one request, and `waiting` requests for b queued behind it with mixed priorities.
/// Returns the scheduler and the id of the request serving on a.
fn loaded(waiting: usize) -> (Scheduler, RequestId) {
    let models = ["a", "b"]
        .iter()
        .map(|id| {
            let mut m = ModelSettings::new(*id);
            m.concurrency_limit = waiting + 16;
            m
        })
        .collect();
    let mut s = Scheduler::new(&SchedulerSettings::new(models)).unwrap();
    let mut out = Vec::new();
    let first = s
        .submit(Tick::ZERO, "a", Priority::new(0), &mut out)
        .unwrap()
        .id;
    s.swap_done(Tick::ZERO, "a", Ok(()), &mut out);
    s.serve_done(Tick::ZERO, first, &mut out);
    let serving = s
        .submit(Tick::ZERO, "a", Priority::new(0), &mut out)
        .unwrap()
        .id;
    for i in 0..waiting {
        // Priorities -10..=9, spread so that insertions land all over the queue.
        let priority = ((i * 7919) % 20) as i32 - 10;
        s.submit(
            Tick::from_millis(i as u64),
            "b",
            Priority::new(priority),
            &mut out,
        )
        .unwrap();
    }
    assert_eq!(s.queue_len(), waiting);
    (s, serving)
}

fn admit(c: &mut Criterion) {
    let mut group = c.benchmark_group("admit_one");
    for waiting in [1_000usize, 10_000] {
        for (label, priority) in [("lowest", -10), ("middle", 0), ("highest", 10)] {
            let (mut s, _serving) = loaded(waiting);
            let mut out: Vec<Effect> = Vec::with_capacity(waiting + 16);
            group.bench_function(BenchmarkId::new(label, waiting), |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        out.clear();
                        let start = Instant::now();
                        let id = s
                            .submit(Tick::ZERO, "b", Priority::new(priority), &mut out)
                            .unwrap()
                            .id;
                        black_box(&out);
                        total += start.elapsed();
                        // Restore the queue, untimed.
                        out.clear();
                        s.cancel(Tick::ZERO, id, &mut out);
                    }
                    total
                });
            });
        }
    }
    group.finish();
}

fn drain(c: &mut Criterion) {
    let mut group = c.benchmark_group("drain_after_swap");
    group.sample_size(20);
    for waiting in [1_000usize, 10_000] {
        group.bench_function(BenchmarkId::from_parameter(waiting), |b| {
            b.iter_batched(
                || (loaded(waiting), Vec::with_capacity(3 * waiting)),
                |((mut s, serving), mut out)| {
                    // a's last request ends: b starts and every waiter joins it ...
                    s.serve_done(Tick::ZERO, serving, &mut out);
                    // ... b is ready: every waiter is granted.
                    s.swap_done(Tick::ZERO, "b", Ok(()), &mut out);
                    debug_assert_eq!(s.in_flight("b"), waiting);
                    (s, out)
                },
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

criterion_group!(benches, admit, drain);
criterion_main!(benches);
