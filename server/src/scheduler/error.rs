//! Why a request was not served.

use std::time::Duration;

use crate::launcher::LaunchError;

/// Hint sent with [`RouteError::ConcurrencyLimit`] (llama-swap sends `Retry-After: 1`).
pub const CONCURRENCY_RETRY_AFTER: Duration = Duration::from_secs(1);

/// Why a request was rejected at admission or ended without being served.
///
/// The HTTP layer maps each variant to a status and code (docs/ERRORS.md).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RouteError {
    /// No model or alias has this name (404 `model_not_found`).
    #[error("model '{model}' is not configured; GET /v1/models lists the models")]
    UnknownModel {
        /// The name the request used.
        model: String,
    },
    /// The model already has its limit of admitted requests (429 `concurrency_limit`).
    #[error("model {model} has reached its concurrency limit; retry after {retry_after:?}")]
    ConcurrencyLimit {
        /// The model ID.
        model: String,
        /// When a retry may succeed.
        retry_after: Duration,
    },
    /// The model already has `max_queued` requests waiting (429 `queue_full`).
    #[error("model {model} already has {waiting} requests waiting; retry after {retry_after:?}")]
    QueueFull {
        /// The model ID.
        model: String,
        /// Requests waiting for it.
        waiting: usize,
        /// When a retry may succeed: the router's estimate from measured service times.
        retry_after: Duration,
    },
    /// The `serial` scheduler does not rank requests (400 `priority_not_supported`).
    #[error(
        "X-Priority {priority} is not supported: the serial scheduler serves requests in arrival order; send no X-Priority or 0"
    )]
    PriorityNotSupported {
        /// The priority the request carried.
        priority: i32,
    },
    /// The model could not be made ready (502/503/504 by variant).
    #[error("model could not be started: {0}")]
    StartFailed(#[source] LaunchError),
    /// The model was unloaded while the request waited (503 `model_unloaded`).
    #[error("model {model} was unloaded while the request waited; retry to load it again")]
    Unloaded {
        /// The model ID.
        model: String,
    },
    /// A reload removed the model from the configuration while the request
    /// waited for it (404 `model_removed`).
    #[error("model {model} was removed from the configuration while the request waited")]
    Removed {
        /// The model ID.
        model: String,
    },
    /// The upstream refused the request's connection and did not exit within
    /// [`REFUSAL_GRACE`](super::REFUSAL_GRACE) (502 `upstream_unreachable`): it runs
    /// but does not listen where the config says.
    #[error("the upstream of model {model} refuses connections")]
    UpstreamRefused {
        /// The model ID.
        model: String,
    },
    /// The server is shutting down (503 `shutting_down`).
    #[error("the server is shutting down")]
    ShuttingDown,
}
