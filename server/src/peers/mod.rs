//! Peers: other servers whose models this server forwards requests to
//! (llama-swap's `peers`). Nothing about a peer is scheduled here: no queue,
//! no swap. What is kept is how to name a peer model ([`PeerRoutes`]).

mod routes;

pub use routes::{PeerRoute, PeerRoutes, qualified_name};
