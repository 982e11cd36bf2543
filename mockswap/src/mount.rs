//! Expectations on a running mock: mounting an [`Expect`] (for the mock's lifetime or
//! a guard's), the [`ExpectGuard`], and the mock's own checks.
//!
//! This sits above both the handle and the state: an [`Expect`] is registered by value
//! with the mock's [`State`], and the guard keeps only that state, never the server.

use std::panic::Location;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Unmet, WaitError};
use crate::expect::Expect;
use crate::journal::RecordedRequest;
use crate::mock::MockSwap;
use crate::report::unmet_report;
use crate::state::{Checked, Mounted, Origin, State};

impl Expect {
    /// Mounts the expectation on `mock`: it counts requests recorded from now on and is
    /// checked by [`MockSwap::verify`] and when the mock drops.
    #[track_caller]
    pub fn mount(self, mock: &MockSwap) {
        mock.state
            .mount(self, Origin::Library, Some(Location::caller()));
    }

    /// Mounts the expectation until the returned guard drops; the guard's drop checks it
    /// (unless the thread is already panicking), so it covers one stage of a test.
    #[track_caller]
    pub fn mount_as_scoped(self, mock: &MockSwap) -> ExpectGuard {
        let mounted = mock
            .state
            .mount(self, Origin::Scoped, Some(Location::caller()));
        ExpectGuard {
            state: Arc::clone(&mock.state),
            mounted,
        }
    }
}

/// A scoped expectation: checked, and unmounted, when dropped (never while the thread
/// is already panicking). Hold it for the stage of the test it covers.
#[derive(Debug)]
#[must_use = "a scoped expectation is checked when its guard drops: bind it to a variable"]
pub struct ExpectGuard {
    state: Arc<State>,
    mounted: Mounted,
}

impl ExpectGuard {
    /// The matching requests recorded since the expectation was mounted.
    pub fn received_requests(&self) -> Vec<RecordedRequest> {
        let requests = self.state.journal.requests();
        Checked::new(&self.mounted, &requests)
            .matching
            .into_iter()
            .cloned()
            .collect()
    }

    fn unmet(&self) -> Option<String> {
        unmet_report(
            std::slice::from_ref(&self.mounted),
            &self.state.journal.requests(),
        )
    }

    /// Checks the expectation now.
    ///
    /// # Panics
    /// When it is unmet, with the report (nearest requests and the request table).
    #[track_caller]
    pub fn verify(&self) {
        if let Err(unmet) = self.check() {
            panic!("{unmet}");
        }
    }

    /// Checks the expectation now without panicking.
    ///
    /// # Errors
    /// [`Unmet`] with the report [`ExpectGuard::verify`] would panic with.
    pub fn check(&self) -> Result<(), Unmet> {
        self.unmet().map_or(Ok(()), |report| Err(Unmet { report }))
    }

    /// Waits until the expectation is met (for calls made by a task the test does not
    /// await), bounded by `timeout`.
    ///
    /// # Errors
    /// [`WaitError::Expectation`] with the report when it was still unmet after
    /// `timeout`.
    pub async fn wait_until_satisfied(&self, timeout: Duration) -> Result<(), WaitError> {
        let mut rx = self.state.journal.subscribe();
        let waited = tokio::time::timeout(timeout, async {
            loop {
                if self.unmet().is_none() {
                    return;
                }
                if rx.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        })
        .await;
        match (waited, self.unmet()) {
            (Ok(()), _) | (Err(_), None) => Ok(()),
            (Err(_), Some(report)) => Err(WaitError::Expectation { timeout, report }),
        }
    }
}

impl Drop for ExpectGuard {
    fn drop(&mut self) {
        self.state.expectations.remove(self.mounted.id);
        if std::thread::panicking() {
            return;
        }
        if let Some(report) = self.unmet() {
            panic!("{report}");
        }
    }
}

impl MockSwap {
    /// Expects exactly `times` requests with `X-Priority: <value>` (`Some`) or with no
    /// `X-Priority` header (`None`), counted over the whole journal (requests before
    /// this call too) and checked by [`MockSwap::verify`] and on drop. Invalid and
    /// duplicated headers match neither. [`Expect`] scopes the count and the
    /// conditions.
    #[track_caller]
    pub fn expect_priority(&self, priority: Option<i32>, times: u64) {
        let expect = match priority {
            Some(v) => Expect::new().priority(v),
            None => Expect::new().priority_absent(),
        };
        self.state.expectations.register(
            expect.times(times),
            Origin::Library,
            Some(Location::caller()),
            0,
        );
    }

    /// Checks every mounted expectation now (mounted, scoped and posted to the admin
    /// API).
    ///
    /// # Panics
    /// When one is unmet, with a report: each unmet expectation with where it was
    /// mounted, what it wanted, how many matched, and the closest requests with why each
    /// did not match (bodies truncated); then the table of every request received.
    #[track_caller]
    pub fn verify(&self) {
        if let Err(unmet) = self.check() {
            panic!("{unmet}");
        }
    }

    /// Checks every mounted expectation now, as [`MockSwap::verify`] does, without
    /// panicking: for a test that reports failures its own way, or retries a stage.
    ///
    /// # Errors
    /// [`Unmet`] with the report `verify()` would panic with.
    pub fn check(&self) -> Result<(), Unmet> {
        let (mounted, requests) = self.state.snapshot(None);
        unmet_report(&mounted, &requests).map_or(Ok(()), |report| Err(Unmet { report }))
    }
}
