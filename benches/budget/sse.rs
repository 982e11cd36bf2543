//! SSE pass-through: a paced stream (one event every 5 ms, each stamped with the time the
//! upstream wrote it, see [`crate::stamped`]) read directly, through nginx and through
//! the server, one stream at a time, interleaved. Each event's delivery delay is its
//! arrival time minus its stamp; the per-chunk delay a proxy adds is the median delivery
//! delay through it minus the median direct, per stream round, then the median over
//! rounds.

use std::net::SocketAddr;

use http_body_util::BodyExt as _;

use crate::http::{Conn, chat_body, post};
use crate::report::Row;
use crate::stamped::{EVENTS, Stamped, now_ns};
use crate::stats::{median, quantile};
use crate::{Ctx, Res};

const SECTION: &str = "SSE pass-through";

/// Delivery delays (seconds) of every stamped event of one stream.
async fn one_stream(addr: SocketAddr) -> Res<Vec<f64>> {
    let mut conn = Conn::open(addr).await?;
    let response = conn
        .send(post("/v1/chat/completions", chat_body("m", true), &[])?)
        .await?;
    if !response.status().is_success() {
        return Err(format!("stream answered {}", response.status()).into());
    }
    let mut body = response.into_body();
    let mut pending: Vec<u8> = Vec::new();
    let mut delays = Vec::with_capacity(EVENTS);
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let arrived = now_ns();
        pending.extend_from_slice(data);
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = pending.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&event);
            let Some(json) = text.trim().strip_prefix("data: ") else {
                continue;
            };
            if let Ok(value) = serde_json::from_str::<serde_json::Value>(json)
                && let Some(stamp) = value.get("stamp_ns").and_then(serde_json::Value::as_u64)
            {
                delays.push((arrived as f64 - stamp as f64) / 1e9);
            }
        }
    }
    if delays.len() < EVENTS {
        return Err(format!("stream carried {} of {EVENTS} events", delays.len()).into());
    }
    Ok(delays)
}

/// Runs the SSE comparison and returns its rows.
pub(crate) async fn run(ctx: &Ctx) -> Res<Vec<Row>> {
    let dir = ctx.tempdir()?;
    let upstream = Stamped::start().await?;
    let direct = upstream.addr();
    let rounds = if ctx.quick { 10 } else { 30 };

    let nginx = match &ctx.nginx {
        Some(path) => crate::nginx::start(path, dir.path(), direct).await.ok(),
        None => None,
    };
    // The server launches a placeholder process and proxies to the stamped upstream,
    // which its health check finds ready at once.
    let config = format!(
        "healthCheckTimeout: 30\nmodels:\n  m:\n    cmd: sleep 3600\n    proxy: http://{direct}\n"
    );
    let server = crate::procs::server(&ctx.bin, dir.path(), &config)
        .await
        .ok();

    let mut targets = vec![("direct", direct)];
    if let Some((_, addr)) = &nginx {
        targets.push(("nginx", *addr));
    }
    if let Some((_, addr)) = &server {
        targets.push(("server", *addr));
    }
    // Warm every path (and load the server's model); drop a target that cannot stream.
    let mut usable = Vec::new();
    for (name, addr) in targets {
        match one_stream(addr).await {
            Ok(_) => usable.push((name, addr)),
            Err(err) => eprintln!("{name} cannot stream: {err}"),
        }
    }
    let mut medians: Vec<Vec<f64>> = vec![Vec::new(); usable.len()];
    let mut p99s: Vec<Vec<f64>> = vec![Vec::new(); usable.len()];
    for _ in 0..rounds {
        for (i, (_, addr)) in usable.iter().enumerate() {
            let delays = one_stream(*addr).await?;
            medians[i].extend(median(&delays));
            p99s[i].extend(quantile(&delays, 0.99));
        }
    }
    let ms = |v: Option<f64>| v.map(|s| s * 1e3);
    let added = |i: usize, of: &[Vec<f64>]| -> Option<f64> {
        let per_round: Vec<f64> = of[i].iter().zip(&of[0]).map(|(p, d)| p - d).collect();
        median(&per_round)
    };
    let mut rows = vec![
        Row::info(
            SECTION,
            "direct: delivery delay per event, median",
            ms(median(&medians[0])),
            "ms",
        )
        .note(format!(
            "{rounds} streams of {EVENTS} events, 5 ms apart, per target"
        )),
    ];
    for name in ["nginx", "server"] {
        let label = format!("{name}: added delay per event, median");
        let label99 = format!("{name}: added delay per event, p99");
        match usable.iter().position(|(n, _)| *n == name) {
            Some(i) if name == "server" => {
                rows.push(
                    Row::at_most(SECTION, label, ms(added(i, &medians)), "ms", 1.0)
                        .note("budget line 3"),
                );
                rows.push(Row::info(SECTION, label99, ms(added(i, &p99s)), "ms"));
            }
            Some(i) => {
                rows.push(Row::info(SECTION, label, ms(added(i, &medians)), "ms"));
                rows.push(Row::info(SECTION, label99, ms(added(i, &p99s)), "ms"));
            }
            None => rows.push(Row::missing(
                SECTION,
                label,
                format!("{name} not available"),
            )),
        }
    }

    if let Some((proc, _)) = server {
        proc.stop().await?;
    }
    if let Some((proc, _)) = nginx {
        proc.stop().await?;
    }
    Ok(rows)
}
