//! The router actor: the single owner of scheduling state.

pub mod launcher;

pub use crate::scheduler::{ModelState, QueueEntry, RouteError, RunningModel, WaitStatus};
pub use launcher::{BoxFuture, LaunchError, Launcher, UpstreamEvent};
