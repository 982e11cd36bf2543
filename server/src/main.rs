//! The `llama-swap-server` binary.
//!
//! Binds the listener, turns ctrl-c/SIGTERM into a graceful shutdown and
//! SIGHUP (or, with `--watch-config`, a changed file) into a reload, and hands
//! everything else to [`llama_swap_server::serve_reloading`].
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
use std::time::{Duration, SystemTime};

use clap::Parser;
use llama_swap_server::config::{
    Config, ConfigError, KeptPorts, Loaded, Loader, SelfProxy, source_files,
};
use llama_swap_server::logging::{self, LogSettings};
use llama_swap_server::serve::{
    ConfigLoader, DEFAULT_LOAD_LIMIT, ListenAddr, TlsFiles, error_chain,
};
use llama_swap_server::{HttpOptions, ServeOptions, serve_reloading};
use tokio::signal::unix::{Signal, SignalKind, signal};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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
    /// interface (port 0 picks a free one). Default 127.0.0.1:8080, or
    /// 127.0.0.1:8443 with TLS. The first stdout line is
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

/// Exit status for an unusable configuration, the same as clap's for bad arguments.
const EXIT_INVALID: u8 = 2;
/// Exit status when the server cannot start for another reason.
const EXIT_FAILED: u8 = 1;
/// How often `--watch-config` looks at the files.
const WATCH_INTERVAL: Duration = Duration::from_secs(2);
/// Longest wait for the files' modification times and sizes.
const FINGERPRINT_LIMIT: Duration = Duration::from_secs(10);

/// Every source file with its modification time and size (`None`: unreadable).
type Fingerprint = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

/// Where the configuration (and certificate) comes from.
#[derive(Debug, Clone)]
struct Sources {
    config: Option<PathBuf>,
    config_dir: Option<PathBuf>,
    tls: Option<TlsFiles>,
    /// `logLevel` and `logTimeFormat` follow each reload.
    log_settings: Option<Arc<LogSettings>>,
}

impl Sources {
    fn load(&self) -> Result<Loaded, ConfigError> {
        self.loader().load()
    }

    /// As [`load`](Self::load) for a reload: the models of the running
    /// configuration keep their `${PORT}` numbers.
    fn reload(&self, kept: &KeptPorts) -> Result<Loaded, ConfigError> {
        self.loader().keep_ports(kept).load()
    }

    fn loader(&self) -> Loader<'_> {
        let mut loader = Config::loader();
        if let Some(file) = &self.config {
            loader = loader.file(file);
        }
        if let Some(dir) = &self.config_dir {
            loader = loader.dir(dir);
        }
        loader
    }

    /// How the sources are named in messages.
    fn describe(&self) -> String {
        match (&self.config, &self.config_dir) {
            (Some(file), Some(dir)) => format!("{} + {}", file.display(), dir.display()),
            (Some(file), None) => file.display().to_string(),
            (None, Some(dir)) => dir.display().to_string(),
            (None, None) => String::new(),
        }
    }

    /// What `--watch-config` compares: every file read (the directory's list
    /// of files included) with its modification time and size.
    fn fingerprint(&self) -> Fingerprint {
        let mut files = source_files(self.config.as_deref(), self.config_dir.as_deref())
            .unwrap_or_else(|_| self.config.iter().cloned().collect());
        if let Some(tls) = &self.tls {
            files.push(tls.cert_path().to_owned());
            files.push(tls.key_path().to_owned());
        }
        files
            .into_iter()
            .map(|path| {
                let stamp = std::fs::metadata(&path)
                    .ok()
                    .and_then(|m| Some((m.modified().ok()?, m.len())));
                (path, stamp)
            })
            .collect()
    }
}

fn main() -> ExitCode {
    // Upstreams are started through this binary acting as a shim (see upstream::spawn).
    if let Some(code) = llama_swap_server::upstream::run_shim_if_requested() {
        return code;
    }
    let cli = Cli::parse_from(go_style(std::env::args_os()));
    if cli.version {
        println!("version: {} (llama-swap-server)", env!("CARGO_PKG_VERSION"));
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
        None => ListenAddr::Host {
            host: "127.0.0.1".to_owned(),
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
    let sources = Sources {
        config: cli.config.clone(),
        config_dir: cli.config_dir.clone(),
        tls,
        log_settings: None,
    };
    // Taken before the load, so a change made while starting is seen as one.
    let loaded_version = sources.fingerprint();
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
    let watch = cli.watch_config;
    let flush = std::sync::Arc::clone(&log_settings);
    let sources = Sources {
        log_settings: Some(log_settings),
        ..sources
    };
    let options = ServeOptions::default().http(HttpOptions::default().proxy_log(proxy_log));
    let code = runtime.block_on(run(
        listen,
        sources,
        watch,
        options,
        loaded.config,
        loaded_version,
    ));
    // Stdout lines are written by a thread: the last ones go out before the exit.
    flush.flush_stdout();
    code
}

async fn run(
    listen: ListenAddr,
    sources: Sources,
    watch: bool,
    mut options: ServeOptions,
    config: Config,
    loaded_version: Vec<(PathBuf, Option<(SystemTime, u64)>)>,
) -> ExitCode {
    llama_swap_server::upstream::guard_server_process().await;
    let signals = register_signals();
    let listener = match listen.bind().await {
        Ok(listener) => listener,
        Err(err) => {
            if let Some(settings) = &sources.log_settings {
                settings.release_stdout();
            }
            eprintln!("error: {}", error_chain(&err));
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let scheme = if sources.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let release = || {
        if let Some(settings) = &sources.log_settings {
            settings.release_stdout();
        }
    };
    match listener.local_addr() {
        Ok(addr) => {
            println!("listening on {scheme}://{addr}");
            release();
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
                    tracing::info!(
                        "no apiKeys are configured: anyone who can connect may use the models"
                    );
                }
            }
        }
        Err(err) => {
            release();
            tracing::warn!(%err, "the bound address is unknown");
        }
    }

    if let Some(tls) = &sources.tls {
        options = options.tls(tls.clone());
    }
    let (reloads_tx, reloads) = mpsc::channel(1);
    let stop_reloads = CancellationToken::new();
    let reloader = tokio::spawn(reload_source(
        signals.hangup,
        sources,
        watch,
        loaded_version,
        KeptPorts::of(&config),
        reloads_tx,
        stop_reloads.clone(),
    ));
    let result = serve_reloading(
        listener,
        config,
        options,
        reloads,
        shutdown_signal(signals.terminate, signals.interrupt),
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

/// The signals the server acts on, registered before it prints its address:
/// a signal sent as soon as the address is known must not meet the default
/// action, which ends the process (SIGHUP) or skips the graceful shutdown.
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

/// Loads the configuration (and the TLS certificate) again on SIGHUP, and with
/// `watch` when a source differs from version `seen`, sending each
/// configuration that loads to the server. A configuration that does not load
/// is reported and the running one kept; so is a certificate.
async fn reload_source(
    mut hangup: Option<Signal>,
    sources: Sources,
    watch: bool,
    mut seen: Fingerprint,
    mut kept: KeptPorts,
    reloads: mpsc::Sender<Config>,
    stop: CancellationToken,
) {
    let mut loader = ConfigLoader::new();
    let mut watcher = ConfigLoader::new();
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
            } => {
                tracing::info!("SIGHUP: reloading the configuration");
                let taken = tokio::select! {
                    () = stop.cancelled() => return,
                    taken = fingerprint(&mut watcher, &sources) => taken,
                };
                if let Some(now) = taken {
                    seen = now;
                }
            }
            _ = ticks.tick(), if watch => {
                let taken = tokio::select! {
                    () = stop.cancelled() => return,
                    taken = fingerprint(&mut watcher, &sources) => taken,
                };
                match taken {
                    Some(now) if now != seen => seen = now,
                    _ => continue,
                }
                tracing::info!(sources = %sources.describe(), "configuration changed: reloading");
            }
        }
        // Off the runtime and bounded, the certificate too: a source that never
        // finishes reading must not hold a worker or keep SIGTERM from ending
        // the server.
        let (reading, keeping) = (sources.clone(), kept.clone());
        let loaded = tokio::select! {
            () = stop.cancelled() => return,
            loaded = loader.load(DEFAULT_LOAD_LIMIT, move || {
                let certificate = reading.tls.as_ref().map(TlsFiles::reload);
                (certificate, reading.reload(&keeping))
            }) => loaded,
        };
        let loaded = match loaded {
            Ok((certificate, loaded)) => {
                match certificate {
                    Some(Ok(())) => tracing::info!("TLS certificate reloaded"),
                    Some(Err(err)) => tracing::error!(
                        "TLS certificate reload failed, the one in use is kept: {}",
                        error_chain(&err)
                    ),
                    None => {}
                }
                Ok(loaded)
            }
            Err(stalled) => Err(stalled),
        };
        match loaded {
            Err(stalled) => tracing::error!(
                "reload failed, the running configuration is kept: {}",
                error_chain(&stalled)
            ),
            Ok(Ok(loaded)) => {
                for warning in &loaded.warnings {
                    tracing::warn!("{}: {warning}", sources.describe());
                }
                if let Some(settings) = &sources.log_settings {
                    settings.apply(&loaded.config);
                }
                // The server may still refuse it (a configuration that cannot
                // be scheduled); the next load then keeps numbers the running
                // one may not have, which costs at most a restart.
                kept = std::mem::take(&mut kept).then(KeptPorts::of(&loaded.config));
                if reloads.send(loaded.config).await.is_err() {
                    return;
                }
            }
            Ok(Err(err)) => tracing::error!(
                "reload failed, the running configuration is kept: {}",
                error_chain(&err)
            ),
        }
    }
}

/// The sources' [fingerprint](Sources::fingerprint), taken off the runtime:
/// `None` (reported) when it did not finish within [`FINGERPRINT_LIMIT`], as
/// on a file system that stopped answering.
async fn fingerprint(watcher: &mut ConfigLoader, sources: &Sources) -> Option<Fingerprint> {
    let reading = sources.clone();
    match watcher
        .load(FINGERPRINT_LIMIT, move || reading.fingerprint())
        .await
    {
        Ok(taken) => Some(taken),
        Err(stalled) => {
            tracing::warn!(
                "checking the configuration files for changes failed: {}",
                error_chain(&stalled)
            );
            None
        }
    }
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
