//! The HTTP surface: model extraction, authentication, error envelopes and the
//! endpoint handlers in front of the router.
//!
//! Handlers hold no scheduling state: they parse the request, submit it to the
//! [`RouterHandle`](crate::router::RouterHandle), wait for the grant and hand
//! the request to the [`proxy`](crate::proxy) with the lease moved into the
//! response body.

pub mod auth;
mod dispatch;
pub mod error;
pub mod extract;
mod info;
mod layers;
pub mod loading;
mod logs;
mod metrics;
mod routes;
mod state;
pub mod upstream_path;

pub use auth::ApiKeys;
pub use error::{ApiError, ErrorKind};
pub use extract::RequestModel;
pub use routes::app;
pub use state::{AppState, DEFAULT_MAX_BODY_BYTES, HttpOptions};
pub use upstream_path::{UpstreamTarget, split_upstream_path};
