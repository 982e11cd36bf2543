//! mockswap: a test double of a llama-swap proxy and a fake upstream model server.
//!
//! Start it in one line from any tokio test, point the code under test at
//! [`MockSwap::uri`], and assert what arrived: every request is journaled with all its
//! headers, and the `X-Priority` header is kept as sent ([`PriorityHeader`]: absent,
//! value, invalid, duplicated), so "no header", `0` and "two values" stay distinct.
//!
//! | module | what it holds |
//! |---|---|
//! | [`mock`] | [`MockSwap`] (start, journal, expectations, gate, faults) and its builder |
//! | [`journal`] | [`RecordedRequest`], one journal entry |
//! | [`priority`] | [`PriorityHeader`], the X-Priority header as sent |
//! | [`reply`] | scripted replies ([`Reply`], [`ReplyRule`]) |
//! | [`fault`] | injected faults ([`Fault`], [`FaultRule`]) |
//! | [`stream`] | stream shaping ([`StreamShape`], [`Chunking`], [`LineEnding`]) |
//! | [`spec`] | the JSON forms of faults, replies and fixture files |
//! | [`wire`] | the response shapes (OpenAI, Anthropic, llama.cpp) |
//! | [`envelope`] | the error envelope shared with the server ([`ApiError`]) |
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use mockswap::MockSwap;
//!
//! let mock = MockSwap::start().await;
//! assert!(mock.uri().starts_with("http://127.0.0.1:"));
//! // ... point the code under test at mock.uri(), then:
//! assert!(mock.requests().is_empty());
//! # }
//! ```
//!
//! The same engine runs as the `mockswap` binary, with an admin API under
//! `/__mockswap/` for tests written in other languages (see the README).

pub mod body;
pub mod envelope;
pub mod error;
mod expect;
pub mod fault;
mod gate;
pub mod journal;
pub mod mock;
pub mod priority;
pub mod reply;
mod server;
pub mod spec;
pub mod stream;
pub mod wire;

pub use envelope::ApiError;
pub use error::{StartError, WaitError};
pub use expect::requests_table;
pub use fault::{Fault, FaultRule, RequestMatch};
pub use journal::RecordedRequest;
pub use mock::{MockSwap, MockSwapBuilder};
pub use priority::{PRIORITY_HEADER, PriorityHeader};
pub use reply::{Reply, ReplyRule};
pub use server::Crash;
pub use spec::{Fixture, SpecError};
pub use stream::{Chunking, LineEnding, StreamShape};
