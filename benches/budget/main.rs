//! The performance budget (docs/DESIGN.md section 7) measured beside its references.
//!
//! Run through `scripts/bench` (release build, nginx installed, the scheduler's
//! criterion bench first), or directly:
//! `cargo bench -p llama-swap-suite --bench budget -- [--quick] [--out BENCHMARKS.md]`.
//!
//! | module | measures |
//! |---|---|
//! | [`overhead`] | latency added and throughput at 1, 64 and 256 clients: direct, nginx, bare hyper proxy, server |
//! | [`sse`] | per-chunk delay of a paced SSE stream through the proxies |
//! | [`swap`] | upstream healthy → first request forwarded; server time in a swap |
//! | [`scheduler`] | admit with 10 000 waiting, drain 10 000 (criterion's estimates) |
//! | [`priority`] | priority scenarios against their oracles and against FIFO without fence |
//! | [`memory`] | server RSS idle and with 10 000 waiting requests |
//! | [`wrk`] | the overhead comparison driven by `wrk` at 1, 64 and 256 connections |
//! | [`store`] | the throughput cost of the history database and of captures at 64 connections (load generator and `wrk`), rows written and dropped, and the memory of a full capture buffer |
//! | [`bodyidle`] | the cost of `timeouts.bodyIdle` on streamed responses: throughput and server CPU per request, on ÷ off |
//!
//! `BENCH_SERVER=/path/to/llama-swap-server` runs that binary wherever the harness
//! runs the server (default: the one beside the harness), so two builds can be
//! compared with the same harness and references (an A/B of a change).
//!
//! The bare hyper proxy is this package's binary `bare-hyper-proxy`
//! (`bare_proxy.rs`): the floor of a hyper-based proxy, what the server could
//! reach with no per-request work of its own.
//!
//! Under `cargo test`/`cargo nextest` (no `--bench` argument) the binary does nothing.

mod bodyidle;
mod http;
mod loadgen;
mod memory;
mod nginx;
mod overhead;
mod priority;
mod procs;
mod report;
mod scheduler;
mod sse;
mod stamped;
mod stats;
mod store;
mod swap;
mod wrk;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use report::{Row, RunInfo};

/// Errors of the harness: it reports them as n/a rows and carries on.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// What every section needs.
pub struct Ctx {
    /// Directory of the release binaries (mockswap, llama-swap-server).
    pub bin: PathBuf,
    /// The nginx executable, when available.
    pub nginx: Option<PathBuf>,
    /// Quick mode: fewer and shorter repetitions.
    pub quick: bool,
    /// Repetitions of the overhead rounds.
    pub rounds: usize,
    /// Repetitions of the other measurements.
    pub reps: usize,
}

impl Ctx {
    /// A fresh temporary directory, removed when dropped.
    pub fn tempdir(&self) -> Res<tempfile::TempDir> {
        Ok(tempfile::Builder::new()
            .prefix("llama-swap-bench-")
            .tempdir()?)
    }
}

struct Args {
    bench: bool,
    list: bool,
    quick: bool,
    out: Option<PathBuf>,
    command: String,
    date: String,
    only: Vec<String>,
}

fn parse_args() -> Args {
    let mut args = Args {
        bench: false,
        list: false,
        quick: false,
        out: None,
        command: "cargo bench -p llama-swap-suite --bench budget".to_owned(),
        date: String::from("unknown"),
        only: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bench" => args.bench = true,
            "--list" => args.list = true,
            "--quick" => args.quick = true,
            "--out" => args.out = it.next().map(PathBuf::from),
            "--command" => args.command = it.next().unwrap_or_default(),
            "--date" => args.date = it.next().unwrap_or_default(),
            "--only" => {
                args.only = it
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(str::to_owned)
                    .collect();
            }
            // cargo and test runners pass their own flags; they do not concern us.
            _ => {}
        }
    }
    args
}

fn main() -> ExitCode {
    let args = parse_args();
    if args.list || !args.bench {
        // Test mode (`cargo test --all-targets`, nextest's listing): no test here.
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("budget: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("budget: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Res<()> {
    let started = Instant::now();
    let bin = procs::bin_dir()?;
    for needed in ["mockswap", "llama-swap-server"] {
        if needed == "llama-swap-server" && std::env::var_os(procs::SERVER_ENV).is_some() {
            continue;
        }
        if !bin.join(needed).is_file() {
            return Err(format!(
                "{} is missing: run `cargo build --release -p mockswap -p llama-swap-server` (scripts/bench does)",
                bin.join(needed).display()
            )
            .into());
        }
    }
    if !bin.join(procs::BARE_PROXY).is_file() {
        eprintln!(
            "{} is missing (`cargo build --release -p llama-swap-suite --bins`; scripts/bench builds it): \
             bare hyper proxy rows are n/a",
            bin.join(procs::BARE_PROXY).display()
        );
    }
    let nginx = nginx::find();
    if nginx.is_none() {
        eprintln!(
            "nginx not found (set NGINX=/path or let scripts/bench install it): nginx rows are n/a"
        );
    }
    let ctx = Ctx {
        bin,
        nginx,
        quick: args.quick,
        rounds: if args.quick { 2 } else { 5 },
        reps: if args.quick { 3 } else { 7 },
    };
    let mode = format!(
        "{} ({} overhead rounds, {} repetitions of the other figures)",
        if ctx.quick { "quick" } else { "full" },
        ctx.rounds,
        ctx.reps
    );
    let wanted = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    let mut rows: Vec<Row> = Vec::new();
    macro_rules! section {
        ($name:literal, $module:ident) => {
            if wanted($name) {
                eprintln!("== {}", $name);
                match $module::run(&ctx).await {
                    Ok(more) => rows.extend(more),
                    Err(err) => {
                        eprintln!("{} failed: {err}", $name);
                        rows.push(Row::missing($name, "section failed", err.to_string()));
                    }
                }
            }
        };
    }
    section!("overhead", overhead);
    section!("sse", sse);
    section!("swap", swap);
    section!("scheduler", scheduler);
    section!("priority", priority);
    section!("memory", memory);
    section!("wrk", wrk);
    section!("store", store);
    section!("bodyidle", bodyidle);

    println!("{}", report::plain_table(&rows));
    if let Some(out) = &args.out {
        let notes_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("benches/budget/NOTES.md");
        let notes = std::fs::read_to_string(&notes_path).unwrap_or_default();
        let info = RunInfo {
            command: &args.command,
            date: &args.date,
            mode: &mode,
            seconds: started.elapsed().as_secs_f64(),
        };
        report::write_markdown(out, &rows, &info, include_str!("METHOD.md"), &notes)?;
        eprintln!("wrote {}", out.display());
    }
    Ok(())
}
