//! Scheduler figures from the server's criterion bench (`server/benches/scheduler.rs`),
//! which `scripts/bench` runs just before this binary: the median estimate of each
//! benchmark, read from criterion's `estimates.json`.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::report::Row;
use crate::{Ctx, Res};

const SECTION: &str = "scheduler";

/// Median in nanoseconds of one criterion benchmark, if it was measured in this run.
fn median_ns(criterion: &Path, id: &str, since: Option<SystemTime>) -> Res<f64> {
    let path = criterion.join(id).join("new/estimates.json");
    let modified = std::fs::metadata(&path)
        .map_err(|_| {
            format!(
                "{} not found: run the scheduler criterion bench",
                path.display()
            )
        })?
        .modified()?;
    if since.is_some_and(|since| modified < since) {
        return Err(format!("{} predates this run", path.display()).into());
    }
    let estimates: serde_json::Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    estimates
        .pointer("/median/point_estimate")
        .and_then(serde_json::Value::as_f64)
        .ok_or_else(|| format!("{} has no median", path.display()).into())
}

fn criterion_dir(ctx: &Ctx) -> PathBuf {
    // target/release → target/criterion
    ctx.bin.parent().map_or_else(
        || PathBuf::from("target/criterion"),
        |t| t.join("criterion"),
    )
}

/// Reads the scheduler figures.
pub(crate) async fn run(ctx: &Ctx) -> Res<Vec<Row>> {
    let criterion = criterion_dir(ctx);
    // scripts/bench exports when it started, so estimates left by an older run are refused.
    let since = std::env::var("BENCH_SINCE")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .map(|secs| UNIX_EPOCH + Duration::from_secs(secs));
    let mut rows = Vec::new();
    for (label, id) in [
        (
            "admit one, 10 000 waiting, lowest priority",
            "admit_one/lowest/10000",
        ),
        (
            "admit one, 10 000 waiting, middle priority",
            "admit_one/middle/10000",
        ),
        (
            "admit one, 10 000 waiting, highest priority",
            "admit_one/highest/10000",
        ),
    ] {
        rows.push(match median_ns(&criterion, id, since) {
            Ok(ns) => Row::at_most(SECTION, label, Some(ns / 1e3), "µs", 50.0)
                .note(format!("criterion {id}")),
            Err(err) => Row::missing(SECTION, label, err.to_string()),
        });
    }
    let id = "drain_after_swap/10000";
    let label = "drain 10 000 after one swap";
    rows.push(match median_ns(&criterion, id, since) {
        Ok(ns) => {
            Row::at_most(SECTION, label, Some(ns / 1e6), "ms", 20.0).note(format!("criterion {id}"))
        }
        // scripts/bench skips it in quick mode: every sample rebuilds a 10 000-deep queue.
        Err(_) if ctx.quick => Row::missing(SECTION, label, "full mode only"),
        Err(err) => Row::missing(SECTION, label, err.to_string()),
    });
    Ok(rows)
}
