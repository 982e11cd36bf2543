//! What a pool's peers say about themselves: `GET /running` (every
//! llama-swap has it) and `GET /api/queue` (this server's), read on demand
//! and kept for [`STATUS_TTL`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use http_body_util::{BodyExt, Limited};
use serde::Deserialize;
use tokio::time::Instant;

use super::choose::{ModelOnPeer, PeerStatus};
use crate::config::PeerConfig;
use crate::proxy::{Outbound, OutboundBody, Proxy};

/// How long a peer's status is used before it is read again.
pub(crate) const STATUS_TTL: Duration = Duration::from_secs(1);

/// The longest a status read may take; a peer slower than that is taken as
/// down for this choice (a request should not wait on a dead host's connect
/// timeout to learn where to go).
pub(crate) const STATUS_TIMEOUT: Duration = Duration::from_secs(1);

/// Status bodies larger than this are not read (a queue of thousands fits).
const MAX_STATUS_BYTES: usize = 4 << 20;

/// One reading of a peer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// `(model, state)` of every model the peer runs.
    running: Vec<(String, String)>,
    /// Requests waiting in its queue; `None` when it has no `/api/queue`.
    waiting: Option<usize>,
}

impl Snapshot {
    /// The peer's status for `model` (as the peer names it).
    pub(crate) fn status_of(&self, model: &str) -> PeerStatus {
        let state = self
            .running
            .iter()
            .find(|(m, _)| m == model)
            .map(|(_, s)| s.as_str());
        PeerStatus {
            model: match state {
                Some("ready") => ModelOnPeer::Ready,
                Some("starting") => ModelOnPeer::Starting,
                _ => ModelOnPeer::NotRunning,
            },
            waiting: self.waiting,
        }
    }
}

/// The last reading of one peer. Concurrent readers of a stale entry wait for
/// one read rather than each sending their own.
#[derive(Debug, Default)]
pub(crate) struct StatusCache {
    slot: tokio::sync::Mutex<Option<(Instant, Option<Arc<Snapshot>>)>>,
}

impl StatusCache {
    /// The peer's status, read again when older than [`STATUS_TTL`]; `None`
    /// when the last read failed.
    pub(crate) async fn get(&self, peer: &PeerConfig, client: &Proxy) -> Option<Arc<Snapshot>> {
        let mut slot = self.slot.lock().await;
        if let Some((at, snapshot)) = slot.as_ref()
            && at.elapsed() < STATUS_TTL
        {
            return snapshot.clone();
        }
        let snapshot = tokio::time::timeout(STATUS_TIMEOUT, read(peer, client))
            .await
            .ok()
            .flatten()
            .map(Arc::new);
        if snapshot.is_none() {
            tracing::debug!(peer = %peer.id, "peer status could not be read; ranked last in its pools");
        }
        *slot = Some((Instant::now(), snapshot.clone()));
        snapshot
    }
}

#[derive(Deserialize)]
struct Running {
    running: Vec<RunningRow>,
}

#[derive(Deserialize)]
struct RunningRow {
    model: String,
    #[serde(default)]
    state: String,
}

#[derive(Deserialize)]
struct Queue {
    queue: Vec<serde_json::Value>,
}

async fn read(peer: &PeerConfig, client: &Proxy) -> Option<Snapshot> {
    let (running, queue) = tokio::join!(
        get_json::<Running>(peer, client, "/running"),
        get_json::<Queue>(peer, client, "/api/queue"),
    );
    let running = running?;
    Some(Snapshot {
        running: running
            .running
            .into_iter()
            .map(|r| (r.model, r.state))
            .collect(),
        waiting: queue.map(|q| q.queue.len()),
    })
}

async fn get_json<T: serde::de::DeserializeOwned>(
    peer: &PeerConfig,
    client: &Proxy,
    path: &str,
) -> Option<T> {
    let outbound = Outbound {
        method: Method::GET,
        path_and_query: path.to_owned(),
        headers: HeaderMap::new(),
        body: OutboundBody::Buffered(Bytes::new()),
        client_ip: None,
        body_limit: 0,
        websocket: false,
        set_headers: super::credentials(peer),
    };
    let response = client
        .forward(&peer.id, &peer.proxy, outbound, ())
        .await
        .ok()?;
    if response.status() != StatusCode::OK {
        return None;
    }
    let body = Limited::new(response.into_body(), MAX_STATUS_BYTES)
        .collect()
        .await
        .ok()?
        .to_bytes();
    serde_json::from_slice(&body).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_reports_the_model_state_and_the_queue() {
        let snapshot = Snapshot {
            running: vec![
                ("a".into(), "ready".into()),
                ("b".into(), "starting".into()),
                ("c".into(), "stopping".into()),
            ],
            waiting: Some(3),
        };
        assert_eq!(snapshot.status_of("a").model, ModelOnPeer::Ready);
        assert_eq!(snapshot.status_of("b").model, ModelOnPeer::Starting);
        assert_eq!(snapshot.status_of("c").model, ModelOnPeer::NotRunning);
        assert_eq!(snapshot.status_of("d").model, ModelOnPeer::NotRunning);
        assert_eq!(snapshot.status_of("d").waiting, Some(3));
    }
}
