//! Runs the setups side by side: a fresh server per setup (release binaries beside
//! the bench, or `BENCH_SERVER`), all replaying the same day, each from its own
//! start (staggered a few seconds so that their swaps do not all fall on the same
//! instants), then the figures of each in unscaled units.

use std::path::PathBuf;
use std::time::Duration;

use tokio::time::Instant;

use crate::Res;
use crate::plan::{Class, Day};
use crate::procs::{self, Proc};
use crate::replay::{self, Counted, Outcome, Shape};
use crate::setup::{self, Scaled, Setup};
use crate::stats::quantile;

/// How the day is replayed.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    /// Directory of the mockswap and llama-swap-server binaries.
    pub bin: PathBuf,
    /// Unscaled seconds per replay second.
    pub scale: f64,
    /// `minResident` asked for, unscaled seconds (rounded to whole replay seconds).
    pub min_resident: f64,
    /// `agingAfter` asked for, unscaled seconds (rounded to whole replay seconds).
    pub aging_after: f64,
    /// Unscaled seconds between two streamed tokens of the mock (the resolution of a
    /// request's service).
    pub token_gap: f64,
    /// Replay time between the starts of two setups.
    pub stagger: Duration,
}

impl Options {
    /// `minResident` in whole replay seconds, at least 1.
    pub(crate) fn min_resident_replay(&self) -> u64 {
        ((self.min_resident / self.scale).round() as u64).max(1)
    }

    /// `agingAfter` in whole replay seconds, at least 1.
    pub(crate) fn aging_after_replay(&self) -> u64 {
        ((self.aging_after / self.scale).round() as u64).max(1)
    }

    /// The token gap in replay seconds, at least 2 ms (below that, timer rounding
    /// would stretch services by more than a quarter).
    pub(crate) fn token_gap_replay(&self) -> f64 {
        (self.token_gap / self.scale).max(0.002)
    }

    /// The shape of the requests, with mockswap's pace measured on this machine.
    async fn shape(&self) -> Res<Shape> {
        let token_gap = self.token_gap_replay();
        let args = [
            "--tokens-per-second".to_owned(),
            format!("{:.3}", 1.0 / token_gap),
        ];
        let (mock, addr) = procs::mockswap(&self.bin, &args).await?;
        let paced_gap = replay::calibrate(addr).await;
        mock.stop().await?;
        Ok(Shape {
            scale: self.scale,
            token_gap,
            paced_gap: paced_gap?,
        })
    }
}

/// The figures of one setup, unscaled seconds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Figures {
    pub elevated: usize,
    pub low: usize,
    /// Requests not answered 200 with a whole body.
    pub failed: usize,
    pub elevated_p50: f64,
    pub elevated_p99: f64,
    pub elevated_max: f64,
    pub low_p50: f64,
    pub low_max: f64,
    /// Starts and wakes (`llamaswap_swaps_total`), per unscaled hour of the day.
    pub swaps_per_hour: f64,
    /// Of those, wakes (the upstreams' own counters).
    pub wakes_per_hour: f64,
    pub failed_swaps: f64,
    /// Time in swaps (`llamaswap_swap_duration_seconds_sum`) ÷ the day's length.
    pub swap_share: f64,
    /// Mean time of one swap.
    pub mean_swap: f64,
    /// Mean time of one swap beyond the stated load, wake and sleep times: this
    /// machine's own cost of a swap, magnified by the scale.
    pub swap_overhead: f64,
    /// Service as replayed ÷ as planned, all requests.
    pub service_ratio: f64,
    /// Replay seconds the day took to play out.
    pub replay_secs: f64,
    /// Replay seconds per streamed token, asked and as paced (calibrated).
    pub token_gaps: (f64, f64),
}

impl Figures {
    fn new(
        day: &Day,
        scale: f64,
        outcomes: &[Outcome],
        counted: Counted,
        sleeps_wakes: [(u64, u64); 4],
        replay_secs: f64,
        shape: Shape,
    ) -> Self {
        let waits = |class: Class| -> Vec<f64> {
            outcomes
                .iter()
                .filter(|o| o.class == class)
                .map(|o| o.wait * scale)
                .collect()
        };
        let (elevated, low) = (waits(Class::Elevated), waits(Class::Low));
        let q = |values: &[f64], p: f64| quantile(values, p).unwrap_or(f64::NAN);
        let hours = day.length() / 3600.0;
        let service: f64 = outcomes.iter().map(|o| o.service).sum();
        let planned: f64 = outcomes.iter().map(|o| o.planned).sum();
        let swaps = counted.total_swaps();
        let swap_time = counted.total_seconds() * scale;
        Figures {
            elevated: elevated.len(),
            low: low.len(),
            failed: outcomes.iter().filter(|o| !o.ok).count(),
            elevated_p50: q(&elevated, 0.5),
            elevated_p99: q(&elevated, 0.99),
            elevated_max: q(&elevated, 1.0),
            low_p50: q(&low, 0.5),
            low_max: q(&low, 1.0),
            swaps_per_hour: swaps / hours,
            wakes_per_hour: sleeps_wakes.iter().map(|&(_, w)| w as f64).sum::<f64>() / hours,
            failed_swaps: counted.failed_swaps,
            swap_share: swap_time / day.length(),
            mean_swap: if swaps > 0.0 { swap_time / swaps } else { 0.0 },
            swap_overhead: if swaps > 0.0 {
                (swap_time - replay::stated_swap_time(&counted, &sleeps_wakes)) / swaps
            } else {
                0.0
            },
            service_ratio: if planned > 0.0 {
                service / planned
            } else {
                f64::NAN
            },
            replay_secs,
            token_gaps: (shape.token_gap, shape.paced_gap),
        }
    }
}

/// One setup's server, started.
struct Running {
    setup: Setup,
    server: Proc,
    addr: std::net::SocketAddr,
    ports: [u16; 4],
    dir: tempfile::TempDir,
}

async fn start(setup: Setup, ports: [u16; 4], options: &Options) -> Res<Running> {
    let dir = tempfile::Builder::new()
        .prefix("llama-swap-day-")
        .tempdir()?;
    let mockswap = options.bin.join("mockswap");
    let scaled = Scaled {
        scale: options.scale,
        min_resident: options.min_resident_replay(),
        aging_after: options.aging_after_replay(),
        token_gap: options.token_gap_replay(),
        mockswap: &mockswap,
        ports,
    };
    let yaml = setup::config(setup, &scaled);
    let (server, addr) = procs::server(&options.bin, dir.path(), &yaml)
        .await
        .map_err(|err| format!("{err}; server log:\n{}", log_tail(&dir)))?;
    Ok(Running {
        setup,
        server,
        addr,
        ports,
        dir,
    })
}

/// The last lines of a setup's server log, for an error report.
fn log_tail(dir: &tempfile::TempDir) -> String {
    let text = std::fs::read_to_string(dir.path().join("server.log")).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}

/// Replays `day` on every setup of `setups` at once and returns each one's figures
/// (or why it has none), in the order given.
pub(crate) async fn compare(
    day: &Day,
    setups: &[Setup],
    options: &Options,
) -> Res<Vec<(Setup, Res<Figures>)>> {
    // Calibrated before any server starts: an error here leaves no process behind.
    let shape = options.shape().await?;
    let first = procs::upstream_ports(u16::try_from(4 * setups.len())?)?;
    let mut running = Vec::new();
    let mut results: Vec<(Setup, Res<Figures>)> = Vec::new();
    for (i, setup) in setups.iter().copied().enumerate() {
        let base = first + u16::try_from(4 * i)?;
        let ports = [base, base + 1, base + 2, base + 3];
        match start(setup, ports, options).await {
            Ok(r) => running.push(r),
            Err(err) => results.push((setup, Err(format!("server did not start: {err}").into()))),
        }
    }
    let t0 = Instant::now() + Duration::from_millis(200);
    let plays = running.iter().enumerate().map(|(i, r)| {
        let start = t0 + options.stagger * u32::try_from(i).unwrap_or(0);
        async move {
            let outcomes = replay::play(r.addr, day, shape, start).await;
            (outcomes, start.elapsed().as_secs_f64())
        }
    });
    let played = futures::future::join_all(plays).await;
    for (r, (outcomes, secs)) in running.into_iter().zip(played) {
        let figures = async {
            let counted = replay::counted(r.addr).await?;
            let sleeps_wakes = replay::sleeps_and_wakes(&r.ports).await;
            Res::Ok(Figures::new(
                day,
                options.scale,
                &outcomes,
                counted,
                sleeps_wakes,
                secs,
                shape,
            ))
        }
        .await;
        let figures = figures.map_err(|err| -> Box<dyn std::error::Error + Send + Sync> {
            format!("{err}; server log:\n{}", log_tail(&r.dir)).into()
        });
        let stopped = r.server.stop().await;
        results.push((r.setup, figures.and_then(|f| stopped.map(|()| f))));
    }
    results.sort_by_key(|(s, _)| setups.iter().position(|x| x == s));
    Ok(results)
}
