//! Proxy overhead: a small non-streaming chat completion, closed loop, at 1, 64 and
//! 256 clients, sent directly to a mockswap upstream, through nginx, through the bare
//! hyper proxy (the floor of a hyper-based proxy: no per-request work of its own) and
//! through llama-swap-server, interleaved in every round so that all of them share the
//! machine's noise. Ratios are computed per round, then the median over rounds is
//! published.

use std::net::SocketAddr;
use std::time::Duration;

use crate::loadgen::{LoadResult, LoadSpec};
use crate::report::Row;
use crate::stats::median_of;
use crate::{Ctx, Res, http, loadgen};

const SECTION: &str = "proxy overhead";
/// The upstream's arguments, the same for the direct reference and the server's child.
const UPSTREAM_ARGS: &str = "--journal-limit 1000";
/// Concurrent clients (one keep-alive connection each).
const CLIENTS: [usize; 3] = [1, 64, 256];
/// The targets' indices, in the order each round runs them.
const DIRECT: usize = 0;
const NGINX: usize = 1;
const BARE: usize = 2;
const SERVER: usize = 3;
const QUIET: usize = 4;
const TARGETS: usize = 5;

/// Per-round figures of one target at one client count.
#[derive(Default, Clone)]
struct Series {
    p50: Vec<Option<f64>>,
    p99: Vec<Option<f64>>,
    rps: Vec<Option<f64>>,
}

impl Series {
    fn push(&mut self, result: Option<&LoadResult>) {
        self.p50.push(result.and_then(LoadResult::p50));
        self.p99.push(result.and_then(LoadResult::p99));
        self.rps.push(result.map(LoadResult::throughput));
    }
}

/// Runs the overhead comparison and returns its rows.
pub(crate) async fn run(ctx: &Ctx) -> Res<Vec<Row>> {
    let dir = ctx.tempdir()?;
    let args: Vec<String> = UPSTREAM_ARGS
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let (upstream, direct) = crate::procs::mockswap(&ctx.bin, &args).await?;

    let nginx = match &ctx.nginx {
        Some(path) => {
            let nginx_dir = dir.path().join("nginx");
            std::fs::create_dir_all(&nginx_dir)?;
            match crate::nginx::start(path, &nginx_dir, direct).await {
                Ok(started) => Some(started),
                Err(err) => {
                    eprintln!("nginx did not start: {err}; nginx rows are n/a");
                    None
                }
            }
        }
        None => None,
    };

    let bare = match crate::procs::bare_proxy(&ctx.bin, direct).await {
        Ok(started) => Some(started),
        Err(err) => {
            eprintln!("the bare hyper proxy did not start: {err}; its rows are n/a");
            None
        }
    };
    let server = start_server(ctx, dir.path(), "server", None).await?;
    let quiet = start_server(ctx, dir.path(), "server-warn", Some("warn")).await?;

    let targets: [(&str, Option<SocketAddr>); TARGETS] = [
        ("direct", Some(direct)),
        ("nginx", nginx.as_ref().map(|(_, a)| *a)),
        ("bare hyper proxy", bare.as_ref().map(|(_, a)| *a)),
        ("server", server.as_ref().map(|(_, a)| *a)),
        ("server, RUST_LOG=warn", quiet.as_ref().map(|(_, a)| *a)),
    ];
    let (warmup, measure) = if ctx.quick {
        (Duration::from_millis(300), Duration::from_secs(1))
    } else {
        (Duration::from_millis(500), Duration::from_secs(2))
    };
    let mut series: [[Series; TARGETS]; 3] = Default::default();
    let mut errors = [0u64; TARGETS];
    let mut health: [Vec<Option<f64>>; 2] = Default::default();
    for round in 0..ctx.rounds {
        for (ci, clients) in CLIENTS.into_iter().enumerate() {
            for (ti, (_, addr)) in targets.iter().enumerate() {
                let result = match addr {
                    Some(addr) => {
                        let spec = LoadSpec {
                            addr: *addr,
                            path: "/v1/chat/completions".to_owned(),
                            body: Some(http::chat_body("m", false)),
                            clients,
                            warmup,
                            measure,
                            rate: None,
                        };
                        match loadgen::run(&spec).await {
                            Ok(result) => {
                                errors[ti] += result.errors;
                                Some(result)
                            }
                            Err(err) => {
                                eprintln!("round {round}: {} at {clients}: {err}", targets[ti].0);
                                None
                            }
                        }
                    }
                    None => None,
                };
                series[ci][ti].push(result.as_ref());
            }
        }
        // Diagnostic: the HTTP stack alone (no model, no upstream), server vs mockswap.
        for (hi, addr) in [(0usize, Some(direct)), (1, targets[SERVER].1)] {
            let result = match addr {
                Some(addr) => {
                    let spec = LoadSpec {
                        addr,
                        path: "/health".to_owned(),
                        body: None,
                        clients: 1,
                        warmup,
                        measure: measure / 2,
                        rate: None,
                    };
                    loadgen::run(&spec).await.ok()
                }
                None => None,
            };
            health[hi].push(result.as_ref().and_then(LoadResult::p50));
        }
        eprintln!("  overhead round {}/{} done", round + 1, ctx.rounds);
    }

    let mut rows = Vec::new();
    let us = |v: Option<f64>| v.map(|s| s * 1e6);
    for (ci, clients) in CLIENTS.into_iter().enumerate() {
        let [d, n, b, s, q] = [DIRECT, NGINX, BARE, SERVER, QUIET].map(|ti| &series[ci][ti]);
        for (ti, (name, _)) in targets.iter().enumerate() {
            let x = &series[ci][ti];
            rows.push(Row::info(
                SECTION,
                format!("{name}, {clients} client(s): p50 latency"),
                us(median_of(&x.p50)),
                "µs",
            ));
            rows.push(Row::info(
                SECTION,
                format!("{name}, {clients} client(s): p99 latency"),
                us(median_of(&x.p99)),
                "µs",
            ));
            rows.push(Row::info(
                SECTION,
                format!("{name}, {clients} client(s): throughput"),
                median_of(&x.rps),
                "req/s",
            ));
        }
        let added = |p: &[Option<f64>], base: &[Option<f64>]| -> Vec<Option<f64>> {
            p.iter()
                .zip(base)
                .map(|(p, b)| Some((*p)? - (*b)?))
                .collect()
        };
        let ratio = |a: &[Option<f64>], b: &[Option<f64>]| -> Vec<Option<f64>> {
            a.iter()
                .zip(b)
                .map(|(a, b)| match (a, b) {
                    (Some(a), Some(b)) if *b > 0.0 => Some(a / b),
                    _ => None,
                })
                .collect()
        };
        let nginx_added = added(&n.p50, &d.p50);
        let bare_added = added(&b.p50, &d.p50);
        let server_added = added(&s.p50, &d.p50);
        let nginx_added99 = added(&n.p99, &d.p99);
        let bare_added99 = added(&b.p99, &d.p99);
        let server_added99 = added(&s.p99, &d.p99);
        rows.push(Row::info(
            SECTION,
            format!("nginx adds, {clients} client(s), p50"),
            us(median_of(&nginx_added)),
            "µs",
        ));
        rows.push(Row::info(
            SECTION,
            format!("bare hyper proxy adds, {clients} client(s), p50"),
            us(median_of(&bare_added)),
            "µs",
        ));
        rows.push(Row::info(
            SECTION,
            format!("server adds, {clients} client(s), p50"),
            us(median_of(&server_added)),
            "µs",
        ));
        rows.push(Row::info(
            SECTION,
            format!("nginx adds, {clients} client(s), p99"),
            us(median_of(&nginx_added99)),
            "µs",
        ));
        rows.push(Row::info(
            SECTION,
            format!("bare hyper proxy adds, {clients} client(s), p99"),
            us(median_of(&bare_added99)),
            "µs",
        ));
        rows.push(Row::info(
            SECTION,
            format!("server adds, {clients} client(s), p99"),
            us(median_of(&server_added99)),
            "µs",
        ));
        let latency_ratio = median_of(&ratio(&server_added, &nginx_added));
        let latency_ratio99 = median_of(&ratio(&server_added99, &nginx_added99));
        let tput_vs_nginx = median_of(&ratio(&s.rps, &n.rps));
        let nginx_vs_direct = median_of(&ratio(&n.rps, &d.rps));
        let server_vs_direct = median_of(&ratio(&s.rps, &d.rps));
        if clients == 1 {
            rows.push(
                Row::at_most(
                    SECTION,
                    "added latency, 1 client, p50: server ÷ nginx",
                    latency_ratio,
                    "×",
                    1.25,
                )
                .note("ratio of (proxy p50 − direct p50), per round"),
            );
            rows.push(
                Row::at_most(
                    SECTION,
                    "added latency, 1 client, p99: server ÷ nginx",
                    latency_ratio99,
                    "×",
                    1.25,
                )
                .note("ratio of (proxy p99 − direct p99), per round"),
            );
        } else {
            rows.push(Row::info(
                SECTION,
                format!("added latency, {clients} clients, p50: server ÷ nginx"),
                latency_ratio,
                "×",
            ));
            let name = format!("throughput, {clients} clients: server ÷ nginx");
            rows.push(if clients == 64 {
                Row::at_least(SECTION, name, tput_vs_nginx, "×", 1.0)
            } else {
                Row::info(SECTION, name, tput_vs_nginx, "×")
            });
            rows.push(
                Row::at_least(
                    SECTION,
                    format!("throughput, {clients} clients: access log on ÷ RUST_LOG=warn"),
                    median_of(&ratio(&s.rps, &q.rps)),
                    "×",
                    0.9,
                )
                .note("the default log writes one access line per request"),
            );
        }
        // The floor: how far the server is from a proxy with no work of its own, and
        // how far that floor is from nginx (reported, not targets).
        let who = if clients == 1 {
            "1 client".to_owned()
        } else {
            format!("{clients} clients")
        };
        for (label, server_added, bare_added, nginx_added) in [
            ("p50", &server_added, &bare_added, &nginx_added),
            ("p99", &server_added99, &bare_added99, &nginx_added99),
        ] {
            rows.push(Row::info(
                SECTION,
                format!("added latency, {who}, {label}: server ÷ bare hyper proxy"),
                median_of(&ratio(server_added, bare_added)),
                "×",
            ));
            rows.push(Row::info(
                SECTION,
                format!("added latency, {who}, {label}: bare hyper proxy ÷ nginx"),
                median_of(&ratio(bare_added, nginx_added)),
                "×",
            ));
        }
        rows.push(Row::info(
            SECTION,
            format!("throughput, {who}: server ÷ bare hyper proxy"),
            median_of(&ratio(&s.rps, &b.rps)),
            "×",
        ));
        rows.push(Row::info(
            SECTION,
            format!("throughput, {who}: bare hyper proxy ÷ nginx"),
            median_of(&ratio(&b.rps, &n.rps)),
            "×",
        ));
        rows.push(Row::info(
            SECTION,
            format!("throughput, {clients} client(s): nginx ÷ direct"),
            nginx_vs_direct,
            "×",
        ));
        rows.push(Row::info(
            SECTION,
            format!("throughput, {clients} client(s): server ÷ direct"),
            server_vs_direct,
            "×",
        ));
    }
    rows.push(Row::info(
        SECTION,
        "diagnostic: mockswap GET /health, 1 client, p50",
        us(median_of(&health[0])),
        "µs",
    ));
    rows.push(
        Row::info(
            SECTION,
            "diagnostic: server GET /health, 1 client, p50",
            us(median_of(&health[1])),
            "µs",
        )
        .note("the HTTP stack alone, without dispatch or proxying"),
    );
    for (ti, (name, _)) in targets.iter().enumerate() {
        if errors[ti] > 0 {
            rows.push(Row::info(
                SECTION,
                format!("{name}: failed requests during the load"),
                Some(errors[ti] as f64),
                "",
            ));
        }
    }

    for (proc, _) in [server, quiet, bare].into_iter().flatten() {
        proc.stop().await?;
    }
    if let Some((proc, _)) = nginx {
        proc.stop().await?;
    }
    upstream.stop().await?;
    Ok(rows)
}

/// Starts a llama-swap-server with one ready model `m` (a mockswap with the
/// reference's flags), logging per `rust_log` (`None`: the default log).
/// `None` when it did not start or serve (its rows are then n/a).
async fn start_server(
    ctx: &Ctx,
    dir: &std::path::Path,
    name: &str,
    rust_log: Option<&str>,
) -> Res<Option<(crate::procs::Proc, SocketAddr)>> {
    let server_dir = dir.join(name);
    std::fs::create_dir_all(&server_dir)?;
    let mut config = crate::procs::server_config(&ctx.bin, "", &[("m", UPSTREAM_ARGS.to_owned())])?;
    // The default limit (10 queued + serving per model) would answer most of 64 clients 429.
    config.push_str("    concurrencyLimit: 1000\n");
    match crate::procs::server_logging(&ctx.bin, &server_dir, &config, rust_log).await {
        Ok((proc, addr)) => {
            // Load the model before timing anything: the swap is measured elsewhere.
            let first = http::timed_chat(addr, "m", &[]).await;
            if first.status.is_some_and(|s| s.is_success()) {
                Ok(Some((proc, addr)))
            } else {
                eprintln!("{name} did not serve the warm-up request: {first:?}");
                proc.stop().await?;
                Ok(None)
            }
        }
        Err(err) => {
            eprintln!("{name} did not start: {err}; its rows are n/a");
            Ok(None)
        }
    }
}
