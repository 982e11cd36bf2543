//! The fake model's sleep state and its settings: what `Shared` holds, below
//! the endpoints that change it (`sleep/mod.rs`), so that neither imports the other.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// Sleep settings fixed at start.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SleepSettings {
    pub(crate) sleep_time: Duration,
    pub(crate) wake_time: Duration,
    /// Bytes of GPU memory held awake.
    pub(crate) memory: u64,
    /// Bytes held asleep.
    pub(crate) sleep_memory: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Phase {
    #[default]
    Awake,
    FallingAsleep,
    Asleep,
    Waking,
}

impl Phase {
    pub(super) fn name(self) -> &'static str {
        match self {
            Phase::Awake => "awake",
            Phase::FallingAsleep => "falling_asleep",
            Phase::Asleep => "asleep",
            Phase::Waking => "waking",
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Counts {
    pub(super) phase: Phase,
    pub(super) sleeps: u64,
    pub(super) wakes: u64,
    /// Model requests and health checks answered 503 because it slept.
    pub(super) refused: u64,
    pub(super) level: u8,
}

/// The fake model's sleep state.
#[derive(Debug, Default)]
pub(crate) struct Sleep {
    counts: Mutex<Counts>,
}

impl Sleep {
    pub(super) fn lock(&self) -> MutexGuard<'_, Counts> {
        // Every update leaves the counts consistent.
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether it is awake; counts a refusal when not.
    pub(crate) fn awake_or_count(&self) -> bool {
        let mut counts = self.lock();
        if counts.phase == Phase::Awake {
            return true;
        }
        counts.refused += 1;
        false
    }
}
