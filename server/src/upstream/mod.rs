//! Upstream process supervision: one owner task per model that spawns its server,
//! waits for it to become healthy, stops it, and reports when it dies on its own.
//!
//! | file | concern |
//! |---|---|
//! | `command` | splitting `cmd` into an argv like a POSIX shell, without one |
//! | `process` | one child: process group, output pumps, SIGTERM/SIGKILL, reaping |
//! | `health` | polling the check endpoint with a fast-then-slower backoff |
//! | `actor` | the per-model state machine (Stopped, Starting, Ready, Stopping) |
//! | `logs` | bounded per-model output history with live subscription |
//! | `port` | refusing to start a model on a port another process listens on |
//! | `props` | a ready upstream's slot count (`GET /props` `total_slots`), for `parallel: auto` |
//! | `spawn` | the shim and spawner thread that make upstreams die with the server |
//! | `orphans` | markers, sweeping descendants, reclaiming a killed server's, reaping adopted ones |
//!
//! The [`Supervisor`] implements [`Launcher`] for the router: it never decides when
//! a model runs, only carries out starts and stops and reports exits it did not cause
//! as [`UpstreamEvent`]s.
//!
//! ```no_run
//! use std::time::Duration;
//! use llama_swap_server::launcher::Launcher;
//! use llama_swap_server::upstream::{ProcessSpec, Supervisor};
//!
//! # async fn demo() -> Result<(), llama_swap_server::launcher::LaunchError> {
//! let spec = ProcessSpec {
//!     model: "qwen".into(),
//!     cmd: "llama-server --port 5800 -m qwen.gguf".into(),
//!     cmd_stop: None,
//!     env: vec![],
//!     proxy: "http://127.0.0.1:5800".into(),
//!     check_endpoint: Some("/health".into()),
//!     health_check_timeout: Duration::from_secs(120),
//! };
//! let (supervisor, _exits) = Supervisor::new(vec![spec], 1000);
//! supervisor.ensure_ready("qwen").await?;
//! supervisor.stop("qwen", Duration::from_secs(10)).await;
//! supervisor.shutdown(Duration::from_secs(5)).await;
//! # Ok(())
//! # }
//! ```

mod actor;
mod command;
mod health;
mod logs;
mod orphans;
mod port;
mod process;
mod props;
mod spawn;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use command::{CommandError, split_command};
pub use logs::{LogHub, LogLine, LogRing, LogStream, LogSubscription, MAX_LINE_BYTES};
pub use orphans::{MARKER_VAR, Reclaimed, adopt_orphans, reclaim};
pub use spawn::{enable_shim, run_shim_if_requested, shim_enabled};

use crate::launcher::{BoxFuture, LaunchError, Launcher, UpstreamEvent};
use crate::proxy::UpstreamTls;
use actor::{ModelActor, Request};

/// What a server binary does once, before it serves, so that no upstream process
/// outlives it or its model: upstreams start through the shim (this executable,
/// which must call [`run_shim_if_requested`] first in `main`), the process adopts
/// orphaned descendants of upstreams, and the processes a server killed earlier
/// left behind are stopped (returned, each also logged as a warning).
///
/// Not for a process that spawns children of its own elsewhere (the reaper of
/// adopted processes would reap them too); a library user calls the parts it
/// wants.
pub async fn guard_server_process() -> Vec<Reclaimed> {
    if let Err(error) = enable_shim(std::path::PathBuf::from("/proc/self/exe")) {
        tracing::warn!(%error, "upstreams are started directly: they will not die with the server if it is killed");
    }
    if let Err(error) = adopt_orphans() {
        tracing::warn!(%error, "cannot become a child subreaper: descendants of upstreams whose parent exits go to init");
    }
    reclaim().await
}

/// Requests one model's task may have waiting before callers wait to enqueue.
const REQUEST_QUEUE: usize = 64;

/// Exit events buffered for the router.
const EVENT_QUEUE: usize = 256;

/// Everything needed to run one model's upstream server, macros already expanded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    /// The model ID.
    pub model: String,
    /// The command line, split like a POSIX shell would (see [`split_command`]) and
    /// run without one.
    pub cmd: String,
    /// Command that asks the server to stop, instead of SIGTERM to its process group.
    /// `${PID}` in it is replaced by the server's pid when it runs.
    pub cmd_stop: Option<String>,
    /// Added to (and overriding) the environment inherited from this process.
    pub env: Vec<(String, String)>,
    /// Base URL of the upstream, e.g. `http://127.0.0.1:5800`.
    pub proxy: String,
    /// Path polled until it answers 200 (`/health`); `None` means ready once spawned.
    pub check_endpoint: Option<String>,
    /// How long the upstream has to pass its health check.
    pub health_check_timeout: Duration,
}

/// Where a model's process is in its life cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProcessState {
    /// No process.
    Stopped,
    /// Spawned, not yet healthy.
    Starting,
    /// Healthy and serving.
    Ready,
    /// Being stopped; a start asked for now begins once the stop is complete.
    Stopping,
    /// The supervisor shut down; the model will not start again.
    ShutDown,
}

/// A model's state and, while there is a process, its pid (also its process-group id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProcessStatus {
    /// The life-cycle state.
    pub state: ProcessState,
    /// The process's pid, when one exists.
    pub pid: Option<u32>,
}

/// Runs the upstream processes of every configured model, one owner task each.
///
/// Dropping the last handle kills every process group at once (SIGKILL) and reaps;
/// [`shutdown`](Self::shutdown) is the graceful way.
#[derive(Debug)]
pub struct Supervisor {
    models: BTreeMap<String, ModelHandle>,
    logs: LogHub,
    tasks: TaskTracker,
    cancel: CancellationToken,
    /// Ends the reaper of adopted orphans once every model is stopped.
    reaper: CancellationToken,
    shutdown_at: watch::Sender<Option<Instant>>,
    /// TLS client for `https://` upstreams (`/props` of `parallel: auto`).
    tls: Option<UpstreamTls>,
}

#[derive(Debug)]
struct ModelHandle {
    requests: mpsc::Sender<Request>,
    status: watch::Receiver<ProcessStatus>,
    /// Base URL of the upstream.
    proxy: String,
}

/// Optional parts of a [`Supervisor`]; the default has none.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SupervisorOptions {
    /// TLS client for health checks of `https://` upstreams (default: the
    /// system's roots, read when such a check first runs).
    pub tls: Option<UpstreamTls>,
}

impl SupervisorOptions {
    /// Sets the TLS client for health checks of `https://` upstreams.
    #[must_use]
    pub fn tls(mut self, tls: Option<UpstreamTls>) -> Self {
        self.tls = tls;
        self
    }
}

impl Supervisor {
    /// Starts one owner task per spec (no process is spawned yet) and returns the
    /// supervisor with the receiver of its [`UpstreamEvent`]s. `log_capacity` is the
    /// number of output lines kept per model. A spec repeating an earlier model ID is
    /// ignored with a warning.
    ///
    /// # Panics
    ///
    /// If called outside a tokio runtime.
    pub fn new(
        specs: Vec<ProcessSpec>,
        log_capacity: usize,
    ) -> (Arc<Self>, mpsc::Receiver<UpstreamEvent>) {
        Self::with_options(specs, log_capacity, SupervisorOptions::default())
    }

    /// As [`new`](Self::new), with the optional parts in `options`.
    ///
    /// # Panics
    ///
    /// If called outside a tokio runtime.
    pub fn with_options(
        specs: Vec<ProcessSpec>,
        log_capacity: usize,
        options: SupervisorOptions,
    ) -> (Arc<Self>, mpsc::Receiver<UpstreamEvent>) {
        let mut unique: BTreeMap<String, ProcessSpec> = BTreeMap::new();
        for spec in specs {
            if unique.contains_key(&spec.model) {
                tracing::warn!(
                    model = spec.model,
                    "duplicate process spec ignored; the first one is used"
                );
                continue;
            }
            unique.insert(spec.model.clone(), spec);
        }
        let logs = LogHub::new(unique.keys().cloned(), log_capacity);
        let (events, events_rx) = mpsc::channel(EVENT_QUEUE);
        let tasks = TaskTracker::new();
        let cancel = CancellationToken::new();
        let (shutdown_at, shutdown_at_rx) = watch::channel(None);
        let mut models = BTreeMap::new();
        for (model, spec) in unique {
            let Some(ring) = logs.ring(&model).cloned() else {
                continue;
            };
            let proxy = spec.proxy.clone();
            let (requests, requests_rx) = mpsc::channel(REQUEST_QUEUE);
            let (status, status_rx) = watch::channel(ProcessStatus {
                state: ProcessState::Stopped,
                pid: None,
            });
            let actor = ModelActor {
                spec,
                ring,
                requests: requests_rx,
                events: events.clone(),
                status,
                cancel: cancel.clone(),
                shutdown_at: shutdown_at_rx.clone(),
                tls: options.tls.clone(),
            };
            tasks.spawn(actor.run());
            models.insert(
                model,
                ModelHandle {
                    requests,
                    status: status_rx,
                    proxy,
                },
            );
        }
        let reaper = cancel.child_token();
        if orphans::adopting() {
            tasks.spawn(orphans::reap_adopted_until(reaper.clone()));
        }
        tasks.close();
        let supervisor = Self {
            models,
            logs,
            tasks,
            cancel,
            reaper,
            shutdown_at,
            tls: options.tls,
        };
        (Arc::new(supervisor), events_rx)
    }

    /// Stops every process in parallel (graceful stop, SIGKILL after `grace`), reaps
    /// them, and ends the owner tasks. A stop already in progress with a longer grace
    /// is cut short to the same deadline. Afterwards [`Launcher::ensure_ready`]
    /// answers [`LaunchError::ShuttingDown`]. Calling it again returns once the first
    /// call's work is done; the earliest deadline wins.
    pub async fn shutdown(&self, grace: Duration) {
        let deadline = Instant::now() + grace;
        self.shutdown_at.send_if_modified(|at| match at {
            Some(earlier) if *earlier <= deadline => false,
            _ => {
                *at = Some(deadline);
                true
            }
        });
        let mut pending = Vec::with_capacity(self.models.len());
        for handle in self.models.values() {
            let (done, done_rx) = oneshot::channel();
            if handle
                .requests
                .send(Request::Shutdown { grace, done })
                .await
                .is_ok()
            {
                pending.push(done_rx);
            }
        }
        for done in pending {
            // An error means the task ended anyway; the tracker wait below covers it.
            let _ = done.await;
        }
        self.reaper.cancel();
        self.tasks.wait().await;
    }

    /// Output history and live output of every model.
    pub fn logs(&self) -> &LogHub {
        &self.logs
    }

    /// The configured model IDs, sorted.
    pub fn models(&self) -> impl Iterator<Item = &str> {
        self.models.keys().map(String::as_str)
    }

    /// The current state of `model`, or `None` if it is not configured.
    pub fn status(&self, model: &str) -> Option<ProcessStatus> {
        self.models.get(model).map(|h| *h.status.borrow())
    }

    /// A receiver that sees every state change of `model`, or `None` if it is not
    /// configured.
    pub fn watch_status(&self, model: &str) -> Option<watch::Receiver<ProcessStatus>> {
        self.models.get(model).map(|h| h.status.clone())
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        // The owner tasks see this and SIGKILL their process groups; if the runtime
        // is gone too, `Upstream`'s own drop does it.
        self.cancel.cancel();
    }
}

impl Launcher for Supervisor {
    fn ensure_ready(&self, model: &str) -> BoxFuture<'static, Result<(), LaunchError>> {
        let Some(handle) = self.models.get(model) else {
            let model = model.to_owned();
            return Box::pin(async move { Err(LaunchError::UnknownModel { model }) });
        };
        let requests = handle.requests.clone();
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            requests
                .send(Request::EnsureReady(reply))
                .await
                .map_err(|_| LaunchError::ShuttingDown)?;
            // The task ended (shut down) before answering.
            answer.await.unwrap_or(Err(LaunchError::ShuttingDown))
        })
    }

    fn stop(&self, model: &str, grace: Duration) -> BoxFuture<'static, ()> {
        let Some(handle) = self.models.get(model) else {
            return Box::pin(async {});
        };
        let requests = handle.requests.clone();
        Box::pin(async move {
            let (done, done_rx) = oneshot::channel();
            if requests.send(Request::Stop { grace, done }).await.is_ok() {
                // Either answered after the stop or dropped by a task that ended,
                // which stopped the process on its way out.
                let _ = done_rx.await;
            }
        })
    }

    fn slots(&self, model: &str) -> BoxFuture<'static, Option<usize>> {
        let proxy = self.models.get(model).map(|h| h.proxy.clone());
        let tls = self.tls.clone();
        Box::pin(async move { props::total_slots(&proxy?, tls.as_ref()).await })
    }
}
