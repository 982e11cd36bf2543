//! A request's priority, from its `X-Priority` header to the rank it waits at.
//!
//! Three values, each computed once, in this order:
//!
//! 1. **requested**: what the client sent. The header is parsed once per
//!    request ([`HeaderPriority::from_headers`]); absent, malformed or repeated
//!    headers count as 0 and never fail the request.
//! 2. **capped**: the requested value after the operator's trust rules
//!    ([`Trust::cap`], the config's `priority:` section): `ignoreHeader` turns
//!    it into 0, `maxHeaderPriority` and a per-key `maxPriority` are ceilings.
//!    A negative key ceiling lowers even a call without a header.
//! 3. **effective**: `max(model floor, capped)` ([`Priority::effective`]),
//!    where the floor is the model's configured
//!    `routing.scheduler.settings.fifo.priority`. A model without a floor ranks
//!    by the capped value alone, so `-10` ranks below a call without a header.
//!
//! The HTTP handler builds one [`Priority`] (requested and capped) and hands it
//! to the router and on to the scheduler, which takes the floor and ranks by the
//! effective value. What happens to the rank while a request waits (aging, the
//! drain fence) is the scheduler's business (`crate::scheduler`). [`Bands`] map
//! effective priorities to the bounded label values of the metrics.

mod bands;
mod header;
mod trust;

pub use bands::Bands;
pub(crate) use bands::BandsError;
pub(crate) use header::{HeaderPriority, PRIORITY_HEADER};
pub use trust::KeyIndex;
pub(crate) use trust::Trust;

/// The priority one request carries: what it asked for and what the trust rules
/// let it have. See the `priority` module's docs for how it becomes a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Priority {
    requested: i32,
    capped: i32,
}

impl Priority {
    /// A priority taken as sent: no trust rule lowered it.
    pub const fn new(requested: i32) -> Self {
        Self {
            requested,
            capped: requested,
        }
    }

    /// A priority whose header said `requested` and that trust rules turned into `capped`.
    pub const fn with_cap(requested: i32, capped: i32) -> Self {
        Self { requested, capped }
    }

    /// What the client asked for (0 without a usable header).
    pub const fn requested(self) -> i32 {
        self.requested
    }

    /// What the trust rules let it have; this, not `requested`, ranks.
    pub const fn capped(self) -> i32 {
        self.capped
    }

    /// Whether a trust rule changed the requested value.
    pub const fn is_capped(self) -> bool {
        self.requested != self.capped
    }

    /// The rank for a model with configured `floor`: `max(floor, capped)`, or
    /// `capped` alone when the model has no floor.
    pub fn effective(self, floor: Option<i32>) -> i32 {
        floor.map_or(self.capped, |floor| floor.max(self.capped))
    }
}

impl From<i32> for Priority {
    fn from(requested: i32) -> Self {
        Self::new(requested)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_lifts_only_priorities_below_it() {
        assert_eq!(Priority::new(-10).effective(Some(0)), 0);
        assert_eq!(Priority::new(10).effective(Some(0)), 10);
        assert_eq!(Priority::new(-10).effective(None), -10);
    }

    #[test]
    fn the_capped_value_ranks_and_the_requested_one_is_kept() {
        let p = Priority::with_cap(50, 10);
        assert!(p.is_capped());
        assert_eq!(p.requested(), 50);
        assert_eq!(p.effective(None), 10);
        assert_eq!(p.effective(Some(20)), 20);
        assert!(!Priority::new(3).is_capped());
    }
}
