//! The gate: holds requests while closed and, once open, releases the held ones one at
//! a time in (priority descending, arrival ascending) order, so a test can prove what a
//! priority-aware caller gets served first.
//!
//! The gate is an actor: one task owns the waiting list; handlers talk to it through a
//! channel. The channel is unbounded because a permit's `Drop` must be able to report
//! "response completed" without awaiting; it carries at most three messages per request.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

enum Msg {
    Arrive {
        seq: u64,
        priority: i32,
        reply: oneshot::Sender<Permit>,
    },
    SetOpen(bool),
    Done,
    /// The request stopped waiting (its client went away).
    Cancel(u64),
    /// Nothing changes; the watched release order is brought up to date.
    Refresh,
    /// The held requests as `(seq, priority)`, in the order they would be released.
    Snapshot(oneshot::Sender<Vec<(u64, i32)>>),
}

/// Lets one request through the gate. When a request that was held is released, the
/// next one is released only after this permit is dropped (its response has ended).
#[derive(Debug)]
pub(crate) struct Permit {
    tx: Option<mpsc::UnboundedSender<Msg>>,
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            // The actor is gone only when the mock is stopping; nothing waits then.
            let _ = tx.send(Msg::Done);
        }
    }
}

struct CancelOnDrop {
    tx: Option<mpsc::UnboundedSender<Msg>>,
    seq: u64,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            let _ = tx.send(Msg::Cancel(self.seq));
        }
    }
}

impl std::fmt::Debug for Msg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Arrive { seq, priority, .. } => write!(f, "Arrive({seq}, {priority})"),
            Self::SetOpen(open) => write!(f, "SetOpen({open})"),
            Self::Done => f.write_str("Done"),
            Self::Cancel(seq) => write!(f, "Cancel({seq})"),
            Self::Refresh => f.write_str("Refresh"),
            Self::Snapshot(_) => f.write_str("Snapshot"),
        }
    }
}

/// The handle the server and the library use.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    tx: mpsc::UnboundedSender<Msg>,
    state: watch::Receiver<GateState>,
    /// The held requests' seqs in release order, kept up to date only while someone
    /// watches it (a loading-state stream showing its queue position).
    order: Arc<watch::Sender<Arc<Vec<u64>>>>,
}

/// What the gate looks like from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct GateState {
    pub(crate) open: bool,
    pub(crate) held: usize,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Waiter {
    priority: i32,
    arrival: Reverse<u64>,
}

impl Gate {
    /// Starts the gate's actor on `tracker`; it ends when `stop` is cancelled, which
    /// drops every held request's reply (they then answer "shutting down").
    pub(crate) fn spawn(open: bool, tracker: &TaskTracker, stop: CancellationToken) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let (state_tx, state) = watch::channel(GateState { open, held: 0 });
        let order = Arc::new(watch::Sender::new(Arc::new(Vec::new())));
        let actor_tx = tx.clone();
        tracker.spawn(run(rx, actor_tx, state_tx, Arc::clone(&order), open, stop));
        Self { tx, state, order }
    }

    /// Waits for the gate to let the request through. `None` when the mock is stopping.
    pub(crate) async fn pass(&self, seq: u64, priority: i32) -> Option<Permit> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Arrive {
                seq,
                priority,
                reply,
            })
            .ok()?;
        // If this future is dropped while waiting (the client went away), the actor
        // must stop counting the request as held.
        let mut cancel = CancelOnDrop {
            tx: Some(self.tx.clone()),
            seq,
        };
        let permit = rx.await.ok();
        cancel.tx = None;
        permit
    }

    /// The held requests as `(seq, priority)`, in release order (empty when stopping).
    pub(crate) async fn waiting(&self) -> Vec<(u64, i32)> {
        let (reply, rx) = oneshot::channel();
        if self.tx.send(Msg::Snapshot(reply)).is_err() {
            return Vec::new();
        }
        rx.await.unwrap_or_default()
    }

    pub(crate) fn set_open(&self, open: bool) {
        let _ = self.tx.send(Msg::SetOpen(open));
    }

    pub(crate) fn state(&self) -> GateState {
        *self.state.borrow()
    }

    /// The held requests' seqs in release order, updated on every change while the
    /// receiver lives.
    pub(crate) fn watch_order(&self) -> watch::Receiver<Arc<Vec<u64>>> {
        let rx = self.order.subscribe();
        // Make the actor refresh the list now that someone watches it.
        let _ = self.tx.send(Msg::Refresh);
        rx
    }

    /// Waits until at least `n` requests are held.
    pub(crate) async fn wait_held(&self, n: usize) {
        let mut rx = self.state.clone();
        let _ = rx.wait_for(|s| s.held >= n).await;
    }
}

async fn run(
    mut rx: mpsc::UnboundedReceiver<Msg>,
    tx: mpsc::UnboundedSender<Msg>,
    state: watch::Sender<GateState>,
    order: Arc<watch::Sender<Arc<Vec<u64>>>>,
    mut open: bool,
    stop: CancellationToken,
) {
    let mut waiting: BinaryHeap<(Waiter, u64)> = BinaryHeap::new();
    let mut replies: std::collections::HashMap<u64, oneshot::Sender<Permit>> =
        std::collections::HashMap::new();
    // True while a request released from the waiting list has not completed.
    let mut releasing = false;
    loop {
        let msg = tokio::select! {
            () = stop.cancelled() => return,
            msg = rx.recv() => match msg {
                Some(msg) => msg,
                None => return,
            },
        };
        match msg {
            Msg::Arrive {
                seq,
                priority,
                reply,
            } => {
                if open && waiting.is_empty() && !releasing {
                    // Nothing to order against: pass straight through, untracked, so an
                    // open gate adds no serialisation.
                    let _ = reply.send(Permit { tx: None });
                } else {
                    waiting.push((
                        Waiter {
                            priority,
                            arrival: Reverse(seq),
                        },
                        seq,
                    ));
                    replies.insert(seq, reply);
                }
            }
            Msg::SetOpen(now_open) => open = now_open,
            Msg::Refresh => {}
            Msg::Done => releasing = false,
            // The heap entry stays; it is skipped when popped, as its reply is gone.
            Msg::Cancel(seq) => {
                replies.remove(&seq);
            }
            Msg::Snapshot(reply) => {
                let mut held: Vec<&(Waiter, u64)> = waiting
                    .iter()
                    .filter(|(_, seq)| replies.contains_key(seq))
                    .collect();
                held.sort_by(|a, b| b.0.cmp(&a.0));
                let _ = reply.send(held.iter().map(|(w, seq)| (*seq, w.priority)).collect());
            }
        }
        if open && !releasing {
            // Release the best waiter still connected; a waiter whose client went away
            // is skipped (its reply fails and the permit comes back undelivered).
            while let Some((_, seq)) = waiting.pop() {
                let Some(reply) = replies.remove(&seq) else {
                    continue;
                };
                let permit = Permit {
                    tx: Some(tx.clone()),
                };
                match reply.send(permit) {
                    Ok(()) => {
                        releasing = true;
                        break;
                    }
                    Err(mut undelivered) => {
                        // Do not let the undelivered permit report a completion.
                        undelivered.tx = None;
                    }
                }
            }
        }
        state.send_replace(GateState {
            open,
            held: replies.len(),
        });
        if order.receiver_count() > 0 {
            let mut held: Vec<&(Waiter, u64)> = waiting
                .iter()
                .filter(|(_, seq)| replies.contains_key(seq))
                .collect();
            held.sort_by(|a, b| b.0.cmp(&a.0));
            let now: Vec<u64> = held.iter().map(|(_, seq)| *seq).collect();
            order.send_if_modified(|current| {
                if **current == now {
                    return false;
                }
                *current = Arc::new(now);
                true
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn open_gate_releases_held_requests_by_priority_then_arrival_one_at_a_time() {
        let tracker = TaskTracker::new();
        let stop = CancellationToken::new();
        let gate = Gate::spawn(false, &tracker, stop.clone());
        let (order_tx, mut order_rx) = mpsc::unbounded_channel();
        let mut tasks = tokio::task::JoinSet::new();
        for (seq, priority) in [(1, -10), (2, 0), (3, 10), (4, 0), (5, 10)] {
            let task_gate = gate.clone();
            let order_tx = order_tx.clone();
            tasks.spawn(async move {
                let permit = task_gate.pass(seq, priority).await.unwrap();
                order_tx.send(seq).unwrap();
                // Hold the permit a while: the next must not be released meanwhile.
                tokio::time::sleep(Duration::from_millis(10)).await;
                order_tx.send(seq + 100).unwrap();
                drop(permit);
            });
            gate.wait_held(seq as usize).await;
        }
        gate.set_open(true);
        while tasks.join_next().await.is_some() {}
        drop(order_tx);
        let mut order = Vec::new();
        while let Some(seq) = order_rx.recv().await {
            order.push(seq);
        }
        assert_eq!(order, [3, 103, 5, 105, 2, 102, 4, 104, 1, 101]);
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn abandoned_waiter_is_no_longer_held_and_is_skipped_on_release() {
        let tracker = TaskTracker::new();
        let stop = CancellationToken::new();
        let gate = Gate::spawn(false, &tracker, stop.clone());
        let abandoned = tokio::spawn({
            let gate = gate.clone();
            async move { gate.pass(1, 10).await.is_some() }
        });
        gate.wait_held(1).await;
        let kept = tokio::spawn({
            let gate = gate.clone();
            async move { gate.pass(2, 0).await.is_some() }
        });
        gate.wait_held(2).await;
        abandoned.abort();
        let mut state = gate.state.clone();
        state.wait_for(|s| s.held == 1).await.unwrap();
        gate.set_open(true);
        assert!(kept.await.unwrap());
        stop.cancel();
    }

    #[tokio::test(start_paused = true)]
    async fn snapshot_lists_held_requests_in_release_order() {
        let tracker = TaskTracker::new();
        let stop = CancellationToken::new();
        let gate = Gate::spawn(false, &tracker, stop.clone());
        let mut tasks = tokio::task::JoinSet::new();
        for (seq, priority) in [(1, 0), (2, 10), (3, 0)] {
            let task_gate = gate.clone();
            tasks.spawn(async move { task_gate.pass(seq, priority).await.is_some() });
            gate.wait_held(seq as usize).await;
        }
        assert_eq!(gate.waiting().await, [(2, 10), (1, 0), (3, 0)]);
        stop.cancel();
        while let Some(done) = tasks.join_next().await {
            assert!(!done.unwrap());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn held_request_is_refused_when_the_gate_stops() {
        let tracker = TaskTracker::new();
        let stop = CancellationToken::new();
        let gate = Gate::spawn(false, &tracker, stop.clone());
        let pass = tokio::spawn({
            let gate = gate.clone();
            async move { gate.pass(1, 0).await.is_none() }
        });
        gate.wait_held(1).await;
        stop.cancel();
        assert!(pass.await.unwrap());
    }
}
