//! The pure scheduling state machine.
//!
//! The scheduler decides, for each request, whether to serve it now, let it join a
//! model start in progress, start a swap for it, or queue it, and which waiting
//! request goes next. It performs no I/O, reads no clock (the router passes a
//! [`Tick`] in) and never iterates a hash map to decide, so the same script of
//! events always yields the same [`Effect`]s.
//!
//! # Rules
//!
//! Admission ([`Scheduler::submit`]), in order:
//! 1. unknown model or alias → [`RouteError::UnknownModel`];
//! 2. `serial` scheduler and a non-zero header priority → [`RouteError::PriorityNotSupported`];
//! 3. the model already has `concurrency_limit` admitted requests (queued + waiting on a
//!    start + serving) → [`RouteError::ConcurrencyLimit`] with a retry hint;
//! 4. a start of the same model is in progress → wait with it (no ranking);
//! 5. **fast path**: the model is ready, evicts nothing and is not being stopped → serve
//!    now, unless a queued request of strictly higher effective priority needs this model
//!    stopped (the *drain fence*, [`SchedulerKind::Fifo`] `drain_fence`), then queue;
//! 6. the model or a model it must evict is being started or stopped → queue;
//! 7. a model it must evict has requests in flight → queue (no preemption);
//! 8. otherwise start a swap: stop the evicted models, then start it. Swaps whose
//!    models do not overlap run in parallel. The drain fence holds back starts too: a
//!    model that a queued request of strictly higher priority would have to stop is not
//!    started for a lower one (it would only add to what the higher one waits for).
//!
//! The queue is ordered by (effective priority desc, arrival sequence asc), effective
//! = `max(model priority from config, header priority)`. Whenever something may have
//! freed (a start ended, a model's last request ended, a stop ended, a waiter left), the
//! queue is walked in order and steps 4-8 are applied to each entry against the
//! evolving state; entries that still cannot go keep their relative order, and the
//! fence of the walk is built from the entries that stay. Positions (1-based) are
//! reported only when they change, and can go up.
//!
//! The `serial` scheduler keeps one request in flight overall, in arrival order.
//!
//! Unload and shutdown fail the waiters of the models concerned and stop them; a
//! model being stopped is never started until the stop ends. A ready model with a
//! `ttl` and no admitted request is stopped after `ttl` ([`Scheduler::tick`]).
//!
//! # Example
//!
//! ```
//! use llama_swap_server::scheduler::{
//!     Effect, ModelSettings, Scheduler, SchedulerSettings, Tick,
//! };
//!
//! let settings = SchedulerSettings::new(vec![ModelSettings::new("a")]);
//! let mut scheduler = Scheduler::new(&settings)?;
//! let mut out = Vec::new();
//! let admitted = scheduler.submit(Tick::ZERO, "a", 0, &mut out)?;
//! // "a" is stopped: the request starts it and waits.
//! assert!(matches!(&out[0], Effect::StartSwap { model, .. } if model == "a"));
//! out.clear();
//! scheduler.swap_done(Tick::from_millis(10), "a", Ok(()), &mut out);
//! assert!(matches!(&out[0], Effect::Grant { id, .. } if *id == admitted.id));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod aging;
mod core;
mod drain;
mod error;
mod lifecycle;
mod settings;
mod types;

pub use self::core::Scheduler;
pub use error::{CONCURRENCY_RETRY_AFTER, RouteError};
pub use settings::{
    DEFAULT_CONCURRENCY_LIMIT, DEFAULT_STOP_GRACE, DEFAULT_UNLOAD_TIMEOUT, GroupSettings,
    ModelSettings, SchedulerKind, SchedulerSettings, SettingsError,
};
pub use types::{
    Admitted, Effect, ModelState, QueueEntry, RequestId, RunningModel, StopId, StopModel, Tick,
    WaitStatus,
};
