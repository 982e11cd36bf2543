//! The printed report: what was replayed, at which scale, and the table of figures
//! in unscaled units (Markdown, so it pastes into BENCHMARKS.md as printed).

use std::fmt::Write as _;

use crate::Res;
use crate::compare::{Figures, Options};
use crate::plan::{Day, MODELS};
use crate::setup::Setup;

/// Seconds as `4.2 s`, `3.1 min` or `1.2 h`.
pub(crate) fn duration(secs: f64) -> String {
    if !secs.is_finite() {
        "n/a".to_owned()
    } else if secs < 100.0 {
        format!("{secs:.1} s")
    } else if secs < 6000.0 {
        format!("{:.1} min", secs / 60.0)
    } else {
        format!("{:.1} h", secs / 3600.0)
    }
}

/// What was replayed and how, before the figures.
pub(crate) fn preamble(day: &Day, options: &Options) -> String {
    let mut out = String::new();
    let (from, to) = day.hours;
    let replay = day.length() / options.scale;
    let _ = writeln!(
        out,
        "Day: seed {}, hours {from:.2}-{to:.2} ({} chat sessions, {} Elevated chats, {} Low jobs; \
         {} of service, {:.0} % of one GPU).",
        day.seed,
        day.sessions.len(),
        day.chats(),
        day.jobs.len(),
        duration(day.service_total()),
        100.0 * day.service_total() / day.length()
    );
    let _ = writeln!(
        out,
        "Time scale: 1 s of replay = {} s of the day ({} in {}); minResident {} s \
         ({} s of replay); agingAfter {} s ({} s of replay); a streamed token every {:.1} ms \
         of replay ({:.2} s of the day).",
        options.scale,
        duration(day.length()),
        duration(replay),
        options.min_resident_replay() as f64 * options.scale,
        options.min_resident_replay(),
        options.aging_after_replay() as f64 * options.scale,
        options.aging_after_replay(),
        options.token_gap_replay() * 1e3,
        options.token_gap_replay() * options.scale,
    );
    out.push_str("\n| model | stands for | memory | load | sleep | wake | Elevated | Low |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---:|---:|\n");
    let per_model = day.per_model();
    for (spec, (elevated, low)) in MODELS.iter().zip(per_model) {
        let _ = writeln!(
            out,
            "| {} | {} | {} GiB | {} s | {} s | {} s | {elevated} | {low} |",
            spec.id, spec.stands_for, spec.memory_gib, spec.load, spec.sleep, spec.wake
        );
    }
    out
}

/// The table of figures, one row per setup.
pub(crate) fn table(results: &[(Setup, Res<Figures>)]) -> String {
    let mut out = String::from(
        "| setup | Elevated wait p50 | p99 | max | Low wait p50 | Low max | swaps/h (wakes) | time in swaps | mean swap | of which overhead | failed |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for (setup, result) in results {
        match result {
            Ok(f) => {
                let _ = writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} | {:.1} ({:.1}) | {:.1} % | {} | {} | {} |",
                    setup.label(),
                    duration(f.elevated_p50),
                    duration(f.elevated_p99),
                    duration(f.elevated_max),
                    duration(f.low_p50),
                    duration(f.low_max),
                    f.swaps_per_hour,
                    f.wakes_per_hour,
                    100.0 * f.swap_share,
                    duration(f.mean_swap),
                    duration(f.swap_overhead),
                    f.failed + f.failed_swaps as usize,
                );
            }
            Err(err) => {
                let _ = writeln!(out, "| {} | failed: {err} |", setup.label());
            }
        }
    }
    out
}

/// Per setup: requests counted and how faithfully the service was replayed.
pub(crate) fn checks(results: &[(Setup, Res<Figures>)]) -> String {
    let mut out = String::new();
    for (setup, result) in results {
        if let Ok(f) = result {
            let _ = writeln!(
                out,
                "{}: {} Elevated + {} Low requests, {} failed; service as replayed ÷ planned {:.3} \
                 (a token asked every {:.2} ms, paced every {:.2} ms); the day played out in {:.1} s",
                setup.name(),
                f.elevated,
                f.low,
                f.failed,
                f.service_ratio,
                f.token_gaps.0 * 1e3,
                f.token_gaps.1 * 1e3,
                f.replay_secs
            );
        }
    }
    out
}
