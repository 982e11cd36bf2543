#![doc = include_str!("../README.md")]
//!
//! ## The public surface
//!
//! Everything is at the crate root:
//!
//! | items | what they are |
//! |---|---|
//! | [`MockSwap`], [`MockSwapBuilder`], [`Crash`], [`DEFAULT_BODY_LIMIT`] | the running mock (start, journal, gate, faults, reset) and its builder |
//! | [`Expect`], [`Times`], [`ExpectGuard`] | expectations: plain values, mounted on a mock (scoped with a guard) and verified on drop |
//! | [`RecordedRequest`], [`requests_table`] | one journal entry; the table a failure prints |
//! | [`PriorityHeader`], [`PRIORITY_HEADER`] | the `X-Priority` header as sent |
//! | [`RequestMatch`], [`PriorityMatch`] | which requests a rule or an expectation applies to |
//! | [`Reply`], [`ReplyRule`], [`ToolCall`] | scripted replies |
//! | [`Fault`], [`FaultRule`] | injected faults |
//! | [`StreamShape`], [`Chunking`], [`LineEnding`] | stream shaping |
//! | [`Fixture`], [`SpecError`] | the JSON forms of replies, faults and fixture files |
//! | [`ApiError`] | the error envelope shared with the server |
//! | [`StartError`], [`WaitError`], [`Unmet`] | what starting, waiting and checking expectations can fail with |
//! | [`StatusCode`] | HTTP status codes (the `http` crate's), for replies and faults |
//! | [`reserve_port`], [`reserve_ports`] | ports for an upstream a config names, never handed to two test processes at once |

// Layers, each file importing only from the ones below it (no import circles):
//
//   mount.rs     Expect::mount, ExpectGuard, MockSwap::verify
//   mock.rs      MockSwap and its builder: starts the server on a State
//   server/      the HTTP server (routing, model requests, admin API, websockets)
//   spec.rs      JSON forms      report.rs  failure reports
//   state.rs     journal, expectation set, reply and fault rules, gate, loaded models
//   expect.rs    Expect and Times as plain values
//   journal.rs, matcher/, reply.rs, fault.rs, gate.rs, stream.rs, wire/, priority.rs,
//   envelope.rs, body.rs, error.rs

mod body;
mod envelope;
mod error;
mod expect;
mod fault;
mod gate;
mod journal;
mod matcher;
mod mock;
mod mount;
mod ports;
mod priority;
mod queue_timeout;
#[cfg(test)]
mod readme_tests;
mod reply;
mod report;
mod server;
mod spec;
mod state;
mod stream;
mod wire;

pub use envelope::ApiError;
pub use error::{StartError, Unmet, WaitError};
pub use expect::{Expect, Times};
pub use fault::{Fault, FaultRule};
pub use journal::RecordedRequest;
pub use matcher::{PriorityMatch, RequestMatch};
pub use mock::{DEFAULT_BODY_LIMIT, MockSwap, MockSwapBuilder};
pub use mount::ExpectGuard;
pub use ports::{reserve_port, reserve_ports};
pub use priority::{PRIORITY_HEADER, PriorityHeader};
pub use queue_timeout::{QUEUE_TIMEOUT_HEADER, QueueTimeoutHeader};
pub use reply::{Reply, ReplyRule, ToolCall};
pub use report::requests_table;
pub use server::Crash;
pub use spec::{Fixture, SpecError};
pub use stream::{Chunking, LineEnding, StreamShape};

/// HTTP status codes, as [`Reply::error`], [`Reply::status`] and [`Fault::status`]
/// take them.
pub use http::StatusCode;
