//! The `mockswap` binary: a fake upstream model server and proxy double for tests that
//! launch processes or are not written in Rust. See the crate README for the flags and
//! the admin API.

use std::io::{IsTerminal as _, Write as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use mockswap::{Crash, Fixture, MockSwap, StreamShape};
use tokio::signal::unix::{SignalKind, signal};

/// How long a graceful stop may take before connections are dropped.
const GRACE: Duration = Duration::from_secs(5);

/// Fake OpenAI-compatible model server and llama-swap proxy double.
#[derive(Debug, Parser)]
#[command(name = "mockswap", version, about)]
struct Args {
    /// Address to listen on; port 0 picks a free port. The first stdout line is
    /// `listening on http://<address>`.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Comma-separated model names served and listed (default: any name is accepted).
    #[arg(long, value_delimiter = ',')]
    models: Option<Vec<String>>,
    /// GET /health answers 503 {"status":"loading"} (and model requests 503) until this
    /// long after start, e.g. `2s`, `500ms`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    load_time: Duration,
    /// How long POST /sleep (vLLM) or /release_memory_occupation (SGLang) takes, e.g. `200ms`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    sleep_time: Duration,
    /// How long POST /wake_up (vLLM) or /resume_memory_occupation (SGLang) takes, e.g. `1s`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    wake_time: Duration,
    /// GPU memory in bytes the fake model reports holding awake (GET /__mockswap/sleep).
    #[arg(long, default_value_t = 0)]
    memory: u64,
    /// GPU memory in bytes it reports holding asleep.
    #[arg(long, default_value_t = 0)]
    sleep_memory: u64,
    /// Delay before answering each model request, e.g. `20ms`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    latency: Duration,
    /// Pace streamed tokens at this rate (default: unpaced).
    #[arg(long)]
    tokens_per_second: Option<f64>,
    /// Delay before the first frame of a stream, e.g. `200ms`.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "0s")]
    time_to_first_token: Duration,
    /// Open chat streams with llama-swap's model-loading frames (sendLoadingState).
    #[arg(long)]
    send_loading_state: bool,
    /// Log SIGTERM and keep running (only SIGKILL stops the process).
    #[arg(long)]
    ignore_sigterm: bool,
    /// Exit with status 1 right after the N-th model request has completed.
    #[arg(long, value_name = "N")]
    crash_after: Option<u64>,
    /// Exit with status 1 in the middle of the first streaming response, after a few frames.
    #[arg(long)]
    crash_mid_stream: bool,
    /// GET /health always answers 503.
    #[arg(long)]
    never_healthy: bool,
    /// Start with the gate closed (requests held until POST /__mockswap/gate {"open":true}).
    #[arg(long)]
    gate_closed: bool,
    /// Keep only the newest N journal entries (for long runs such as benchmarks).
    #[arg(long, value_name = "N")]
    journal_limit: Option<usize>,
    /// JSON file of scripted replies and faults (format in the README).
    #[arg(long, value_name = "FILE")]
    fixture: Option<PathBuf>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MOCKSWAP_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("mockswap: cannot start the runtime: {err}");
            return ExitCode::from(2);
        }
    };
    runtime.block_on(run(args))
}

async fn run(args: Args) -> ExitCode {
    let mut builder = MockSwap::builder()
        .listen(args.listen)
        .load_time(args.load_time)
        .latency(args.latency)
        .never_healthy(args.never_healthy)
        .crash_mid_stream(args.crash_mid_stream)
        .sleep_time(args.sleep_time)
        .wake_time(args.wake_time)
        .memory(args.memory, args.sleep_memory);
    let mut shape = StreamShape::new()
        .time_to_first_token(args.time_to_first_token)
        .loading_state(args.send_loading_state);
    if let Some(rate) = args.tokens_per_second {
        shape = shape.tokens_per_second(rate);
    }
    builder = builder.stream_shape(shape);
    if let Some(models) = args.models {
        builder = builder.models(models);
    }
    if let Some(n) = args.crash_after {
        builder = builder.crash_after(n);
    }
    if let Some(n) = args.journal_limit {
        builder = builder.journal_limit(n);
    }
    if args.gate_closed {
        builder = builder.gate_closed();
    }
    if let Some(path) = &args.fixture {
        match Fixture::load(path) {
            Ok(fixture) => builder = builder.fixture(fixture),
            Err(err) => {
                eprintln!("mockswap: {err}");
                return ExitCode::from(2);
            }
        }
    }
    let mut sigterm = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(err) => {
            eprintln!("mockswap: cannot handle SIGTERM: {err}");
            return ExitCode::from(2);
        }
    };
    let mut sigint = match signal(SignalKind::interrupt()) {
        Ok(s) => s,
        Err(err) => {
            eprintln!("mockswap: cannot handle SIGINT: {err}");
            return ExitCode::from(2);
        }
    };
    let mock = match builder.start().await {
        Ok(mock) => mock,
        Err(err) => {
            eprintln!("mockswap: {err}");
            return ExitCode::from(2);
        }
    };
    {
        // The first stdout line is the contract with whoever launched us; flush it now.
        let mut out = std::io::stdout().lock();
        if writeln!(out, "listening on {}", mock.uri())
            .and_then(|()| out.flush())
            .is_err()
        {
            // Nobody reads stdout; keep serving, the port is still usable.
            tracing::warn!("could not write the listening line to stdout");
        }
    }
    tracing::info!(uri = %mock.uri(), "mockswap ready");
    loop {
        tokio::select! {
            _ = sigterm.recv() => {
                if args.ignore_sigterm {
                    tracing::warn!("SIGTERM received and ignored (--ignore-sigterm)");
                    continue;
                }
                tracing::info!("SIGTERM received, stopping");
                stop(&mock).await;
                return ExitCode::SUCCESS;
            }
            _ = sigint.recv() => {
                tracing::info!("SIGINT received, stopping");
                stop(&mock).await;
                return ExitCode::SUCCESS;
            }
            crash = mock.crashed() => {
                match crash {
                    Crash::MidStream => tracing::error!("crashing mid-stream (--crash-mid-stream)"),
                    Crash::AfterRequests(n) => {
                        tracing::error!(requests = n, "crashing after {n} request(s) (--crash-after)");
                        // Let the N-th response finish writing before the process ends.
                        stop(&mock).await;
                    }
                    _ => {}
                }
                return ExitCode::from(1);
            }
        }
    }
}

async fn stop(mock: &MockSwap) {
    if tokio::time::timeout(GRACE, mock.shutdown()).await.is_err() {
        tracing::warn!("graceful stop took longer than {GRACE:?}; dropping connections");
        mock.kill().await;
    }
}
