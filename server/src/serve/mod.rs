//! The library entry point: serve a configuration on a listener until a
//! shutdown signal, reloading it on demand, then drain and stop everything.
//!
//! Shutdown order, each step bounded:
//! 1. stop accepting connections;
//! 2. requests still waiting for a model answer 503 `shutting_down`, log
//!    streams end, and every connection closes after its current response;
//! 3. responses in flight may finish until the drain deadline, then the
//!    remaining connections are closed; a connection whose socket has not
//!    accepted a write for 5 s (its client stopped reading, or reads so slowly
//!    that the kernel does not call the socket writable: a UI tab on a laptop
//!    gone to sleep) is closed then instead of holding the shutdown to the
//!    deadline;
//! 4. the router fails anything left and stops every upstream; the supervisor
//!    reaps them;
//! 5. `serve` returns.
//!
//! A reload keeps the router and the supervisor and applies the new
//! configuration to them in place: a model whose process definition is
//! unchanged keeps its upstream running and its requests (in flight and
//! waiting, in their order); a changed model is stopped once its requests in
//! flight end and its new definition starts for what waits for it; a removed
//! model's waiting requests fail with `model_removed` and it is stopped once
//! its requests in flight end. New requests use the new HTTP state at once.
//! A configuration that cannot be scheduled is refused and the running one
//! kept.
//!
//! ```
//! use llama_swap_server::config::Config;
//!
//! async fn run() -> Result<(), Box<dyn std::error::Error>> {
//!     let loaded = Config::loader().file("config.yaml").load()?;
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//!     let shutdown = async {
//!         let _ = tokio::signal::ctrl_c().await;
//!     };
//!     llama_swap_server::serve(listener, loaded.config, shutdown).await?;
//!     Ok(())
//! }
//! ```

mod idle;
mod instance;
pub(crate) mod listen;
mod offload;
mod stall;
mod tls;
mod watch;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
// `watch` is the config watcher's module here.
use tokio::sync::watch as latest;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::api::{App, HttpOptions};
use crate::config::Config;
pub(crate) use crate::errors::error_chain;
use crate::scheduler::SettingsError;
use instance::Instance;
pub use listen::{ListenAddr, ListenError};
pub use tls::{TlsError, TlsFiles};
pub use watch::{ConfigSources, ConfigWatcher, serve_watching};

/// How long a client may take to finish the TLS handshake.
const TLS_HANDSHAKE_LIMIT: Duration = Duration::from_secs(30);

/// Settings of a served instance that are not in llama-swap's config file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServeOptions {
    /// HTTP settings (body limit).
    pub http: HttpOptions,
    /// How long responses in flight may take to finish after the shutdown
    /// signal or a reload (default 30 s, like llama-swap).
    pub drain_deadline: Duration,
    /// Grace period of the final upstream stop (SIGTERM, then SIGKILL; default 5 s).
    pub stop_grace: Duration,
    /// Serve HTTPS with this certificate instead of plain HTTP (default none).
    pub tls: Option<TlsFiles>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            http: HttpOptions::default(),
            drain_deadline: Duration::from_secs(30),
            stop_grace: Duration::from_secs(5),
            tls: None,
        }
    }
}

impl ServeOptions {
    /// Sets the HTTP settings.
    #[must_use]
    pub fn http(mut self, http: HttpOptions) -> Self {
        self.http = http;
        self
    }

    /// Sets how long responses in flight may take to finish when draining.
    #[must_use]
    pub fn drain_deadline(mut self, deadline: Duration) -> Self {
        self.drain_deadline = deadline;
        self
    }

    /// Sets the grace period of the final upstream stop.
    #[must_use]
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// Serves HTTPS with `tls` (see [`TlsFiles::reload`] to renew it).
    #[must_use]
    pub fn tls(mut self, tls: TlsFiles) -> Self {
        self.tls = Some(tls);
        self
    }
}

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The configuration could not be turned into a scheduler.
    #[error("the configuration cannot be scheduled")]
    Settings(#[from] SettingsError),
    /// The TLS client for `https://` upstreams could not be set up.
    #[error("the TLS client for https:// upstreams cannot be set up")]
    Tls(#[from] crate::proxy::TlsSetupError),
    /// Models whose upstream is the server's own listen address.
    #[error("{}", self_proxy_lines(.0))]
    SelfProxy(Vec<crate::config::SelfProxy>),
    /// The router did not take the reloaded configuration.
    #[error("the router did not take the new configuration")]
    Reload(#[source] crate::router::ReconfigureError),
    /// A reload changed `store.path` to a file that cannot be used as the
    /// history database (the error names it).
    #[error("the new history database cannot be used")]
    Store(#[source] crate::store::StoreError),
    /// `routing.router.use: memory` with `gpus: auto` found no GPU with a
    /// known memory size, or a model does not fit on the GPUs found.
    #[error("routing.router.settings.memory.gpus is auto: {0}")]
    Gpus(#[source] crate::policy::memory::MemoryError),
}

/// `config` with `gpus: auto` replaced by this machine's GPUs (read once).
async fn on_this_machine(config: Config) -> Result<Config, ServeError> {
    if !config.detects_gpus() {
        return Ok(config);
    }
    let gpus = crate::hardware::gpus_with_memory().await;
    tracing::info!(?gpus, "GPUs found for the memory router");
    config.on_detected_gpus(gpus).map_err(ServeError::Gpus)
}

fn self_proxy_lines(models: &[crate::config::SelfProxy]) -> String {
    let lines: Vec<String> = models.iter().map(ToString::to_string).collect();
    lines.join("\n")
}

/// Refuses `config` when a model's upstream is the address `listener` is bound to.
fn refuse_self_proxies(config: &Config, listener: &TcpListener) -> Result<(), ServeError> {
    let Ok(listen) = listener.local_addr() else {
        return Ok(());
    };
    let loops = config.self_proxies(listen);
    if loops.is_empty() {
        Ok(())
    } else {
        Err(ServeError::SelfProxy(loops))
    }
}

/// Serves `config` on `listener` until `shutdown` resolves, with default options.
///
/// # Errors
///
/// [`ServeError`] when the configuration cannot be scheduled.
pub async fn serve(
    listener: TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    serve_with(listener, config, ServeOptions::default(), shutdown).await
}

/// Serves `config` on `listener` until `shutdown` resolves.
///
/// # Errors
///
/// [`ServeError`] when the configuration cannot be scheduled.
pub async fn serve_with(
    listener: TcpListener,
    config: Config,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let (_keep, reloads) = mpsc::channel(1);
    serve_reloading(listener, config, options, reloads, shutdown).await
}

/// Serves `config` on `listener`, switching to each configuration received on
/// `reloads`, until `shutdown` resolves.
///
/// # Errors
///
/// [`ServeError`] when the first configuration cannot be scheduled or a
/// model's upstream is the listen address (a bad reload is logged and ignored).
pub async fn serve_reloading(
    listener: TcpListener,
    config: Config,
    options: ServeOptions,
    mut reloads: mpsc::Receiver<Config>,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    refuse_self_proxies(&config, &listener)?;
    let config = on_this_machine(config).await?;
    let mut current = Instance::start(&config, &options)?;
    let (app_tx, app_rx) = latest::channel(App::new(current.state.clone()));
    let stop = CancellationToken::new();
    let mut connections = JoinSet::new();
    let mut reloads_open = true;

    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    connections.spawn(connection(
                        stream,
                        peer,
                        options.tls.clone(),
                        app_rx.clone(),
                        stop.clone(),
                    ));
                }
                Err(error) => {
                    // Out of file descriptors and the like: back off instead of spinning.
                    tracing::warn!(%error, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            reload = reloads.recv(), if reloads_open => match reload {
                Some(config) => {
                    let reloaded = match refuse_self_proxies(&config, &listener) {
                        Ok(()) => match on_this_machine(config).await {
                            Ok(config) => current.reload(&config, &options).await,
                            Err(error) => Err(error),
                        },
                        Err(error) => Err(error),
                    };
                    match reloaded {
                        Ok(()) => {
                            drop(app_tx.send_replace(App::new(current.state.clone())));
                            tracing::info!("configuration reloaded");
                        }
                        Err(error) => tracing::error!(
                            error = %error_chain(&error),
                            "reload refused; the running configuration is kept"
                        ),
                    }
                }
                None => reloads_open = false,
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    tracing::info!("shutting down: draining requests in flight");
    current.state.drain();
    stop.cancel();
    let drained = tokio::time::timeout(options.drain_deadline, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            left = connections.len(),
            deadline = ?options.drain_deadline,
            "responses still in flight at the drain deadline are cut"
        );
        connections.shutdown().await;
    }
    current.stop(Duration::ZERO, options.stop_grace).await;
    tracing::info!("shut down");
    Ok(())
}

/// Serves one connection (after the TLS handshake with `tls`) with whatever
/// app is current when each request arrives; on `stop`, finishes the current
/// response and closes.
async fn connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    tls: Option<TlsFiles>,
    apps: latest::Receiver<App>,
    stop: CancellationToken,
) {
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "TCP_NODELAY not set");
    }
    // The socket itself is watched, under TLS too: rustls takes what hyper
    // writes into its own buffer even when the socket is full.
    let blocked = stall::Blocked::new();
    let stream = stall::Watched::new(stream, Arc::clone(&blocked));
    match tls {
        None => serve_io(stream, peer, apps, stop, &blocked).await,
        // Boxed: the handshake's and the TLS stream's state (several KiB)
        // would otherwise be reserved in every plain connection's task too.
        Some(tls) => Box::pin(tls_connection(stream, peer, tls, apps, stop, &blocked)).await,
    }
}

/// [`connection`] after a TLS handshake.
async fn tls_connection(
    stream: stall::Watched<tokio::net::TcpStream>,
    peer: SocketAddr,
    tls: TlsFiles,
    apps: latest::Receiver<App>,
    stop: CancellationToken,
    blocked: &stall::Blocked,
) {
    let handshake = tokio::select! {
        () = stop.cancelled() => return,
        done = tokio::time::timeout(TLS_HANDSHAKE_LIMIT, tls.acceptor().accept(stream)) => done,
    };
    match handshake {
        Ok(Ok(stream)) => serve_io(stream, peer, apps, stop, blocked).await,
        Ok(Err(error)) => tracing::debug!(%peer, %error, "TLS handshake failed"),
        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
    }
}

async fn serve_io<I>(
    io: I,
    peer: SocketAddr,
    apps: latest::Receiver<App>,
    stop: CancellationToken,
    blocked: &stall::Blocked,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |mut request: http::Request<Incoming>| {
        request.extensions_mut().insert(ConnectInfo(peer));
        let app = apps.borrow().clone();
        async move {
            Ok::<_, std::convert::Infallible>(app.call(request.map(axum::body::Body::new)).await)
        }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .serve_connection(TokioIo::new(io), service)
        // Websockets: the connection is handed to the proxy's pipe after a 101.
        .with_upgrades();
    tokio::pin!(conn);
    let result = tokio::select! {
        result = conn.as_mut() => result,
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                result = conn.as_mut() => result,
                () = blocked.stalled(stall::STALLED_AFTER) => {
                    tracing::info!(
                        %peer,
                        "the client stopped reading while the server drains; its connection is closed"
                    );
                    return;
                }
            }
        }
    };
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}
