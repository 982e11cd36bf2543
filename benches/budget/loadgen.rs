//! Closed-loop load generator: N clients, each on its own keep-alive connection, sending
//! the next request as soon as the previous body has ended (or, paced, at its share of a
//! fixed rate, when the previous one has ended). A warm-up phase is run and discarded;
//! only requests sent and completed inside the measured window count.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::task::JoinSet;

use crate::Res;
use crate::http::{Conn, get, post};
use crate::stats::quantile;

/// What to send, how hard and for how long.
#[derive(Debug, Clone)]
pub(crate) struct LoadSpec {
    /// Where to send it.
    pub addr: SocketAddr,
    /// Request path.
    pub path: String,
    /// JSON body of a POST; `None` sends a GET.
    pub body: Option<Bytes>,
    /// Concurrent clients (connections).
    pub clients: usize,
    /// Discarded warm-up.
    pub warmup: Duration,
    /// Measured window.
    pub measure: Duration,
    /// Requests per second the clients send together at most (`None`: as fast as
    /// answers come). Paced below what the machine can serve, the CPU each request
    /// costs the server does not depend on how the machine's cores are shared.
    pub rate: Option<f64>,
}

/// The figures of one closed-loop run.
#[derive(Debug, Clone)]
pub(crate) struct LoadResult {
    /// Latency of every successful request in the window, seconds.
    pub latencies: Vec<f64>,
    /// Failed requests (non-2xx or transport error) in the whole run.
    pub errors: u64,
    /// Successful requests in the whole run, warm-up included (to divide a CPU
    /// reading taken around the run).
    pub completed: u64,
    /// Length of the measured window, seconds.
    pub window: f64,
}

impl LoadResult {
    /// Median latency, seconds.
    pub(crate) fn p50(&self) -> Option<f64> {
        quantile(&self.latencies, 0.50)
    }

    /// 99th percentile latency, seconds.
    pub(crate) fn p99(&self) -> Option<f64> {
        quantile(&self.latencies, 0.99)
    }

    /// Successful requests per second in the window.
    pub(crate) fn throughput(&self) -> f64 {
        self.latencies.len() as f64 / self.window
    }
}

struct ClientOutcome {
    latencies: Vec<f64>,
    errors: u64,
    completed: u64,
}

/// Runs the load and returns its figures.
///
/// # Errors
///
/// When no client could connect at all.
pub(crate) async fn run(spec: &LoadSpec) -> Res<LoadResult> {
    let start = Instant::now();
    let window_start = start + spec.warmup;
    let end = window_start + spec.measure;
    let mut clients = JoinSet::new();
    for index in 0..spec.clients {
        let spec = spec.clone();
        clients.spawn(async move { client(spec, index, window_start, end).await });
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut completed = 0;
    while let Some(joined) = clients.join_next().await {
        let outcome = joined??;
        latencies.extend(outcome.latencies);
        errors += outcome.errors;
        completed += outcome.completed;
    }
    if latencies.is_empty() {
        return Err(format!(
            "no request to {}{} succeeded ({errors} errors)",
            spec.addr, spec.path
        )
        .into());
    }
    Ok(LoadResult {
        latencies,
        errors,
        completed,
        window: spec.measure.as_secs_f64(),
    })
}

async fn client(
    spec: LoadSpec,
    index: usize,
    window_start: Instant,
    end: Instant,
) -> Res<ClientOutcome> {
    let mut latencies = Vec::with_capacity(4096);
    let mut errors = 0;
    let mut completed = 0;
    let mut conn: Option<Conn> = None;
    // Each client's share of the rate: one request every `clients / rate` seconds.
    let interval = spec
        .rate
        .filter(|rate| *rate > 0.0)
        .map(|rate| Duration::from_secs_f64(spec.clients as f64 / rate));
    // The clients' first sends are spread over one interval.
    let mut next = Instant::now()
        + interval.map_or(Duration::ZERO, |i| {
            i.mul_f64(index as f64 / spec.clients as f64)
        });
    loop {
        if let Some(interval) = interval {
            // A client that fell behind sends at once, and keeps its pace from there.
            let now = Instant::now();
            if next < now {
                next = now;
            }
            tokio::time::sleep_until(next.into()).await;
            next += interval;
        }
        let sent = Instant::now();
        if sent >= end {
            break;
        }
        let mut live = match conn.take() {
            Some(live) => live,
            None => Conn::open(spec.addr).await?,
        };
        let request = match &spec.body {
            Some(body) => post(&spec.path, body.clone(), &[])?,
            None => get(&spec.path)?,
        };
        let outcome = live.call(request).await;
        let done = Instant::now();
        match outcome {
            Ok((status, _)) if status.is_success() => {
                completed += 1;
                if sent >= window_start && done <= end {
                    latencies.push(done.duration_since(sent).as_secs_f64());
                }
                conn = Some(live);
            }
            Ok(_) => {
                errors += 1;
                conn = Some(live);
            }
            // The peer closed the connection (keep-alive limit, restart): reconnect.
            Err(_) => errors += 1,
        }
    }
    Ok(ClientOutcome {
        latencies,
        errors,
        completed,
    })
}
