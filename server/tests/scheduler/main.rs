//! The scheduling core: the pure scheduler driven by scripted events (time passed
//! in as ticks), and the router actor around it on a paused clock with launchers
//! the tests control. No process, no socket.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod lifecycle;
mod matrix;
mod parallel;
mod priority;
mod props;
mod reconfigure;
mod refusal;
mod residency;
mod router;
mod router_fast;
mod router_matrix;
mod router_metrics;
mod router_parallel;
mod router_reconfigure;
mod router_refusal;
mod scenarios;
mod sleep;
mod support;
mod trust;
