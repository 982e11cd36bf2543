#![doc = include_str!("../README.md")]
//!
//! ## Modules
//!
//! | module | what it holds |
//! |---|---|
//! | [`mock`] | [`MockSwap`] (start, journal, gate, faults, reset) and its builder |
//! | [`expect`] | expectations ([`Expect`], [`ExpectGuard`], [`Times`]), verified on drop |
//! | [`journal`] | [`RecordedRequest`], one journal entry |
//! | [`priority`] | [`PriorityHeader`], the X-Priority header as sent |
//! | [`matcher`] | which requests a rule applies to ([`RequestMatch`], [`PriorityMatch`]) |
//! | [`reply`] | scripted replies ([`Reply`], [`ReplyRule`], [`ToolCall`]) |
//! | [`fault`] | injected faults ([`Fault`], [`FaultRule`]) |
//! | [`stream`] | stream shaping ([`StreamShape`], [`Chunking`], [`LineEnding`]) |
//! | [`spec`] | the JSON forms of faults, replies and fixture files ([`Fixture`]) |
//! | [`wire`] | the response shapes (OpenAI, Anthropic, llama.cpp) |
//! | [`envelope`] | the error envelope shared with the server ([`ApiError`]) |
//! | [`body`] | the response body type |
//! | [`error`] | [`StartError`], [`WaitError`] |

pub mod body;
pub mod envelope;
pub mod error;
pub mod expect;
pub mod fault;
mod gate;
pub mod journal;
pub mod matcher;
pub mod mock;
pub mod priority;
pub mod reply;
mod report;
mod server;
pub mod spec;
pub mod stream;
pub mod wire;

pub use envelope::ApiError;
pub use error::{StartError, WaitError};
pub use expect::{Expect, ExpectGuard, Times};
pub use fault::{Fault, FaultRule};
pub use journal::RecordedRequest;
pub use matcher::{PriorityMatch, RequestMatch};
pub use mock::{MockSwap, MockSwapBuilder};
pub use priority::{PRIORITY_HEADER, PriorityHeader};
pub use reply::{Reply, ReplyRule, ToolCall};
pub use report::requests_table;
pub use server::Crash;
pub use spec::{Fixture, SpecError};
pub use stream::{Chunking, LineEnding, StreamShape};
