//! The `llama-swap-server` binary.
//!
//! Binds the listener, turns ctrl-c/SIGTERM into a graceful shutdown and
//! SIGHUP (or, with `--watch-config`, a changed file) into a reload, and hands
//! everything else to the library ([`llama_swap_server::serve_watching`]
//! with a [`ConfigWatcher`](llama_swap_server::ConfigWatcher)).
//!
//! Exit codes: 0 success (including a graceful shutdown), 1 the address cannot
//! be bound or the runtime cannot start, 2 invalid configuration or invalid
//! command line.

/// The binary's allocator. Under load glibc's malloc and free took a sixth of
/// the proxy's CPU (every request allocates and frees its buffers and header
/// maps across threads); mimalloc's thread-local free lists about halve that
/// (BENCHMARKS.md).
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::ffi::OsString;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use llama_swap_server::config::{Config, ConfigError, Loaded, SelfProxy};
use llama_swap_server::logging::{self, LogSettings};
use llama_swap_server::{
    ConfigSources, ConfigWatcher, HttpOptions, ListenAddr, ServeOptions, TlsFiles, error_chain,
    serve_watching,
};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// A priority-aware model-swapping proxy that runs llama-swap configurations.
///
/// Flags may be written Go-style with one dash, as llama-swap's are
/// (`-config config.yaml -listen :8080 -watch-config`).
#[derive(Debug, Parser)]
#[command(name = "llama-swap-server", about, disable_version_flag = true)]
struct Cli {
    /// llama-swap YAML configuration file.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Directory of *.yml/*.yaml configuration files, merged in name order
    /// after --config (duplicate models or groups are errors).
    #[arg(long, value_name = "DIR")]
    config_dir: Option<PathBuf>,

    /// Address to listen on: host:port, [ipv6]:port, or :port for every
    /// interface (port 0 picks a free one). Default :8080 (every interface,
    /// as llama-swap), or :8443 with TLS; without apiKeys, listening beyond
    /// this machine is warned about. The first stdout line is
    /// `listening on http://<address>` (https with TLS).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,

    /// Reload the configuration when a file (or the directory's list of
    /// files, or the TLS certificate) changes; checked every 2 s. SIGHUP
    /// reloads in any case.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    watch_config: bool,

    /// PEM certificate chain for HTTPS (needs --tls-key-file).
    #[arg(long, value_name = "FILE", requires = "tls_key_file")]
    tls_cert_file: Option<PathBuf>,

    /// PEM private key for HTTPS (needs --tls-cert-file).
    #[arg(long, value_name = "FILE", requires = "tls_cert_file")]
    tls_key_file: Option<PathBuf>,

    /// Validate the configuration, print the resolved models, groups and scheduler,
    /// and exit (0 when valid, 2 when not).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    check_config: bool,

    /// Print the version and exit.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", default_value = "false", value_parser = go_bool)]
    version: bool,
}

/// The long flags, for reading Go's single-dash spelling.
const FLAGS: &[&str] = &[
    "config",
    "config-dir",
    "listen",
    "watch-config",
    "tls-cert-file",
    "tls-key-file",
    "check-config",
    "version",
    "help",
];

/// Go's flag package takes `-name`, `-name=value` and `--name` alike; clap
/// takes `--name`. A single-dash argument naming one of our flags is given a
/// second dash; everything after `--` is left alone.
fn go_style(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut rest = false;
    for arg in args {
        if rest || arg == "--" {
            rest = true;
            out.push(arg);
            continue;
        }
        let converted = arg.to_str().and_then(|text| {
            let body = text.strip_prefix('-').filter(|b| !b.starts_with('-'))?;
            let name = body.split_once('=').map_or(body, |(name, _)| name);
            FLAGS
                .contains(&name)
                .then(|| OsString::from(format!("-{text}")))
        });
        out.push(converted.unwrap_or(arg));
    }
    out
}

/// A boolean as Go's flag package reads one.
fn go_bool(text: &str) -> Result<bool, String> {
    match text {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(format!("{other:?} is not a boolean (use true or false)")),
    }
}

/// Exit status for an unusable configuration (or history database), as
/// llama-swap exits on a bad config; clap's own argument errors stay 2.
const EXIT_INVALID: u8 = 1;
/// Exit status when the server cannot start for another reason.
const EXIT_FAILED: u8 = 1;

fn main() -> ExitCode {
    // Upstreams are started through this binary acting as a shim (see upstream::spawn).
    if let Some(code) = llama_swap_server::testing::upstream::run_shim_if_requested() {
        return code;
    }
    let cli = Cli::parse_from(go_style(std::env::args_os()));
    if cli.version {
        println!("{}", llama_swap_server::version::line());
        return ExitCode::SUCCESS;
    }
    if cli.config.is_none() && cli.config_dir.is_none() {
        eprintln!("error: {}", ConfigError::NoSources);
        return ExitCode::from(EXIT_INVALID);
    }
    let listen = match cli.listen.as_deref() {
        Some(text) => match text.parse::<ListenAddr>() {
            Ok(addr) => addr,
            Err(err) => {
                eprintln!("error: --listen: {err}");
                return ExitCode::from(EXIT_INVALID);
            }
        },
        // llama-swap's default (its container image passes no -listen).
        None => ListenAddr::AllInterfaces {
            port: if cli.tls_cert_file.is_some() {
                8443
            } else {
                8080
            },
        },
    };
    let tls = match (&cli.tls_cert_file, &cli.tls_key_file) {
        (Some(cert), Some(key)) if !cli.check_config => match TlsFiles::load(cert, key) {
            Ok(tls) => Some(tls),
            Err(err) => {
                eprintln!("error: TLS: {}", error_chain(&err));
                return ExitCode::from(EXIT_INVALID);
            }
        },
        _ => None,
    };
    let mut sources = ConfigSources::new();
    if let Some(file) = &cli.config {
        sources = sources.file(file);
    }
    if let Some(dir) = &cli.config_dir {
        sources = sources.dir(dir);
    }
    if let Some(tls) = &tls {
        sources = sources.tls(tls.clone());
    }
    // Taken before the load, so a change made while starting is seen as one.
    let loaded_version = sources.version();
    let loaded = match sources.load() {
        Ok(loaded) => loaded,
        Err(err) => return report_invalid(&err),
    };
    print_warnings(&sources.describe(), &loaded);
    if cli.check_config {
        // Checked against -listen only when it is given (llama-swap's own
        // configs often use port 8080, the default); serving always checks
        // the bound address, and each reload.
        let loops = if cli.listen.is_some() {
            self_proxies(&loaded.config, &listen)
        } else {
            Vec::new()
        };
        if !loops.is_empty() {
            for model in &loops {
                eprintln!("error: {model}");
            }
            return ExitCode::from(EXIT_INVALID);
        }
        println!(
            "configuration OK: {} ({} warning{})",
            sources.describe(),
            loaded.warnings.len(),
            if loaded.warnings.len() == 1 { "" } else { "s" }
        );
        print!("{}", loaded.config.summary());
        print_memory_hints(&loaded.config);
        return ExitCode::SUCCESS;
    }
    let (proxy_log, log_settings) = logging::install(&loaded.config);
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
    // The history database is opened once, before serving: a path that cannot
    // be used is a start error naming it.
    let history = match llama_swap_server::History::open(&loaded.config.activity.store) {
        Ok(history) => std::sync::Arc::new(history),
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(EXIT_INVALID);
        }
    };
    let mut options =
        ServeOptions::default().http(HttpOptions::default().proxy_log(proxy_log).history(history));
    if let Some(tls) = tls {
        options = options.tls(tls);
    }
    let code = runtime.block_on(async {
        llama_swap_server::testing::upstream::guard_server_process().await;
        // Registered before the address is printed: a signal sent as soon as it
        // is known must not meet the default action, which ends the process
        // (SIGHUP) or skips the graceful shutdown.
        let signals = register_signals();
        let mut watcher = ConfigWatcher::new(sources, loaded_version, &loaded.config)
            .poll(cli.watch_config)
            .on_reload({
                let settings = Arc::clone(&log_settings);
                move |config| settings.apply(config)
            });
        if let Some(hangup) = signals.hangup {
            watcher = watcher.hangup(hangup);
        }
        let shutdown = shutdown_signal(signals.terminate, signals.interrupt);
        run(
            listen,
            watcher,
            options,
            loaded.config,
            &log_settings,
            shutdown,
        )
        .await
    });
    // Stdout lines are written by a thread: the last ones go out before the exit.
    log_settings.flush_stdout();
    code
}

/// Binds `listen`, says where the server listens, and serves until `shutdown`.
async fn run(
    listen: ListenAddr,
    watcher: ConfigWatcher,
    options: ServeOptions,
    config: Config,
    log_settings: &LogSettings,
    shutdown: impl Future<Output = ()> + Send,
) -> ExitCode {
    // `-listen :0`: not a port a model is numbered with (from startPort up).
    let highest = config.models.iter().filter_map(|m| m.port).max();
    let start = config.start_port;
    let proxies: Vec<u16> = config
        .models
        .iter()
        .filter_map(|m| m.proxy.parse::<http::Uri>().ok()?.port_u16())
        .collect();
    let reserved = |port: u16| {
        highest.is_some_and(|top| (start..=top).contains(&port)) || proxies.contains(&port)
    };
    let listener = match listen.bind_avoiding(reserved).await {
        Ok(listener) => listener,
        Err(err) => {
            log_settings.release_stdout();
            eprintln!("error: {}", error_chain(&err));
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let scheme = if options.tls.is_some() {
        "https"
    } else {
        "http"
    };
    match listener.local_addr() {
        Ok(addr) => {
            println!("listening on {scheme}://{addr}");
            log_settings.release_stdout();
            if listen.is_loopback_only() {
                tracing::info!(
                    "only this machine can connect; use -listen :{} to listen on every interface",
                    addr.port()
                );
            } else {
                tracing::info!(
                    "reachable by all hosts on the network; use -listen localhost:{} to restrict to this machine",
                    addr.port()
                );
                if config.api_keys.is_empty() {
                    tracing::warn!(
                        "no apiKeys are configured: anyone who can reach {addr} may use the models; set apiKeys, or use -listen localhost:{} to listen on this machine only",
                        addr.port()
                    );
                }
            }
        }
        Err(err) => {
            log_settings.release_stdout();
            tracing::warn!(%err, "the bound address is unknown");
        }
    }
    match serve_watching(listener, config, options, watcher, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", error_chain(&err));
            ExitCode::from(EXIT_INVALID)
        }
    }
}

/// The models whose upstream is the address `listen` stands for (none known
/// for port 0 or a name that does not resolve).
fn self_proxies(config: &Config, listen: &ListenAddr) -> Vec<SelfProxy> {
    let addrs: Vec<SocketAddr> = match listen {
        ListenAddr::AllInterfaces { port } => vec![SocketAddr::from(([0, 0, 0, 0], *port))],
        ListenAddr::Host { host, port } => (host.as_str(), *port)
            .to_socket_addrs()
            .map(Iterator::collect)
            .unwrap_or_default(),
    };
    let mut found: Vec<SelfProxy> = Vec::new();
    for addr in addrs.into_iter().filter(|a| a.port() != 0) {
        for model in config.self_proxies(addr) {
            if !found.iter().any(|f| f.model == model.model) {
                found.push(model);
            }
        }
    }
    found
}

/// The signals the server acts on.
struct Signals {
    hangup: Option<Signal>,
    terminate: Option<Signal>,
    interrupt: Option<Signal>,
}

fn register_signals() -> Signals {
    let register = |kind: SignalKind, name: &str, instead: &str| match signal(kind) {
        Ok(registered) => Some(registered),
        Err(err) => {
            tracing::warn!(%err, "{name} cannot be handled; {instead}");
            None
        }
    };
    Signals {
        hangup: register(SignalKind::hangup(), "SIGHUP", "reload with --watch-config"),
        terminate: register(SignalKind::terminate(), "SIGTERM", "use ctrl-c"),
        interrupt: register(SignalKind::interrupt(), "SIGINT", "use SIGTERM"),
    }
}

/// Resolves on SIGINT (ctrl-c) or SIGTERM.
async fn shutdown_signal(terminate: Option<Signal>, interrupt: Option<Signal>) {
    async fn received(signal: Option<Signal>) {
        match signal {
            Some(mut signal) => {
                signal.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
    tokio::select! {
        () = received(interrupt) => {}
        () = received(terminate) => {}
    }
    tracing::info!("shutdown requested");
}

/// Prints warnings as `warning: file: key.path: message`, like the errors.
fn print_warnings(file: &str, loaded: &Loaded) {
    for warning in &loaded.warnings {
        eprintln!("warning: {file}: {warning}");
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

/// `--check-config` under the memory router: models whose processes running
/// on this machine now use more GPU memory than their `memory` says.
fn print_memory_hints(config: &llama_swap_server::config::Config) {
    if config.memory.is_none() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return;
    };
    let estimates = config
        .models
        .iter()
        .filter_map(|m| Some((m.id.as_str(), m.memory?)));
    for hint in runtime.block_on(llama_swap_server::memory_hints(estimates)) {
        println!("hint: {hint}");
    }
}
