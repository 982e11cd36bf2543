//! Memory: the server's resident set (VmRSS from /proc) idle, then with 10 000 requests
//! waiting. Model `a` is kept busy by one request its upstream answers only after an
//! hour, so every request for `b` (same swap group) must wait for it; once
//! `GET /api/queue` lists all of them, the RSS is read again. The per-waiter figure is
//! the growth divided by the number of waiters (bodies are ~100 bytes, connection state
//! included).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;
use tokio::task::JoinSet;

use crate::http::{Conn, chat_body, get_json, post};
use crate::procs::Proc;
use crate::report::Row;
use crate::stats::median;
use crate::{Ctx, Res};

const SECTION: &str = "memory";
/// Waiting requests in a full run; quick runs use a fifth (the per-request figure is a slope).
const WAITING: usize = 10_000;

fn waiting(ctx: &Ctx) -> usize {
    if ctx.quick { WAITING / 5 } else { WAITING }
}

/// Number of waiters in a `GET /api/queue` answer (an array, or an object holding one).
pub(crate) fn queue_len(answer: &serde_json::Value) -> Option<usize> {
    if let Some(list) = answer.as_array() {
        return Some(list.len());
    }
    ["queue", "waiting", "requests", "waiters"]
        .iter()
        .find_map(|key| answer.get(key).and_then(|v| v.as_array()).map(Vec::len))
}

/// The median of a few RSS reads, so one read during an allocation burst does not count.
async fn settled_rss(proc: &Proc) -> Res<f64> {
    let mut reads = Vec::new();
    for _ in 0..5 {
        reads.push(proc.rss_bytes()? as f64);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    median(&reads).ok_or_else(|| "no RSS read".into())
}

/// Polls `GET /api/queue` until it lists `n` waiters (or the deadline passes).
async fn wait_for_queue(addr: SocketAddr, n: usize, deadline: Duration) -> Res<usize> {
    let until = Instant::now() + deadline;
    loop {
        let len = queue_len(&get_json(addr, "/api/queue").await?)
            .ok_or("unrecognised /api/queue answer")?;
        if len >= n || Instant::now() > until {
            return Ok(len);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Measures the server's memory and returns the rows.
pub(crate) async fn run(ctx: &Ctx) -> Res<Vec<Row>> {
    let dir = ctx.tempdir()?;
    let extra = "";
    let mut config = crate::procs::server_config(
        &ctx.bin,
        extra,
        &[("a", "--latency 3600s".to_owned()), ("b", String::new())],
    )?;
    config.push_str(&format!("    concurrencyLimit: {}\n", WAITING + 100));
    let n = waiting(ctx);
    let (server, addr) = crate::procs::server(&ctx.bin, dir.path(), &config).await?;
    let result = measure(&server, addr, n).await;
    server.stop().await?;
    let (idle, busy, full, queued) = result?;
    let mib = |b: f64| b / 1024.0 / 1024.0;
    let per_waiter = (full - busy) / queued as f64;
    let mut rows = vec![
        Row::at_most(
            SECTION,
            "RSS idle (config loaded, no model running)",
            Some(mib(idle)),
            "MiB",
            15.0,
        ),
        Row::info(
            SECTION,
            "RSS with one model serving one request",
            Some(mib(busy)),
            "MiB",
        ),
        Row::info(
            SECTION,
            format!("RSS with {queued} requests waiting"),
            Some(mib(full)),
            "MiB",
        ),
        Row::at_most(
            SECTION,
            "RSS per waiting request",
            Some(per_waiter / 1024.0),
            "KiB",
            4.0,
        )
        .note("includes its connection and HTTP state; the body is ~100 bytes"),
    ];
    const BEYOND: &str = "RSS per waiting request beyond a held hyper connection";
    match reference(ctx).await {
        Ok(per_held) => {
            rows.push(
                Row::info(SECTION, "reference: mockswap RSS per held request", Some(per_held / 1024.0), "KiB")
                    .note("hyper HTTP/1 server, requests held at its gate: the cost of a waiting connection alone"),
            );
            // #17's target: what the server adds to the cost of the connection itself.
            rows.push(
                Row::at_most(SECTION, BEYOND, Some((per_waiter - per_held) / 1024.0), "KiB", 2.0)
                    .note("server's RSS per waiter minus mockswap's per held request, same run; negative: cheaper"),
            );
        }
        Err(err) => {
            rows.push(Row::missing(
                SECTION,
                "reference: mockswap RSS per held request",
                err.to_string(),
            ));
            rows.push(Row::missing(
                SECTION,
                BEYOND,
                "no reference figure".to_owned(),
            ));
        }
    }
    Ok(rows)
}

/// RSS growth per request held at a mockswap's closed gate, bytes: what one waiting
/// HTTP/1 connection costs in a plain hyper server, with no scheduler behind it.
async fn reference(ctx: &Ctx) -> Res<f64> {
    let n = waiting(ctx);
    let args: Vec<String> = ["--gate-closed", "--journal-limit", "10"]
        .map(str::to_owned)
        .to_vec();
    let (mock, addr) = crate::procs::mockswap(&ctx.bin, &args).await?;
    let result = async {
        let before = settled_rss(&mock).await?;
        let holders = open_waiters(addr, "m", n).await;
        let until = Instant::now() + Duration::from_secs(120);
        let held = loop {
            let gate = get_json(addr, "/__mockswap/gate").await?;
            let held = gate
                .get("held")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0);
            if held >= n as u64 || Instant::now() > until {
                break held;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let after = settled_rss(&mock).await?;
        drop(holders);
        if held == 0 {
            return Err("mockswap held no request".into());
        }
        Res::Ok((after - before) / held as f64)
    }
    .await;
    mock.stop().await?;
    result
}

/// Opens `n` connections, each sending one chat completion for `model` that is
/// expected to wait; the requests are abandoned when the returned set is dropped.
async fn open_waiters(addr: SocketAddr, model: &'static str, n: usize) -> JoinSet<Res<()>> {
    let connecting = Arc::new(Semaphore::new(256));
    let mut holders = JoinSet::new();
    for i in 0..n {
        let connecting = Arc::clone(&connecting);
        holders.spawn(async move {
            let permit = connecting.acquire_owned().await?;
            let mut conn = Conn::open(addr).await?;
            drop(permit);
            let priority = ((i * 7919) % 21) as i32 - 10;
            let request = post(
                "/v1/chat/completions",
                chat_body(model, false),
                &[("x-priority", priority.to_string())],
            )?;
            let _ = conn.send(request).await;
            Res::Ok(())
        });
    }
    holders
}

async fn measure(server: &Proc, addr: SocketAddr, n: usize) -> Res<(f64, f64, f64, usize)> {
    let idle = settled_rss(server).await?;

    // Occupy a: its upstream answers after an hour, the server is stopped long before.
    let mut holders = JoinSet::new();
    holders.spawn(async move {
        let mut conn = Conn::open(addr).await?;
        let _ = conn
            .call(post("/v1/chat/completions", chat_body("a", false), &[])?)
            .await;
        Res::Ok(())
    });
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let running = get_json(addr, "/running").await?;
        let ready = running
            .get("running")
            .and_then(|r| r.as_array())
            .is_some_and(|models| {
                models.iter().any(|m| {
                    m.get("model") == Some(&"a".into()) && m.get("state") == Some(&"ready".into())
                })
            });
        if ready {
            break;
        }
        if Instant::now() > until {
            return Err("model a did not start within 30 s".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let busy = settled_rss(server).await?;

    // The waiters, a few hundred connections at a time (the listen backlog is finite).
    let waiters = open_waiters(addr, "b", n).await;
    let queued = wait_for_queue(addr, n, Duration::from_secs(120)).await?;
    let full = settled_rss(server).await?;
    drop(waiters);
    holders.abort_all();
    if queued == 0 {
        return Err("no request was queued".into());
    }
    Ok((idle, busy, full, queued))
}
