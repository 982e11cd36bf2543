//! The router actor: the single owner of scheduling state.
//!
//! [`Router::spawn`] starts one tokio task that owns the [`Scheduler`]. Everything
//! reaches it as an event: requests, queue and running snapshots, unloads and
//! shutdown through a [`RouterHandle`] (bounded channel); cancels and serve
//! completions from dropped [`Ticket`]s and [`Lease`]s; results of model starts and
//! stops from tasks it owns (a [`tokio::task::JoinSet`]); exits the [`Launcher`]
//! reports; and TTL timers. Slow work (stopping and starting upstreams) never runs on
//! the actor itself.
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use llama_swap_server::testing::launcher::{BoxFuture, LaunchError, Launcher};
//! use llama_swap_server::testing::priority::Priority;
//! use llama_swap_server::testing::router::{Router, Submit};
//! use llama_swap_server::testing::scheduler::{ModelSettings, SchedulerSettings};
//!
//! /// A launcher whose models are ready at once.
//! struct Instant;
//!
//! impl Launcher for Instant {
//!     fn ensure_ready(&self, _model: &str) -> BoxFuture<'static, Result<(), LaunchError>> {
//!         Box::pin(async { Ok(()) })
//!     }
//!     fn stop(&self, _model: &str, _grace: Duration) -> BoxFuture<'static, ()> {
//!         Box::pin(async {})
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (_exits, exits_rx) = tokio::sync::mpsc::channel(16);
//! let settings = SchedulerSettings::new(vec![ModelSettings::new("qwen")]);
//! let router = Router::spawn(settings, Arc::new(Instant), exits_rx)?;
//!
//! let request = Submit { model: "qwen".into(), priority: Priority::new(10) };
//! let ticket = router.submit(request).await?;
//! let lease = ticket.granted().await?;
//! assert_eq!(lease.model(), "qwen");
//! drop(lease); // the request is over: the router may now stop or swap the model
//!
//! router.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod actor;
mod fast;
mod serve_times;
mod ticket;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

use self::actor::{Actor, Command};
use self::fast::Gates;
use self::ticket::Notice;
pub use self::ticket::{Lease, Ticket};
use crate::launcher::{Launcher, UpstreamEvent};
use crate::metrics::Metrics;
use crate::priority::Priority;
pub(crate) use crate::scheduler::{GpuUsage, QueueEntry, RunningModel};
use crate::scheduler::{
    ModelNames, RequestId, Restarts, Scheduler, SchedulerSettings, SettingsError,
};
pub use crate::scheduler::{ModelState, RouteError, WaitStatus};

/// Room in the actor's mailbox; senders wait when it is full.
const MAILBOX: usize = 1024;

/// Starts the router actor.
#[derive(Debug)]
pub struct Router;

impl Router {
    /// Spawns the actor on the current tokio runtime and returns a handle to it.
    ///
    /// `events` carries exits the launcher did not cause. The actor ends after
    /// [`RouterHandle::shutdown`], or when every handle has been dropped (it then
    /// shuts down the same way).
    ///
    /// # Errors
    ///
    /// [`SettingsError`] when the settings are invalid (duplicate model, ambiguous
    /// alias, a limit of 0, priorities with `serial`, invalid groups).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn spawn(
        settings: SchedulerSettings,
        launcher: Arc<dyn Launcher>,
        events: mpsc::Receiver<UpstreamEvent>,
    ) -> Result<RouterHandle, SettingsError> {
        Self::spawn_with(settings, launcher, events, RouterOptions::default())
    }

    /// As [`spawn`](Self::spawn), with the optional parts in `options`.
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn).
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime.
    pub fn spawn_with(
        settings: SchedulerSettings,
        launcher: Arc<dyn Launcher>,
        events: mpsc::Receiver<UpstreamEvent>,
        options: RouterOptions,
    ) -> Result<RouterHandle, SettingsError> {
        let scheduler = Scheduler::new(&settings)?;
        let names = scheduler.names();
        let ids = scheduler.id_source();
        let gates = Arc::new(Gates::new(
            names.ids().len(),
            tokio::time::Instant::now(),
            0,
        ));
        let published = Arc::new(RwLock::new(Published {
            names,
            gates: Arc::clone(&gates),
        }));
        let (commands_tx, commands_rx) = mpsc::channel(MAILBOX);
        let (notices_tx, notices_rx) = mpsc::unbounded_channel();
        let (changes_tx, changes_rx) = watch::channel(0);
        let actor = Actor::new(
            scheduler,
            launcher,
            notices_tx.clone(),
            changes_tx,
            Arc::clone(&published),
            options,
        );
        let task = tokio::spawn(actor.run(commands_rx, notices_rx, events));
        Ok(RouterHandle {
            commands: commands_tx,
            published,
            changes: changes_rx,
            task: Arc::new(Mutex::new(Some(task))),
            fast: Arc::new(FastPath {
                ids,
                notices: notices_tx,
            }),
        })
    }
}

/// Optional parts of a router; the default has none of them.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RouterOptions {
    /// Where swaps and drain-fence holds are recorded (default: nowhere).
    pub metrics: Option<Arc<Metrics>>,
}

impl RouterOptions {
    /// Records swaps and drain-fence holds into `metrics`.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
}

/// What a request asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submit {
    /// Model ID or alias.
    pub model: String,
    /// Its priority, requested and capped (see the `priority` module).
    pub priority: Priority,
}

/// A cheap, cloneable handle to the router actor.
#[derive(Debug, Clone)]
pub struct RouterHandle {
    commands: mpsc::Sender<Command>,
    /// The scheduler's names and the fast path's gates, to resolve and grant
    /// without a round trip; replaced by the actor on a reconfigure.
    published: Arc<RwLock<Published>>,
    /// Generation of the queue and model states, bumped by the actor.
    changes: watch::Receiver<u64>,
    /// The actor task, awaited by the first shutdown that finds it.
    task: Arc<Mutex<Option<JoinHandle<()>>>>,
    /// What the fast path needs (see [`RouterHandle::try_fast`]).
    fast: Arc<FastPath>,
}

/// What the actor publishes for one configuration.
#[derive(Debug)]
struct Published {
    names: Arc<ModelNames>,
    gates: Arc<Gates>,
}

/// Why [`RouterHandle::reconfigure`] changed nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReconfigureError {
    /// The new settings are invalid (the running ones are kept).
    #[error("the new configuration cannot be scheduled")]
    Settings(#[from] SettingsError),
    /// The router is shutting down or gone.
    #[error("the router is shutting down")]
    ShuttingDown,
}

/// The state the actor publishes for grants without a round trip.
#[derive(Debug)]
struct FastPath {
    /// The scheduler's sequence of request IDs.
    ids: Arc<AtomicU64>,
    /// Where fast leases report to the actor once it counts them.
    notices: mpsc::UnboundedSender<Notice>,
}

impl RouterHandle {
    /// Submits a request; resolves when the scheduler admitted or rejected it.
    ///
    /// # Errors
    ///
    /// [`RouteError::UnknownModel`], [`RouteError::ConcurrencyLimit`],
    /// [`RouteError::PriorityNotSupported`] (serial scheduler),
    /// [`RouteError::QueueFull`] with a `retry_after` estimated from measured
    /// serve times, or [`RouteError::ShuttingDown`].
    pub async fn submit(&self, request: Submit) -> Result<Ticket, RouteError> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Submit {
            model: request.model,
            priority: request.priority,
            reply,
        };
        if self.commands.send(command).await.is_err() {
            return Err(RouteError::ShuttingDown);
        }
        answer.await.unwrap_or(Err(RouteError::ShuttingDown))
    }

    /// Grants a request for `model` (an ID) at once, without a round trip to
    /// the actor, when the router has published that it would: the model is
    /// ready, evicts nothing, nothing waits anywhere (so no fence, ranking or
    /// turn is bypassed) and it has room under its concurrency limit and
    /// slots. `None` otherwise: [`submit`](Self::submit) as usual.
    ///
    /// The lease is like any other: drop it when the response has ended, or
    /// hand it back with [`Lease::refused`].
    pub fn try_fast(&self, model: &str, priority: Priority) -> Option<Lease> {
        let (index, id_string, gates, grant) = {
            let published = self.published();
            let index = published.names.index(model)?;
            let id_string = published.names.ids().get(index)?.clone();
            let grant = published.gates.try_acquire(index)?;
            (index, id_string, Arc::clone(&published.gates), grant)
        };
        let fast = &self.fast;
        let id = RequestId(fast.ids.fetch_add(1, Ordering::Relaxed));
        Some(Lease::fast(
            id,
            id_string,
            priority,
            fast.notices.clone(),
            gates,
            index,
            grant,
        ))
    }

    fn published(&self) -> std::sync::RwLockReadGuard<'_, Published> {
        // The actor replaces the whole value; a panic cannot leave half of it.
        self.published
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies new settings in place (a reload): waiting requests keep their
    /// order, those of removed models fail with [`RouteError::Removed`],
    /// requests in flight and the models' states are kept, and the new
    /// settings (groups, floors, limits, `parallel`, aliases, TTLs, matrix)
    /// apply to the decisions taken from now on. `restart` names the models
    /// whose process definition changed: each is stopped once its requests
    /// in flight end, and what waits for it then starts the new definition.
    ///
    /// # Errors
    ///
    /// [`ReconfigureError::Settings`] when the settings are invalid (nothing
    /// changes), [`ReconfigureError::ShuttingDown`] once shut down.
    pub async fn reconfigure(
        &self,
        settings: SchedulerSettings,
        restart: Vec<String>,
    ) -> Result<(), ReconfigureError> {
        self.reconfigure_with(settings, move || Restarts::changed(restart))
            .await
    }

    /// As [`reconfigure`](Self::reconfigure), with the launcher's side of the
    /// reload: once the settings are known to be valid, the actor calls
    /// `update` (which gives the launcher its new process definitions and
    /// says which changed and which new ones must wait for old processes) and
    /// applies the settings in the same step, so no start is decided in
    /// between with the old settings and a new definition.
    ///
    /// # Errors
    ///
    /// As [`reconfigure`](Self::reconfigure); `update` is not called then.
    pub async fn reconfigure_with(
        &self,
        settings: SchedulerSettings,
        update: impl FnOnce() -> Restarts + Send + 'static,
    ) -> Result<(), ReconfigureError> {
        let (reply, answer) = oneshot::channel();
        let command = Command::Reconfigure {
            settings: Box::new(settings),
            update: Box::new(update),
            reply,
        };
        if self.commands.send(command).await.is_err() {
            return Err(ReconfigureError::ShuttingDown);
        }
        answer.await.unwrap_or(Err(ReconfigureError::ShuttingDown))
    }

    /// Every request waiting in the ranked queue, in position order (empty once shut down).
    pub async fn queue(&self) -> Vec<QueueEntry> {
        let (reply, answer) = oneshot::channel();
        if self.commands.send(Command::Queue { reply }).await.is_err() {
            return Vec::new();
        }
        answer.await.unwrap_or_default()
    }

    /// Every model that is not stopped, sorted by ID (empty once shut down).
    pub async fn running(&self) -> Vec<RunningModel> {
        let (reply, answer) = oneshot::channel();
        if self
            .commands
            .send(Command::Running { reply })
            .await
            .is_err()
        {
            return Vec::new();
        }
        answer.await.unwrap_or_default()
    }

    /// The memory router's GPUs with the memory the models placed on them
    /// hold (empty under the other routers, and once shut down).
    pub async fn gpus(&self) -> Vec<GpuUsage> {
        let (reply, answer) = oneshot::channel();
        if self.commands.send(Command::Gpus { reply }).await.is_err() {
            return Vec::new();
        }
        answer.await.unwrap_or_default()
    }

    /// Unloads `models` (IDs or aliases; `None` = all): their waiting requests fail
    /// with [`RouteError::Unloaded`]; resolves once they are stopped.
    ///
    /// # Errors
    ///
    /// [`RouteError::UnknownModel`] for a name that is not configured (nothing is
    /// unloaded), [`RouteError::ShuttingDown`] during or after shutdown.
    pub async fn unload(&self, models: Option<Vec<String>>) -> Result<(), RouteError> {
        let (reply, answer) = oneshot::channel();
        if self
            .commands
            .send(Command::Unload { models, reply })
            .await
            .is_err()
        {
            return Err(RouteError::ShuttingDown);
        }
        answer.await.unwrap_or(Err(RouteError::ShuttingDown))
    }

    /// Shuts the router down: waiting requests fail with [`RouteError::ShuttingDown`],
    /// later submits are refused, every upstream is stopped, and the actor ends.
    /// Resolves when that is done; idempotent.
    pub async fn shutdown(&self) {
        let (reply, answer) = oneshot::channel();
        if self
            .commands
            .send(Command::Shutdown { reply })
            .await
            .is_ok()
        {
            let _ = answer.await;
        }
        let task = self.task.lock().ok().and_then(|mut task| task.take());
        if let Some(task) = task {
            let _ = task.await;
        }
    }

    /// A generation counter the actor bumps after every step that may have changed
    /// the queue, a model's state or its in-flight requests.
    ///
    /// Observers (the UI's event stream) wait on it and then take
    /// [`queue`](Self::queue) and [`running`](Self::running) snapshots; several
    /// bumps between two looks coalesce into one. The value only grows; once the
    /// actor has ended, `changed()` returns an error.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// The model ID a name (ID or alias) refers to.
    pub fn resolve(&self, name: &str) -> Option<String> {
        self.published().names.resolve(name).map(str::to_owned)
    }
}
