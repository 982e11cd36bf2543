//! What the integration tests, benchmarks, examples and the workspace's end-to-end
//! suite reach beneath the facade.
//!
//! Not part of the library's API: hidden from the documentation, and it changes
//! whenever the internals do. Each module here is named for the crate module it
//! opens and re-exports only the items used outside the crate, so that everything
//! else stays `pub(crate)` (the `unreachable_pub` lint keeps it so).

/// The activity table and its metered body (`benches/activity.rs`).
pub mod activity {
    pub use crate::activity::{Activity, MeteredBody, UsageScanner};
}
