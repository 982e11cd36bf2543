//! Expectations in the style of wiremock's `Mock`: "between n and m requests matching
//! these conditions arrive after this point", verified by `verify()` and on drop, with
//! a report that shows the closest requests and why each did not match.
//!
//! An expectation counts only the requests recorded after it was mounted (a startup
//! `GET /v1/models` before it does not shift the count), and only those still in the
//! journal (`clear_requests` and `reset` forget requests).

use std::fmt;
use std::ops::{Range, RangeFrom, RangeInclusive, RangeTo, RangeToInclusive};
use std::panic::Location;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use crate::error::WaitError;
use crate::journal::RecordedRequest;
use crate::matcher::{RequestMatch, match_methods};
use crate::mock::MockSwap;
use crate::report;
use crate::server::Shared;

/// How many matching requests an expectation wants: an exact number or a range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    pub(crate) min: u64,
    /// Inclusive; `None` is unbounded.
    pub(crate) max: Option<u64>,
}

impl Times {
    /// Whether `n` requests satisfy it.
    pub fn contains(self, n: u64) -> bool {
        n >= self.min && self.max.is_none_or(|max| n <= max)
    }

    /// At least `n`.
    pub fn at_least(n: u64) -> Self {
        Self { min: n, max: None }
    }

    /// At most `n`.
    pub fn at_most(n: u64) -> Self {
        Self {
            min: 0,
            max: Some(n),
        }
    }
}

impl fmt::Display for Times {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.min, self.max) {
            (min, Some(max)) if min == max => write!(f, "exactly {min}"),
            (0, Some(max)) => write!(f, "at most {max}"),
            (min, None) => write!(f, "at least {min}"),
            (min, Some(max)) => write!(f, "between {min} and {max}"),
        }
    }
}

impl From<u64> for Times {
    fn from(n: u64) -> Self {
        Self {
            min: n,
            max: Some(n),
        }
    }
}

impl From<RangeInclusive<u64>> for Times {
    fn from(r: RangeInclusive<u64>) -> Self {
        Self {
            min: *r.start(),
            max: Some(*r.end()),
        }
    }
}

impl From<Range<u64>> for Times {
    fn from(r: Range<u64>) -> Self {
        Self {
            min: r.start,
            max: Some(r.end.saturating_sub(1)),
        }
    }
}

impl From<RangeFrom<u64>> for Times {
    fn from(r: RangeFrom<u64>) -> Self {
        Self::at_least(r.start)
    }
}

impl From<RangeTo<u64>> for Times {
    fn from(r: RangeTo<u64>) -> Self {
        Self::at_most(r.end.saturating_sub(1))
    }
}

impl From<RangeToInclusive<u64>> for Times {
    fn from(r: RangeToInclusive<u64>) -> Self {
        Self::at_most(r.end)
    }
}

/// An expectation being built: conditions (the methods of [`RequestMatch`]), how many
/// matching requests, and a name for the report. Mount it with [`Expect::mount`]
/// (checked by [`MockSwap::verify`] and when the mock drops) or
/// [`Expect::mount_as_scoped`] (checked when the guard drops).
#[derive(Debug, Clone)]
#[must_use = "an expectation does nothing until it is mounted"]
pub struct Expect {
    pub(crate) matcher: RequestMatch,
    times: Times,
    name: Option<String>,
}

match_methods!(Expect);

impl Default for Expect {
    fn default() -> Self {
        Self::new()
    }
}

impl Expect {
    /// Any request, at least once (narrow it with conditions, fix the count with
    /// [`Expect::times`]).
    pub fn new() -> Self {
        Self {
            matcher: RequestMatch::any(),
            times: Times::at_least(1),
            name: None,
        }
    }

    /// `POST /v1/chat/completions` (also through `/upstream/<model>/`).
    pub fn chat() -> Self {
        Self::post("/v1/chat/completions")
    }

    /// `POST <path>`.
    pub fn post(path: impl Into<String>) -> Self {
        Self::new().method("POST").path(path)
    }

    /// `GET <path>`.
    pub fn get(path: impl Into<String>) -> Self {
        Self::new().method("GET").path(path)
    }

    /// How many matching requests: `1`, `0` (none may arrive), `2..=3`, `1..`, `..=4`.
    /// Default: at least one.
    pub fn times(mut self, times: impl Into<Times>) -> Self {
        self.times = times.into();
        self
    }

    /// A name shown in the failure report. Default: `expectation #<id>`.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Mounts the expectation on `mock`: it counts requests recorded from now on and is
    /// checked by [`MockSwap::verify`] and when the mock drops.
    #[track_caller]
    pub fn mount(self, mock: &MockSwap) {
        let location = Location::caller();
        mock.shared
            .expectations
            .mount(&mock.shared, self, Origin::Library, Some(location));
    }

    /// Mounts the expectation until the returned guard drops; the guard's drop checks it
    /// (unless the thread is already panicking), so it covers one stage of a test.
    #[track_caller]
    pub fn mount_as_scoped(self, mock: &MockSwap) -> ExpectGuard {
        let location = Location::caller();
        let mounted =
            mock.shared
                .expectations
                .mount(&mock.shared, self, Origin::Scoped, Some(location));
        ExpectGuard {
            shared: Arc::clone(&mock.shared),
            mounted,
        }
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
    pub(crate) name: Option<String>,
    pub(crate) matcher: RequestMatch,
    pub(crate) times: Times,
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
            .filter(|r| expectation.matcher.matches(r))
            .collect();
        Self {
            expectation,
            since,
            matching,
        }
    }

    pub(crate) fn met(&self) -> bool {
        let n = u64::try_from(self.matching.len()).unwrap_or(u64::MAX);
        self.expectation.times.contains(n)
    }

    pub(crate) fn too_many(&self) -> bool {
        let n = u64::try_from(self.matching.len()).unwrap_or(u64::MAX);
        self.expectation.times.max.is_some_and(|max| n > max)
    }

    /// The requests that failed the fewest conditions, with why each failed.
    pub(crate) fn nearest(&self, limit: usize) -> Vec<(&'a RecordedRequest, Vec<String>)> {
        let mut misses: Vec<(&RecordedRequest, Vec<String>)> = self
            .since
            .iter()
            .map(|r| (*r, self.expectation.matcher.mismatches(r)))
            .filter(|(_, why)| !why.is_empty())
            .collect();
        misses.sort_by_key(|(r, why)| (why.len(), r.seq));
        misses.truncate(limit);
        misses
    }
}

/// The mounted expectations (library, scoped and admin).
#[derive(Debug, Default)]
pub(crate) struct Expectations {
    inner: Mutex<(u64, Vec<Mounted>)>,
}

impl Expectations {
    fn lock(&self) -> MutexGuard<'_, (u64, Vec<Mounted>)> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn mount(
        &self,
        shared: &Shared,
        expect: Expect,
        origin: Origin,
        location: Option<&'static Location<'static>>,
    ) -> Mounted {
        self.mount_after(expect, origin, location, shared.journal.last_seq())
    }

    /// Mounts counting requests after `after_seq` (0 counts the whole journal).
    pub(crate) fn mount_after(
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
            name: expect.name,
            matcher: expect.matcher,
            times: expect.times,
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

/// The report of the given expectations against the journal, `None` when all are met.
pub(crate) fn unmet_report(mounted: &[Mounted], requests: &[RecordedRequest]) -> Option<String> {
    let checked: Vec<Checked<'_>> = mounted.iter().map(|m| Checked::new(m, requests)).collect();
    let failed: Vec<&Checked<'_>> = checked.iter().filter(|c| !c.met()).collect();
    (!failed.is_empty()).then(|| report::unmet(&failed, mounted.len(), requests))
}

/// A scoped expectation: checked, and unmounted, when dropped (never while the thread
/// is already panicking). Hold it for the stage of the test it covers.
#[derive(Debug)]
#[must_use = "a scoped expectation is checked when its guard drops: bind it to a variable"]
pub struct ExpectGuard {
    shared: Arc<Shared>,
    mounted: Mounted,
}

impl ExpectGuard {
    /// The matching requests recorded since the expectation was mounted.
    pub fn received_requests(&self) -> Vec<RecordedRequest> {
        let requests = self.shared.journal.requests();
        Checked::new(&self.mounted, &requests)
            .matching
            .into_iter()
            .cloned()
            .collect()
    }

    fn unmet(&self) -> Option<String> {
        unmet_report(
            std::slice::from_ref(&self.mounted),
            &self.shared.journal.requests(),
        )
    }

    /// Checks the expectation now.
    ///
    /// # Panics
    /// When it is unmet, with the report (nearest requests and the request table).
    #[track_caller]
    pub fn verify(&self) {
        if let Some(report) = self.unmet() {
            panic!("{report}");
        }
    }

    /// Waits until the expectation is met (for calls made by a task the test does not
    /// await), bounded by `timeout`.
    ///
    /// # Errors
    /// [`WaitError::Expectation`] with the report when it was still unmet after
    /// `timeout`.
    pub async fn wait_until_satisfied(&self, timeout: Duration) -> Result<(), WaitError> {
        let mut rx = self.shared.journal.subscribe();
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
        self.shared.expectations.remove(self.mounted.id);
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
        self.shared.expectations.mount_after(
            expect.times(times),
            Origin::Library,
            Some(Location::caller()),
            0,
        );
    }

    /// The report of every mounted expectation that is not met, or `None`.
    pub(crate) fn unmet(&self, only_library: bool) -> Option<String> {
        let mounted: Vec<Mounted> = self
            .shared
            .expectations
            .all()
            .into_iter()
            .filter(|m| !only_library || m.origin == Origin::Library)
            .collect();
        unmet_report(&mounted, &self.requests())
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
        if let Some(report) = self.unmet(false) {
            panic!("{report}");
        }
    }
}
