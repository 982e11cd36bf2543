//! What the scheduler is configured with: models, groups and the scheduler kind.
//!
//! These structs are the contract between `crate::config` (which fills them from
//! llama-swap's YAML) and the scheduler/router (which validate them at start).

use std::num::NonZeroUsize;
use std::time::Duration;

use crate::policy::matrix::{MatrixError, MatrixSettings};
use crate::policy::{GroupSettings, PolicyError};

/// Concurrency limit of a model whose config does not set `concurrencyLimit`
/// (or sets 0), as in llama-swap.
pub(crate) const DEFAULT_CONCURRENCY_LIMIT: usize = 10;

/// Graceful stop timeout of a model whose config does not set `unloadTimeout`.
pub(crate) const DEFAULT_UNLOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// Everything the scheduler needs to know, resolved from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerSettings {
    /// Every configured model (local models only; order does not matter).
    pub models: Vec<ModelSettings>,
    /// Swap groups. Empty: every model is in the implicit `(default)` group, so one
    /// model runs at a time. Models not listed in any group join `(default)` too.
    pub groups: Vec<GroupSettings>,
    /// The matrix (llama-swap's `routing.router.use: matrix`): when set, it
    /// decides evictions and `groups` is ignored.
    pub matrix: Option<MatrixSettings>,
    /// Which scheduler orders the requests.
    pub kind: SchedulerKind,
    /// Anti-starvation (`priority.agingAfter`, FIFO only): a request queued this
    /// long ranks ahead of every request that has not aged, oldest first. `None`: off.
    pub aging_after: Option<Duration>,
    /// `priority.minResidentYieldsTo`: who may stop a model inside its
    /// [`ModelSettings::min_resident`] window (default: a strictly higher waiter).
    pub min_resident_yields_to: ResidencyYield,
    /// The memory router (`routing.router.use: memory`): when set, models are
    /// placed on these GPUs by their [`ModelSettings::memory`], and it
    /// decides evictions (`groups` and `matrix` are ignored).
    pub memory: Option<crate::policy::memory::GpuPool>,
}

impl SchedulerSettings {
    /// Settings for `models` in the default group, with the FIFO scheduler and the drain fence on.
    pub fn new(models: Vec<ModelSettings>) -> Self {
        Self {
            models,
            groups: Vec::new(),
            matrix: None,
            kind: SchedulerKind::default(),
            aging_after: None,
            min_resident_yields_to: ResidencyYield::default(),
            memory: None,
        }
    }
}

/// Who may stop a model inside its `minResident` window
/// (`priority.minResidentYieldsTo`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ResidencyYield {
    /// `higher` (the default): a waiter whose rank is strictly above the
    /// highest effective priority the model served since it became ready (an
    /// aged waiter is above every priority).
    #[default]
    Higher,
    /// `none`: nobody; the window always runs out first.
    Nobody,
}

/// One model as the scheduler sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSettings {
    /// The model ID.
    pub id: String,
    /// Other names a request may use for this model.
    pub aliases: Vec<String>,
    /// Config floor of the effective priority (`routing.scheduler.settings.fifo.priority`,
    /// keys resolved through aliases). `None` = no floor: requests rank by their
    /// header alone, so `X-Priority: -10` ranks below a request without a header.
    pub priority: Option<i32>,
    /// Most requests admitted at once (queued, waiting for a start, or being served).
    pub concurrency_limit: usize,
    /// Grace for stopping this model on unload, TTL expiry and shutdown.
    pub unload_timeout: Duration,
    /// Idle time after which the model is unloaded; `None` = never.
    pub ttl: Option<Duration>,
    /// Most requests that may wait for this model (queued or waiting for its
    /// start) before more are refused with [`RouteError::QueueFull`](super::RouteError::QueueFull);
    /// `None` = no bound beyond the concurrency limit.
    pub max_queued: Option<usize>,
    /// How many requests may be in flight to the upstream at once (`parallel`);
    /// beyond that a request for the ready model waits in the ranked queue.
    pub parallel: Parallel,
    /// What the memory router knows of it (`memory`, `gpus`, `persistent`);
    /// `None`: it holds no GPU memory.
    pub memory: Option<crate::policy::memory::MemoryModel>,
    /// `minResident` (model, else `priority.minResident`): once ready, it is
    /// not stopped by a swap for a waiter of the same or lower effective
    /// priority than the highest it served since, before it has been ready
    /// this long (see [`ResidencyYield`] for higher waiters). `None`: no
    /// minimum. Unload, TTL, shutdown and reloads are not held back.
    pub min_resident: Option<Duration>,
    /// It has a sleep mode (`sleep:`): a swap that frees it puts it to sleep,
    /// keeping this many bytes on each of its GPUs (its sleep `memory`).
    /// `None`: a swap stops it.
    pub sleep: Option<u64>,
}

impl ModelSettings {
    /// A model with llama-swap's defaults: no alias, no priority floor, limit 10, unload timeout 10 s, no TTL.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            aliases: Vec::new(),
            priority: None,
            concurrency_limit: DEFAULT_CONCURRENCY_LIMIT,
            unload_timeout: DEFAULT_UNLOAD_TIMEOUT,
            ttl: None,
            max_queued: None,
            parallel: Parallel::Unlimited,
            memory: None,
            min_resident: None,
            sleep: None,
        }
    }
}

/// How many requests a model's upstream is given at once (the per-model `parallel` key).
///
/// An upstream such as llama.cpp's `llama-server` has a fixed number of slots
/// (`--parallel`) and queues everything beyond them in arrival order, where no
/// priority applies. With a limit, the requests beyond it wait in this server's
/// ranked queue instead, so an Elevated request overtakes queued Low work for the
/// same model. Nothing already forwarded is ever preempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Parallel {
    /// No limit: a request for a ready model is forwarded at once (llama-swap's behaviour).
    #[default]
    Unlimited,
    /// At most this many requests in flight to the upstream.
    Limit(NonZeroUsize),
    /// The upstream's own slot count, read once it is ready (llama-server's
    /// `/props` `total_slots`, see [`Launcher::slots`](crate::launcher::Launcher::slots));
    /// no limit until it is known or when the upstream does not say.
    Auto,
}

impl Parallel {
    /// A fixed limit of `n` (`None` for 0).
    pub fn limit(n: usize) -> Option<Self> {
        NonZeroUsize::new(n).map(Self::Limit)
    }
}

/// Which scheduler orders waiting requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchedulerKind {
    /// Priority queue: (effective priority desc, arrival asc), llama-swap's `fifo`.
    Fifo {
        /// Make fast-path requests for a ready model queue while a strictly higher
        /// waiting request needs that model stopped (docs/DESIGN.md section 2).
        drain_fence: bool,
    },
    /// One request at a time overall, strict arrival order, no priorities.
    Serial,
}

impl Default for SchedulerKind {
    fn default() -> Self {
        Self::Fifo { drain_fence: true }
    }
}

/// Why [`SchedulerSettings`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// Two models share an ID.
    #[error("model {model} is configured twice")]
    DuplicateModel {
        /// The model ID.
        model: String,
    },
    /// A name (ID or alias) refers to two models.
    #[error("name {name} is used by both {first} and {second}; aliases must be unique")]
    AmbiguousName {
        /// The alias or ID in question.
        name: String,
        /// The model that claimed it first.
        first: String,
        /// The other model.
        second: String,
    },
    /// A model allows no request at all.
    #[error("model {model} has concurrency limit 0; it must be at least 1")]
    ZeroConcurrencyLimit {
        /// The model ID.
        model: String,
    },
    /// The `serial` scheduler does not rank, so priorities would be silently ignored.
    #[error("model {model} has priority {priority}, but the serial scheduler has no priorities")]
    PriorityWithSerial {
        /// The model ID.
        model: String,
        /// Its configured priority.
        priority: i32,
    },
    /// The groups are invalid.
    #[error(transparent)]
    Groups(#[from] PolicyError),
    /// The matrix does not compile.
    #[error("matrix: {0}")]
    Matrix(#[from] MatrixError),
    /// The memory router's settings cannot place every model.
    #[error(transparent)]
    Memory(#[from] crate::policy::memory::MemoryError),
}
