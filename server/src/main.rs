//! The `llama-swap-server` binary.
//!
//! Binds the listener, turns ctrl-c/SIGTERM into a graceful shutdown and
//! SIGHUP (or, with `--watch-config`, a changed file) into a reload, and hands
//! everything else to [`llama_swap_server::serve_reloading`].
//!
//! Exit codes: 0 success (including a graceful shutdown), 1 the address cannot
//! be bound or the runtime cannot start, 2 invalid configuration or invalid
//! command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::Parser;
use llama_swap_server::config::{Config, ConfigError, Loaded, LogLevel};
use llama_swap_server::serve::error_chain;
use llama_swap_server::{ServeOptions, serve_reloading};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// A priority-aware model-swapping proxy that runs llama-swap configurations.
#[derive(Debug, Parser)]
#[command(name = "llama-swap-server", version, about)]
struct Cli {
    /// llama-swap YAML configuration file.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,

    /// Address to listen on (`host:port`; port 0 picks a free one). The first
    /// stdout line is `listening on http://<address>`.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080")]
    listen: String,

    /// Reload the configuration when the file changes (checked every 2 s).
    /// SIGHUP reloads it in any case.
    #[arg(long)]
    watch_config: bool,

    /// Validate the configuration, print the resolved models, groups and scheduler,
    /// and exit (0 when valid, 2 when not).
    #[arg(long)]
    check_config: bool,
}

/// Exit status for an unusable configuration, the same as clap's for bad arguments.
const EXIT_INVALID: u8 = 2;
/// Exit status when the server cannot start for another reason.
const EXIT_FAILED: u8 = 1;
/// How often `--watch-config` looks at the file.
const WATCH_INTERVAL: Duration = Duration::from_secs(2);

fn main() -> ExitCode {
    // Upstreams are started through this binary acting as a shim (see upstream::spawn).
    if let Some(code) = llama_swap_server::upstream::run_shim_if_requested() {
        return code;
    }
    let cli = Cli::parse();
    // Taken before the load, so a change made while starting is seen as one.
    let loaded_version = fingerprint(&cli.config);
    let loaded = match Config::load(&cli.config) {
        Ok(loaded) => loaded,
        Err(err) => return report_invalid(&err),
    };
    print_warnings(&cli.config, &loaded);
    if cli.check_config {
        println!(
            "configuration OK: {} ({} warning{})",
            cli.config.display(),
            loaded.warnings.len(),
            if loaded.warnings.len() == 1 { "" } else { "s" }
        );
        print!("{}", loaded.config.summary());
        return ExitCode::SUCCESS;
    }
    init_tracing(loaded.config.log_level);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    runtime.block_on(run(cli, loaded.config, loaded_version))
}

async fn run(cli: Cli, config: Config, loaded_version: Option<(SystemTime, u64)>) -> ExitCode {
    llama_swap_server::upstream::guard_server_process().await;
    let listener = match tokio::net::TcpListener::bind(&cli.listen).await {
        Ok(listener) => listener,
        Err(err) => {
            eprintln!("error: cannot listen on {}: {err}", cli.listen);
            return ExitCode::from(EXIT_FAILED);
        }
    };
    match listener.local_addr() {
        Ok(addr) => {
            println!("listening on http://{addr}");
            if !addr.ip().is_loopback() {
                tracing::info!(%addr, "listening beyond loopback; set apiKeys to require a key");
            }
        }
        Err(err) => tracing::warn!(%err, "the bound address is unknown"),
    }

    let (reloads_tx, reloads) = mpsc::channel(1);
    let stop_reloads = CancellationToken::new();
    let reloader = tokio::spawn(reload_source(
        cli.config.clone(),
        cli.watch_config,
        loaded_version,
        reloads_tx,
        stop_reloads.clone(),
    ));
    let result = serve_reloading(
        listener,
        config,
        ServeOptions::default(),
        reloads,
        shutdown_signal(),
    )
    .await;
    stop_reloads.cancel();
    if let Err(err) = reloader.await {
        tracing::warn!(%err, "the reload task failed");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// Resolves on ctrl-c (SIGINT) or SIGTERM.
async fn shutdown_signal() {
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut sigterm) => {
                sigterm.recv().await;
            }
            Err(err) => {
                tracing::warn!(%err, "SIGTERM cannot be handled; use ctrl-c");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        result = tokio::signal::ctrl_c() => {
            if let Err(err) = result {
                tracing::warn!(%err, "ctrl-c cannot be handled");
                std::future::pending::<()>().await;
            }
        }
        () = terminate => {}
    }
    tracing::info!("shutdown requested");
}

/// Loads the configuration again on SIGHUP, and with `watch` when the file
/// differs from version `seen`, sending each one that loads to the server. A
/// configuration that does not load is reported and the running one kept.
async fn reload_source(
    path: PathBuf,
    watch: bool,
    mut seen: Option<(SystemTime, u64)>,
    reloads: mpsc::Sender<Config>,
    stop: CancellationToken,
) {
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(hangup) => Some(hangup),
        Err(err) => {
            tracing::warn!(%err, "SIGHUP cannot be handled; reload with --watch-config");
            None
        }
    };
    let mut ticks = tokio::time::interval(WATCH_INTERVAL);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            Some(()) = async {
                match hangup.as_mut() {
                    Some(h) => h.recv().await,
                    None => std::future::pending().await,
                }
            } => tracing::info!("SIGHUP: reloading the configuration"),
            _ = ticks.tick(), if watch => {
                let now = fingerprint(&path);
                if now == seen {
                    continue;
                }
                seen = now;
                tracing::info!(file = %path.display(), "configuration file changed: reloading");
            }
        }
        match Config::load(&path) {
            Ok(loaded) => {
                for warning in &loaded.warnings {
                    tracing::warn!("{}: {warning}", path.display());
                }
                if reloads.send(loaded.config).await.is_err() {
                    return;
                }
            }
            Err(err) => tracing::error!(
                "reload failed, the running configuration is kept: {}",
                error_chain(&err)
            ),
        }
    }
}

/// What `--watch-config` compares: modification time and size.
fn fingerprint(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// `RUST_LOG` when set, else the config's `logLevel`.
fn init_tracing(level: LogLevel) {
    let default = match level {
        LogLevel::Debug => "debug",
        LogLevel::Warn => "warn",
        LogLevel::Error => "error",
        _ => "info",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .init();
}

/// Prints warnings as `warning: file: key.path: message`, like the errors.
fn print_warnings(file: &Path, loaded: &Loaded) {
    for warning in &loaded.warnings {
        eprintln!("warning: {}: {warning}", file.display());
    }
}

fn report_invalid(err: &ConfigError) -> ExitCode {
    let issues = err.issues();
    if issues.is_empty() {
        eprintln!("error: {err}");
    } else {
        for line in err.to_string().lines() {
            eprintln!("error: {line}");
        }
        eprintln!(
            "configuration invalid: {} problem{}",
            issues.len(),
            if issues.len() == 1 { "" } else { "s" }
        );
    }
    ExitCode::from(EXIT_INVALID)
}
