//! Proxy overhead measured by `wrk` (Debian's package): an independent C load
//! generator, so the figures do not depend on the harness's own tokio client.
//! The same small non-streaming chat completion as the overhead section, at 1,
//! 64 and 256 connections, against a mockswap upstream directly, nginx in front
//! of it, the bare hyper proxy in front of it (the floor of a hyper-based proxy),
//! and llama-swap-server with its default log (one access line per request to
//! stdout, read by the harness) and with `RUST_LOG=warn`. Targets are
//! interleaved in every round; ratios are taken per round.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::process::Command;

use crate::report::Row;
use crate::stats::median_of;
use crate::{Ctx, Res, http};

const SECTION: &str = "wrk";
const UPSTREAM_ARGS: &str = "--journal-limit 1000";
const CONNECTIONS: [usize; 3] = [1, 64, 256];
const TARGETS: [&str; 5] = [
    "direct",
    "nginx",
    "bare hyper proxy",
    "server",
    "server, RUST_LOG=warn",
];
/// Indices into [`TARGETS`].
const DIRECT: usize = 0;
const NGINX: usize = 1;
const BARE: usize = 2;
const SERVER: usize = 3;
const QUIET: usize = 4;

/// `wrk` from `WRK` or the PATH.
pub(crate) fn find() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("WRK") {
        return Some(PathBuf::from(path));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("wrk"))
            .find(|p| p.is_file())
    })
}

/// One wrk run's figures.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct WrkResult {
    /// Requests per second.
    pub rps: f64,
    /// Seconds.
    pub p50: f64,
    /// Seconds.
    pub p99: f64,
    /// Non-2xx answers and socket errors.
    pub errors: u64,
}

/// Seconds from wrk's `123.45us` / `1.23ms` / `1.00s`.
fn duration_secs(text: &str) -> Option<f64> {
    let text = text.trim();
    let split = text.find(|c: char| c.is_ascii_alphabetic())?;
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    let scale = match unit {
        "us" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "m" => 60.0,
        _ => return None,
    };
    Some(value * scale)
}

/// Parses the output of `wrk --latency`.
fn parse(output: &str) -> Option<WrkResult> {
    let mut result = WrkResult::default();
    let (mut p50, mut p99, mut rps) = (None, None, None);
    for line in output.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("50%") {
            p50 = duration_secs(rest);
        } else if let Some(rest) = line.strip_prefix("99%") {
            p99 = duration_secs(rest);
        } else if let Some(rest) = line.strip_prefix("Requests/sec:") {
            rps = rest.trim().parse().ok();
        } else if let Some(rest) = line.strip_prefix("Non-2xx or 3xx responses:") {
            result.errors += rest.trim().parse::<u64>().unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 0"
            result.errors += rest
                .split(',')
                .filter_map(|part| part.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>();
        }
    }
    result.p50 = p50?;
    result.p99 = p99?;
    result.rps = rps?;
    Some(result)
}

/// Runs `wrk` with `script` against `addr`'s chat completions endpoint.
pub(crate) async fn run_wrk(
    wrk: &Path,
    script: &Path,
    addr: SocketAddr,
    connections: usize,
    seconds: u64,
) -> Res<WrkResult> {
    let threads = connections.min(2);
    let output = Command::new(wrk)
        .arg(format!("-t{threads}"))
        .arg(format!("-c{connections}"))
        .arg(format!("-d{seconds}s"))
        .arg("--latency")
        .arg("-s")
        .arg(script)
        .arg(format!("http://{addr}/v1/chat/completions"))
        .output()
        .await?;
    let text = String::from_utf8_lossy(&output.stdout);
    parse(&text).ok_or_else(|| format!("unexpected wrk output: {text}").into())
}

/// A wrk script in `dir` that POSTs `body` as JSON.
pub(crate) fn post_script(dir: &Path, body: &[u8]) -> Res<PathBuf> {
    let script = dir.join("post.lua");
    let body_text = String::from_utf8_lossy(body);
    std::fs::write(
        &script,
        format!(
            "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = [[{body_text}]]\n"
        ),
    )?;
    Ok(script)
}

/// Runs the wrk comparison and returns its rows.
pub(crate) async fn run(ctx: &Ctx) -> Res<Vec<Row>> {
    let Some(wrk) = find() else {
        return Ok(vec![Row::missing(
            SECTION,
            "wrk figures",
            "wrk is not installed (scripts/bench installs Debian's package)",
        )]);
    };
    let dir = ctx.tempdir()?;
    let script = post_script(dir.path(), &http::chat_body("m", false))?;
    let args: Vec<String> = UPSTREAM_ARGS
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let (upstream, direct) = crate::procs::mockswap(&ctx.bin, &args).await?;
    let nginx = match &ctx.nginx {
        Some(path) => {
            let nginx_dir = dir.path().join("nginx");
            std::fs::create_dir_all(&nginx_dir)?;
            crate::nginx::start(path, &nginx_dir, direct).await.ok()
        }
        None => None,
    };
    let bare = match crate::procs::bare_proxy(&ctx.bin, direct).await {
        Ok(started) => Some(started),
        Err(err) => {
            eprintln!("the bare hyper proxy did not start: {err}");
            None
        }
    };
    let mut servers = Vec::new();
    for (name, log) in [("server", None), ("server-warn", Some("warn"))] {
        let server_dir = dir.path().join(name);
        std::fs::create_dir_all(&server_dir)?;
        let mut config =
            crate::procs::server_config(&ctx.bin, "", &[("m", UPSTREAM_ARGS.to_owned())])?;
        config.push_str("    concurrencyLimit: 1000\n");
        let started = crate::procs::server_logging(&ctx.bin, &server_dir, &config, log).await;
        match started {
            Ok((proc, addr)) => {
                let first = http::timed_chat(addr, "m", &[]).await;
                if first.status.is_some_and(|s| s.is_success()) {
                    servers.push(Some((proc, addr)));
                } else {
                    proc.stop().await?;
                    servers.push(None);
                }
            }
            Err(err) => {
                eprintln!("{name} did not start: {err}");
                servers.push(None);
            }
        }
    }
    let addrs: [Option<SocketAddr>; TARGETS.len()] = [
        Some(direct),
        nginx.as_ref().map(|(_, a)| *a),
        bare.as_ref().map(|(_, a)| *a),
        servers[0].as_ref().map(|(_, a)| *a),
        servers[1].as_ref().map(|(_, a)| *a),
    ];
    let (rounds, seconds) = if ctx.quick { (1, 2) } else { (3, 3) };
    // [connections][target][round]
    let mut results: Vec<Vec<Vec<Option<WrkResult>>>> =
        vec![vec![Vec::new(); TARGETS.len()]; CONNECTIONS.len()];
    for round in 0..rounds {
        for (ci, &connections) in CONNECTIONS.iter().enumerate() {
            for (ti, addr) in addrs.iter().enumerate() {
                let result = match addr {
                    Some(addr) => match run_wrk(&wrk, &script, *addr, connections, seconds).await {
                        Ok(result) => Some(result),
                        Err(err) => {
                            eprintln!("wrk round {round}: {} at {connections}: {err}", TARGETS[ti]);
                            None
                        }
                    },
                    None => None,
                };
                results[ci][ti].push(result);
            }
        }
        eprintln!("  wrk round {}/{rounds} done", round + 1);
        // Let the kernel reap the previous round's sockets (TIME_WAIT) between rounds.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let mut rows = Vec::new();
    let us = |v: Option<f64>| v.map(|s| s * 1e6);
    let field = |ci: usize, ti: usize, f: fn(&WrkResult) -> f64| -> Vec<Option<f64>> {
        results[ci][ti].iter().map(|r| r.as_ref().map(f)).collect()
    };
    let per_round = |a: &[Option<f64>], b: &[Option<f64>], op: fn(f64, f64) -> Option<f64>| {
        a.iter()
            .zip(b)
            .map(|(a, b)| op((*a)?, (*b)?))
            .collect::<Vec<_>>()
    };
    let div = |a: f64, b: f64| (b > 0.0).then(|| a / b);
    let sub = |a: f64, b: f64| Some(a - b);
    for (ci, &connections) in CONNECTIONS.iter().enumerate() {
        for (ti, name) in TARGETS.iter().enumerate() {
            rows.push(Row::info(
                SECTION,
                format!("{name}, {connections} conn: throughput"),
                median_of(&field(ci, ti, |r| r.rps)),
                "req/s",
            ));
            rows.push(Row::info(
                SECTION,
                format!("{name}, {connections} conn: p50 latency"),
                us(median_of(&field(ci, ti, |r| r.p50))),
                "µs",
            ));
            rows.push(Row::info(
                SECTION,
                format!("{name}, {connections} conn: p99 latency"),
                us(median_of(&field(ci, ti, |r| r.p99))),
                "µs",
            ));
            let errors: u64 = results[ci][ti].iter().flatten().map(|r| r.errors).sum();
            if errors > 0 {
                rows.push(Row::info(
                    SECTION,
                    format!("{name}, {connections} conn: failed requests"),
                    Some(errors as f64),
                    "",
                ));
            }
        }
        let rps = |ti| field(ci, ti, |r| r.rps);
        if connections == 1 {
            for (label, f) in [
                ("p50", (|r: &WrkResult| r.p50) as fn(&WrkResult) -> f64),
                ("p99", |r: &WrkResult| r.p99),
            ] {
                let direct = field(ci, DIRECT, f);
                let nginx_added = per_round(&field(ci, NGINX, f), &direct, sub);
                let bare_added = per_round(&field(ci, BARE, f), &direct, sub);
                let server_added = per_round(&field(ci, SERVER, f), &direct, sub);
                rows.push(Row::info(
                    SECTION,
                    format!("nginx adds, 1 conn, {label}"),
                    us(median_of(&nginx_added)),
                    "µs",
                ));
                rows.push(Row::info(
                    SECTION,
                    format!("bare hyper proxy adds, 1 conn, {label}"),
                    us(median_of(&bare_added)),
                    "µs",
                ));
                rows.push(Row::info(
                    SECTION,
                    format!("server adds, 1 conn, {label}"),
                    us(median_of(&server_added)),
                    "µs",
                ));
                rows.push(
                    Row::at_most(
                        SECTION,
                        format!("added latency, 1 conn, {label}: server ÷ nginx"),
                        median_of(&per_round(&server_added, &nginx_added, div)),
                        "×",
                        1.25,
                    )
                    .note("(proxy − direct) per round"),
                );
                rows.push(Row::info(
                    SECTION,
                    format!("added latency, 1 conn, {label}: server ÷ bare hyper proxy"),
                    median_of(&per_round(&server_added, &bare_added, div)),
                    "×",
                ));
                rows.push(Row::info(
                    SECTION,
                    format!("added latency, 1 conn, {label}: bare hyper proxy ÷ nginx"),
                    median_of(&per_round(&bare_added, &nginx_added, div)),
                    "×",
                ));
            }
        } else {
            let name = format!("throughput, {connections} conn: server ÷ nginx");
            let ratio = median_of(&per_round(&rps(SERVER), &rps(NGINX), div));
            rows.push(if connections == 64 {
                Row::at_least(SECTION, name, ratio, "×", 1.0)
            } else {
                Row::info(SECTION, name, ratio, "×")
            });
            rows.push(Row::at_least(
                SECTION,
                format!("throughput, {connections} conn: access log on ÷ RUST_LOG=warn"),
                median_of(&per_round(&rps(SERVER), &rps(QUIET), div)),
                "×",
                0.9,
            ));
        }
        rows.push(Row::info(
            SECTION,
            format!("throughput, {connections} conn: server ÷ bare hyper proxy"),
            median_of(&per_round(&rps(SERVER), &rps(BARE), div)),
            "×",
        ));
        rows.push(Row::info(
            SECTION,
            format!("throughput, {connections} conn: bare hyper proxy ÷ nginx"),
            median_of(&per_round(&rps(BARE), &rps(NGINX), div)),
            "×",
        ));
    }

    for server in servers.into_iter().flatten() {
        server.0.stop().await?;
    }
    if let Some((proc, _)) = bare {
        proc.stop().await?;
    }
    if let Some((proc, _)) = nginx {
        proc.stop().await?;
    }
    upstream.stop().await?;
    Ok(rows)
}
