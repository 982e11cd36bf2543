//! Swapping on a realistic day (issue 28): a seeded synthetic day of a bot, bursts of
//! Elevated interactive chats and a stream of Low batch jobs over four models with
//! stated load, sleep and wake times, replayed with time scaled down against a fresh
//! release server per setup with mockswap upstreams. It prints, in unscaled units,
//! Elevated p50/p99 wait, Low maximum wait, swaps per hour and the share of time
//! lost to swaps for: arrival order only (llama-swap), priorities, + `minResident`,
//! + `agingAfter`, + sleep, + memory placement on one GPU and on two.
//!
//! ```text
//! cargo build --release --locked -p mockswap -p llama-swap-server
//! cargo bench --locked -p llama-swap-suite --bench day -- [options]
//!   --quick            the evening (hours 17-21) only: about a minute
//!   --seed N           the day's seed (default 1)
//!   --scale S          seconds of the day per second of replay (default 240: a day in 6 min)
//!   --hours A-B        replay hours A to B of the day (default 0-24)
//!   --min-resident S   minResident, seconds of the day (default 240; rounded to whole replay seconds)
//!   --aging-after S    agingAfter, seconds of the day (default 720; rounded likewise)
//!   --token-gap S      seconds of the day between two streamed tokens (default 2)
//!   --only a,b         setups: arrival, priority, minresident, aging, sleep, memory1, memory
//!   --serial           one setup after the other (default: all at once, staggered)
//!   --bin DIR          where mockswap and llama-swap-server are (default: beside the bench,
//!                      target/release; `BENCH_SERVER` names another server binary)
//! ```
//!
//! | module | holds |
//! |---|---|
//! | [`plan`] | the models' stated figures and the seeded day generator |
//! | [`setup`] | the server config of each setup |
//! | [`replay`] | playing a day against one server; the server's swap counters |
//! | [`compare`] | the setups side by side, and their figures |
//! | [`report`] | the printed preamble and table |
//!
//! The processes, the HTTP client and the order statistics are the budget bench's
//! (`benches/budget/{procs,http,stats}.rs`), included as they are. The test target
//! `day` (`smoke.rs`) runs the generator's tests and a tiny day over HTTP.
//!
//! Under `cargo test`/`cargo nextest` (no `--bench` argument) the binary does nothing.

mod compare;
#[allow(dead_code)]
#[path = "../budget/http.rs"]
mod http;
mod plan;
#[allow(dead_code)]
#[path = "../budget/procs.rs"]
mod procs;
mod replay;
mod report;
mod setup;
#[allow(dead_code)]
#[path = "../budget/stats.rs"]
mod stats;

use std::process::ExitCode;
use std::time::Duration;

use compare::Options;
use setup::Setup;

/// Errors of the harness.
pub type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

struct Args {
    bench: bool,
    seed: u64,
    scale: f64,
    hours: (f64, f64),
    min_resident: f64,
    aging_after: f64,
    token_gap: f64,
    only: Vec<Setup>,
    serial: bool,
    bin: Option<std::path::PathBuf>,
}

fn number<T: std::str::FromStr>(flag: &str, value: Option<String>) -> Res<T> {
    value
        .as_deref()
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("{flag} needs a number").into())
}

fn parse_args() -> Res<Args> {
    let mut args = Args {
        bench: false,
        seed: 1,
        scale: 240.0,
        hours: (0.0, 24.0),
        min_resident: 240.0,
        aging_after: 720.0,
        token_gap: 2.0,
        only: Setup::ALL.to_vec(),
        serial: false,
        bin: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--bench" => args.bench = true,
            "--quick" => args.hours = (17.0, 21.0),
            "--seed" => args.seed = number("--seed", it.next())?,
            "--scale" => args.scale = number("--scale", it.next())?,
            "--min-resident" => args.min_resident = number("--min-resident", it.next())?,
            "--aging-after" => args.aging_after = number("--aging-after", it.next())?,
            "--token-gap" => args.token_gap = number("--token-gap", it.next())?,
            "--serial" => args.serial = true,
            "--bin" => args.bin = it.next().map(std::path::PathBuf::from),
            "--hours" => {
                let value = it.next().unwrap_or_default();
                let (a, b) = value.split_once('-').ok_or("--hours takes A-B")?;
                args.hours = (
                    number("--hours", Some(a.to_owned()))?,
                    number("--hours", Some(b.to_owned()))?,
                );
            }
            "--only" => {
                args.only = it
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(|name| Setup::named(name).ok_or(format!("no setup named {name}")))
                    .collect::<Result<_, _>>()?;
            }
            // cargo and test runners pass their own flags (--list among them).
            _ => {}
        }
    }
    let (from, to) = args.hours;
    if !(0.0 <= from && from < to && to <= 24.0) {
        return Err("--hours A-B needs 0 <= A < B <= 24".into());
    }
    if args.scale.is_nan() || args.scale < 1.0 {
        return Err("--scale must be at least 1".into());
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(err) => {
            eprintln!("day: {err}");
            return ExitCode::from(2);
        }
    };
    if !args.bench {
        // Test mode (`cargo test --all-targets`, nextest's listing): the tests are
        // the `day` test target's.
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("day: cannot start the runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("day: {err}");
            ExitCode::FAILURE
        }
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "n/a".to_owned())
}

async fn run(args: Args) -> Res<()> {
    let bin = match args.bin {
        Some(dir) => dir,
        None => procs::bin_dir()?,
    };
    for needed in ["mockswap", "llama-swap-server"] {
        if needed == "llama-swap-server" && std::env::var_os(procs::SERVER_ENV).is_some() {
            continue;
        }
        if !bin.join(needed).is_file() {
            return Err(format!(
                "{} is missing: run `cargo build --release -p mockswap -p llama-swap-server`",
                bin.join(needed).display()
            )
            .into());
        }
    }
    let day = plan::generate(args.seed, args.hours.0, args.hours.1);
    let options = Options {
        bin,
        scale: args.scale,
        min_resident: args.min_resident,
        aging_after: args.aging_after,
        token_gap: args.token_gap,
        stagger: Duration::from_secs(3),
    };
    println!("{}", report::preamble(&day, &options));
    let before = load_average();
    let results = if args.serial {
        let mut all = Vec::new();
        for setup in &args.only {
            eprintln!("== {}", setup.name());
            all.extend(compare::compare(&day, &[*setup], &options).await?);
        }
        all
    } else {
        eprintln!(
            "== {} setups at once, about {:.0} s",
            args.only.len(),
            day.length() / args.scale
        );
        compare::compare(&day, &args.only, &options).await?
    };
    println!("{}", report::table(&results));
    print!("{}", report::checks(&results));
    println!(
        "Load average (1, 5, 15 min) before: {before}; after: {}",
        load_average()
    );
    Ok(())
}
