//! The process supervisor: plain shell processes and real `mockswap` servers as
//! upstreams, their health checks, stops, escalation, crashes and teardown, with
//! the process table checked so that no process outlives its test.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod lifecycle;
mod mockswap;
mod orphans;
mod reconfigure;
mod sleep;
mod support;
