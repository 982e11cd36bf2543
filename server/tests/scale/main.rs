//! Memory is linear in the number of models (issue 31 #3): counted, not timed.
//!
//! The scheduler once kept, for every model, the list of every model it
//! cannot run beside (all of them, without groups) and the reverse: 50 000
//! models made 5 billion entries, and the server grew by gigabytes without
//! ever answering. Here the scheduler of N and of 4 N models (every model
//! conflicting with every other, requests waiting so that the drain fence is
//! in play) is built in a fresh process each, which reports how much its
//! resident set grew. Per model, a linear structure costs the same at both
//! sizes; an N² one costs four times as much at 4 N. Figures for a whole
//! server (RSS per model at 1 000, 5 000 and 50 000 models) are
//! `scripts/scale`'s, in BENCHMARKS.md.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;

use llama_swap_server::testing::priority::Priority;
use llama_swap_server::testing::scheduler::{ModelSettings, Scheduler, SchedulerSettings, Tick};

/// The child's environment variable: how many models to build.
const MODELS_VAR: &str = "SCALE_TEST_MODELS";
const CHILD: &str = "scheduler_rss_growth_child";

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// N models in the default group (each evicts every other), one ready and
/// serving, a waiter queued behind it for another model at a higher
/// priority, and one more request placed while it waits (the fence is asked).
fn scheduler_with_waiters(n: usize) -> Scheduler {
    let models = (0..n)
        .map(|i| ModelSettings::new(format!("model-{i:06}")))
        .collect();
    let mut s = Scheduler::new(&SchedulerSettings::new(models)).unwrap();
    let mut out = Vec::new();
    let first = s
        .submit(Tick::ZERO, "model-000000", Priority::new(0), &mut out)
        .unwrap();
    s.swap_done(Tick::ZERO, "model-000000", Ok(()), &mut out);
    s.submit(Tick::ZERO, "model-000001", Priority::new(5), &mut out)
        .unwrap();
    s.submit(Tick::ZERO, "model-000002", Priority::new(0), &mut out)
        .unwrap();
    assert_eq!(s.queue_len(), 2, "both wait behind the request in flight");
    s.serve_done(Tick::ZERO, first.id, &mut out);
    s
}

/// Run by [`scheduler_memory_is_linear_in_models`] in a process of its own:
/// prints how many KiB the resident set grew while building the scheduler.
#[test]
#[ignore = "run by scheduler_memory_is_linear_in_models in a process of its own"]
fn scheduler_rss_growth_child() {
    let Ok(n) = std::env::var(MODELS_VAR) else {
        return;
    };
    let n: usize = n.parse().unwrap();
    let before = rss_kib();
    let s = scheduler_with_waiters(n);
    let grown = rss_kib().saturating_sub(before);
    assert!(s.pending() > 0);
    println!("rss-growth-kib={grown}");
}

/// The resident-set growth (bytes) of building the scheduler of `n` models,
/// measured in a fresh process.
fn growth(n: usize) -> u64 {
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            CHILD,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(MODELS_VAR, n.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let kib: u64 = stdout
        .lines()
        .find_map(|l| l.split("rss-growth-kib=").nth(1))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no figure from the child: {stdout}"))
        .parse()
        .unwrap();
    kib * 1024
}

#[test]
fn scheduler_memory_is_linear_in_models() {
    const N: usize = 2_000;
    let small = growth(N) as f64 / N as f64;
    let large = growth(4 * N) as f64 / (4 * N) as f64;
    eprintln!(
        "scheduler: {small:.0} B/model at {N} models, {large:.0} B/model at {} models",
        4 * N
    );
    // An N² term makes the second four times the first; a page of slack per
    // model at the small size absorbs the allocator's granularity.
    assert!(
        large <= 2.0 * small + 512.0,
        "the scheduler's memory per model grows with the model count: {small:.0} B at {N}, {large:.0} B at {}",
        4 * N
    );
}
