//! Values the scheduler takes and gives: time, identities, effects, snapshots.

use std::ops::Add;
use std::time::Duration;

use super::RouteError;

/// A point in scheduler time: the time since the router started.
///
/// The scheduler never reads a clock; the router passes the current `Tick` in, so
/// tests write `Tick::from_millis(5_000)` and replay scripts exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Tick(Duration);

impl Tick {
    /// The start of time.
    pub const ZERO: Self = Self(Duration::ZERO);

    /// A tick `since_start` after the start.
    pub const fn new(since_start: Duration) -> Self {
        Self(since_start)
    }

    /// A tick `millis` milliseconds after the start.
    pub const fn from_millis(millis: u64) -> Self {
        Self(Duration::from_millis(millis))
    }

    /// Time since the start.
    pub const fn since_start(self) -> Duration {
        self.0
    }

    /// Time from `earlier` to `self`; zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Self) -> Duration {
        self.0.saturating_sub(earlier.0)
    }
}

impl Add<Duration> for Tick {
    type Output = Self;

    fn add(self, rhs: Duration) -> Self {
        Self(self.0.saturating_add(rhs))
    }
}

/// Identity of one admitted request: its arrival sequence number (monotonic, never reused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// Identity of one stop operation (unload, TTL expiry, shutdown).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StopId(pub u64);

/// One model to stop, with its grace before a forced kill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopModel {
    /// The model ID.
    pub model: String,
    /// Graceful stop timeout.
    pub grace: Duration,
    /// A swap frees it and it has a sleep mode (`sleep:`): it may sleep
    /// instead of stopping (`Launcher::release`). False for unload, TTL,
    /// shutdown, and a sleeping model the memory router stops for good.
    pub may_sleep: bool,
}

/// Where an admitted request stands while it waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStatus {
    /// Admitted; no decision yet.
    Admitted,
    /// Waiting in the ranked queue. 1-based; it may go up when higher-priority work arrives.
    Queued {
        /// 1 + the number of waiting requests ranked before this one.
        position: usize,
    },
    /// Waiting for its model to start (joined or started a swap).
    Starting,
    /// Granted: the request may use the model.
    Granted,
}

/// What the router must do as a result of a scheduler step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// The request may use `model` now; it reports back with `serve_done` when it ends.
    Grant {
        /// The request.
        id: RequestId,
        /// The resolved model ID.
        model: String,
    },
    /// The request ends with `error` (it was never served).
    Fail {
        /// The request.
        id: RequestId,
        /// Why.
        error: RouteError,
    },
    /// Queue positions that changed, as (request, new 1-based position), in queue
    /// order. One effect per step however many changed, so a deep queue stays cheap.
    Positions {
        /// The changes.
        changes: Vec<(RequestId, usize)>,
    },
    /// The request now waits for its model to start ([`WaitStatus::Starting`]).
    Status {
        /// The request.
        id: RequestId,
        /// Its new status.
        status: WaitStatus,
    },
    /// Stop every model of `evict` (in parallel, each with its own grace: its
    /// `unloadTimeout`, as an unload would), then make `model` ready; report the
    /// result with `swap_done(model, ..)`.
    StartSwap {
        /// The model to make ready.
        model: String,
        /// Running models that must stop first, sorted by ID.
        evict: Vec<StopModel>,
    },
    /// Stop models: batches one after the other, the models of a batch in parallel;
    /// report with `stop_done(id)` once every batch is done.
    Stop {
        /// The operation, for `stop_done`.
        id: StopId,
        /// The batches, in order.
        batches: Vec<Vec<StopModel>>,
    },
}

/// The scheduler's view of a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ModelState {
    /// Not running.
    Stopped,
    /// Being made ready (including stopping the models it evicts).
    Starting,
    /// Ready to serve.
    Ready,
    /// Being stopped (evicted, unloaded, TTL expiry or shutdown).
    Stopping,
    /// Asleep (`sleep:`): a swap freed it and its process stays, not serving;
    /// the next request for it wakes it (a start). Holds only its sleep
    /// `memory` on its GPUs.
    Sleeping,
}

impl ModelState {
    /// The word `/running`, `/api/events` and `/metrics` use for it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stopped => "stopped",
            Self::Starting => "starting",
            Self::Ready => "ready",
            Self::Stopping => "stopping",
            Self::Sleeping => "sleeping",
        }
    }
}

/// A model that is not stopped, for `GET /running`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningModel {
    /// The model ID.
    pub model: String,
    /// Its state (never [`ModelState::Stopped`]).
    pub state: ModelState,
    /// Granted requests whose lease is still held (forwarded to the upstream).
    pub in_flight: usize,
    /// Most requests in flight at once (`parallel`); `None` = no limit (or `auto`
    /// before the upstream said).
    pub parallel: Option<usize>,
    /// The ids of the GPUs the memory router placed it on (empty under the
    /// other routers).
    pub gpus: Vec<u32>,
    /// Bytes it holds on each of `gpus` as the memory router counts them: its
    /// share of `memory`, or its sleep `memory` while asleep (0 under the
    /// other routers).
    pub memory: u64,
    /// Under the memory router: the last measure of its process's GPU
    /// memory (bytes over all its GPUs), once one was taken.
    pub memory_measured: Option<u64>,
}

/// One GPU of the memory router, for `GET /running`, `/api/events` and
/// `/metrics`: what the models placed on it hold, as the router counts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuUsage {
    /// Its id (what `${GPU}` and `CUDA_VISIBLE_DEVICES` say).
    pub id: u32,
    /// Its memory in bytes.
    pub memory: u64,
    /// Bytes kept free (`reserve`).
    pub reserve: u64,
    /// Bytes the models placed on it hold (asleep: their sleep `memory`).
    pub used: u64,
    /// Bytes a model may still be placed in: `memory - reserve - used`.
    pub free: u64,
}

/// Why a queued request waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WaitReason {
    /// Its model is ready but every one of its `parallel` slots is taken: it goes
    /// when a response ends, highest waiter for the model first.
    SlotsFull,
    /// It needs a model started or stopped (its own, or one in the way), or the
    /// drain fence holds it behind a higher waiter that does.
    Swap,
}

impl WaitReason {
    /// `"slots full"` or `"swap"`, as `/api/queue` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SlotsFull => "slots full",
            Self::Swap => "swap",
        }
    }
}

/// One waiting request in the ranked queue, for `GET /api/queue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueEntry {
    /// The request.
    pub id: RequestId,
    /// The resolved model ID.
    pub model: String,
    /// Priority the request asked for (parsed header, 0 if none).
    pub requested_priority: i32,
    /// The header priority after trust caps (`priority.maxHeaderPriority`,
    /// per-key caps, `ignoreHeader`); equal to `requested_priority` without caps.
    pub capped_priority: i32,
    /// `max(config floor, requested)`: what ranks it.
    pub effective_priority: i32,
    /// 1-based position in the queue.
    pub position: usize,
    /// Why it waits, as of this snapshot.
    pub reason: WaitReason,
    /// It waited `aging_after` and now ranks ahead of newer work; its
    /// priorities above stay what they were, for display and metrics.
    pub aged: bool,
    /// Time since the request was admitted.
    pub waited: Duration,
}

/// A request the scheduler admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// Its identity (arrival sequence).
    pub id: RequestId,
    /// The resolved model ID.
    pub model: String,
    /// Its effective priority.
    pub effective_priority: i32,
}

/// What a measure of a model's GPU memory changed
/// ([`Scheduler::measured`](super::Scheduler::measured)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measured {
    /// Its configured `memory`, in bytes.
    pub estimate: u64,
    /// What its process uses, in bytes over all its GPUs.
    pub measured: u64,
    /// What the memory router counts from now on: the larger of the two,
    /// never more than its GPUs hold.
    pub counted: u64,
}
