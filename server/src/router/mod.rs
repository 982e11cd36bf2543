//! The router actor: the single owner of scheduling state.

pub mod launcher;

pub use launcher::{BoxFuture, LaunchError, Launcher, UpstreamEvent};
