//! Expectations in the style of wiremock's `Mock`: "between n and m requests matching
//! these conditions arrive after this point". An [`Expect`] is a plain value (conditions,
//! a count, a name); mounting it on a running mock (`mount.rs`) registers it by value
//! with the mock's state, which checks it against the journal.
//!
//! An expectation counts only the requests recorded after it was mounted (a startup
//! `GET /v1/models` before it does not shift the count), and only those still in the
//! journal (`clear_requests` and `reset` forget requests).

use std::fmt;
use std::ops::{Range, RangeFrom, RangeInclusive, RangeTo, RangeToInclusive};

use crate::matcher::{RequestMatch, match_methods};

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
/// (checked by [`MockSwap::verify`](crate::MockSwap::verify) and when the mock drops) or
/// [`Expect::mount_as_scoped`] (checked when the guard drops).
#[derive(Debug, Clone)]
#[must_use = "an expectation does nothing until it is mounted"]
pub struct Expect {
    pub(crate) matcher: RequestMatch,
    pub(crate) times: Times,
    pub(crate) name: Option<String>,
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
}
