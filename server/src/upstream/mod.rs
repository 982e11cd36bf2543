//! Upstream process supervision: one owner task per model that spawns its server,
//! waits for it to become healthy, stops it, and reports when it dies on its own.
//!
//! | file | concern |
//! |---|---|
//! | `command` | splitting `cmd` into an argv like a POSIX shell, without one |
//! | `process` | one child: process group, output pumps, SIGTERM/SIGKILL, reaping |
//! | `health` | polling the check endpoint with a fast-then-slower backoff |
//! | `actor` | the per-model state machine (Stopped, Starting, Ready, Stopping, Sleeping) |
//! | `monitor` | health monitoring of ready models, crash-loop backoff and the failed state |
//! | `logs` | bounded per-model output history with live subscription |
//! | `port` | refusing to start a model on a port another process listens on |
//! | `props` | a ready upstream's slot count (`GET /props` `total_slots`), for `parallel: auto` |
//! | `sleep` | sleep instead of stop, and waking (vLLM, SGLang, custom calls) |
//! | `spawn` | the shim and spawner thread that make upstreams die with the server |
//! | `gpu` | `${GPU}` and `CUDA_VISIBLE_DEVICES` for a model the memory router placed |
//! | `measure` | the GPU memory a running model really uses (`nvidia-smi`, `rocm-smi`) |
//! | `orphans` | markers, sweeping descendants, reclaiming a killed server's, reaping adopted ones |
//!
//! The [`Supervisor`] implements [`Launcher`] for the router: it never decides when
//! a model runs, only carries out starts and stops and reports exits it did not cause
//! as [`UpstreamEvent`]s.
//!
//! ```no_run
//! use std::time::Duration;
//! use llama_swap_server::testing::launcher::Launcher;
//! use llama_swap_server::testing::upstream::{Monitor, ProcessSpec, Supervisor};
//!
//! # async fn demo() -> Result<(), llama_swap_server::testing::launcher::LaunchError> {
//! let spec = ProcessSpec {
//!     model: "qwen".into(),
//!     cmd: "llama-server --port 5800 -m qwen.gguf".into(),
//!     cmd_stop: None,
//!     env: vec![],
//!     proxy: "http://127.0.0.1:5800".into(),
//!     check_endpoint: Some("/health".into()),
//!     health_check_timeout: Duration::from_secs(120),
//!     sleep: None,
//!     monitor: Monitor::default(),
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
mod gpu;
mod health;
mod logs;
mod measure;
mod monitor;
mod orphans;
mod port;
mod process;
mod props;
mod sleep;
mod spawn;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

pub use command::{CommandError, split_command};
pub use logs::LogStream;
pub(crate) use logs::{LogHub, LogLine, LogRing, LogSubscription, SharedLine};
pub use measure::{MemoryHint, memory_hints};
// For the log endpoints' tests, which fill a ring of their own size.
#[cfg(test)]
pub(crate) use logs::LogLimits;
pub use monitor::{Failed, Monitor};
pub use orphans::adopt_orphans;
pub(crate) use orphans::{Reclaimed, reclaim};
pub(crate) use port::ephemeral_ports;
pub use sleep::HttpCall;
pub(crate) use spawn::enable_shim;
pub use spawn::run_shim_if_requested;

use crate::launcher::{BoxFuture, LaunchError, Launcher, Released, UpstreamEvent};
use crate::metrics::Metrics;
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

/// Every failed model's [`Failed`] state, by model ID, written by the owner
/// tasks (each its own entry).
pub(crate) type FailedModels = watch::Sender<BTreeMap<String, Arc<Failed>>>;

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
    /// How it sleeps instead of stopping when a swap frees it (`sleep:`);
    /// `None`: it is stopped.
    pub sleep: Option<SleepSpec>,
    /// How the ready process is watched and its restarts paced
    /// (`healthCheckInterval`, `maxRestarts`, ...). Not part of
    /// [`starts_like`](Self::starts_like): read at the next start.
    pub monitor: Monitor,
}

/// A sleep mode: the calls that put a model's server to sleep (its process
/// and memory on the host kept, its GPU memory freed) and wake it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SleepSpec {
    /// Puts it to sleep (vLLM `POST /sleep?level=1`).
    pub sleep: HttpCall,
    /// Wakes it (vLLM `POST /wake_up`); it is ready once its health check passes.
    pub wake: HttpCall,
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
    /// Asleep (`sleep:`): the process runs, its GPU memory is freed; a start
    /// wakes it.
    Sleeping,
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
/// [`shutdown`](Self::shutdown) is the graceful way. [`reconfigure`](Self::reconfigure)
/// follows a reload without touching the processes of models it keeps.
#[derive(Debug)]
pub struct Supervisor {
    /// Every model with an owner task: the configured ones, and removed ones
    /// whose task has not ended yet (`listed: false`).
    models: RwLock<BTreeMap<String, ModelHandle>>,
    logs: LogHub,
    tasks: TaskTracker,
    cancel: CancellationToken,
    /// Ends the reaper of adopted orphans once every model is stopped.
    reaper: CancellationToken,
    shutdown_at: watch::Sender<Option<Instant>>,
    /// Where owner tasks report exits (a reload adds tasks); dropped at
    /// shutdown, so the channel closes once the tasks have ended.
    events: Mutex<Option<mpsc::Sender<UpstreamEvent>>>,
    /// TLS client for `https://` upstreams (`/props` of `parallel: auto`).
    tls: RwLock<Option<UpstreamTls>>,
    /// Where upstream failures are counted.
    metrics: Option<Arc<Metrics>>,
    /// The failed models, shown in `/running`, `/api/events` and `/metrics`.
    failed: Arc<FailedModels>,
}

#[derive(Debug)]
struct ModelHandle {
    requests: mpsc::Sender<Request>,
    status: watch::Receiver<ProcessStatus>,
    /// The definition the next start uses (the owner task reads it then).
    config: watch::Sender<ActorConfig>,
    /// Configured (false: removed by a reload, waiting for its task to end).
    listed: bool,
}

/// What an owner task starts its next process with.
#[derive(Debug, Clone)]
pub(crate) struct ActorConfig {
    pub(crate) spec: ProcessSpec,
    pub(crate) tls: Option<UpstreamTls>,
    /// Configured; a removed model's task ends once it has no process.
    pub(crate) listed: bool,
    /// The GPU ids the next start is placed on (the memory router), which
    /// fill `${GPU}` and the `*_VISIBLE_DEVICES` variables.
    pub(crate) gpus: Option<Vec<u32>>,
}

/// What [`Supervisor::reconfigure`] did, each list sorted by model ID.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reconfigured {
    /// Models that were not configured before.
    pub added: Vec<String>,
    /// Models whose process is started differently now
    /// ([`ProcessSpec::starts_like`] is false): the next start uses the new
    /// definition; a process running now keeps the old one until it stops.
    /// (A removed model configured again before its task ended can be in
    /// `added` too.)
    pub changed: Vec<String>,
    /// Models no longer configured: they can still be stopped, and their
    /// task ends once they have no process.
    pub removed: Vec<String>,
    /// `(new, old)`: the new definition of `new` (added or changed) listens
    /// on the port of the definition `old` (changed or removed) had, whose
    /// process may still run: `new` must not start before it is gone. An
    /// address without a port a URL can say counts as every port.
    pub waits: Vec<(String, String)>,
}

impl Reconfigured {
    /// What the router needs of it ([`RouterHandle::reconfigure_with`](crate::router::RouterHandle::reconfigure_with)).
    pub fn restarts(&self) -> crate::scheduler::Restarts {
        crate::scheduler::Restarts {
            changed: self.changed.clone(),
            waits: self.waits.clone(),
        }
    }
}

/// The port of an upstream's base URL (the scheme's default when it has none).
fn address_port(proxy: &str) -> Option<u16> {
    let uri: http::Uri = proxy.parse().ok()?;
    uri.port_u16().or(match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    })
}

impl ProcessSpec {
    /// Whether a process started from `other` is the one this spec starts:
    /// the same command, stop command, environment and upstream address and
    /// health check. The health check's time limit is not part of it (it is
    /// read at the next start either way).
    pub fn starts_like(&self, other: &Self) -> bool {
        self.model == other.model
            && self.cmd == other.cmd
            && self.cmd_stop == other.cmd_stop
            && self.env == other.env
            && self.proxy == other.proxy
            && self.check_endpoint == other.check_endpoint
            && self.sleep == other.sleep
    }
}

/// Optional parts of a [`Supervisor`]; the default has none.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SupervisorOptions {
    /// TLS client for health checks of `https://` upstreams (default: the
    /// system's roots, read when such a check first runs).
    pub tls: Option<UpstreamTls>,
    /// Where upstream failures are counted
    /// (`llamaswap_upstream_failures_total`; default: nowhere).
    pub metrics: Option<Arc<Metrics>>,
}

impl SupervisorOptions {
    /// Counts upstream failures (failed starts, exits, failed health
    /// checks) into `metrics`.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Sets the TLS client for health checks of `https://` upstreams.
    #[must_use]
    pub fn tls(mut self, tls: Option<UpstreamTls>) -> Self {
        self.tls = tls;
        self
    }
}

/// The specs by model ID, the first of a repeated ID kept (with a warning).
fn unique_specs(specs: Vec<ProcessSpec>) -> BTreeMap<String, ProcessSpec> {
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
    unique
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
        let unique = unique_specs(specs);
        let logs = LogHub::new(unique.keys().cloned(), log_capacity);
        let (events, events_rx) = mpsc::channel(EVENT_QUEUE);
        let tasks = TaskTracker::new();
        let cancel = CancellationToken::new();
        let (shutdown_at, _) = watch::channel(None);
        let reaper = cancel.child_token();
        if orphans::adopting() {
            tasks.spawn(orphans::reap_adopted_until(reaper.clone()));
        }
        // Closed so that `wait` returns once the tasks end; a reload may still add some.
        tasks.close();
        let supervisor = Self {
            models: RwLock::new(BTreeMap::new()),
            logs,
            tasks,
            cancel,
            reaper,
            shutdown_at,
            events: Mutex::new(Some(events)),
            tls: RwLock::new(options.tls),
            metrics: options.metrics,
            failed: Arc::new(watch::channel(BTreeMap::new()).0),
        };
        {
            let mut models = supervisor.write_models();
            for (model, spec) in unique {
                let handle = supervisor.spawn_actor(spec);
                models.insert(model, handle);
            }
        }
        (Arc::new(supervisor), events_rx)
    }

    /// Starts the owner task of one model.
    fn spawn_actor(&self, spec: ProcessSpec) -> ModelHandle {
        let events = self
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_else(|| mpsc::channel(1).0);
        let ring = self.logs.add(spec.model.clone());
        let (requests, requests_rx) = mpsc::channel(REQUEST_QUEUE);
        let (status, status_rx) = watch::channel(ProcessStatus {
            state: ProcessState::Stopped,
            pid: None,
        });
        let tls = self.current_tls();
        let (config, config_rx) = watch::channel(ActorConfig {
            spec: spec.clone(),
            tls: tls.clone(),
            listed: true,
            gpus: None,
        });
        let actor = ModelActor {
            spec,
            config: config_rx,
            ring,
            requests: requests_rx,
            events,
            status,
            cancel: self.cancel.clone(),
            shutdown_at: self.shutdown_at.subscribe(),
            tls,
            restarts: monitor::Restarts::default(),
            failed: Arc::clone(&self.failed),
            metrics: self.metrics.clone(),
        };
        self.tasks.spawn(actor.run());
        ModelHandle {
            requests,
            status: status_rx,
            config,
            listed: true,
        }
    }

    fn read_models(&self) -> RwLockReadGuard<'_, BTreeMap<String, ModelHandle>> {
        // Every write leaves the map consistent, even one that panics midway.
        self.models.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write_models(&self) -> RwLockWriteGuard<'_, BTreeMap<String, ModelHandle>> {
        self.models.write().unwrap_or_else(PoisonError::into_inner)
    }

    fn current_tls(&self) -> Option<UpstreamTls> {
        self.tls
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Follows a reload: `specs` become the configured models and `tls` the
    /// client for `https://` health checks and `/props`.
    ///
    /// Nothing is stopped or started here: a kept model's process keeps
    /// running (with its definition, even a changed one, until it stops: the
    /// next start uses the new one); a new model gets its owner task (no
    /// process yet); a removed model is no longer listed, can still be
    /// stopped, and its task ends once it has no process. The result also
    /// says which new definitions use the port of a definition that goes away
    /// ([`Reconfigured::waits`]). Stopping changed and
    /// removed models when their requests are over is the router's decision.
    /// After [`shutdown`](Self::shutdown) it changes nothing.
    pub fn reconfigure(&self, specs: Vec<ProcessSpec>, tls: Option<UpstreamTls>) -> Reconfigured {
        let mut done = Reconfigured::default();
        if self.shutdown_at.borrow().is_some() {
            return done;
        }
        *self.tls.write().unwrap_or_else(PoisonError::into_inner) = tls.clone();
        let mut unique = unique_specs(specs);
        // Ports of definitions that go away (their process may still run), and
        // of the new definitions.
        let mut leaving: Vec<(String, Option<u16>)> = Vec::new();
        let mut arriving: Vec<(String, Option<u16>)> = Vec::new();
        let mut models = self.write_models();
        // Tasks of models removed by an earlier reload end once they have no process.
        models.retain(|_, handle| {
            !handle.requests.is_closed() && handle.status.borrow().state != ProcessState::ShutDown
        });
        for (model, handle) in models.iter_mut() {
            match unique.remove(model) {
                Some(spec) => {
                    if !handle.listed {
                        // Configured again before its task ended.
                        handle.listed = true;
                        done.added.push(model.clone());
                    }
                    let old = handle.config.borrow().spec.clone();
                    if !old.starts_like(&spec) {
                        done.changed.push(model.clone());
                        leaving.push((model.clone(), address_port(&old.proxy)));
                        arriving.push((model.clone(), address_port(&spec.proxy)));
                    }
                    let gpus = handle.config.borrow().gpus.clone();
                    handle.config.send_replace(ActorConfig {
                        spec,
                        tls: tls.clone(),
                        listed: true,
                        gpus,
                    });
                }
                None if handle.listed => {
                    handle.listed = false;
                    done.removed.push(model.clone());
                    let old = address_port(&handle.config.borrow().spec.proxy);
                    leaving.push((model.clone(), old));
                    handle.config.send_modify(|config| config.listed = false);
                }
                None => {}
            }
        }
        for (model, spec) in unique {
            arriving.push((model.clone(), address_port(&spec.proxy)));
            let handle = self.spawn_actor(spec);
            models.insert(model.clone(), handle);
            done.added.push(model);
        }
        done.added.sort();
        for (new, port) in &arriving {
            for (old, old_port) in &leaving {
                let shared = port.is_none() || old_port.is_none() || port == old_port;
                if new != old && shared {
                    done.waits.push((new.clone(), old.clone()));
                }
            }
        }
        if !done.added.is_empty() || !done.changed.is_empty() || !done.removed.is_empty() {
            tracing::info!(
                added = ?done.added,
                changed = ?done.changed,
                removed = ?done.removed,
                "upstreams reconfigured"
            );
        }
        done
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
        drop(
            self.events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let senders: Vec<mpsc::Sender<Request>> = self
            .read_models()
            .values()
            .map(|h| h.requests.clone())
            .collect();
        let mut pending = Vec::with_capacity(senders.len());
        for requests in senders {
            let (done, done_rx) = oneshot::channel();
            if requests
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
    pub fn models(&self) -> Vec<String> {
        self.read_models()
            .iter()
            .filter(|(_, h)| h.listed)
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// The current state of `model`, or `None` if it has no owner task (never
    /// configured, or removed and stopped).
    pub fn status(&self, model: &str) -> Option<ProcessStatus> {
        self.read_models().get(model).map(|h| *h.status.borrow())
    }

    /// A receiver that sees every state change of `model`, or `None` if it has
    /// no owner task.
    pub fn watch_status(&self, model: &str) -> Option<watch::Receiver<ProcessStatus>> {
        self.read_models().get(model).map(|h| h.status.clone())
    }

    /// The models that are failed now (`maxRestarts` failures within their
    /// `restartWindow`), by ID: starts of them are refused until their
    /// `retry_at_ms` or an explicit load.
    pub fn failed(&self) -> BTreeMap<String, Arc<Failed>> {
        self.failed.borrow().clone()
    }

    /// A receiver that sees every change of [`failed`](Self::failed).
    pub fn watch_failed(&self) -> watch::Receiver<BTreeMap<String, Arc<Failed>>> {
        self.failed.subscribe()
    }

    /// Forgets `model`'s recent failures (an explicit load): a failed model
    /// is started again by the next request, and no crash-loop backoff holds
    /// that start back. Requests sent after this one see it done.
    pub async fn clear_failures(&self, model: &str) {
        if let Some(requests) = self.requests(model) {
            // An error means the task ended: nothing to clear.
            let _ = requests.send(Request::ClearFailures).await;
        }
    }

    fn requests(&self, model: &str) -> Option<mpsc::Sender<Request>> {
        self.read_models().get(model).map(|h| h.requests.clone())
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
        let Some(requests) = self.requests(model) else {
            let model = model.to_owned();
            return Box::pin(async move { Err(LaunchError::UnknownModel { model }) });
        };
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

    fn ensure_ready_on(
        &self,
        model: &str,
        gpus: &[u32],
    ) -> BoxFuture<'static, Result<(), LaunchError>> {
        if let Some(handle) = self.read_models().get(model) {
            // Read by the owner task when it starts the next process; a process
            // running now keeps the GPUs it was started on.
            handle.config.send_if_modified(|config| match &config.gpus {
                Some(old) if old.as_slice() == gpus => false,
                _ => {
                    config.gpus = Some(gpus.to_vec());
                    true
                }
            });
        }
        self.ensure_ready(model)
    }

    fn release(&self, model: &str, grace: Duration) -> BoxFuture<'static, Released> {
        let Some(requests) = self.requests(model) else {
            return Box::pin(async { Released::Stopped });
        };
        Box::pin(async move {
            let (done, done_rx) = oneshot::channel();
            if requests.send(Request::Sleep { grace, done }).await.is_err() {
                return Released::Stopped;
            }
            // Answered once asleep or stopped, or dropped by a task that
            // ended, which stopped the process on its way out.
            done_rx.await.unwrap_or(Released::Stopped)
        })
    }

    fn stop(&self, model: &str, grace: Duration) -> BoxFuture<'static, ()> {
        let Some(requests) = self.requests(model) else {
            return Box::pin(async {});
        };
        Box::pin(async move {
            let (done, done_rx) = oneshot::channel();
            if requests.send(Request::Stop { grace, done }).await.is_ok() {
                // Either answered after the stop or dropped by a task that ended,
                // which stopped the process on its way out.
                let _ = done_rx.await;
            }
        })
    }

    fn gpu_memory(&self, model: &str) -> BoxFuture<'static, Option<u64>> {
        let status = self.status(model);
        let model = model.to_owned();
        Box::pin(async move {
            let pid = status.filter(|s| s.state == ProcessState::Ready)?.pid?;
            measure::gpu_memory(&model, pid).await
        })
    }

    fn slots(&self, model: &str) -> BoxFuture<'static, Option<usize>> {
        let proxy = self
            .read_models()
            .get(model)
            .map(|h| h.config.borrow().spec.proxy.clone());
        let tls = self.current_tls();
        Box::pin(async move { props::total_slots(&proxy?, tls.as_ref()).await })
    }
}
