//! Which peer of a pool takes a request (this server's extension; llama-swap
//! refuses a bare name several peers list).
//!
//! The rule, in order:
//!
//! 1. a peer that has the model **ready** (its `GET /running` says so);
//! 2. else one that is **starting** it;
//! 3. else one that answered but does not run it;
//! 4. last, a peer whose status could not be read (down, or not answering in
//!    time): it is still tried when every peer is in that state, so a peer
//!    that comes back is found again by the next request.
//!
//! Within a tier, the **least busy** wins: the requests waiting in its queue
//! (`GET /api/queue`, when the peer is this server; 0 for a peer without one)
//! plus the requests this server has in flight to it. Ties go to the peer
//! first in ID order. Statuses are read at most once a second per peer
//! (`STATUS_TTL`), so a burst is spread by the in-flight counts, which are
//! always current.

/// What a peer said about itself, for one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PeerStatus {
    /// The model's state on the peer.
    pub model: ModelOnPeer,
    /// Requests waiting in the peer's queue (all models), when it reports one.
    pub waiting: Option<usize>,
}

/// A model's state on a peer, from its `GET /running`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ModelOnPeer {
    /// Ready to serve.
    Ready,
    /// Being started.
    Starting,
    /// Not running (stopped, stopping, or not listed).
    NotRunning,
}

/// One peer of the pool as the choice sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Candidate {
    /// The peer's index.
    pub peer: usize,
    /// Its last known status; `None` when it could not be read.
    pub status: Option<PeerStatus>,
    /// Requests this server has in flight to it now.
    pub in_flight: usize,
}

impl Candidate {
    fn rank(&self) -> (u8, usize) {
        match self.status {
            None => (3, self.in_flight),
            Some(status) => {
                let tier = match status.model {
                    ModelOnPeer::Ready => 0,
                    ModelOnPeer::Starting => 1,
                    ModelOnPeer::NotRunning => 2,
                };
                (
                    tier,
                    status.waiting.unwrap_or(0).saturating_add(self.in_flight),
                )
            }
        }
    }
}

/// The peer the rule above picks; `None` only for an empty pool.
#[must_use]
pub(crate) fn choose(candidates: &[Candidate]) -> Option<usize> {
    candidates
        .iter()
        .enumerate()
        .min_by_key(|(order, c)| (c.rank(), *order))
        .map(|(_, c)| c.peer)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(peer: usize, model: ModelOnPeer, waiting: Option<usize>, in_flight: usize) -> Candidate {
        Candidate {
            peer,
            status: Some(PeerStatus { model, waiting }),
            in_flight,
        }
    }

    fn down(peer: usize, in_flight: usize) -> Candidate {
        Candidate {
            peer,
            status: None,
            in_flight,
        }
    }

    #[test]
    fn the_peer_with_the_model_ready_wins_even_when_busier() {
        let pool = [
            up(0, ModelOnPeer::NotRunning, Some(0), 0),
            up(1, ModelOnPeer::Ready, Some(5), 3),
        ];
        assert_eq!(choose(&pool), Some(1));
    }

    #[test]
    fn starting_beats_not_running() {
        let pool = [
            up(0, ModelOnPeer::NotRunning, Some(0), 0),
            up(1, ModelOnPeer::Starting, Some(2), 0),
        ];
        assert_eq!(choose(&pool), Some(1));
    }

    #[test]
    fn among_equals_the_least_busy_wins_counting_queue_and_in_flight() {
        let pool = [
            up(0, ModelOnPeer::NotRunning, Some(2), 1),
            up(1, ModelOnPeer::NotRunning, Some(0), 2),
            up(2, ModelOnPeer::NotRunning, None, 4),
        ];
        assert_eq!(choose(&pool), Some(1));
    }

    #[test]
    fn ties_go_to_the_first_peer() {
        let pool = [
            up(0, ModelOnPeer::Ready, Some(1), 0),
            up(1, ModelOnPeer::Ready, Some(0), 1),
        ];
        assert_eq!(choose(&pool), Some(0));
    }

    #[test]
    fn a_peer_whose_status_is_unknown_comes_last_but_is_still_chosen_alone() {
        let pool = [down(0, 0), up(1, ModelOnPeer::NotRunning, Some(9), 9)];
        assert_eq!(choose(&pool), Some(1));
        assert_eq!(choose(&[down(0, 2), down(1, 1)]), Some(1));
        assert_eq!(choose(&[]), None);
    }
}
