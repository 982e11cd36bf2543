//! Peers: other servers whose models this server forwards requests to
//! (llama-swap's `peers`).
//!
//! Nothing about a peer is scheduled here: no queue, no swap, no lease. A
//! peer's request is forwarded at once with the caller's priority (after this
//! server's trust caps) in `X-Priority`, so when the peer is this server its
//! own queue ranks the front's callers. What this module keeps:
//!
//! | file | concern |
//! |---|---|
//! | `routes` | [`PeerRoutes`]: which names lead to which peer's model (llama-swap's rules, plus pools) |
//! | `choose` | [`choose`]: the peer of a pool that takes a request (model ready, else least busy) |
//! | `status` | a pool peer's `GET /running` and `GET /api/queue`, read on demand, kept a second |
//! | `mod` | [`Peers`]: each peer's client, its in-flight count (a metric), and picking |

mod choose;
mod routes;
mod status;

use std::sync::{Mutex, PoisonError};

use http::{HeaderMap, HeaderValue, header};
use prometheus_client::metrics::gauge::Gauge;

pub use choose::{Candidate, ModelOnPeer, PeerStatus, choose};
pub use routes::{PeerRoute, PeerRoutes, qualified_name};
pub use status::{STATUS_TIMEOUT, STATUS_TTL};

use crate::config::PeerConfig;
use crate::metrics::Metrics;
use crate::proxy::{Proxy, Timeouts};

/// The header some clients (Anthropic SDKs) use for a key.
const X_API_KEY: &str = "x-api-key";

/// One configured peer, ready to forward to.
#[derive(Debug)]
pub struct Peer {
    /// Its configuration.
    pub config: PeerConfig,
    /// The client with its `timeouts`.
    pub(crate) client: Proxy,
    /// Requests in flight to it; this is the `llamaswap_peer_requests_in_flight` series.
    in_flight: Gauge,
    status: status::StatusCache,
}

/// Every peer of one served configuration.
#[derive(Debug, Default)]
pub struct Peers {
    peers: Vec<Peer>,
    routes: PeerRoutes,
    /// Held while a pool's choice is made and counted, so two requests
    /// arriving together see each other's in-flight count.
    choosing: Mutex<()>,
}

/// A request on its way to one peer: counted in flight until dropped (it
/// lives in the response body, so until the body ends).
#[derive(Debug)]
pub struct InFlight {
    gauge: Gauge,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// The peer a request goes to.
#[derive(Debug)]
pub struct Picked {
    /// Index of the peer.
    pub peer: usize,
    /// The model as the peer names it.
    pub model: String,
    /// Counts the request until dropped.
    pub in_flight: InFlight,
}

impl Peers {
    /// The peers of `configs` (sorted by ID), each with a client made by
    /// `client_for` for its timeouts, counted in `metrics`.
    pub fn new(
        configs: &[PeerConfig],
        mut client_for: impl FnMut(&Timeouts) -> Proxy,
        metrics: &Metrics,
    ) -> Self {
        Self {
            peers: configs
                .iter()
                .map(|config| Peer {
                    client: client_for(&config.timeouts),
                    in_flight: metrics.peer_in_flight(&config.id),
                    status: status::StatusCache::default(),
                    config: config.clone(),
                })
                .collect(),
            routes: PeerRoutes::new(configs),
            choosing: Mutex::new(()),
        }
    }

    /// True when no peer is configured.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }

    /// Where `name` leads among peer models (callers check local names first).
    #[must_use]
    pub fn resolve(&self, name: &str) -> Option<PeerRoute<'_>> {
        self.routes.resolve(name)
    }

    /// The naming table.
    #[must_use]
    pub fn routes(&self) -> &PeerRoutes {
        &self.routes
    }

    /// The peer at `index`.
    #[must_use]
    pub fn get(&self, index: usize) -> Option<&Peer> {
        self.peers.get(index)
    }

    /// Every peer, sorted by ID.
    pub fn iter(&self) -> impl Iterator<Item = &Peer> {
        self.peers.iter()
    }

    /// Requests this server has in flight to each peer, by ID.
    pub fn in_flight(&self) -> impl Iterator<Item = (&str, usize)> {
        self.peers.iter().map(|p| {
            (
                p.config.id.as_str(),
                usize::try_from(p.in_flight.get()).unwrap_or(0),
            )
        })
    }

    /// The peer `route` leads to, counted in flight. A pool reads the status
    /// of its peers (at most once per [`STATUS_TTL`] each) and applies
    /// [`choose`]. `None` only for a route of another configuration.
    pub async fn pick(&self, route: PeerRoute<'_>) -> Option<Picked> {
        match route {
            PeerRoute::Peer { peer, model } => {
                let target = self.peers.get(peer)?;
                Some(Picked {
                    peer,
                    model: model.to_owned(),
                    in_flight: enter(target),
                })
            }
            PeerRoute::Pool { model, peers } => {
                let statuses = futures_util::future::join_all(peers.iter().map(|&i| async move {
                    let peer = self.peers.get(i)?;
                    peer.status.get(&peer.config, &peer.client).await
                }))
                .await;
                let _choosing = self.choosing.lock().unwrap_or_else(PoisonError::into_inner);
                let candidates: Vec<Candidate> = peers
                    .iter()
                    .zip(&statuses)
                    .filter_map(|(&i, snapshot)| {
                        let peer = self.peers.get(i)?;
                        Some(Candidate {
                            peer: i,
                            status: snapshot.as_ref().map(|s| s.status_of(model)),
                            in_flight: usize::try_from(peer.in_flight.get()).unwrap_or(0),
                        })
                    })
                    .collect();
                let chosen = choose(&candidates)?;
                let target = self.peers.get(chosen)?;
                tracing::debug!(pool = model, peer = %target.config.id, ?candidates, "pool chose a peer");
                Some(Picked {
                    peer: chosen,
                    model: model.to_owned(),
                    in_flight: enter(target),
                })
            }
        }
    }
}

fn enter(peer: &Peer) -> InFlight {
    peer.in_flight.inc();
    InFlight {
        gauge: peer.in_flight.clone(),
    }
}

/// The headers that carry a peer's `apiKey` (none without one).
pub(crate) fn credentials(peer: &PeerConfig) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(key) = &peer.api_key {
        let key = key.expose();
        // The config checked that the key fits in a header.
        if let (Ok(bearer), Ok(plain)) = (
            HeaderValue::from_str(&format!("Bearer {key}")),
            HeaderValue::from_str(key),
        ) {
            let mut bearer = bearer;
            bearer.set_sensitive(true);
            let mut plain = plain;
            plain.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, bearer);
            headers.insert(X_API_KEY, plain);
        }
    }
    headers
}
