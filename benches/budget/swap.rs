//! Swaps: two models in one swap group, each a mockswap with a 300 ms load time, asked
//! for alternately so that every request stops one upstream and starts the other.
//!
//! - readiness: mockswap's journal says when the first request arrived on its own clock,
//!   which starts with the process; its health turned 200 at exactly the load time on
//!   that clock, so `received_ms − load` is "healthy → first request forwarded";
//! - server time in a swap: the client's total time minus the load time, split into
//!   "request sent → upstream process running" (stop of the old one, spawn, runtime
//!   start; from wall-clock stamps, ms resolution), readiness, and the rest.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::http::{get_json, timed_chat};
use crate::report::Row;
use crate::stats::median;
use crate::{Ctx, Res};

const SECTION: &str = "swap";
const LOAD: Duration = Duration::from_millis(300);
const LONG_LOAD: Duration = Duration::from_secs(2);

/// One swap's figures, milliseconds.
struct Sample {
    total_beyond_load: f64,
    to_process: f64,
    readiness: f64,
}

fn unix_ms() -> Res<f64> {
    Ok(SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs_f64() * 1e3)
}

/// The arrival of the last chat completion in the journal of `model`'s upstream.
async fn arrival(server: SocketAddr, model: &str) -> Res<(f64, f64)> {
    let journal = get_json(server, &format!("/upstream/{model}/__mockswap/requests")).await?;
    let entries = journal
        .as_array()
        .or_else(|| journal.get("requests").and_then(|r| r.as_array()))
        .ok_or("journal is not an array")?;
    let entry = entries
        .iter()
        .rev()
        .find(|e| e.get("path").and_then(|p| p.as_str()) == Some("/v1/chat/completions"))
        .ok_or("no chat completion in the upstream's journal")?;
    let received_ms = entry
        .get("received_ms")
        .and_then(serde_json::Value::as_f64)
        .ok_or("journal entry without received_ms")?;
    let received_unix_ms = entry
        .get("received_unix_ms")
        .and_then(serde_json::Value::as_f64)
        .ok_or("journal entry without received_unix_ms")?;
    Ok((received_ms, received_unix_ms))
}

async fn one_swap(server: SocketAddr, model: &str, load: Duration) -> Res<Sample> {
    let sent_unix = unix_ms()?;
    let timed = timed_chat(server, model, &[]).await;
    if !timed.status.is_some_and(|s| s.is_success()) {
        return Err(format!("swap to {model} answered {:?}", timed.status).into());
    }
    let (received_ms, received_unix_ms) = arrival(server, model).await?;
    let load_ms = load.as_secs_f64() * 1e3;
    let process_start_unix = received_unix_ms - received_ms;
    Ok(Sample {
        total_beyond_load: timed.secs() * 1e3 - load_ms,
        to_process: process_start_unix - sent_unix,
        readiness: received_ms - load_ms,
    })
}

/// Runs the swap measurements and returns their rows.
pub(crate) async fn run(ctx: &Ctx) -> Res<Vec<Row>> {
    let (cold, samples) = series(ctx, LOAD, ctx.reps * 2).await?;
    let col = |samples: &[Sample], f: fn(&Sample) -> f64| {
        median(&samples.iter().map(f).collect::<Vec<_>>())
    };
    let n = samples.len();
    let mut rows = vec![
        Row::at_most(
            SECTION,
            "upstream healthy → first request forwarded (300 ms load)",
            col(&samples, |s| s.readiness),
            "ms",
            50.0,
        )
        .note(format!("median of {n} swaps; mockswap's own clock")),
        Row::info(
            SECTION,
            "swap a↔b: total minus upstream load time",
            col(&samples, |s| s.total_beyond_load),
            "ms",
        )
        .note("stop old + spawn + readiness + forwarding"),
        Row::info(
            SECTION,
            "  of which: request sent → new upstream process running",
            col(&samples, |s| s.to_process),
            "ms",
        )
        .note("stop of the old upstream, fork/exec, runtime start; wall clock, ms resolution"),
        Row::info(
            SECTION,
            "cold start (nothing to stop): total minus load time",
            Some(cold.total_beyond_load),
            "ms",
        )
        .note("one sample"),
    ];
    // Real models load for seconds, when the health poll has backed off to its cap.
    match series(ctx, LONG_LOAD, if ctx.quick { 2 } else { 6 }).await {
        Ok((_, long)) => rows.push(
            Row::at_most(
                SECTION,
                "upstream healthy → first request forwarded (2 s load)",
                col(&long, |s| s.readiness),
                "ms",
                50.0,
            )
            .note(format!("median of {} swaps", long.len())),
        ),
        Err(err) => rows.push(Row::missing(
            SECTION,
            "upstream healthy → first request forwarded (2 s load)",
            err.to_string(),
        )),
    }
    Ok(rows)
}

/// A fresh server with two models loading in `load`; a cold start, then `swaps` swaps.
async fn series(ctx: &Ctx, load: Duration, swaps: usize) -> Res<(Sample, Vec<Sample>)> {
    let dir = ctx.tempdir()?;
    let args = format!("--load-time {}ms", load.as_millis());
    let config = crate::procs::server_config(&ctx.bin, "", &[("a", args.clone()), ("b", args)])?;
    let (server, addr) = crate::procs::server(&ctx.bin, dir.path(), &config).await?;
    let result = async {
        let cold = one_swap(addr, "a", load).await?;
        let mut samples = Vec::new();
        for i in 0..swaps {
            let model = if i % 2 == 0 { "b" } else { "a" };
            samples.push(one_swap(addr, model, load).await?);
        }
        Res::Ok((cold, samples))
    }
    .await;
    server.stop().await?;
    result
}
