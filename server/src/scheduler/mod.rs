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
//! A request arrives with a [`Priority`](crate::priority::Priority): the value
//! it asked for and the value the trust caps left it (`priority.ignoreHeader`,
//! `maxHeaderPriority`, per-key `maxPriority`; applied by the HTTP layer). The
//! scheduler fixes its **effective** priority at admission:
//! `max(model floor, capped)`, or `capped` alone for a model without a floor.
//!
//! Admission ([`Scheduler::submit`]), in order:
//! 1. shutdown has begun → [`RouteError::ShuttingDown`];
//! 2. unknown model or alias → [`RouteError::UnknownModel`];
//! 3. `serial` scheduler and a priority the client asked for that would count
//!    (requested and capped both non-zero) → [`RouteError::PriorityNotSupported`];
//! 4. the model already has `concurrency_limit` admitted requests (queued + waiting on a
//!    start + serving) → [`RouteError::ConcurrencyLimit`] with a retry hint;
//! 5. the model already has `max_queued` requests waiting (queued or waiting on a
//!    start) → [`RouteError::QueueFull`] (the router replaces the retry hint with
//!    one from measured serve times);
//! 6. a start of the same model is in progress → wait with it (no ranking);
//! 7. **fast path**: the model is ready, evicts nothing and is not being stopped → serve
//!    now, unless a queued request of strictly higher rank needs this model
//!    stopped (the *drain fence*, [`SchedulerKind::Fifo`] `drain_fence`), then queue;
//!    and unless the model has a slot limit ([`Parallel`], `parallel: N`) and N
//!    requests are in flight on it: then queue ("slots full", see `slots.rs`);
//! 8. the model or a model it must evict is being started or stopped → queue;
//! 9. a model it must evict has requests in flight → queue (**no preemption**: a
//!    request being served is never cut short, whatever waits);
//! 10. otherwise start a swap: stop the evicted models, then start it. Swaps whose
//!     models do not overlap run in parallel. The drain fence holds back starts too: a
//!     model that a queued request of strictly higher rank would have to stop is not
//!     started for a lower one (it would only add to what the higher one waits for).
//!
//! The queue is ordered by (rank desc, arrival sequence asc). The rank is the
//! effective priority, except that with `aging_after` set (FIFO only) a request
//! that has waited that long ranks above every request that has not aged, aged
//! ones by arrival (its priorities stay as they were, for display); see `aging.rs`
//! for the bound this gives. Whenever something may have freed (a start ended, a
//! model's last request ended, a stop ended, a waiter left, a waiter aged), the
//! queue is walked in order (a response that frees one of a model's slots while
//! it still serves others lets only that model's waiters take it) and steps 6-10 are applied to each entry against the
//! evolving state; entries that still cannot go keep their relative order, and the
//! fence of the walk is built from the entries that stay. Positions (1-based) are
//! reported only when they change, and can go up.
//!
//! The `serial` scheduler keeps one request in flight overall, in arrival order.
//!
//! A granted request whose upstream refused its connection (it crashed an instant
//! ago) is handed back ([`Scheduler::refused`]): it keeps its identity, priority and
//! aging clock, waits for the exit of the instance that refused it (at most
//! [`REFUSAL_GRACE`]) and goes back into the queue where it ranked (`refusal.rs`).
//!
//! Unload and shutdown fail the waiters of the models concerned and stop them; a
//! model being stopped is never started until the stop ends. A ready model with a
//! `ttl` and no admitted request is stopped after `ttl` ([`Scheduler::tick`]). A
//! ready model whose process exits by itself is stopped; the next request for it
//! starts it again ([`Scheduler::upstream_exited`]).
//!
//! # How to add a rule
//!
//! A request is let go (granted, started, joined) in one way only: its site asks
//! `Scheduler::decide` what its model allows (the decision tree of steps 6-10,
//! in `decide.rs`) and passes that, with the request's rank and the fence level
//! over the model, to `verdict` (also in `decide.rs`), the one grant check. The
//! sites that call it are: `place` (a new request), `drain` (the queue walk),
//! `drain_serial`, `refill` (a freed slot, `slots.rs`), `grant_joined` (the
//! waiters of a start that ended, `slots.rs`) and `fast_cap` (what the router's
//! lock-free fast path may grant, `fast.rs`). A rule about *whether a model can
//! serve or start* goes into `decide`; a rule about *which request may take
//! what the model allows* goes into `verdict`; neither needs a site changed.
//! The counters a rule reads (`reserved`, `in_flight`, `fast`, `stopping`,
//! `idle_since`, readiness) are private to `model.rs` and change only through
//! `Model`'s methods named for events (`admit`, `grant`, `release`, `finish`,
//! `absorb_fast`, `stop_begun`, ...): add an event there, never a write
//! elsewhere. Then state the rule as an invariant in
//! `server/tests/scheduler/props.rs` (`World::check_step`, run by
//! `random_scripts_keep_the_scheduler_invariants` and the slot-limited
//! variant), with a plain `#[test]` script for the case that motivated it.
//!
//! # Example
//!
//! ```
//! use llama_swap_server::testing::priority::Priority;
//! use llama_swap_server::testing::scheduler::{
//!     Effect, ModelSettings, Scheduler, SchedulerSettings, Tick,
//! };
//!
//! let settings = SchedulerSettings::new(vec![ModelSettings::new("a")]);
//! let mut scheduler = Scheduler::new(&settings)?;
//! let mut out = Vec::new();
//! let admitted = scheduler.submit(Tick::ZERO, "a", Priority::new(0), &mut out)?;
//! // "a" is stopped: the request starts it and waits.
//! assert!(matches!(&out[0], Effect::StartSwap { model, .. } if model == "a"));
//! out.clear();
//! scheduler.swap_done(Tick::from_millis(10), "a", Ok(()), &mut out);
//! assert!(matches!(&out[0], Effect::Grant { id, .. } if *id == admitted.id));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod aging;
mod core;
mod decide;
mod error;
mod fast;
mod gpus;
mod lifecycle;
mod model;
mod names;
mod placement;
mod reconfigure;
mod refusal;
mod settings;
mod slots;
mod types;

pub use self::core::Scheduler;
pub use error::{CONCURRENCY_RETRY_AFTER, RouteError};
pub use fast::FastCap;
pub(crate) use names::ModelNames;
pub use reconfigure::Restarts;
pub use refusal::REFUSAL_GRACE;
pub(crate) use settings::{DEFAULT_CONCURRENCY_LIMIT, DEFAULT_UNLOAD_TIMEOUT};
pub use settings::{
    ModelSettings, Parallel, ResidencyYield, SchedulerKind, SchedulerSettings, SettingsError,
};
pub(crate) use types::{Admitted, RunningModel};
pub use types::{
    Effect, GpuUsage, Measured, ModelState, QueueEntry, RequestId, StopId, StopModel, Tick,
    WaitReason, WaitStatus,
};
