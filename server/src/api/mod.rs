//! The HTTP surface: model extraction, authentication, error envelopes and the
//! endpoint handlers in front of the router.

pub mod auth;
pub mod error;
pub mod extract;
pub mod loading;
pub mod upstream_path;

pub use auth::ApiKeys;
pub use error::{ApiError, ErrorKind};
pub use extract::RequestModel;
pub use upstream_path::{UpstreamTarget, split_upstream_path};
