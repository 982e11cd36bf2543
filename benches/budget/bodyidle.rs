//! The cost of `timeouts.bodyIdle` (issue 31 #5) on streamed (SSE) responses.
//!
//! One server binary, two configurations of its model `m` (a mockswap): `bodyIdle: 0`
//! (no timer) and `bodyIdle: 60` (the default: a timer armed when the upstream's body
//! first makes the proxy wait, reset on every later wait). Two loads, each with the
//! harness's closed-loop generator and with `wrk`, the two configurations interleaved
//! in every round (A, B, A, B) and ratios taken per round:
//!
//! - unpaced streams of 64 frames at 64 connections: throughput;
//! - paced streams (64 frames at 2 000 tokens/s, so the proxy waits before nearly every
//!   frame and the timer is reset each time) at 16 connections: the server's CPU time per
//!   request (utime + stime from `/proc/<pid>/stat`), since throughput is set by the pace.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;

use crate::loadgen::{self, LoadSpec};
use crate::procs::Proc;
use crate::report::Row;
use crate::stats::median_of;
use crate::{Ctx, Res, http};

const SECTION: &str = "bodyIdle";
/// Frames per stream: the echo answers one frame per word of the last user message.
const WORDS: usize = 63;
/// The pace of the second load's upstream.
const PACE: &str = "2000";
const TARGETS: [(&str, &str); 2] = [
    ("bodyIdle: 0 (off)", "    timeouts: {bodyIdle: 0}\n"),
    ("bodyIdle: 60 (default)", "    timeouts: {bodyIdle: 60}\n"),
];

/// One load: its name, the upstream's extra arguments, connections.
struct Load {
    name: &'static str,
    upstream_args: &'static [&'static str],
    connections: usize,
}

const LOADS: [Load; 2] = [
    Load {
        name: "unpaced",
        upstream_args: &[],
        connections: 64,
    },
    Load {
        name: "paced 2000 tok/s",
        upstream_args: &["--tokens-per-second", PACE],
        connections: 16,
    },
];

/// A streamed chat request whose echo is `WORDS + 1` frames.
fn stream_body() -> Bytes {
    let prompt = vec!["w"; WORDS].join(" ");
    Bytes::from(
        serde_json::json!({
            "model": "m",
            "stream": true,
            "messages": [{"role": "user", "content": prompt}],
        })
        .to_string(),
    )
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat`.
pub(crate) fn cpu_secs(proc: &Proc) -> Res<f64> {
    stat_cpu_secs(std::path::Path::new(&format!("/proc/{}/stat", proc.pid()?)))
}

/// CPU seconds (user + system) in a `stat` file of `/proc`: a process's, or
/// one of its threads' (`/proc/<pid>/task/<tid>/stat`).
pub(crate) fn stat_cpu_secs(path: &std::path::Path) -> Res<f64> {
    let stat = std::fs::read_to_string(path)?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat.rsplit_once(')').ok_or("no command in stat")?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 of `rest`.
    let utime: f64 = fields.get(11).ok_or("no utime")?.parse()?;
    let stime: f64 = fields.get(12).ok_or("no stime")?.parse()?;
    // /proc reports in USER_HZ, which is 100 on Linux whatever the kernel's HZ.
    Ok((utime + stime) / 100.0)
}

async fn start(
    ctx: &Ctx,
    dir: &std::path::Path,
    load: &Load,
    ti: usize,
) -> Res<(Proc, SocketAddr)> {
    let server_dir = dir.join(format!("server-{}-{ti}", load.upstream_args.len()));
    std::fs::create_dir_all(&server_dir)?;
    let args = ["--journal-limit", "1000"]
        .iter()
        .chain(load.upstream_args)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    let mut config = crate::procs::server_config(&ctx.bin, "", &[("m", args)])?;
    config.push_str("    concurrencyLimit: 1000\n");
    config.push_str(TARGETS[ti].1);
    let (proc, addr) = crate::procs::server(&ctx.bin, &server_dir, &config).await?;
    let first = http::timed_chat(addr, "m", &[]).await;
    if !first.status.is_some_and(|s| s.is_success()) {
        proc.stop().await?;
        return Err(format!("the warm-up request answered {:?}", first.status).into());
    }
    Ok((proc, addr))
}

/// Per-round figures of one target under one load and one generator.
#[derive(Default, Clone)]
struct Series {
    rps: Vec<Option<f64>>,
    cpu_us: Vec<Option<f64>>,
}

/// Runs the section and returns its rows.
pub(crate) async fn run(ctx: &Ctx) -> Res<Vec<Row>> {
    let dir = ctx.tempdir()?;
    let body = stream_body();
    let wrk = crate::wrk::find();
    let script = crate::wrk::post_script(dir.path(), &body)?;
    let (warmup, measure, wrk_seconds) = if ctx.quick {
        (Duration::from_millis(300), Duration::from_secs(2), 2)
    } else {
        (Duration::from_millis(500), Duration::from_secs(3), 3)
    };
    let rounds = ctx.rounds.max(3);
    let mut rows = Vec::new();
    for load in &LOADS {
        let mut servers = Vec::new();
        for ti in 0..TARGETS.len() {
            servers.push(start(ctx, dir.path(), load, ti).await?);
        }
        // [generator][target]
        let mut series: [[Series; 2]; 2] = Default::default();
        let mut errors = [0u64; 2];
        for round in 0..rounds {
            for (ti, (proc, addr)) in servers.iter().enumerate() {
                let spec = LoadSpec {
                    addr: *addr,
                    path: "/v1/chat/completions".to_owned(),
                    body: Some(body.clone()),
                    clients: load.connections,
                    warmup,
                    measure,
                    rate: None,
                };
                // The CPU reading spans the warm-up too, as does `completed`.
                let before = cpu_secs(proc)?;
                match loadgen::run(&spec).await {
                    Ok(result) => {
                        let used = cpu_secs(proc)? - before;
                        errors[ti] += result.errors;
                        series[0][ti].rps.push(Some(result.throughput()));
                        series[0][ti].cpu_us.push(
                            (result.completed > 0).then(|| used / result.completed as f64 * 1e6),
                        );
                    }
                    Err(err) => {
                        eprintln!("bodyIdle round {round}: {}: {err}", TARGETS[ti].0);
                        series[0][ti].rps.push(None);
                        series[0][ti].cpu_us.push(None);
                    }
                }
                let Some(wrk) = &wrk else {
                    series[1][ti].rps.push(None);
                    series[1][ti].cpu_us.push(None);
                    continue;
                };
                let before = cpu_secs(proc)?;
                match crate::wrk::run_wrk(wrk, &script, *addr, load.connections, wrk_seconds).await
                {
                    Ok(result) => {
                        let used = cpu_secs(proc)? - before;
                        errors[ti] += result.errors;
                        let completed = result.rps * wrk_seconds as f64;
                        series[1][ti].rps.push(Some(result.rps));
                        series[1][ti]
                            .cpu_us
                            .push((completed > 0.0).then(|| used / completed * 1e6));
                    }
                    Err(err) => {
                        eprintln!("bodyIdle round {round}: wrk {}: {err}", TARGETS[ti].0);
                        series[1][ti].rps.push(None);
                        series[1][ti].cpu_us.push(None);
                    }
                }
            }
            eprintln!("  bodyIdle {} round {}/{rounds} done", load.name, round + 1);
        }
        for (proc, _) in servers {
            proc.stop().await?;
        }
        let ratio = |a: &[Option<f64>], b: &[Option<f64>]| -> Vec<Option<f64>> {
            a.iter()
                .zip(b)
                .map(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) if *b > 0.0 => Some(a / b),
                    _ => None,
                })
                .collect()
        };
        let conns = load.connections;
        for (gi, generator) in ["load generator", "wrk"].into_iter().enumerate() {
            for (ti, (name, _)) in TARGETS.iter().enumerate() {
                let s = &series[gi][ti];
                rows.push(Row::info(
                    SECTION,
                    format!(
                        "{}, {conns} conn, {generator}, {name}: throughput",
                        load.name
                    ),
                    median_of(&s.rps),
                    "req/s",
                ));
                rows.push(Row::info(
                    SECTION,
                    format!(
                        "{}, {conns} conn, {generator}, {name}: server CPU per request",
                        load.name
                    ),
                    median_of(&s.cpu_us),
                    "µs",
                ));
            }
            let [off, on] = &series[gi];
            rows.push(
                Row::info(
                    SECTION,
                    format!(
                        "{}, {conns} conn, {generator}: throughput, on ÷ off",
                        load.name
                    ),
                    median_of(&ratio(&on.rps, &off.rps)),
                    "×",
                )
                .note(format!("per round, {rounds} rounds, interleaved")),
            );
            rows.push(
                Row::info(
                    SECTION,
                    format!(
                        "{}, {conns} conn, {generator}: server CPU per request, on ÷ off",
                        load.name
                    ),
                    median_of(&ratio(&on.cpu_us, &off.cpu_us)),
                    "×",
                )
                .note("utime + stime of the server process ÷ requests completed"),
            );
        }
        for (ti, (name, _)) in TARGETS.iter().enumerate() {
            if errors[ti] > 0 {
                rows.push(Row::info(
                    SECTION,
                    format!("{}, {name}: failed requests", load.name),
                    Some(errors[ti] as f64),
                    "",
                ));
            }
        }
    }
    Ok(rows)
}
