//! The errors of the library API.

use std::net::SocketAddr;
use std::time::Duration;

/// Why the mock could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The bound socket's address could not be read.
    #[error("cannot read the listening address: {source}")]
    LocalAddr {
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// A wait that timed out.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// Fewer requests than wanted arrived in time.
    #[error("waited {timeout:?} for {wanted} request(s), {got} arrived\n{table}")]
    Requests {
        /// How many were wanted.
        wanted: usize,
        /// How many arrived.
        got: usize,
        /// How long was waited.
        timeout: Duration,
        /// The table of every request received.
        table: String,
    },
    /// Fewer requests than wanted were held at the gate in time.
    #[error("waited {timeout:?} for {wanted} request(s) held at the gate, {got} held\n{table}")]
    Held {
        /// How many were wanted.
        wanted: usize,
        /// How many were held.
        got: usize,
        /// How long was waited.
        timeout: Duration,
        /// The table of every request received.
        table: String,
    },
    /// The number of open websockets did not reach the wanted count in time.
    #[error("waited {timeout:?} for {wanted} open websocket(s), {open} open")]
    Websockets {
        /// How many were wanted open.
        wanted: usize,
        /// How many were open at the end.
        open: usize,
        /// How long was waited.
        timeout: Duration,
    },
    /// An expectation was still unmet when the wait ended.
    #[error("waited {timeout:?} for an expectation to be met\n{report}")]
    Expectation {
        /// How long was waited.
        timeout: Duration,
        /// The expectation's failure report.
        report: String,
    },
}

impl WaitError {
    /// True for every variant (all are timeouts); kept for symmetry with other errors.
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            Self::Requests { .. }
                | Self::Held { .. }
                | Self::Websockets { .. }
                | Self::Expectation { .. }
        )
    }
}

/// Expectations that are not met, as [`MockSwap::check`](crate::MockSwap::check) and
/// [`ExpectGuard::check`](crate::ExpectGuard::check) return them: `Display` is the
/// report `verify()` panics with (each unmet expectation, the nearest requests and
/// why each did not match, then the request table).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{report}")]
pub struct Unmet {
    pub(crate) report: String,
}

impl Unmet {
    /// The report, as text.
    pub fn report(&self) -> &str {
        &self.report
    }

    /// The report, owned.
    pub fn into_report(self) -> String {
        self.report
    }
}
