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
//! | `choose` | `choose`: the peer of a pool that takes a request (model ready, else least busy) |
//! | `status` | a pool peer's `GET /running` and `GET /api/queue`, read on demand, kept a second |
//! | `mod` | [`Peers`]: each peer's client, its in-flight count (a metric) and its bound, and picking |
//!
//! A peer takes at most its `concurrencyLimit` requests in flight from this
//! server ([`DEFAULT_PEER_CONCURRENCY_LIMIT`] by default); [`Peers::pick`]
//! refuses one more ([`PickError::Busy`]), and a pool passes over its peers
//! that are at their limit. With the hop marks this bounds what a loop of
//! peers can pile up even when something between them drops the marks.
//!
//! Which names lead to a peer (qualified names, bare names, pools) is decided
//! in `names`; this module only forwards where a route leads.

mod choose;
mod status;

use std::sync::{Mutex, PoisonError};

use http::{HeaderMap, HeaderValue, header};
use prometheus_client::metrics::gauge::Gauge;

pub(crate) use choose::{Candidate, choose};

#[cfg(doc)]
use crate::config::DEFAULT_PEER_CONCURRENCY_LIMIT;
use crate::config::PeerConfig;
use crate::metrics::Metrics;
use crate::names::PeerRoute;
use crate::proxy::{Proxy, Timeouts};

/// The header some clients (Anthropic SDKs) use for a key.
const X_API_KEY: &str = "x-api-key";

/// One configured peer, ready to forward to.
#[derive(Debug)]
pub(crate) struct Peer {
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
pub(crate) struct Peers {
    peers: Vec<Peer>,
    /// Held while a pool's choice is made and counted, so two requests
    /// arriving together see each other's in-flight count.
    choosing: Mutex<()>,
}

/// A request on its way to one peer: counted in flight until dropped (it
/// lives in the response body, so until the body ends).
#[derive(Debug)]
pub(crate) struct InFlight {
    gauge: Gauge,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.gauge.dec();
    }
}

/// Why [`Peers::pick`] found no peer for a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum PickError {
    /// The route belongs to another configuration (one a reload replaced).
    #[error("the route belongs to a configuration that was replaced")]
    Gone,
    /// The peer (every peer of the pool) already has its `concurrencyLimit`
    /// of requests in flight from this server.
    #[error(
        "peer {peer} already has {limit} requests in flight from this server, its concurrencyLimit"
    )]
    Busy {
        /// The peer's ID (for a pool, the first one's).
        peer: String,
        /// Its limit.
        limit: usize,
    },
}

/// The peer a request goes to.
#[derive(Debug)]
pub(crate) struct Picked {
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
    pub(crate) fn new(
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
            choosing: Mutex::new(()),
        }
    }

    /// The peer at `index`.
    #[must_use]
    pub(crate) fn get(&self, index: usize) -> Option<&Peer> {
        self.peers.get(index)
    }

    /// The peer `route` leads to, counted in flight. A pool reads the status
    /// of its peers (at most once per [`STATUS_TTL`](status::STATUS_TTL) each) and applies
    /// [`choose`] to those below their limit.
    ///
    /// # Errors
    ///
    /// [`PickError::Busy`] when the peer (every peer of the pool) is at its
    /// `concurrencyLimit`; [`PickError::Gone`] for a route of another
    /// configuration.
    pub(crate) async fn pick(&self, route: PeerRoute<'_>) -> Result<Picked, PickError> {
        match route {
            PeerRoute::Peer { peer, model } => {
                let target = self.peers.get(peer).ok_or(PickError::Gone)?;
                Ok(Picked {
                    peer,
                    model: model.to_owned(),
                    in_flight: enter(target)?,
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
                        let in_flight = usize::try_from(peer.in_flight.get()).unwrap_or(0);
                        (in_flight < peer.config.concurrency_limit).then(|| Candidate {
                            peer: i,
                            status: snapshot.as_ref().map(|s| s.status_of(model)),
                            in_flight,
                        })
                    })
                    .collect();
                let Some(chosen) = choose(&candidates) else {
                    let first = peers.first().and_then(|&i| self.peers.get(i));
                    return Err(first.map_or(PickError::Gone, |peer| PickError::Busy {
                        peer: peer.config.id.clone(),
                        limit: peer.config.concurrency_limit,
                    }));
                };
                let target = self.peers.get(chosen).ok_or(PickError::Gone)?;
                tracing::debug!(pool = model, peer = %target.config.id, ?candidates, "pool chose a peer");
                Ok(Picked {
                    peer: chosen,
                    model: model.to_owned(),
                    in_flight: enter(target)?,
                })
            }
        }
    }
}

/// Counts one more request in flight to `peer`, unless it is at its limit.
fn enter(peer: &Peer) -> Result<InFlight, PickError> {
    // Counted first, then checked: two requests racing for the last place
    // cannot both pass.
    let before = peer.in_flight.inc();
    let in_flight = InFlight {
        gauge: peer.in_flight.clone(),
    };
    if usize::try_from(before).unwrap_or(0) >= peer.config.concurrency_limit {
        // Dropping it takes the count back.
        drop(in_flight);
        return Err(PickError::Busy {
            peer: peer.config.id.clone(),
            limit: peer.config.concurrency_limit,
        });
    }
    Ok(in_flight)
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
