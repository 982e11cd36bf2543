//! What the integration tests, benchmarks, examples and the workspace's end-to-end
//! suite reach beneath the facade: the scheduler and the router driven directly, the
//! upstream supervisor, the launcher contract, and the values tests compare against.
//!
//! Not part of the library's API: hidden from the documentation, and it changes
//! whenever the internals do. Each module here is named for the crate module it
//! opens and re-exports only the items used outside the crate, so that everything
//! else stays `pub(crate)` (the `unreachable_pub` lint keeps it so). Code outside the
//! crate that needs another internal item adds it here.

/// The activity table and its metered body (`benches/activity.rs`).
pub mod activity {
    pub use crate::activity::{Activity, MeteredBody, UsageScanner};
}

/// The capture buffer (`benches/activity.rs`).
pub mod capture {
    pub use crate::capture::Captures;
}

/// The HTTP layer.
pub mod api {
    /// Request-rate limits of failed authentication.
    pub mod auth_limit {
        pub use crate::api::auth_limit::BURST;
    }
}

/// Request body filters (`stripParams`, `setParams`, `setParamsByID`).
pub mod filters {
    pub use crate::filters::{FilterError, Filters};
}

/// The contract between the router and whatever runs upstream processes.
pub mod launcher {
    pub use crate::launcher::{
        BoxFuture, LaunchError, Launcher, PortHolder, Released, UpstreamEvent,
    };
}

/// The Prometheus metrics.
pub mod metrics {
    pub use crate::metrics::Metrics;
}

/// Where a requested name leads.
pub mod names {
    pub use crate::names::{Lead, PeerRoute};
}

/// Eviction policies.
pub mod policy {
    pub use crate::policy::{GroupSettings, PolicyError};

    /// The memory placement policy.
    pub mod memory {
        pub use crate::policy::memory::{
            Gpu, GpuPool, Memory, MemoryError, MemoryModel, MemorySettings, Resident,
        };
    }

    /// The matrix policy.
    pub mod matrix {
        pub use crate::policy::matrix::{
            Matrix, MatrixError, MatrixSet, MatrixSettings, SyntaxError,
        };
    }
}

/// A request's priority.
pub mod priority {
    pub use crate::priority::{Bands, KeyIndex, Priority};
}

/// The reverse proxy's loop marks and timeouts.
pub mod proxy {
    pub use crate::proxy::{DEFAULT_RESPONSE_HEADER, MAX_HOPS, Timeouts, VIA_HEADER};
}

/// The actor that owns the scheduler.
pub mod router {
    pub use crate::router::{
        Lease, ModelState, ReconfigureError, RouteError, Router, RouterHandle, RouterOptions,
        Submit, Ticket, WaitStatus,
    };
}

/// The pure scheduling state machine.
pub mod scheduler {
    pub use crate::scheduler::{
        CONCURRENCY_RETRY_AFTER, Effect, FastCap, GpuUsage, Measured, ModelSettings, ModelState,
        Parallel, QueueEntry, REFUSAL_GRACE, RequestId, ResidencyYield, Restarts, RouteError,
        Scheduler, SchedulerKind, SchedulerSettings, SettingsError, StopId, StopModel, Tick,
        WaitReason, WaitStatus,
    };
}

/// The upstream supervisor.
pub mod upstream {
    pub use crate::upstream::{
        CommandError, Failed, HttpCall, LogStream, Monitor, ProcessSpec, ProcessState, SleepSpec,
        Supervisor, SupervisorOptions, adopt_orphans, guard_server_process, run_shim_if_requested,
        split_command,
    };
}
