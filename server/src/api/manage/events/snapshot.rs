//! The router's state as the event stream reads it: one snapshot per change,
//! shared by every subscriber.

use std::sync::Arc;

use tokio::time::Instant;

use crate::router::{GpuUsage, QueueEntry, RouterHandle, RunningModel};

/// The router's view at one generation, shared by every subscriber.
#[derive(Debug)]
pub(crate) struct RouterSnapshot {
    pub(super) queue: Vec<QueueEntry>,
    pub(super) running: Vec<RunningModel>,
    /// The memory router's GPUs (empty under the other routers).
    pub(super) gpus: Vec<GpuUsage>,
    /// When it was taken: waits are reported as of the moment they are sent.
    pub(super) taken: Instant,
}

/// One coalesced router snapshot for all subscribers: however many browsers
/// watch, a change costs the router one `queue` and one `running` call.
#[derive(Debug, Default)]
pub(crate) struct SnapshotCache {
    latest: tokio::sync::Mutex<Option<(u64, Arc<RouterSnapshot>)>>,
}

impl SnapshotCache {
    /// A snapshot at least as new as generation `seen`.
    pub(super) async fn at_least(&self, seen: u64, router: &RouterHandle) -> Arc<RouterSnapshot> {
        let mut latest = self.latest.lock().await;
        if let Some((generation, snapshot)) = latest.as_ref()
            && *generation >= seen
        {
            return Arc::clone(snapshot);
        }
        // Read before the calls: the snapshot is at least this new.
        let generation = *router.changes().borrow();
        let snapshot = Arc::new(RouterSnapshot {
            queue: router.queue().await,
            running: router.running().await,
            gpus: router.gpus().await,
            taken: Instant::now(),
        });
        *latest = Some((generation, Arc::clone(&snapshot)));
        snapshot
    }
}
