//! SSE pass-through: a paced stream (one token every 5 ms) read directly, through nginx
//! and through the server, one stream at a time. For every event we record when it
//! completed, relative to when the request was sent; the published delay is, per event
//! index, the median arrival through the proxy minus the median arrival direct, then the
//! median over the indices. It includes forwarding the request once, so it is an upper
//! bound on the per-chunk delay.

use std::net::SocketAddr;
use std::time::Instant;

use http_body_util::BodyExt as _;

use crate::http::{Conn, post};
use crate::report::Row;
use crate::stats::median;
use crate::{Ctx, Res};

const SECTION: &str = "SSE pass-through";
/// 200 tokens/s: a frame every 5 ms, faster than any real model streams.
const UPSTREAM_ARGS: &str = "--tokens-per-second 200 --journal-limit 1000";
/// Words in the prompt; mockswap echoes them, one token per frame.
const WORDS: usize = 40;

fn stream_body() -> bytes::Bytes {
    let prompt = vec!["word"; WORDS].join(" ");
    bytes::Bytes::from(
        serde_json::json!({
            "model": "m",
            "stream": true,
            "messages": [{"role": "user", "content": prompt}],
        })
        .to_string(),
    )
}

/// Arrival offsets (seconds since send) of every SSE event of one stream.
async fn one_stream(addr: SocketAddr) -> Res<Vec<f64>> {
    let mut conn = Conn::open(addr).await?;
    let sent = Instant::now();
    let response = conn
        .send(post("/v1/chat/completions", stream_body(), &[])?)
        .await?;
    if !response.status().is_success() {
        return Err(format!("stream answered {}", response.status()).into());
    }
    let mut body = response.into_body();
    let mut pending: Vec<u8> = Vec::new();
    let mut arrivals = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let now = sent.elapsed().as_secs_f64();
        pending.extend_from_slice(data);
        // Each complete event ("\n\n"-terminated) arrived no later than now.
        while let Some(end) = pending.windows(2).position(|w| w == b"\n\n") {
            pending.drain(..end + 2);
            arrivals.push(now);
        }
    }
    Ok(arrivals)
}

/// Per-index median arrival over `streams` streams.
async fn profile(addr: SocketAddr, streams: usize) -> Res<Vec<f64>> {
    let mut runs = Vec::with_capacity(streams);
    for _ in 0..streams {
        runs.push(one_stream(addr).await?);
    }
    let len = runs.iter().map(Vec::len).min().unwrap_or(0);
    if len < WORDS {
        return Err(format!("streams had only {len} events").into());
    }
    Ok((0..len)
        .filter_map(|i| median(&runs.iter().map(|r| r[i]).collect::<Vec<_>>()))
        .collect())
}

fn lag(proxied: &[f64], direct: &[f64]) -> Option<f64> {
    let lags: Vec<f64> = proxied.iter().zip(direct).map(|(p, d)| p - d).collect();
    median(&lags)
}

/// Runs the SSE comparison and returns its rows.
pub async fn run(ctx: &Ctx) -> Res<Vec<Row>> {
    let dir = ctx.tempdir()?;
    let args: Vec<String> = UPSTREAM_ARGS
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let (upstream, direct) = crate::procs::mockswap(&ctx.bin, &args).await?;
    let streams = if ctx.quick { 8 } else { 25 };

    let nginx = match &ctx.nginx {
        Some(path) => crate::nginx::start(path, dir.path(), direct).await.ok(),
        None => None,
    };
    let config = crate::procs::server_config(&ctx.bin, "", &[("m", UPSTREAM_ARGS.to_owned())])?;
    let server = crate::procs::server(&ctx.bin, dir.path(), &config)
        .await
        .ok();

    // Warm every path (and load the server's model) before the first timed stream.
    one_stream(direct).await?;
    let mut targets = vec![("direct", direct)];
    if let Some((_, addr)) = &nginx
        && one_stream(*addr).await.is_ok()
    {
        targets.push(("nginx", *addr));
    }
    if let Some((_, addr)) = &server
        && one_stream(*addr).await.is_ok()
    {
        targets.push(("server", *addr));
    }
    // Interleave the targets, stream by stream, so they share the machine's noise.
    let mut per_target: Vec<Vec<Vec<f64>>> = vec![Vec::new(); targets.len()];
    for _ in 0..streams {
        for (i, (_, addr)) in targets.iter().enumerate() {
            per_target[i].push(profile(*addr, 1).await?);
        }
    }
    let merged: Vec<Vec<f64>> = per_target
        .iter()
        .map(|runs| {
            let len = runs.iter().map(Vec::len).min().unwrap_or(0);
            (0..len)
                .filter_map(|i| median(&runs.iter().map(|r| r[i]).collect::<Vec<_>>()))
                .collect()
        })
        .collect();

    let ms = |v: Option<f64>| v.map(|s| s * 1e3);
    let mut rows = Vec::new();
    let direct_profile = &merged[0];
    let gaps: Vec<f64> = direct_profile.windows(2).map(|w| w[1] - w[0]).collect();
    rows.push(
        Row::info(
            SECTION,
            "direct: median gap between events",
            ms(median(&gaps)),
            "ms",
        )
        .note(format!(
            "{streams} streams of {} events per target",
            direct_profile.len()
        )),
    );
    let find = |name: &str| targets.iter().position(|(n, _)| *n == name);
    match find("nginx") {
        Some(i) => rows.push(Row::info(
            SECTION,
            "nginx: delay per event vs direct",
            ms(lag(&merged[i], direct_profile)),
            "ms",
        )),
        None => rows.push(Row::missing(
            SECTION,
            "nginx: delay per event vs direct",
            "nginx not available",
        )),
    }
    match find("server") {
        Some(i) => rows.push(
            Row::at_most(
                SECTION,
                "server: delay per event vs direct",
                ms(lag(&merged[i], direct_profile)),
                "ms",
                1.0,
            )
            .note("includes forwarding the request once: an upper bound"),
        ),
        None => rows.push(Row::missing(
            SECTION,
            "server: delay per event vs direct",
            "server not available",
        )),
    }

    if let Some((proc, _)) = server {
        proc.stop().await?;
    }
    if let Some((proc, _)) = nginx {
        proc.stop().await?;
    }
    upstream.stop().await?;
    Ok(rows)
}
