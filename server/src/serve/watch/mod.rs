//! Reloading the configuration from its files: on SIGHUP, and with
//! `-watch-config` whenever a file (or the directory's list of files, or the
//! TLS certificate) changes.
//!
//! Each configuration that loads is handed to [`serve_reloading`]; one that
//! does not (a bad file, a file that never finishes reading) is reported and
//! the running one kept, and so is a certificate that does not load. Models a
//! reload keeps keep their `${PORT}` numbers ([`KeptPorts`]), so adding a
//! model restarts nothing else.
//!
//! ```no_run
//! use llama_swap_server::{ConfigSources, ConfigWatcher, serve_watching};
//! use llama_swap_server::ServeOptions;
//!
//! async fn run() -> Result<(), Box<dyn std::error::Error>> {
//!     let sources = ConfigSources::new().file("config.yaml");
//!     // Taken before the load, so that a change made meanwhile is seen.
//!     let version = sources.version();
//!     let loaded = sources.load()?;
//!     let watcher = ConfigWatcher::new(sources, version, &loaded.config).poll(true);
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//!     let shutdown = async {
//!         let _ = tokio::signal::ctrl_c().await;
//!     };
//!     serve_watching(listener, loaded.config, ServeOptions::default(), watcher, shutdown)
//!         .await?;
//!     Ok(())
//! }
//! ```

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use tokio::net::TcpListener;
use tokio::signal::unix::Signal;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::offload::{ConfigLoader, DEFAULT_LOAD_LIMIT};
use super::tls::TlsFiles;
use super::{ServeError, ServeOptions, error_chain, serve_reloading};
use crate::config::{Config, ConfigError, KeptPorts, Loaded, Loader, source_files};

/// How often a [polling](ConfigWatcher::poll) watcher looks at the files.
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_secs(2);
/// Longest wait for the files' modification times and sizes.
const FINGERPRINT_LIMIT: Duration = Duration::from_secs(10);

/// Where the configuration (and the certificate) comes from: `--config`,
/// `--config-dir` and the TLS files.
#[derive(Debug, Clone, Default)]
pub struct ConfigSources {
    config: Option<PathBuf>,
    config_dir: Option<PathBuf>,
    tls: Option<TlsFiles>,
}

impl ConfigSources {
    /// No sources yet: add a [`file`](Self::file), a [`dir`](Self::dir) or both.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads this file (`--config`).
    #[must_use]
    pub fn file(mut self, path: impl Into<PathBuf>) -> Self {
        self.config = Some(path.into());
        self
    }

    /// Reads the directory's `*.yml`/`*.yaml` files after the file (`--config-dir`).
    #[must_use]
    pub fn dir(mut self, path: impl Into<PathBuf>) -> Self {
        self.config_dir = Some(path.into());
        self
    }

    /// Reloads this certificate with the configuration, and watches its files.
    #[must_use]
    pub fn tls(mut self, tls: TlsFiles) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The certificate given to [`tls`](Self::tls).
    pub fn tls_files(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// Reads, merges and checks the configuration.
    ///
    /// # Errors
    ///
    /// [`ConfigError`] when a source cannot be read or the configuration is
    /// not valid ([`ConfigError::NoSources`] without a file or directory).
    pub fn load(&self) -> Result<Loaded, ConfigError> {
        self.loader().load()
    }

    /// As [`load`](Self::load) for a reload: the models `kept` lists keep
    /// their `${PORT}` numbers.
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

    /// How the sources are named in messages: `file`, `dir` or `file + dir`.
    pub fn describe(&self) -> String {
        match (&self.config, &self.config_dir) {
            (Some(file), Some(dir)) => format!("{} + {}", file.display(), dir.display()),
            (Some(file), None) => file.display().to_string(),
            (None, Some(dir)) => dir.display().to_string(),
            (None, None) => String::new(),
        }
    }

    /// What a polling watcher compares: every file read (the directory's list
    /// of files included) with its modification time and size. Blocking
    /// (it reads file metadata).
    pub fn version(&self) -> SourcesVersion {
        let mut files = source_files(self.config.as_deref(), self.config_dir.as_deref())
            .unwrap_or_else(|_| self.config.iter().cloned().collect());
        if let Some(tls) = &self.tls {
            files.push(tls.cert_path().to_owned());
            files.push(tls.key_path().to_owned());
        }
        SourcesVersion(
            files
                .into_iter()
                .map(|path| {
                    let stamp = stamp(&path);
                    (path, stamp)
                })
                .collect(),
        )
    }
}

/// A file's modification time and size (`None`: unreadable).
fn stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// The state of the sources at one moment ([`ConfigSources::version`]):
/// equal versions mean nothing a reload would read has changed.
#[derive(Clone, PartialEq, Eq)]
pub struct SourcesVersion(Vec<(PathBuf, Option<(SystemTime, u64)>)>);

impl fmt::Debug for SourcesVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|(path, _)| path))
            .finish()
    }
}

/// Sends a configuration to the server each time it should be reloaded: on
/// SIGHUP ([`hangup`](Self::hangup)), and when [polling](Self::poll), each
/// time the sources' [version](ConfigSources::version) changes.
pub struct ConfigWatcher {
    sources: ConfigSources,
    seen: SourcesVersion,
    kept: KeptPorts,
    poll: bool,
    hangup: Option<Signal>,
    on_reload: Option<Box<dyn Fn(&Config) + Send + Sync>>,
}

impl fmt::Debug for ConfigWatcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigWatcher")
            .field("sources", &self.sources)
            .field("poll", &self.poll)
            .field("hangup", &self.hangup.is_some())
            .finish_non_exhaustive()
    }
}

impl ConfigWatcher {
    /// A watcher of `sources`, which were at `version` when `running` (the
    /// configuration being served) was loaded from them. It reloads nothing
    /// until told when: [`poll`](Self::poll), [`hangup`](Self::hangup).
    #[must_use]
    pub fn new(sources: ConfigSources, version: SourcesVersion, running: &Config) -> Self {
        Self {
            sources,
            seen: version,
            kept: KeptPorts::of(running),
            poll: false,
            hangup: None,
            on_reload: None,
        }
    }

    /// Reloads when the files change (`-watch-config`), looking every
    /// `WATCH_INTERVAL` (2 s).
    #[must_use]
    pub fn poll(mut self, poll: bool) -> Self {
        self.poll = poll;
        self
    }

    /// Reloads each time `signal` arrives (SIGHUP, registered by the caller
    /// early, so that a signal sent at once does not meet the default action).
    #[must_use]
    pub fn hangup(mut self, signal: Signal) -> Self {
        self.hangup = Some(signal);
        self
    }

    /// Calls `apply` with each configuration that loaded, before the server
    /// gets it (the binary applies `logLevel` and `logTimeFormat` this way).
    #[must_use]
    pub fn on_reload(mut self, apply: impl Fn(&Config) + Send + Sync + 'static) -> Self {
        self.on_reload = Some(Box::new(apply));
        self
    }

    /// Sends each configuration that should be served to `reloads`, until
    /// `stop` is cancelled or the receiver is gone.
    pub async fn run(self, reloads: mpsc::Sender<Config>, stop: CancellationToken) {
        let Self {
            sources,
            seen,
            kept,
            poll,
            hangup,
            on_reload,
        } = self;
        let files = FileSources {
            sources,
            versions: ConfigLoader::new(),
            loads: ConfigLoader::new(),
            on_reload,
        };
        let watch = Watch {
            seen,
            kept,
            poll: poll.then_some(WATCH_INTERVAL),
        };
        watch.run(files, hangup, reloads, stop).await;
    }
}

/// Serves `config` on `listener` like [`serve_reloading`], with the
/// configurations `watcher` sends, until `shutdown` resolves.
///
/// # Errors
///
/// As [`serve_reloading`].
pub async fn serve_watching(
    listener: TcpListener,
    config: Config,
    options: ServeOptions,
    watcher: ConfigWatcher,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let (reloads_tx, reloads) = mpsc::channel(1);
    let stop = CancellationToken::new();
    let watching = watcher.run(reloads_tx, stop.clone());
    let serving = async {
        let served = serve_reloading(listener, config, options, reloads, shutdown).await;
        stop.cancel();
        served
    };
    // Side by side in this task: the watcher ends with the server.
    let ((), served) = tokio::join!(watching, serving);
    served
}

/// Where a [`Watch`] reads versions and configurations: the files, or a
/// test's stand-in. Each call reports its own failures and answers `None`.
pub(crate) trait Sources {
    /// What is compared to tell a change.
    type Version: PartialEq;

    /// How the sources are named in messages.
    fn describe(&self) -> String;

    /// The sources' version now.
    fn version(&mut self) -> impl Future<Output = Option<Self::Version>>;

    /// The configuration to serve now, the models in `kept` keeping their ports.
    fn load(&mut self, kept: &KeptPorts) -> impl Future<Output = Option<Config>>;
}

/// The requests to reload from outside: SIGHUP, or a test's channel.
pub(crate) trait Hangup {
    /// Resolves with the next request (`None`: there will be none).
    fn requested(&mut self) -> impl Future<Output = Option<()>>;
}

impl Hangup for Signal {
    fn requested(&mut self) -> impl Future<Output = Option<()>> {
        self.recv()
    }
}

impl Hangup for mpsc::Receiver<()> {
    fn requested(&mut self) -> impl Future<Output = Option<()>> {
        self.recv()
    }
}

/// The watcher's loop and what it remembers between reloads.
pub(crate) struct Watch<V> {
    /// The version of the sources last loaded (or last looked at on SIGHUP).
    pub(crate) seen: V,
    /// The ports of the configuration last sent.
    pub(crate) kept: KeptPorts,
    /// How often to look for changes; `None`: only on request.
    pub(crate) poll: Option<Duration>,
}

impl<V: PartialEq> Watch<V> {
    /// Loads from `sources` on each request of `hangup` and, when polling, on
    /// each change, and sends what loads to `reloads`; until `stop` or the
    /// receiver is gone.
    pub(crate) async fn run<S, H>(
        mut self,
        mut sources: S,
        mut hangup: Option<H>,
        reloads: mpsc::Sender<Config>,
        stop: CancellationToken,
    ) where
        S: Sources<Version = V>,
        H: Hangup,
    {
        let mut ticks = tokio::time::interval(self.poll.unwrap_or(WATCH_INTERVAL));
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                Some(()) = async {
                    match hangup.as_mut() {
                        Some(h) => h.requested().await,
                        None => std::future::pending().await,
                    }
                } => {
                    tracing::info!("SIGHUP: reloading the configuration");
                    let taken = tokio::select! {
                        () = stop.cancelled() => return,
                        taken = sources.version() => taken,
                    };
                    if let Some(now) = taken {
                        self.seen = now;
                    }
                }
                _ = ticks.tick(), if self.poll.is_some() => {
                    let taken = tokio::select! {
                        () = stop.cancelled() => return,
                        taken = sources.version() => taken,
                    };
                    match taken {
                        Some(now) if now != self.seen => self.seen = now,
                        _ => continue,
                    }
                    tracing::info!(sources = %sources.describe(), "configuration changed: reloading");
                }
            }
            let loaded = tokio::select! {
                () = stop.cancelled() => return,
                loaded = sources.load(&self.kept) => loaded,
            };
            let Some(config) = loaded else { continue };
            // The server may still refuse it (a configuration that cannot be
            // scheduled); the next load then keeps numbers the running one
            // may not have, which costs at most a restart.
            self.kept = std::mem::take(&mut self.kept).then(KeptPorts::of(&config));
            if reloads.send(config).await.is_err() {
                return;
            }
        }
    }
}

/// The files of [`ConfigSources`], read off the runtime and within limits: a
/// source that never finishes reading must not hold a worker or keep SIGTERM
/// from ending the server.
struct FileSources {
    sources: ConfigSources,
    versions: ConfigLoader,
    loads: ConfigLoader,
    on_reload: Option<Box<dyn Fn(&Config) + Send + Sync>>,
}

impl Sources for FileSources {
    type Version = SourcesVersion;

    fn describe(&self) -> String {
        self.sources.describe()
    }

    async fn version(&mut self) -> Option<SourcesVersion> {
        let reading = self.sources.clone();
        match self
            .versions
            .load(FINGERPRINT_LIMIT, move || reading.version())
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

    async fn load(&mut self, kept: &KeptPorts) -> Option<Config> {
        let (reading, keeping) = (self.sources.clone(), kept.clone());
        let loaded = self
            .loads
            .load(DEFAULT_LOAD_LIMIT, move || {
                let certificate = reading.tls.as_ref().map(TlsFiles::reload);
                (certificate, reading.reload(&keeping))
            })
            .await;
        let (certificate, loaded) = match loaded {
            Ok(done) => done,
            Err(stalled) => {
                tracing::error!(
                    "reload failed, the running configuration is kept: {}",
                    error_chain(&stalled)
                );
                return None;
            }
        };
        match certificate {
            Some(Ok(())) => tracing::info!("TLS certificate reloaded"),
            Some(Err(err)) => tracing::error!(
                "TLS certificate reload failed, the one in use is kept: {}",
                error_chain(&err)
            ),
            None => {}
        }
        match loaded {
            Ok(loaded) => {
                for warning in &loaded.warnings {
                    tracing::warn!("{}: {warning}", self.sources.describe());
                }
                if let Some(apply) = &self.on_reload {
                    apply(&loaded.config);
                }
                Some(loaded.config)
            }
            Err(err) => {
                tracing::error!(
                    "reload failed, the running configuration is kept: {}",
                    error_chain(&err)
                );
                None
            }
        }
    }
}

#[cfg(test)]
mod tests;
