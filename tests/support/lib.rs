//! Shared helpers for the root examples and the cross-crate end-to-end suite.
//!
//! | module | what it holds |
//! |---|---|
//! | [`harness`] | [`harness::Stack`]: the real server in-process with mockswap upstream processes, an SDK client, queue and gate probes, a checked shutdown |
//! | [`events`] | [`events::ServerEvents`]: waits that wake on the server's `/api/events` instead of a timer |
//! | [`procs`] | finding live processes by binary and port, to prove none is left |

pub mod events;
pub mod harness;
pub mod procs;
