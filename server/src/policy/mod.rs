//! Eviction policies: which models must stop so that another can run.
//!
//! The scheduler asks a policy two set-shaped questions ([`EvictionPolicy`]):
//!
//! - **evict**: to run model X while these models are up (ready, starting or
//!   stopping), which of them must stop first? The answer becomes the `evict`
//!   list of a swap.
//! - **conflicts**: which of these models can never run alongside X, whatever
//!   else runs? The drain fence uses it: while a request for X waits, lower
//!   ranked requests neither use nor start a model that conflicts with X (it
//!   would only have to be stopped again). The scheduler asks it pair by pair
//!   ([`EvictionPolicy::conflicts_with`]) for the models that have waiters,
//!   so nothing it keeps grows with the square of the model count.
//!
//! [`Groups`] (llama-swap's `groups`, the default) answers both pairwise. The
//! matrix ([`matrix`]) chooses the cheapest combination of its sets, so its
//! evictions depend on everything that runs. The memory router ([`memory`])
//! places models on GPUs by the memory they need; its plans also depend on who
//! waits and what was used last, so the scheduler asks it with that state.
//!
//! Policies are pure: model numbers in, model numbers out; no process, no clock,
//! no logging. A model is its index in the sorted list of configured model IDs,
//! the numbering the scheduler uses.

mod groups;
pub(crate) mod matrix;
pub(crate) mod memory;

use std::fmt;

pub(crate) use groups::Groups;
pub use groups::{GroupSettings, PolicyError};

/// The questions the scheduler asks about which models may run together.
///
/// Models are indices into the sorted list of configured model IDs; sets are
/// slices in ascending order, and answers are too. An index the policy does not
/// know is never part of an answer.
pub(crate) trait EvictionPolicy: fmt::Debug + Send + Sync {
    /// To run `target` while `running` are up (ready, starting or stopping; may
    /// contain `target`), the ones that must stop first. Never contains `target`.
    /// Where the policy has a choice of equal cost, it stops the least recently
    /// used first (`last_used` of a model: larger is more recent).
    fn evict(
        &self,
        target: usize,
        running: &[usize],
        last_used: &dyn Fn(usize) -> u64,
    ) -> Vec<usize>;

    /// The members of `models` that cannot run alongside `target` whatever else
    /// runs. Never contains `target`. It must not depend on which models run.
    fn conflicts(&self, target: usize, models: &[usize]) -> Vec<usize>;

    /// Whether `other` can never run alongside `target` (`other` is in
    /// [`conflicts`](Self::conflicts) of `target`); false for `target` itself.
    /// The scheduler asks it pair by pair, for the models that have requests
    /// waiting, instead of keeping a table of every pair (which would grow
    /// with the square of the model count).
    fn conflicts_with(&self, target: usize, other: usize) -> bool {
        !self.conflicts(target, &[other]).is_empty()
    }

    /// Why [`evict`](Self::evict) answers what it does for the same question,
    /// for the one log line of a real swap (the matrix names its set and the
    /// cost). `None`: nothing to add (the default).
    fn explain(
        &self,
        target: usize,
        running: &[usize],
        last_used: &dyn Fn(usize) -> u64,
    ) -> Option<String> {
        let _ = (target, running, last_used);
        None
    }
}
