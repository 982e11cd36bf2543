//! The table printed at the end of a run and the BENCHMARKS.md it rewrites.

use std::fmt::Write as _;
use std::path::Path;

use crate::Res;

/// Whether a figure meets its target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Meets the target.
    Pass,
    /// Misses the target.
    Miss,
    /// No target, or no figure.
    Info,
}

/// One published figure.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    /// Budget line or topic.
    pub section: &'static str,
    /// What was measured.
    pub name: String,
    /// The median, in `unit`; `None` when it could not be measured.
    pub value: Option<f64>,
    /// Display unit.
    pub unit: &'static str,
    /// The target, as text (empty when the figure is a reference).
    pub target: String,
    /// Pass, miss or informational.
    pub verdict: Verdict,
    /// How it was obtained or why it is missing.
    pub note: String,
}

impl Row {
    /// A reference figure without a target.
    pub(crate) fn info(
        section: &'static str,
        name: impl Into<String>,
        value: Option<f64>,
        unit: &'static str,
    ) -> Self {
        Self {
            section,
            name: name.into(),
            value,
            unit,
            target: String::new(),
            verdict: Verdict::Info,
            note: String::new(),
        }
    }

    /// A figure that must stay at or below `limit`.
    pub(crate) fn at_most(
        section: &'static str,
        name: impl Into<String>,
        value: Option<f64>,
        unit: &'static str,
        limit: f64,
    ) -> Self {
        let verdict = match value {
            Some(v) if v <= limit => Verdict::Pass,
            Some(_) => Verdict::Miss,
            None => Verdict::Info,
        };
        Self {
            target: format!("≤ {}", fmt_value(limit)),
            verdict,
            ..Self::info(section, name, value, unit)
        }
    }

    /// A figure that must stay at or above `limit`.
    pub(crate) fn at_least(
        section: &'static str,
        name: impl Into<String>,
        value: Option<f64>,
        unit: &'static str,
        limit: f64,
    ) -> Self {
        let verdict = match value {
            Some(v) if v >= limit => Verdict::Pass,
            Some(_) => Verdict::Miss,
            None => Verdict::Info,
        };
        Self {
            target: format!("≥ {}", fmt_value(limit)),
            verdict,
            ..Self::info(section, name, value, unit)
        }
    }

    /// A row for a figure that could not be measured, with the reason.
    pub(crate) fn missing(
        section: &'static str,
        name: impl Into<String>,
        why: impl Into<String>,
    ) -> Self {
        Self {
            note: why.into(),
            ..Self::info(section, name, None, "")
        }
    }

    /// Adds a note.
    #[must_use]
    pub(crate) fn note(mut self, note: impl Into<String>) -> Self {
        self.note = note.into();
        self
    }
}

/// A value with three significant digits, without exponent notation.
pub(crate) fn fmt_value(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".to_owned()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn verdict_text(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Pass => "pass",
        Verdict::Miss => "MISS",
        Verdict::Info => "",
    }
}

fn value_text(row: &Row) -> String {
    match row.value {
        Some(v) if row.unit.is_empty() => fmt_value(v),
        Some(v) => format!("{} {}", fmt_value(v), row.unit),
        None => "n/a".to_owned(),
    }
}

/// The table as aligned plain text for the terminal.
pub(crate) fn plain_table(rows: &[Row]) -> String {
    let cells: Vec<[String; 5]> = rows
        .iter()
        .map(|r| {
            [
                r.section.to_owned(),
                r.name.clone(),
                value_text(r),
                r.target.clone(),
                verdict_text(r.verdict).to_owned(),
            ]
        })
        .collect();
    let mut widths = [0usize; 5];
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &cells {
        for (i, (w, cell)) in widths.iter().zip(row).enumerate() {
            let pad = w.saturating_sub(cell.chars().count());
            if i == 2 {
                let _ = write!(out, "{}{cell}  ", " ".repeat(pad));
            } else {
                let _ = write!(out, "{cell}{}  ", " ".repeat(pad));
            }
        }
        out.push('\n');
    }
    out
}

/// The table as Markdown.
pub(crate) fn markdown_table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| area | figure | median | target | verdict | note |\n|---|---|---:|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} |",
            r.section,
            r.name,
            value_text(r),
            r.target,
            verdict_text(r.verdict),
            r.note.replace('|', "\\|").replace('\n', " ")
        );
    }
    out
}

/// The machine, as one line: cores, CPU model, memory.
pub(crate) fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, usize::from);
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kib| kib.parse::<f64>().ok())
        })
        .map_or_else(
            || "unknown memory".to_owned(),
            |kib| format!("{:.1} GiB RAM", kib / 1024.0 / 1024.0),
        );
    format!("{cores} cores (nproc), {cpu}, {mem}")
}

/// What the report header says about the run.
pub(crate) struct RunInfo<'a> {
    /// The exact command.
    pub command: &'a str,
    /// When it ran (UTC).
    pub date: &'a str,
    /// "full" or "quick", with its repetition counts.
    pub mode: &'a str,
    /// Wall time of the benchmark binary.
    pub seconds: f64,
}

/// Rewrites `path` with the figures, keeping the hand-written notes from `notes`.
pub(crate) fn write_markdown(
    path: &Path,
    rows: &[Row],
    info: &RunInfo<'_>,
    method: &str,
    notes: &str,
) -> Res<()> {
    let misses = rows.iter().filter(|r| r.verdict == Verdict::Miss).count();
    let passes = rows.iter().filter(|r| r.verdict == Verdict::Pass).count();
    let mut out = String::new();
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "Figures of the performance budget (docs/DESIGN.md section 7) beside their targets and the \
         references measured in the same run. This file is rewritten by `scripts/bench`; \
         the notes at the end are kept from `benches/budget/NOTES.md`.\n"
    );
    let _ = writeln!(out, "- command: `{}`", info.command);
    let _ = writeln!(out, "- date: {}", info.date);
    let _ = writeln!(out, "- machine: {}", machine());
    let _ = writeln!(out, "- mode: {}", info.mode);
    let _ = writeln!(
        out,
        "- benchmark wall time: {:.0} s (build excluded)",
        info.seconds
    );
    let _ = writeln!(out, "- targets met: {passes}, missed: {misses}\n");
    let _ = writeln!(out, "## Figures\n");
    out.push_str(&markdown_table(rows));
    out.push('\n');
    out.push_str(method);
    out.push('\n');
    out.push_str(notes);
    std::fs::write(path, out)?;
    Ok(())
}
