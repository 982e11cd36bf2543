//! What a request holds while it waits ([`Ticket`]) and while it is served ([`Lease`]).

use std::fmt;
use std::sync::Arc;

use tokio::sync::{mpsc, oneshot, watch};

use super::fast::{FastGrant, Gates};
use crate::priority::Priority;
use crate::scheduler::{RequestId, RouteError, WaitStatus};

/// Something a ticket or lease tells the actor when it goes away.
#[derive(Debug)]
pub(super) enum Notice {
    /// The ticket was dropped before its grant was taken: cancel the request.
    Cancel(RequestId),
    /// The lease was dropped: the request has been served.
    ServeDone(RequestId),
    /// The upstream refused the request before it reached it: schedule it
    /// again, answering on `waiter` (see [`Lease::refused`]).
    Refused {
        /// The request.
        id: RequestId,
        /// Where its new grant goes.
        waiter: Waiter,
    },
    /// A fast-path grant of model (index) that the scheduler absorbed ended.
    FastDone {
        /// The configuration the index is of (the gates' number).
        config: u64,
        /// The model's index.
        model: usize,
    },
    /// The upstream refused a fast-path grant: it becomes a scheduled request.
    FastRefused {
        /// The configuration the index is of (the gates' number).
        config: u64,
        /// The model's index.
        model: usize,
        /// The request.
        id: RequestId,
        /// Its priority.
        priority: Priority,
        /// The model instance it was granted for.
        start: u64,
        /// Whether the scheduler counts it already (its gate closed since).
        absorbed: bool,
        /// Where its new grant goes.
        waiter: Waiter,
    },
}

/// The actor's end of a waiting request: its status and its grant.
#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) status: watch::Sender<WaitStatus>,
    pub(super) grant: oneshot::Sender<Result<Lease, RouteError>>,
    /// Carried into the lease, for a ticket made again from it.
    pub(super) effective_priority: i32,
}

impl Waiter {
    /// A waiter and the ticket that listens to it.
    pub(super) fn pair(
        id: RequestId,
        model: String,
        effective_priority: i32,
        notices: mpsc::UnboundedSender<Notice>,
    ) -> (Self, Ticket) {
        let (status_tx, status_rx) = watch::channel(WaitStatus::Admitted);
        let (grant_tx, grant_rx) = oneshot::channel();
        let waiter = Self {
            status: status_tx,
            grant: grant_tx,
            effective_priority,
        };
        let ticket = Ticket::new(id, model, effective_priority, status_rx, grant_rx, notices);
        (waiter, ticket)
    }
}

/// Sends [`Notice::Cancel`] when dropped while armed.
///
/// The send can only fail when the actor is gone, and then there is nothing left to cancel.
struct CancelGuard {
    id: RequestId,
    notices: mpsc::UnboundedSender<Notice>,
    armed: bool,
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.armed {
            let _ = self.notices.send(Notice::Cancel(self.id));
        }
    }
}

/// An admitted request waiting for its model.
///
/// Dropping it (or the future of [`Ticket::granted`]) before the grant cancels the
/// request: it leaves the queue and never causes a model to load.
pub struct Ticket {
    id: RequestId,
    model: String,
    effective_priority: i32,
    status: watch::Receiver<WaitStatus>,
    grant: oneshot::Receiver<Result<Lease, RouteError>>,
    guard: CancelGuard,
}

impl Ticket {
    fn new(
        id: RequestId,
        model: String,
        effective_priority: i32,
        status: watch::Receiver<WaitStatus>,
        grant: oneshot::Receiver<Result<Lease, RouteError>>,
        notices: mpsc::UnboundedSender<Notice>,
    ) -> Self {
        Self {
            id,
            model,
            effective_priority,
            status,
            grant,
            guard: CancelGuard {
                id,
                notices,
                armed: true,
            },
        }
    }

    /// The request's identity (its arrival sequence number).
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The resolved model ID.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// `max(config priority of the model, header priority)`.
    pub fn effective_priority(&self) -> i32 {
        self.effective_priority
    }

    /// Where the request stands; updated only when that changes. Positions may go up.
    pub fn status(&self) -> watch::Receiver<WaitStatus> {
        self.status.clone()
    }

    /// Waits until the request may use its model.
    ///
    /// # Errors
    ///
    /// [`RouteError::StartFailed`] when the model could not be started,
    /// [`RouteError::Unloaded`] when it was unloaded meanwhile, and
    /// [`RouteError::ShuttingDown`] when the router shuts down.
    pub async fn granted(self) -> Result<Lease, RouteError> {
        let Self {
            grant, mut guard, ..
        } = self;
        let result = grant.await;
        guard.armed = false;
        // A closed channel means the actor ended without answering: only at shutdown.
        result.unwrap_or(Err(RouteError::ShuttingDown))
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("id", &self.id)
            .field("model", &self.model)
            .field("effective_priority", &self.effective_priority)
            .field("status", &*self.status.borrow())
            .finish_non_exhaustive()
    }
}

/// The right to use a model for one request. Dropping it tells the router the
/// request is over, so hold it until the response body has ended.
pub struct Lease {
    id: RequestId,
    model: String,
    effective_priority: i32,
    notices: mpsc::UnboundedSender<Notice>,
    /// Given back with [`Lease::refused`]: the request is not over.
    handed_back: bool,
    /// Taken from the model's gate without the actor (see `fast.rs`).
    fast: Option<FastLease>,
}

/// Where a fast-path lease counts itself out.
struct FastLease {
    gates: Arc<Gates>,
    model: usize,
    grant: FastGrant,
    priority: Priority,
}

impl Lease {
    pub(super) fn new(
        id: RequestId,
        model: String,
        effective_priority: i32,
        notices: mpsc::UnboundedSender<Notice>,
    ) -> Self {
        Self {
            id,
            model,
            effective_priority,
            notices,
            handed_back: false,
            fast: None,
        }
    }

    /// A lease taken from model `index`'s open gate, for request `id`.
    pub(super) fn fast(
        id: RequestId,
        model: String,
        priority: Priority,
        notices: mpsc::UnboundedSender<Notice>,
        gates: Arc<Gates>,
        index: usize,
        grant: FastGrant,
    ) -> Self {
        Self {
            id,
            model,
            effective_priority: priority.effective(grant.floor),
            notices,
            handed_back: false,
            fast: Some(FastLease {
                gates,
                model: index,
                grant,
                priority,
            }),
        }
    }

    /// The upstream refused the connection before the request reached it (it
    /// has just crashed, most likely): hands the request back to the router,
    /// which grants it again once the model's exit is processed and the model
    /// runs again, keeping its priority and its place. Wait on the returned
    /// ticket as on the first one; it fails with
    /// [`RouteError::UpstreamRefused`] when the upstream does not exit within
    /// [`REFUSAL_GRACE`](crate::scheduler::REFUSAL_GRACE).
    pub fn refused(mut self) -> Ticket {
        self.handed_back = true;
        let (waiter, ticket) = Waiter::pair(
            self.id,
            self.model.clone(),
            self.effective_priority,
            self.notices.clone(),
        );
        let notice = match self.fast.take() {
            Some(fast) => Notice::FastRefused {
                config: fast.gates.config(),
                model: fast.model,
                id: self.id,
                priority: fast.priority,
                start: fast.grant.start,
                absorbed: fast.gates.release(fast.model, fast.grant.generation),
                waiter,
            },
            None => Notice::Refused {
                id: self.id,
                waiter,
            },
        };
        // Fails only when the actor is gone; the ticket then answers ShuttingDown.
        let _ = self.notices.send(notice);
        ticket
    }

    /// The request's identity.
    pub fn id(&self) -> RequestId {
        self.id
    }

    /// The model ID the request may use.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// `max(config priority of the model, header priority)`.
    pub fn effective_priority(&self) -> i32 {
        self.effective_priority
    }

    /// Whether it was granted on the fast path, without a round trip to the router.
    pub fn is_fast(&self) -> bool {
        self.fast.is_some()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.handed_back {
            return;
        }
        // Sends fail only when the actor is gone, and then there is nothing to account for.
        match &self.fast {
            Some(fast) => {
                if fast.gates.release(fast.model, fast.grant.generation) {
                    let _ = self.notices.send(Notice::FastDone {
                        config: fast.gates.config(),
                        model: fast.model,
                    });
                }
            }
            None => {
                let _ = self.notices.send(Notice::ServeDone(self.id));
            }
        }
    }
}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("id", &self.id)
            .field("model", &self.model)
            .field("fast", &self.fast.is_some())
            .finish_non_exhaustive()
    }
}
