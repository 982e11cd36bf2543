//! The cost of the request history (`store.path`, SQLite) and of captures
//! (`captureBuffer`) per request, and the memory a full capture buffer holds.
//!
//! llama-swap-server runs in four configurations: both off (`captureBuffer:
//! 0`, no `store.path`), the store on, captures on (llama-swap's default 5 MB
//! buffer), and both on; its model's upstream is an nginx that answers every
//! request itself (`return 200` with a chat completion and its usage), so the
//! figures are the server's own work. Each is loaded at 64 connections by the
//! harness's closed-loop generator and by `wrk`, the configurations
//! interleaved in every round, each round starting with the next one; ratios
//! are taken per round, for the throughput and for the server's CPU time per
//! request (its process's utime + stime over the run ÷ the requests
//! answered). The target: each costs at most 5% of the throughput with both
//! off.
//!
//! On a shared 2-core machine the saturated runs spread by ±10% from one round
//! to the next, as much as the cost measured; so each round also paces the
//! harness's clients at [`PACED_RATE`] (about a third of what the machine
//! serves) and reads the server's CPU per request there: the cost of the work
//! itself, steadier from round to round.
//!
//! The target itself is then measured on its own, in pairs: both off and both
//! on, one right after the other (in alternating order), [`PAIRS`] times, by
//! each generator; the median of the pairs' ratios is published with a 95%
//! confidence interval of that median (distribution-free: order statistics of
//! the ratios), so a reader sees whether the spread lets it settle the 5%.
//! With `BENCH_LLAMA_SWAP` naming a llama-swap binary (built by hand; CI has
//! none), llama-swap runs the same two configurations on the same upstream
//! (`logLevel: warn`, as the server logs warnings only here), and each pair
//! measures it too, right after or before the server's: its own both on ÷
//! both off, and the server's both on ÷ llama-swap's both on, in the same
//! run.
//!
//! And the work of the two threads the store and captures add is read from
//! `/proc/<pid>/task/*/stat` (by thread name: `history-writer`, `captures`)
//! over the whole section ÷ the requests the server counted: their CPU per
//! request, which does not depend on how the cores were shared.
//!
//! Rows: for the two configurations with the store on, the requests the server
//! counted (`llamaswap_requests_total` in `/metrics`) beside the rows its writer
//! wrote (`llamaswap_history_rows_total{outcome="written"}`) once it has caught
//! up; the difference is what the writer dropped (a full queue) or lost (a
//! refused batch). The rows the history holds are shown too.
//!
//! Both store configurations keep [`FULL_HISTORY`] rows (`store.maxRows`), so
//! that both run with a full history, where every row written also costs the
//! delete of the oldest, for all but the first seconds: the state a server
//! stays in once its history has filled, and the same for both (with the
//! default million rows the configuration measured more often would reach it
//! first).
//!
//! The memory of a full capture buffer: the server's RSS after requests whose
//! captures overflow the buffer many times, minus its RSS before them, beside
//! the same traffic with captures off (what the traffic itself leaves behind).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;

use crate::bodyidle::cpu_secs;
use crate::loadgen::{LoadSpec, run as load};
use crate::procs::Proc;
use crate::report::Row;
use crate::stats::median_of;
use crate::{Ctx, Res, http};

const SECTION: &str = "store";
const CONNECTIONS: usize = 64;
/// Requests per second of the paced run: about a third of what the machine
/// serves at 64 connections, so that its cores are never all busy.
const PACED_RATE: f64 = 8000.0;
/// Pairs of runs (both off, both on) of the paired measurement, in full mode.
const PAIRS: usize = 24;
/// The confidence of the interval published around the pairs' median.
const CONFIDENCE: f64 = 0.95;
const TARGETS: [&str; 4] = [
    "both off",
    "store on",
    "captures on",
    "store and captures on",
];
/// What the upstream answers.
const ANSWER: &str = r#"{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#;

/// The rows each store configuration keeps (`store.maxRows`).
const FULL_HISTORY: u64 = 100_000;

/// The server's configuration for target `index`, its model proxied to `upstream`.
fn config(index: usize, dir: &Path, upstream: SocketAddr) -> String {
    configuration(index, dir, upstream, Some(FULL_HISTORY))
}

/// The configuration for target `index`; the store (when on) keeps
/// `max_rows` rows, or llama-swap's unbounded history with `None` (it has no
/// `store.maxRows`).
fn configuration(index: usize, dir: &Path, upstream: SocketAddr, max_rows: Option<u64>) -> String {
    let store = matches!(index, 1 | 3);
    let captures = matches!(index, 2 | 3);
    let mut yaml = String::from("healthCheckTimeout: 60\n");
    if !captures {
        yaml.push_str("captureBuffer: 0\n");
    }
    if store {
        yaml.push_str(&format!(
            "store:\n  path: {}\n",
            dir.join("history.db").display()
        ));
        if let Some(rows) = max_rows {
            yaml.push_str(&format!("  maxRows: {rows}\n"));
        }
    }
    // The process only has to stay up: nginx answers for it.
    yaml.push_str(&format!(
        "models:\n  m:\n    cmd: sleep 100000\n    proxy: http://{upstream}\n    concurrencyLimit: 1000\n"
    ));
    yaml
}

/// The note of a paired figure: how many pairs (`how` they were measured)
/// and the confidence interval of their median.
fn pairs_note(ratios: &[f64], how: &str) -> String {
    match crate::stats::median_interval(ratios, CONFIDENCE) {
        Some((low, high)) => format!(
            "median of {} pairs ({how}); {:.0}% confidence interval of the median {low:.3}-{high:.3}",
            ratios.len(),
            CONFIDENCE * 100.0
        ),
        None => format!(
            "median of {} pairs ({how}; too few for an interval)",
            ratios.len()
        ),
    }
}

/// The variable naming a llama-swap binary to measure beside the server.
const LLAMA_SWAP_ENV: &str = "BENCH_LLAMA_SWAP";

/// Starts the llama-swap at `binary` with `config` (the server's, logging
/// warnings only) and loads its model.
async fn start_llama_swap(binary: &Path, dir: &Path, config: &str) -> Res<(Proc, SocketAddr)> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("config.yaml");
    std::fs::write(&path, format!("logLevel: warn\n{config}"))?;
    let addr: SocketAddr = format!("127.0.0.1:{}", crate::procs::free_port()?).parse()?;
    let mut command = tokio::process::Command::new(binary);
    command
        .arg("-config")
        .arg(&path)
        .arg("-listen")
        .arg(addr.to_string());
    let proc =
        crate::procs::listening("llama-swap", command, addr, &dir.join("llama-swap.log")).await?;
    let first = http::timed_chat(addr, "m", &[]).await;
    if !first.status.is_some_and(|s| s.is_success()) {
        proc.stop().await?;
        return Err(format!("llama-swap's first request answered {:?}", first.status).into());
    }
    Ok((proc, addr))
}

async fn start_server(ctx: &Ctx, dir: &Path, config: &str) -> Res<(Proc, SocketAddr)> {
    std::fs::create_dir_all(dir)?;
    let (proc, addr) = crate::procs::server(&ctx.bin, dir, config).await?;
    let first = http::timed_chat(addr, "m", &[]).await;
    if !first.status.is_some_and(|s| s.is_success()) {
        proc.stop().await?;
        return Err(format!("the first request answered {:?}", first.status).into());
    }
    Ok((proc, addr))
}

/// Runs the section and returns its rows.
pub(crate) async fn run(ctx: &Ctx) -> Res<Vec<Row>> {
    let Some(nginx) = &ctx.nginx else {
        return Ok(vec![Row::missing(
            SECTION,
            "store and capture cost",
            "nginx is not installed (scripts/bench installs Debian's package)",
        )]);
    };
    let dir = ctx.tempdir()?;
    let nginx_dir = dir.path().join("nginx");
    std::fs::create_dir_all(&nginx_dir)?;
    let (upstream, upstream_addr) =
        crate::nginx::start_answering(nginx, &nginx_dir, ANSWER).await?;
    let mut servers = Vec::new();
    for (index, name) in TARGETS.iter().enumerate() {
        let server_dir = dir.path().join(format!("server-{index}"));
        match start_server(ctx, &server_dir, &config(index, &server_dir, upstream_addr)).await {
            Ok(started) => servers.push(Some(started)),
            Err(err) => {
                eprintln!("{name} did not start: {err}");
                servers.push(None);
            }
        }
    }
    // llama-swap both off and both on, when a binary is given.
    let mut reference = Vec::new();
    if let Some(binary) = std::env::var_os(LLAMA_SWAP_ENV) {
        for index in [0, 3] {
            let ls_dir = dir.path().join(format!("llama-swap-{index}"));
            match start_llama_swap(
                Path::new(&binary),
                &ls_dir,
                &configuration(index, &ls_dir, upstream_addr, None),
            )
            .await
            {
                Ok(started) => reference.push(started),
                Err(err) => {
                    eprintln!("llama-swap ({}) did not start: {err}", TARGETS[index]);
                    break;
                }
            }
        }
        if reference.len() < 2 {
            // One of the two alone compares nothing.
            for (proc, _) in reference.drain(..) {
                proc.stop().await?;
            }
        }
    }
    let wrk = crate::wrk::find();
    let script = crate::wrk::post_script(dir.path(), &http::chat_body("m", false))?;
    let body = http::chat_body("m", false);
    let (rounds, warmup, measure, wrk_seconds) = if ctx.quick {
        (1, Duration::from_millis(300), Duration::from_secs(1), 2)
    } else {
        (
            // Two whole rotations of the starting configuration at least:
            // a ratio within 5% needs more rounds than the shared machine's
            // spread between two runs.
            ctx.rounds.max(2 * TARGETS.len()),
            Duration::from_millis(500),
            Duration::from_secs(3),
            3,
        )
    };
    // [target][round]
    let mut loadgen: Vec<Vec<Option<f64>>> = vec![Vec::new(); TARGETS.len()];
    let mut by_wrk: Vec<Vec<Option<f64>>> = vec![Vec::new(); TARGETS.len()];
    // The server's CPU time per request (µs), [target][round].
    let mut loadgen_cpu: Vec<Vec<Option<f64>>> = vec![Vec::new(); TARGETS.len()];
    let mut wrk_cpu: Vec<Vec<Option<f64>>> = vec![Vec::new(); TARGETS.len()];
    let mut paced_cpu: Vec<Vec<Option<f64>>> = vec![Vec::new(); TARGETS.len()];
    let mut errors = vec![0u64; TARGETS.len()];
    for round in 0..rounds {
        // Each round starts with the next configuration, so that none is
        // always measured first (or right after the same one).
        let order = (0..servers.len()).map(|k| (k + round) % servers.len());
        for (ti, server) in order.map(|ti| (ti, &servers[ti])) {
            let Some((proc, addr)) = server else {
                for series in [
                    &mut loadgen,
                    &mut by_wrk,
                    &mut loadgen_cpu,
                    &mut wrk_cpu,
                    &mut paced_cpu,
                ] {
                    series[ti].push(None);
                }
                continue;
            };
            let spec = LoadSpec {
                addr: *addr,
                path: "/v1/chat/completions".to_owned(),
                body: Some(body.clone()),
                clients: CONNECTIONS,
                warmup,
                measure,
                rate: None,
            };
            // The CPU reading spans the warm-up too, as does `completed`.
            let before = cpu_secs(proc)?;
            match load(&spec).await {
                Ok(result) => {
                    let used = cpu_secs(proc)? - before;
                    errors[ti] += result.errors;
                    loadgen[ti].push(Some(result.throughput()));
                    loadgen_cpu[ti]
                        .push((result.completed > 0).then(|| used / result.completed as f64 * 1e6));
                }
                Err(err) => {
                    eprintln!("store round {round}: {}: {err}", TARGETS[ti]);
                    loadgen[ti].push(None);
                    loadgen_cpu[ti].push(None);
                }
            }
            // The same load paced well below what the machine serves: the
            // server's CPU per request no longer depends on how the saturated
            // cores were shared in that round.
            let paced = LoadSpec {
                rate: Some(PACED_RATE),
                ..spec.clone()
            };
            let before = cpu_secs(proc)?;
            match load(&paced).await {
                Ok(result) => {
                    let used = cpu_secs(proc)? - before;
                    errors[ti] += result.errors;
                    paced_cpu[ti]
                        .push((result.completed > 0).then(|| used / result.completed as f64 * 1e6));
                }
                Err(err) => {
                    eprintln!("store round {round}: paced {}: {err}", TARGETS[ti]);
                    paced_cpu[ti].push(None);
                }
            }
            let Some(wrk) = &wrk else {
                by_wrk[ti].push(None);
                wrk_cpu[ti].push(None);
                continue;
            };
            let before = cpu_secs(proc)?;
            match crate::wrk::run_wrk(wrk, &script, *addr, CONNECTIONS, wrk_seconds).await {
                Ok(result) => {
                    let used = cpu_secs(proc)? - before;
                    errors[ti] += result.errors;
                    let completed = result.rps * wrk_seconds as f64;
                    by_wrk[ti].push(Some(result.rps));
                    wrk_cpu[ti].push((completed > 0.0).then(|| used / completed * 1e6));
                }
                Err(err) => {
                    eprintln!("store round {round}: wrk {}: {err}", TARGETS[ti]);
                    by_wrk[ti].push(None);
                    wrk_cpu[ti].push(None);
                }
            }
        }
        eprintln!("  store round {}/{rounds} done", round + 1);
    }
    let div = |a: &Option<f64>, b: &Option<f64>| match (a, b) {
        (Some(a), Some(b)) if *b > 0.0 => Some(a / b),
        _ => None,
    };
    let mut rows = Vec::new();
    if let (Some((_, off_addr)), Some((_, on_addr))) = (&servers[0], &servers[3]) {
        let pairs = if ctx.quick { 2 } else { PAIRS };
        let spec = |addr: SocketAddr| LoadSpec {
            addr,
            path: "/v1/chat/completions".to_owned(),
            body: Some(body.clone()),
            clients: CONNECTIONS,
            warmup: Duration::from_millis(300),
            measure: Duration::from_millis(1500),
            rate: None,
        };
        // [off, on] of the server, then of llama-swap when it runs.
        let mut addrs = vec![*off_addr, *on_addr];
        addrs.extend(reference.iter().map(|(_, addr)| *addr));
        // [generator][pair][addr]: the throughputs.
        let mut measured: [Vec<Vec<Option<f64>>>; 2] = [Vec::new(), Vec::new()];
        for pair in 0..pairs {
            let mut got = [vec![None; addrs.len()], vec![None; addrs.len()]];
            // Each pair back to back, in alternating order; with llama-swap,
            // the two programs' pairs alternate too.
            let mut order: Vec<usize> = (0..addrs.len()).collect();
            if pair % 2 == 1 {
                order.reverse();
            }
            for side in order {
                let addr = addrs[side];
                match load(&spec(addr)).await {
                    Ok(result) => got[0][side] = Some(result.throughput()),
                    Err(err) => eprintln!("store pair {pair}: load generator: {err}"),
                }
                if let Some(wrk) = &wrk {
                    match crate::wrk::run_wrk(wrk, &script, addr, CONNECTIONS, 2).await {
                        Ok(result) => got[1][side] = Some(result.rps),
                        Err(err) => eprintln!("store pair {pair}: wrk: {err}"),
                    }
                }
            }
            for (series, got) in measured.iter_mut().zip(got) {
                series.push(got);
            }
        }
        eprintln!("  store: {pairs} pairs done");
        let ratio_of = |generator: usize, on: usize, off: usize| -> Vec<Option<f64>> {
            measured[generator]
                .iter()
                .map(|got| div(&got[on], &got[off]))
                .collect()
        };
        let by_loadgen = ratio_of(0, 1, 0);
        let by_wrk_pairs = ratio_of(1, 1, 0);
        if reference.len() == 2 {
            for (gi, generator) in ["load generator", "wrk"].into_iter().enumerate() {
                for (what, on, off) in [
                    (
                        "llama-swap (reference): store and captures on ÷ both off",
                        3,
                        2,
                    ),
                    (
                        "server store and captures on ÷ llama-swap store and captures on",
                        1,
                        3,
                    ),
                    ("server both off ÷ llama-swap both off", 0, 2),
                ] {
                    let ratios: Vec<f64> = ratio_of(gi, on, off).into_iter().flatten().collect();
                    let note = pairs_note(&ratios, "measured beside the server's");
                    rows.push(
                        Row::info(
                            SECTION,
                            format!("throughput, {CONNECTIONS} conn, {generator}, paired: {what}"),
                            crate::stats::median(&ratios),
                            "×",
                        )
                        .note(note),
                    );
                }
            }
        } else {
            rows.push(Row::missing(
                SECTION,
                "llama-swap's own cost of its store and captures (reference)",
                "set BENCH_LLAMA_SWAP to a llama-swap binary to measure it beside the server",
            ));
        }
        for (generator, ratios) in [("load generator", &by_loadgen), ("wrk", &by_wrk_pairs)] {
            let ratios: Vec<f64> = ratios.iter().flatten().copied().collect();
            let interval = crate::stats::median_interval(&ratios, CONFIDENCE);
            let note = pairs_note(&ratios, "both off, both on, back to back");
            rows.push(
                Row::at_least(
                    SECTION,
                    format!(
                        "throughput, {CONNECTIONS} conn, {generator}, paired: store and captures on ÷ both off"
                    ),
                    crate::stats::median(&ratios),
                    "×",
                    0.95,
                )
                .note(note),
            );
            for (end, value) in [
                ("low", interval.map(|i| i.0)),
                ("high", interval.map(|i| i.1)),
            ] {
                rows.push(Row::info(
                    SECTION,
                    format!(
                        "throughput, {CONNECTIONS} conn, {generator}, paired: {:.0}% interval, {end} end",
                        CONFIDENCE * 100.0
                    ),
                    value,
                    "×",
                ));
            }
        }
    }
    for (generator, figures, cpu) in [
        ("load generator", &loadgen, &loadgen_cpu),
        ("wrk", &by_wrk, &wrk_cpu),
    ] {
        for (ti, name) in TARGETS.iter().enumerate() {
            rows.push(Row::info(
                SECTION,
                format!("{name}, {CONNECTIONS} conn, {generator}: throughput"),
                median_of(&figures[ti]),
                "req/s",
            ));
            rows.push(
                Row::info(
                    SECTION,
                    format!("{name}, {CONNECTIONS} conn, {generator}: server CPU per request"),
                    median_of(&cpu[ti]),
                    "µs",
                )
                .note("utime + stime of the server process ÷ requests answered, warm-up included"),
            );
        }
        for (ti, name) in TARGETS.iter().enumerate().skip(1) {
            let ratios: Vec<Option<f64>> = figures[ti]
                .iter()
                .zip(&figures[0])
                .map(|(on, off)| div(on, off))
                .collect();
            rows.push(
                Row::at_least(
                    SECTION,
                    format!("throughput, {CONNECTIONS} conn, {generator}: {name} ÷ both off"),
                    median_of(&ratios),
                    "×",
                    0.95,
                )
                .note("per round; target: at most 5% of the throughput"),
            );
            let ratios: Vec<Option<f64>> = cpu[ti]
                .iter()
                .zip(&cpu[0])
                .map(|(on, off)| div(on, off))
                .collect();
            rows.push(
                Row::info(
                    SECTION,
                    format!(
                        "server CPU per request, {CONNECTIONS} conn, {generator}: {name} ÷ both off"
                    ),
                    median_of(&ratios),
                    "×",
                )
                .note("per round"),
            );
        }
    }
    for (ti, name) in TARGETS.iter().enumerate() {
        rows.push(
            Row::info(
                SECTION,
                format!("{name}, paced at {PACED_RATE} req/s: server CPU per request"),
                median_of(&paced_cpu[ti]),
                "µs",
            )
            .note("utime + stime of the server process ÷ requests answered, warm-up included"),
        );
    }
    for (ti, name) in TARGETS.iter().enumerate().skip(1) {
        let ratios: Vec<Option<f64>> = paced_cpu[ti]
            .iter()
            .zip(&paced_cpu[0])
            .map(|(on, off)| div(on, off))
            .collect();
        rows.push(
            Row::info(
                SECTION,
                format!("server CPU per request, paced at {PACED_RATE} req/s: {name} ÷ both off"),
                median_of(&ratios),
                "×",
            )
            .note("per round: the cost of the work itself, without the saturated machine's spread"),
        );
    }
    for (ti, name) in TARGETS.iter().enumerate() {
        if errors[ti] > 0 {
            rows.push(Row::info(
                SECTION,
                format!("{name}: failed requests"),
                Some(errors[ti] as f64),
                "",
            ));
        }
    }
    for (ti, server) in servers.iter().enumerate() {
        let Some((_, addr)) = server else { continue };
        if !matches!(ti, 1 | 3) {
            continue;
        }
        match history_rows(*addr).await {
            Ok((requests, written, kept)) => {
                if let Some((proc, _)) = server {
                    for (thread, what) in [
                        ("history-writer", "history writer"),
                        ("captures", "capture thread"),
                    ] {
                        if ti == 1 && thread == "captures" {
                            continue;
                        }
                        let cpu = thread_cpu_secs(proc, thread)
                            .ok()
                            .filter(|_| requests > 0.0);
                        rows.push(
                            Row::info(
                                SECTION,
                                format!("{}: {what}'s CPU per request", TARGETS[ti]),
                                cpu.map(|secs| secs / requests * 1e6),
                                "µs",
                            )
                            .note(format!(
                                "utime + stime of the `{thread}` thread over the section ÷ requests counted"
                            )),
                        );
                    }
                }
                let name = TARGETS[ti];
                rows.push(
                    Row::info(
                        SECTION,
                        format!("{name}: requests counted by the server"),
                        Some(requests),
                        "",
                    )
                    .note("llamaswap_requests_total, all outcomes, warm-ups included"),
                );
                rows.push(
                    Row::info(
                        SECTION,
                        format!("{name}: rows in the history database"),
                        Some(kept),
                        "",
                    )
                    .note(format!(
                        "store.maxRows: {FULL_HISTORY}, older rows are deleted"
                    )),
                );
                rows.push(
                    Row::at_most(
                        SECTION,
                        format!("{name}: rows dropped or lost"),
                        Some(requests - written),
                        "",
                        0.0,
                    )
                    .note(
                        "requests counted − rows written (llamaswap_history_rows_total), \
                         once the writer has caught up",
                    ),
                );
            }
            Err(err) => eprintln!("store rows ({}): {err}", TARGETS[ti]),
        }
    }
    for server in servers.into_iter().flatten().chain(reference) {
        server.0.stop().await?;
    }
    rows.extend(capture_memory(ctx, dir.path(), upstream_addr).await);
    upstream.stop().await?;
    Ok(rows)
}

/// The requests a server counted, the rows its writer wrote and the rows its
/// history holds (fewer once retention deletes), read once the row count has
/// stopped moving (the writer batches behind the request path).
async fn history_rows(addr: SocketAddr) -> Res<(f64, f64, f64)> {
    let metrics = http::get_text(addr, "/metrics").await?;
    let sum = |prefix: &str| -> f64 {
        metrics
            .lines()
            .filter(|line| line.starts_with(prefix))
            .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum()
    };
    let requests = sum("llamaswap_requests_total{");
    let mut last = None;
    for _ in 0..20 {
        let page = http::get_json(addr, "/api/metrics/activity?limit=1").await?;
        let total = page["total"]
            .as_f64()
            .ok_or("no total in /api/metrics/activity")?;
        if last == Some(total) {
            // Read after the writer caught up (the query waited for it).
            let metrics = http::get_text(addr, "/metrics").await?;
            let written = metrics
                .lines()
                .filter(|line| {
                    line.starts_with("llamaswap_history_rows_total{outcome=\"written\"}")
                })
                .filter_map(|line| line.rsplit_once(' ')?.1.parse::<f64>().ok())
                .sum();
            return Ok((requests, written, total));
        }
        last = Some(total);
        // Polling a count the server cannot announce: nothing to await.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Err("the history's row count kept moving for 10 s".into())
}

/// Requests sent to fill the capture buffer, and the size of each prompt.
const FILL_REQUESTS: usize = 1000;
const FILL_PROMPT: usize = 32 * 1024;

/// A chat body with a prompt of `len` bytes that compresses poorly.
fn big_body(len: usize, seed: u64) -> Bytes {
    let mut state = seed | 1;
    let prompt: String = (0..len)
        .map(|_| {
            // xorshift: letters zstd cannot squeeze much.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            char::from(b'a' + (state % 26) as u8)
        })
        .collect();
    Bytes::from(
        serde_json::json!({
            "model": "m",
            "messages": [{"role": "user", "content": prompt}],
        })
        .to_string(),
    )
}

/// RSS growth of a server under requests that overflow its capture buffer,
/// with captures on (default 5 MB) and off.
async fn capture_memory(ctx: &Ctx, dir: &Path, upstream: SocketAddr) -> Vec<Row> {
    let mut growth = [None, None];
    for (slot, index) in [(0, 2), (1, 0)] {
        let server_dir = dir.join(format!("memory-{index}"));
        let outcome: Res<f64> = async {
            let (proc, addr) =
                start_server(ctx, &server_dir, &config(index, &server_dir, upstream)).await?;
            let before = proc.rss_bytes()?;
            let mut conn = http::Conn::open(addr).await?;
            for i in 0..FILL_REQUESTS {
                let request = http::post(
                    "/v1/chat/completions",
                    big_body(FILL_PROMPT, i as u64 + 1),
                    &[],
                )?;
                let (status, _) = conn.call(request).await?;
                if !status.is_success() {
                    return Err(format!("request {i} answered {status}").into());
                }
            }
            // The buffer compresses on its own thread: give it the last ones.
            tokio::time::sleep(Duration::from_millis(500)).await;
            let after = proc.rss_bytes()?;
            proc.stop().await?;
            Ok(after as f64 - before as f64)
        }
        .await;
        match outcome {
            Ok(bytes) => growth[slot] = Some(bytes),
            Err(err) => eprintln!("capture memory ({}): {err}", TARGETS[index]),
        }
    }
    let mib = |b: Option<f64>| b.map(|b| b / (1024.0 * 1024.0));
    let sent = (FILL_REQUESTS * FILL_PROMPT) as f64 / (1024.0 * 1024.0);
    vec![
        Row::info(
            SECTION,
            "RSS growth, captures on (5 MB buffer), after overflowing it",
            mib(growth[0]),
            "MiB",
        )
        .note(format!(
            "{FILL_REQUESTS} requests of {} KiB prompts ({sent:.0} MiB) in one connection",
            FILL_PROMPT / 1024
        )),
        Row::info(
            SECTION,
            "RSS growth, captures off, same requests",
            mib(growth[1]),
            "MiB",
        ),
        Row::info(
            SECTION,
            "memory a full capture buffer holds (on − off)",
            mib(growth[0].zip(growth[1]).map(|(on, off)| on - off)),
            "MiB",
        )
        .note("the buffer's budget is 5 MiB of compressed captures, plus the uncompressed capture being collected per request in flight"),
    ]
}

/// utime + stime, in seconds, of the threads of `proc` named `name`.
fn thread_cpu_secs(proc: &Proc, name: &str) -> Res<f64> {
    let mut total = 0.0;
    let mut found = false;
    for task in std::fs::read_dir(format!("/proc/{}/task", proc.pid()?))? {
        let task = task?.path();
        let Ok(comm) = std::fs::read_to_string(task.join("comm")) else {
            continue;
        };
        if comm.trim_end() != name {
            continue;
        }
        total += crate::bodyidle::stat_cpu_secs(&task.join("stat"))?;
        found = true;
    }
    if found {
        Ok(total)
    } else {
        Err(format!("no thread named {name}").into())
    }
}
