//! The HTTP server: accept loop, connections, routing, and the state every handler
//! shares.
//!
//! Connections are served with hyper directly (not through a router framework) because
//! faults need per-connection control: a "reset before headers" fault drops the
//! connection with `SO_LINGER` 0 so the client sees a TCP RST, not a clean close.
//!
//! | module | what it holds |
//! |---|---|
//! | `shared` | [`Shared`] (settings, stop signals, the mock's state), [`Crash`] |
//! | `conn` | the accept loop and one connection |
//! | `handler` | routing: which paths exist and what is journaled |
//! | `extract` | reading a request: model, stream flag, the journal entry |
//! | `respond` | small answers several routes share (health, model list, text) |
//! | `model_request` | a model request up to the gate |
//! | `served` | a model request after the gate: latency, faults, the reply |
//! | `loading` | the loading-state stream of a chat request |
//! | `websocket` | websocket upgrades (echoed) |
//! | `admin` | the admin API under `/__mockswap/` |

mod admin;
mod conn;
mod extract;
mod handler;
mod loading;
mod model_request;
mod respond;
mod served;
mod shared;
mod sleep;
mod websocket;

pub(crate) use conn::spawn_accept_loop;
pub use shared::Crash;
pub(crate) use shared::{Settings, Shared};
pub(crate) use sleep::SleepSettings;
