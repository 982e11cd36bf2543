//! What a test sets up and what the mock records, in one place that both the HTTP
//! server (`server/`) and the handle ([`MockSwap`](crate::MockSwap)) stand on: the
//! journal, the mounted expectations, the installed reply and fault rules, the gate,
//! and the models counted as loaded.
//!
//! Nothing here knows about connections or the public handle, so the public
//! expectation types never reach into the server (the shape of wiremock's
//! `mock_set.rs`). Expectations are registered by value: [`ExpectationSet::register`]
//! takes the [`Expect`] itself.

use std::collections::BTreeSet;
use std::panic::Location;
use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::expect::Expect;
use crate::fault::Faults;
use crate::gate::Gate;
use crate::journal::{Journal, RecordedRequest};
use crate::reply::Replies;

/// The state shared by the server's handlers and the handle.
#[derive(Debug)]
pub(crate) struct State {
    pub(crate) journal: Journal,
    pub(crate) expectations: ExpectationSet,
    pub(crate) replies: Replies,
    pub(crate) faults: Faults,
    pub(crate) gate: Gate,
    /// Models that served a request and were not unloaded since (what `/running` lists).
    loaded: Mutex<BTreeSet<String>>,
}

impl State {
    /// Fresh state; the gate's actor runs on `tracker` until `stop` is cancelled.
    pub(crate) fn new(
        gate_open: bool,
        journal_limit: Option<usize>,
        tracker: &TaskTracker,
        stop: CancellationToken,
    ) -> Self {
        Self {
            journal: Journal::new(journal_limit),
            expectations: ExpectationSet::default(),
            replies: Replies::default(),
            faults: Faults::default(),
            gate: Gate::spawn(gate_open, tracker, stop),
            loaded: Mutex::new(BTreeSet::new()),
        }
    }

    /// The models counted as loaded.
    pub(crate) fn loaded(&self) -> MutexGuard<'_, BTreeSet<String>> {
        // Every section is one insert, remove, clear or clone: a poisoned lock is whole.
        self.loaded.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Everything a test sets up or records, cleared; the gate open.
    pub(crate) fn reset(&self) {
        self.journal.clear();
        self.faults.clear();
        self.replies.clear();
        self.expectations.clear();
        self.loaded().clear();
        self.gate.set_open(true);
    }

    /// Registers an expectation counting the requests recorded from now on.
    pub(crate) fn mount(
        &self,
        expect: Expect,
        origin: Origin,
        location: Option<&'static Location<'static>>,
    ) -> Mounted {
        self.expectations
            .register(expect, origin, location, self.journal.last_seq())
    }

    /// The mounted expectations (those of `origin` only, when given) checked against
    /// the journal, as owned snapshots.
    pub(crate) fn snapshot(&self, origin: Option<Origin>) -> (Vec<Mounted>, Vec<RecordedRequest>) {
        let mounted = self
            .expectations
            .all()
            .into_iter()
            .filter(|m| origin.is_none_or(|o| m.origin == o))
            .collect();
        (mounted, self.journal.requests())
    }
}

/// Where an expectation came from, which decides when it is checked on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `Expect::mount` or `expect_priority`: checked when the mock drops.
    Library,
    /// `Expect::mount_as_scoped`: checked when its guard drops.
    Scoped,
    /// `POST /__mockswap/expectations`: checked by `GET /__mockswap/verify`.
    Admin,
}

/// One mounted expectation.
#[derive(Debug, Clone)]
pub(crate) struct Mounted {
    pub(crate) id: u64,
    pub(crate) expect: Expect,
    /// Only requests with a higher sequence number count.
    pub(crate) after_seq: u64,
    pub(crate) location: Option<&'static Location<'static>>,
    pub(crate) origin: Origin,
}

/// An expectation checked against the journal.
#[derive(Debug)]
pub(crate) struct Checked<'a> {
    pub(crate) expectation: &'a Mounted,
    /// Requests recorded since it was mounted.
    pub(crate) since: Vec<&'a RecordedRequest>,
    pub(crate) matching: Vec<&'a RecordedRequest>,
}

impl<'a> Checked<'a> {
    pub(crate) fn new(expectation: &'a Mounted, requests: &'a [RecordedRequest]) -> Self {
        let since: Vec<&RecordedRequest> = requests
            .iter()
            .filter(|r| r.seq > expectation.after_seq)
            .collect();
        let matching = since
            .iter()
            .copied()
            .filter(|r| expectation.expect.matcher.matches(r))
            .collect();
        Self {
            expectation,
            since,
            matching,
        }
    }

    fn matched(&self) -> u64 {
        u64::try_from(self.matching.len()).unwrap_or(u64::MAX)
    }

    pub(crate) fn met(&self) -> bool {
        self.expectation.expect.times.contains(self.matched())
    }

    pub(crate) fn too_many(&self) -> bool {
        let n = self.matched();
        self.expectation.expect.times.max.is_some_and(|max| n > max)
    }

    /// The requests that failed the fewest conditions, with why each failed.
    pub(crate) fn nearest(&self, limit: usize) -> Vec<(&'a RecordedRequest, Vec<String>)> {
        let mut misses: Vec<(&RecordedRequest, Vec<String>)> = self
            .since
            .iter()
            .map(|r| (*r, self.expectation.expect.matcher.mismatches(r)))
            .filter(|(_, why)| !why.is_empty())
            .collect();
        misses.sort_by_key(|(r, why)| (why.len(), r.seq));
        misses.truncate(limit);
        misses
    }
}

/// The mounted expectations (library, scoped and admin).
#[derive(Debug, Default)]
pub(crate) struct ExpectationSet {
    inner: Mutex<(u64, Vec<Mounted>)>,
}

impl ExpectationSet {
    fn lock(&self) -> MutexGuard<'_, (u64, Vec<Mounted>)> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers `expect`, counting requests after `after_seq` (0 counts the whole
    /// journal), and returns what was mounted.
    pub(crate) fn register(
        &self,
        expect: Expect,
        origin: Origin,
        location: Option<&'static Location<'static>>,
        after_seq: u64,
    ) -> Mounted {
        let mut inner = self.lock();
        inner.0 += 1;
        let mounted = Mounted {
            id: inner.0,
            expect,
            after_seq,
            location,
            origin,
        };
        inner.1.push(mounted.clone());
        mounted
    }

    pub(crate) fn remove(&self, id: u64) {
        self.lock().1.retain(|m| m.id != id);
    }

    pub(crate) fn clear(&self) {
        self.lock().1.clear();
    }

    /// A snapshot of every mounted expectation.
    pub(crate) fn all(&self) -> Vec<Mounted> {
        self.lock().1.clone()
    }
}
