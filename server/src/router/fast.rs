//! The fast path: grants for a ready model taken without a round trip to the actor.
//!
//! The actor publishes, per model, a gate: open while a request for the model
//! would be granted at once whatever its priority ([`Scheduler::fast_cap`](crate::scheduler::Scheduler::fast_cap)),
//! with the number of grants that fit. A handler takes a grant by counting
//! itself in with one compare-and-swap; its lease counts itself out when it
//! is dropped. The actor stays the only one that decides: before every event
//! that could change a decision it closes every gate, and the grants still
//! counted in a closed gate become the scheduler's (absorbed as in flight);
//! each of those reports its end to the actor as a notice, as a slow-path
//! lease does. A lease counts itself out of its gate only if the gate is
//! still in the same opening (generation) it counted itself into; otherwise
//! the scheduler has absorbed it and is told.
//!
//! One word per gate holds the state, so the close and every count in or out
//! are ordered: `open` (bit 63), the opening's generation (bits 32..63) and
//! the grants counted in during it (bits 0..32).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

use crate::scheduler::FastCap;

const OPEN: u64 = 1 << 63;
const COUNT: u64 = (1 << 32) - 1;
const GENERATION_SHIFT: u32 = 32;
const GENERATION: u64 = (1 << 31) - 1;
/// `floor` when the model has none.
const NO_FLOOR: i64 = i64::MIN;

/// One gate per model, indexed like the scheduler's models.
#[derive(Debug)]
pub(super) struct Gates {
    gates: Box<[Gate]>,
    /// Time zero of the actor's clock, for the end times of grants.
    epoch: Instant,
    /// The configuration these gates are indexed by (a reload makes new
    /// gates; leases of older ones report with their number).
    config: u64,
}

#[derive(Debug, Default)]
struct Gate {
    word: AtomicU64,
    /// Grants this opening allows (written while closed).
    admits: AtomicU64,
    /// The model instance of this opening (written while closed).
    start: AtomicU64,
    /// The model's priority floor (written while closed).
    floor: AtomicI64,
    /// When the last grant that counted itself out ended: nanoseconds since
    /// `epoch`, plus one (0 = none).
    last_done: AtomicU64,
}

/// A grant taken from an open gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct FastGrant {
    /// The opening it was counted into.
    pub(super) generation: u64,
    /// The model instance it is for.
    pub(super) start: u64,
    /// The model's priority floor.
    pub(super) floor: Option<i32>,
}

/// What a close found in a gate that was open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Closed {
    /// Grants counted in and not yet out: from now on the scheduler's.
    pub(super) outstanding: usize,
    /// When the last grant that counted itself out ended, since the epoch.
    pub(super) last_done: Option<Duration>,
}

fn generation(word: u64) -> u64 {
    (word >> GENERATION_SHIFT) & GENERATION
}

impl Gates {
    /// `models` closed gates for configuration number `config`.
    pub(super) fn new(models: usize, epoch: Instant, config: u64) -> Self {
        Self {
            gates: (0..models).map(|_| Gate::default()).collect(),
            epoch,
            config,
        }
    }

    /// The configuration these gates are indexed by.
    pub(super) fn config(&self) -> u64 {
        self.config
    }

    /// Time zero of the actor's clock.
    pub(super) fn epoch(&self) -> Instant {
        self.epoch
    }

    /// Number of gates (models).
    pub(super) fn len(&self) -> usize {
        self.gates.len()
    }

    /// Takes a grant for model `t` if its gate is open and has room.
    pub(super) fn try_acquire(&self, t: usize) -> Option<FastGrant> {
        let gate = self.gates.get(t)?;
        let mut word = gate.word.load(Ordering::Acquire);
        loop {
            if word & OPEN == 0 {
                return None;
            }
            // Written before the opening this word belongs to; if the gate has
            // been reopened since, the exchange below fails and they are read again.
            let admits = gate.admits.load(Ordering::Relaxed);
            let start = gate.start.load(Ordering::Relaxed);
            let floor = gate.floor.load(Ordering::Relaxed);
            if word & COUNT >= admits {
                return None;
            }
            match gate.word.compare_exchange_weak(
                word,
                word + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return Some(FastGrant {
                        generation: generation(word),
                        start,
                        floor: if floor == NO_FLOOR {
                            None
                        } else {
                            i32::try_from(floor).ok()
                        },
                    });
                }
                Err(current) => word = current,
            }
        }
    }

    /// A grant of model `t` taken in `generation` ended. Returns true when the
    /// gate has been closed since (the scheduler counts the grant, so the
    /// actor must be told); false when it counted itself out.
    pub(super) fn release(&self, t: usize, generation_taken: u64) -> bool {
        let Some(gate) = self.gates.get(t) else {
            return false;
        };
        let mut word = gate.word.load(Ordering::Acquire);
        if word & OPEN == 0 || generation(word) != generation_taken {
            return true;
        }
        // Before the count goes down, so a close that no longer sees this
        // grant sees its end time.
        let since = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
        gate.last_done
            .fetch_max(since.saturating_add(1), Ordering::Relaxed);
        loop {
            if word & OPEN == 0 || generation(word) != generation_taken {
                return true;
            }
            match gate.word.compare_exchange_weak(
                word,
                word - 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return false,
                Err(current) => word = current,
            }
        }
    }

    /// Closes the gate of model `t` (the actor only). `None` when it was closed.
    pub(super) fn close(&self, t: usize) -> Option<Closed> {
        let gate = self.gates.get(t)?;
        let mut word = gate.word.load(Ordering::Acquire);
        loop {
            if word & OPEN == 0 {
                return None;
            }
            let next = ((generation(word) + 1) & GENERATION) << GENERATION_SHIFT;
            match gate
                .word
                .compare_exchange_weak(word, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    let done = gate.last_done.load(Ordering::Relaxed);
                    return Some(Closed {
                        outstanding: usize::try_from(word & COUNT).unwrap_or(usize::MAX),
                        last_done: done.checked_sub(1).map(Duration::from_nanos),
                    });
                }
                Err(current) => word = current,
            }
        }
    }

    /// Opens the closed gate of model `t` for `cap` (the actor only); a no-op
    /// when it is open.
    pub(super) fn open(&self, t: usize, cap: FastCap) {
        let Some(gate) = self.gates.get(t) else {
            return;
        };
        if self.is_open(t) {
            return;
        }
        gate.admits.store(
            u64::try_from(cap.admits).unwrap_or(COUNT).min(COUNT),
            Ordering::Relaxed,
        );
        gate.start.store(cap.start, Ordering::Relaxed);
        gate.floor
            .store(cap.floor.map_or(NO_FLOOR, i64::from), Ordering::Relaxed);
        // While closed only the actor changes the word (its count is 0), so
        // setting the bit publishes the stores above with it.
        gate.word.fetch_or(OPEN, Ordering::Release);
    }

    /// Whether the gate of model `t` is open.
    pub(super) fn is_open(&self, t: usize) -> bool {
        self.gates
            .get(t)
            .is_some_and(|g| g.word.load(Ordering::Acquire) & OPEN != 0)
    }

    /// Grants counted into the open gate of model `t` (0 when closed).
    pub(super) fn counted(&self, t: usize) -> usize {
        self.gates.get(t).map_or(0, |g| {
            let word = g.word.load(Ordering::Acquire);
            if word & OPEN == 0 {
                0
            } else {
                usize::try_from(word & COUNT).unwrap_or(usize::MAX)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn cap(admits: usize) -> FastCap {
        FastCap {
            admits,
            start: 3,
            floor: Some(-2),
        }
    }

    #[test]
    fn a_closed_gate_grants_nothing() {
        let gates = Gates::new(1, Instant::now(), 0);
        assert_eq!(gates.try_acquire(0), None);
        assert_eq!(gates.try_acquire(7), None);
    }

    #[test]
    fn an_open_gate_grants_up_to_its_admits_with_the_instance_and_floor() {
        let gates = Gates::new(1, Instant::now(), 0);
        gates.open(0, cap(2));
        let first = gates.try_acquire(0).map(|g| (g.start, g.floor));
        assert_eq!(first, Some((3, Some(-2))));
        assert!(gates.try_acquire(0).is_some());
        assert_eq!(gates.try_acquire(0), None, "room for two only");
        assert_eq!(gates.counted(0), 2);
    }

    #[test]
    fn a_grant_ended_while_open_counts_itself_out_and_frees_its_room() {
        let gates = Gates::new(1, Instant::now(), 0);
        gates.open(0, cap(1));
        let grant = gates.try_acquire(0).map(|g| g.generation);
        assert_eq!(grant.map(|g| gates.release(0, g)), Some(false));
        assert!(gates.try_acquire(0).is_some());
    }

    #[test]
    fn a_close_hands_over_the_outstanding_grants_which_then_report_their_end() {
        let gates = Gates::new(1, Instant::now(), 0);
        gates.open(0, cap(5));
        let a = gates.try_acquire(0).map(|g| g.generation);
        let b = gates.try_acquire(0).map(|g| g.generation);
        let closed = gates.close(0);
        assert_eq!(closed.map(|c| c.outstanding), Some(2));
        assert_eq!(gates.close(0), None, "already closed");
        // Reopened: the old grants still belong to the scheduler.
        gates.open(0, cap(5));
        assert_eq!(a.map(|g| gates.release(0, g)), Some(true));
        assert_eq!(b.map(|g| gates.release(0, g)), Some(true));
        assert_eq!(gates.counted(0), 0);
    }

    #[test]
    fn a_close_reports_when_the_last_grant_counted_out_ended() {
        let gates = Gates::new(1, Instant::now(), 0);
        gates.open(0, cap(1));
        assert_eq!(gates.close(0).and_then(|c| c.last_done), None);
        gates.open(0, cap(1));
        let grant = gates.try_acquire(0).map(|g| g.generation);
        grant.map(|g| gates.release(0, g));
        assert!(gates.close(0).and_then(|c| c.last_done).is_some());
    }

    /// Handlers on several threads take and end grants while the actor closes
    /// and reopens: every grant is counted exactly once, by the gate (it counted
    /// itself out) or by the scheduler (absorbed by a close, then reported).
    #[test]
    fn grants_racing_closes_are_each_accounted_for_once() {
        let gates = Arc::new(Gates::new(1, Instant::now(), 0));
        gates.open(0, cap(1_000));
        let reported = Arc::new(AtomicUsize::new(0));
        let taken = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..4)
            .map(|_| {
                let (gates, reported, taken) = (
                    Arc::clone(&gates),
                    Arc::clone(&reported),
                    Arc::clone(&taken),
                );
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        if let Some(grant) = gates.try_acquire(0) {
                            taken.fetch_add(1, Ordering::Relaxed);
                            if gates.release(0, grant.generation) {
                                reported.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                    }
                })
            })
            .collect();
        let mut absorbed = 0;
        for _ in 0..2_000 {
            if let Some(closed) = gates.close(0) {
                absorbed += closed.outstanding;
            }
            gates.open(0, cap(1_000));
        }
        for worker in workers {
            worker.join().expect("worker");
        }
        absorbed += gates.close(0).map_or(0, |c| c.outstanding);
        assert_eq!(absorbed, reported.load(Ordering::Relaxed));
        assert!(taken.load(Ordering::Relaxed) > 0);
    }
}
