//! Priority effectiveness. Every scenario is a fixed trace (arrival offsets, models,
//! classes) run twice on a fresh server: with priorities (`X-Priority: 10` elevated,
//! `-10` low, drain fence on) and as llama-swap behaves (no headers, `drainFence: false`).
//! Upstreams are mockswaps that answer after `SERVICE` and load in `LOAD`; one swap
//! group, so every model change is a swap.
//!
//! Oracles (docs/DESIGN.md sections 2.2 and 7): without preemption an
//! elevated request first in line waits for the residual of the running work it must
//! outlast plus one swap; the budget allows 50 ms more. "One swap" is measured on the
//! same server just before the trace (a swap between two idle models, minus service).

use std::net::SocketAddr;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::http::{Timed, timed_chat};
use crate::procs::Proc;
use crate::report::Row;
use crate::stats::{mean, median};
use crate::{Ctx, Res};

const SECTION: &str = "priority";
const SERVICE: Duration = Duration::from_millis(300);
const LOAD: Duration = Duration::from_millis(200);
const SLACK_MS: f64 = 50.0;

/// With priorities and the fence, or as llama-swap (no headers, no fence).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Priority,
    Fifo,
}

/// Request class in a trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Low,
    Elevated,
}

impl Class {
    fn headers(self, mode: Mode) -> Vec<(&'static str, String)> {
        match (mode, self) {
            (Mode::Fifo, _) => Vec::new(),
            (Mode::Priority, Class::Low) => vec![("x-priority", "-10".to_owned())],
            (Mode::Priority, Class::Elevated) => vec![("x-priority", "10".to_owned())],
        }
    }
}

/// A fresh server for one run of a trace.
struct Bench {
    server: Proc,
    addr: SocketAddr,
    /// One swap between idle models, seconds (the oracle's "one swap").
    swap: f64,
}

impl Bench {
    async fn start(
        ctx: &Ctx,
        dir: &std::path::Path,
        mode: Mode,
        models: &[&str],
        measure_swap: bool,
    ) -> Res<Self> {
        let args = format!(
            "--latency {}ms --load-time {}ms --journal-limit 1000",
            SERVICE.as_millis(),
            LOAD.as_millis()
        );
        let entries: Vec<(&str, String)> = models.iter().map(|m| (*m, args.clone())).collect();
        let extra = match mode {
            Mode::Priority => "",
            Mode::Fifo => {
                "routing:\n  scheduler:\n    settings:\n      fifo:\n        drainFence: false\n"
            }
        };
        let config = crate::procs::server_config(&ctx.bin, extra, &entries)?;
        let (server, addr) = crate::procs::server(&ctx.bin, dir, &config).await?;
        let mut bench = Self {
            server,
            addr,
            swap: 0.0,
        };
        if measure_swap {
            // Load the second model, then swap to the first: that swap is the reference.
            ok(timed_chat(addr, models[1], &[]).await)?;
            let swap = ok(timed_chat(addr, models[0], &[]).await)?;
            bench.swap = swap.secs() - SERVICE.as_secs_f64();
        }
        Ok(bench)
    }
}

fn ok(timed: Timed) -> Res<Timed> {
    if timed.status.is_some_and(|s| s.is_success()) {
        Ok(timed)
    } else {
        Err(format!("request failed: {:?}", timed.status).into())
    }
}

/// One request of a trace: when (after t0), for which model, which class.
#[derive(Debug, Clone)]
struct Arrival {
    at: Duration,
    model: String,
    class: Class,
}

/// Runs an open-loop trace: each arrival on its own connection at its offset from `t0`.
async fn play(
    addr: SocketAddr,
    mode: Mode,
    t0: Instant,
    trace: &[Arrival],
) -> Res<Vec<(Arrival, Timed)>> {
    let mut set = JoinSet::new();
    for (i, arrival) in trace.iter().cloned().enumerate() {
        set.spawn(async move {
            tokio::time::sleep_until(t0 + arrival.at).await;
            let timed = timed_chat(addr, &arrival.model, &arrival.class.headers(mode)).await;
            (i, arrival, timed)
        });
    }
    let mut out = Vec::with_capacity(trace.len());
    while let Some(joined) = set.join_next().await {
        out.push(joined?);
    }
    out.sort_by_key(|(i, _, _)| *i);
    Ok(out.into_iter().map(|(_, a, t)| (a, t)).collect())
}

fn wait_of(timed: &Timed) -> f64 {
    timed.secs() - SERVICE.as_secs_f64()
}

/// Figures of one run of a "one elevated request" scenario, seconds.
struct ElevatedRun {
    wait: f64,
    /// Residual of the running work the elevated request must outlast, plus one swap.
    bound: f64,
    failed: usize,
}

/// A: one running low request; at +50 ms `queued` lows arrive (models cycled); at
/// +100 ms the elevated request for `target`.
async fn jump(ctx: &Ctx, mode: Mode, queued: &[&str], target: &str) -> Res<ElevatedRun> {
    let dir = ctx.tempdir()?;
    let mut models = vec!["a"];
    for m in queued.iter().copied().chain([target]) {
        if !models.contains(&m) {
            models.push(m);
        }
    }
    let bench = Bench::start(ctx, dir.path(), mode, &models, true).await?;
    let elevated_at = Duration::from_millis(100);
    let mut trace = vec![Arrival {
        at: Duration::ZERO,
        model: "a".into(),
        class: Class::Low,
    }];
    for m in queued {
        trace.push(Arrival {
            at: Duration::from_millis(50),
            model: (*m).into(),
            class: Class::Low,
        });
    }
    trace.push(Arrival {
        at: elevated_at,
        model: target.into(),
        class: Class::Elevated,
    });
    let result = play(bench.addr, mode, Instant::now(), &trace).await;
    let swap = bench.swap;
    bench.server.stop().await?;
    let result = result?;
    let failed = result
        .iter()
        .filter(|(_, t)| !t.status.is_some_and(|s| s.is_success()))
        .count();
    let (_, elevated) = result
        .iter()
        .find(|(a, _)| a.class == Class::Elevated)
        .ok_or("no elevated request in the trace")?;
    let residual = SERVICE.saturating_sub(elevated_at).as_secs_f64();
    Ok(ElevatedRun {
        wait: wait_of(elevated),
        bound: residual + swap,
        failed,
    })
}

/// A busy with `clients` closed-loop low clients (staggered); at +1 s the elevated
/// request for b; the low traffic stops at +1 s + `cap`.
async fn steady(ctx: &Ctx, mode: Mode, cap: Duration) -> Res<ElevatedRun> {
    const CLIENTS: u32 = 4;
    let dir = ctx.tempdir()?;
    let bench = Bench::start(ctx, dir.path(), mode, &["a", "b"], true).await?;
    let addr = bench.addr;
    let t0 = Instant::now();
    let elevated_at = Duration::from_secs(1);
    let stop_at = t0 + elevated_at + cap;
    let mut lows = JoinSet::new();
    for c in 0..CLIENTS {
        let headers = Class::Low.headers(mode);
        lows.spawn(async move {
            tokio::time::sleep_until(t0 + SERVICE * c / CLIENTS).await;
            let mut failed = 0usize;
            while Instant::now() < stop_at {
                if !timed_chat(addr, "a", &headers)
                    .await
                    .status
                    .is_some_and(|s| s.is_success())
                {
                    failed += 1;
                }
            }
            failed
        });
    }
    tokio::time::sleep_until(t0 + elevated_at).await;
    let elevated = timed_chat(addr, "b", &Class::Elevated.headers(mode)).await;
    let mut failed = usize::from(!elevated.status.is_some_and(|s| s.is_success()));
    while let Some(joined) = lows.join_next().await {
        failed += joined?;
    }
    let swap = bench.swap;
    bench.server.stop().await?;
    // The fence admits nothing new for a once b waits: the longest residual is one service.
    Ok(ElevatedRun {
        wait: wait_of(&elevated),
        bound: SERVICE.as_secs_f64() + swap,
        failed,
    })
}

/// Mean waits of a random two-model, two-class trace, seconds: (all, low, elevated).
async fn conservation(ctx: &Ctx, mode: Mode, span: Duration) -> Res<(f64, f64, f64, usize)> {
    let dir = ctx.tempdir()?;
    let bench = Bench::start(ctx, dir.path(), mode, &["a", "b"], false).await?;
    // Deterministic: the same trace in both modes and every run.
    let mut rng = StdRng::seed_from_u64(0x5eed_0007);
    let rate = 4.0; // arrivals per second
    let mut trace = Vec::new();
    let mut at = 0.0;
    loop {
        at += -(1.0 - rng.random::<f64>()).ln() / rate;
        if at >= span.as_secs_f64() {
            break;
        }
        let model = if rng.random_bool(0.5) { "a" } else { "b" };
        let class = if rng.random_bool(0.25) {
            Class::Elevated
        } else {
            Class::Low
        };
        trace.push(Arrival {
            at: Duration::from_secs_f64(at),
            model: model.into(),
            class,
        });
    }
    let result = play(bench.addr, mode, Instant::now(), &trace).await;
    bench.server.stop().await?;
    let result = result?;
    let failed = result
        .iter()
        .filter(|(_, t)| !t.status.is_some_and(|s| s.is_success()))
        .count();
    let waits = |class: Option<Class>| {
        let v: Vec<f64> = result
            .iter()
            .filter(|(a, _)| class.is_none_or(|c| a.class == c))
            .map(|(_, t)| wait_of(t))
            .collect();
        mean(&v).unwrap_or(f64::NAN)
    };
    Ok((
        waits(None),
        waits(Some(Class::Low)),
        waits(Some(Class::Elevated)),
        failed,
    ))
}

fn ms(v: Option<f64>) -> Option<f64> {
    v.map(|s| s * 1e3)
}

/// Rows for one elevated-request scenario from its runs in both modes.
fn elevated_rows(
    name: &str,
    prio: &[ElevatedRun],
    fifo: &[ElevatedRun],
    fifo_note: &str,
) -> Vec<Row> {
    let col = |runs: &[ElevatedRun], f: fn(&ElevatedRun) -> f64| {
        median(&runs.iter().map(f).collect::<Vec<_>>())
    };
    let excess: Vec<f64> = prio.iter().map(|r| r.wait - r.bound).collect();
    let failed: usize = prio.iter().chain(fifo).map(|r| r.failed).sum();
    let mut rows = vec![
        Row::info(
            SECTION,
            format!("{name}: elevated wait, priority"),
            ms(col(prio, |r| r.wait)),
            "ms",
        )
        .note(format!(
            "oracle bound residual + one swap = {} ms",
            crate::report::fmt_value(col(prio, |r| r.bound).unwrap_or(f64::NAN) * 1e3)
        )),
        Row::at_most(
            SECTION,
            format!("{name}: wait beyond the oracle bound"),
            ms(median(&excess)),
            "ms",
            SLACK_MS,
        ),
        Row::info(
            SECTION,
            format!("{name}: elevated wait, FIFO without fence"),
            ms(col(fifo, |r| r.wait)),
            "ms",
        )
        .note(fifo_note.to_owned()),
    ];
    if failed > 0 {
        rows.push(Row::info(
            SECTION,
            format!("{name}: failed requests (both modes)"),
            Some(failed as f64),
            "",
        ));
    }
    rows
}

/// The queue jump: one running low request, four lows queued for b, elevated for c.
async fn queue_jump(ctx: &Ctx, reps: usize) -> Res<Vec<Row>> {
    let (mut p, mut f) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        p.push(jump(ctx, Mode::Priority, &["b", "b", "b", "b"], "c").await?);
        f.push(jump(ctx, Mode::Fifo, &["b", "b", "b", "b"], "c").await?);
    }
    Ok(elevated_rows(
        "queue jump (1 running low, 4 low queued for b)",
        &p,
        &f,
        "expected ≈ bound + service + swap",
    ))
}

/// The swap jump: one running low request, six lows queued for b, c, d, elevated for e.
async fn swap_jump(ctx: &Ctx, reps: usize) -> Res<Vec<Row>> {
    let (mut p, mut f) = (Vec::new(), Vec::new());
    let queued = ["b", "c", "d", "b", "c", "d"];
    for _ in 0..reps {
        p.push(jump(ctx, Mode::Priority, &queued, "e").await?);
        f.push(jump(ctx, Mode::Fifo, &queued, "e").await?);
    }
    Ok(elevated_rows(
        "swap jump (6 low queued for b, c, d)",
        &p,
        &f,
        "expected ≈ bound + 3 × (service + swap)",
    ))
}

/// Steady low traffic on a loaded model, elevated for another.
async fn steady_low(ctx: &Ctx, reps: usize, cap: Duration) -> Res<Vec<Row>> {
    let (mut p, mut f) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        p.push(steady(ctx, Mode::Priority, cap).await?);
        f.push(steady(ctx, Mode::Fifo, cap).await?);
    }
    let starved = format!(
        "low traffic stops {} s after the elevated request arrives: ≥ that means starved",
        cap.as_secs()
    );
    Ok(elevated_rows(
        "steady low on a (4 clients) + elevated for b",
        &p,
        &f,
        &starved,
    ))
}

/// The conservation check on a seeded Poisson trace.
async fn conservation_rows(ctx: &Ctx, reps: usize, span: Duration) -> Res<Vec<Row>> {
    let mut rows = Vec::new();
    let (mut pa, mut pl, mut ph, mut fa, mut fl, mut fh, mut failed) =
        (vec![], vec![], vec![], vec![], vec![], vec![], 0);
    for _ in 0..reps {
        let (a, l, h, x) = conservation(ctx, Mode::Priority, span).await?;
        pa.push(a);
        pl.push(l);
        ph.push(h);
        failed += x;
        let (a, l, h, x) = conservation(ctx, Mode::Fifo, span).await?;
        fa.push(a);
        fl.push(l);
        fh.push(h);
        failed += x;
    }
    let ratios: Vec<f64> = pa.iter().zip(&fa).map(|(p, f)| p / f).collect();
    let name = format!(
        "conservation ({} s Poisson trace, 4/s, 25% elevated, a/b)",
        span.as_secs()
    );
    rows.push(Row::info(
        SECTION,
        format!("{name}: mean wait, priority"),
        ms(median(&pa)),
        "ms",
    ));
    rows.push(Row::info(
        SECTION,
        format!("{name}: mean wait, FIFO without fence"),
        ms(median(&fa)),
        "ms",
    ));
    rows.push(
        Row::info(SECTION, format!("{name}: mean wait priority ÷ FIFO"), median(&ratios), "×")
            .note("conservation: ≈ 1 (priority redistributes waiting); differs by the swaps it adds or saves"),
    );
    for (label, values) in [
        ("elevated mean wait, priority", &ph),
        ("elevated mean wait, FIFO without fence", &fh),
        ("low mean wait, priority", &pl),
        ("low mean wait, FIFO without fence", &fl),
    ] {
        rows.push(Row::info(
            SECTION,
            format!("{name}: {label}"),
            ms(median(values)),
            "ms",
        ));
    }
    if failed > 0 {
        rows.push(Row::info(
            SECTION,
            "conservation: failed requests (both modes)",
            Some(failed as f64),
            "",
        ));
    }
    Ok(rows)
}

/// Runs every scenario and returns the rows; a scenario that fails is reported as n/a.
pub(crate) async fn run(ctx: &Ctx) -> Res<Vec<Row>> {
    let reps = if ctx.quick { 1 } else { ctx.reps.min(5) };
    let cap = Duration::from_secs(if ctx.quick { 2 } else { 4 });
    let span = Duration::from_secs(if ctx.quick { 4 } else { 15 });
    let mut rows = Vec::new();
    let results = [
        ("queue jump", queue_jump(ctx, reps).await),
        ("swap jump", swap_jump(ctx, reps).await),
        ("steady low", steady_low(ctx, reps, cap).await),
        (
            "conservation",
            conservation_rows(ctx, reps.min(3), span).await,
        ),
    ];
    for (name, result) in results {
        match result {
            Ok(more) => rows.extend(more),
            Err(err) => {
                eprintln!("priority scenario {name} failed: {err}");
                rows.push(Row::missing(SECTION, name, err.to_string()));
            }
        }
    }
    Ok(rows)
}
