//! The proxy's own log, as llama-swap keeps it: every line
//! `[timestamp ][LEVEL] message key=value ...` goes into a bounded history
//! (served by `/logs`, `/logs/stream` and `/logs/stream/proxy`) and, with
//! `logToStdout: proxy` or `both`, to stdout, its level coloured only when
//! stdout is a terminal. The upstreams' output (tracing target
//! `upstream_output`) reaches stdout with `logToStdout: upstream` or `both`;
//! its history is in the supervisor's per-model rings.
//!
//! `logLevel` and `logTimeFormat` apply to the proxy's lines and are updated
//! on every reload ([`LogSettings::apply`]); `logToStdout` is fixed at start,
//! as in llama-swap. With `RUST_LOG` set, its filter replaces `logLevel`.
//!
//! ```no_run
//! use llama_swap_server::config::Config;
//! use llama_swap_server::logging;
//!
//! let loaded = Config::loader().file("config.yaml").load()?;
//! let (proxy_log, settings) = logging::install(&loaded.config);
//! tracing::info!("started");
//! assert_eq!(proxy_log.history().len(), 1);
//! settings.apply(&loaded.config); // after a reload
//! # Ok::<(), llama_swap_server::config::ConfigError>(())
//! ```
//!
//! The tracing layer and its stdout writer ([`install`], [`ProxyLogLayer`],
//! [`LogSettings`]) come with the `cli` feature (the default): they are built on
//! tracing-subscriber, which only the binary needs. Without it the history type
//! [`ProxyLog`] is still here for the HTTP layer.

use std::sync::Arc;

use crate::config::LogTimeFormat;
use crate::upstream::{LogRing, LogStream, LogSubscription, SharedLine};

#[cfg(feature = "cli")]
mod fields;
mod inline;
#[cfg(feature = "cli")]
mod layer;
#[cfg(feature = "cli")]
mod stdout;

pub(crate) use self::inline::InlineText;
#[cfg(feature = "cli")]
pub use self::layer::{LogSettings, ProxyLogLayer, install};

/// Lines of the proxy's log kept for `/logs`.
const HISTORY_LINES: usize = 2000;
/// The tracing target of upstream output (see `upstream::logs`).
pub const UPSTREAM_TARGET: &str = "upstream_output";
/// The name of the proxy's log in `/logs/stream/<id>` and in `/logs` lines.
pub const PROXY_LOG_ID: &str = "proxy";

/// The history of the proxy's log lines, with live subscription. Cheap to
/// clone; clones share the history.
#[derive(Debug, Clone)]
pub struct ProxyLog {
    ring: Arc<LogRing>,
}

impl Default for ProxyLog {
    fn default() -> Self {
        Self::new()
    }
}

impl ProxyLog {
    /// An empty log keeping the last 2000 lines, at most 1 MiB of them
    /// (`DEFAULT_RING_BYTES`; the oldest go first), each value cut as the
    /// tracing layer writes it.
    #[must_use]
    pub fn new() -> Self {
        Self {
            ring: Arc::new(LogRing::standalone(PROXY_LOG_ID, HISTORY_LINES)),
        }
    }

    /// Appends a formatted line (no line terminator).
    pub fn record(&self, text: String) {
        self.ring.record(LogStream::Stdout, text);
    }

    /// Appends a copy of a formatted line, in the buffer of the line it
    /// evicts when that fits (see `LogRing::record_copy`).
    pub fn record_copy(&self, text: &str) {
        self.ring.record_copy(LogStream::Stdout, text);
    }

    /// The lines kept, oldest first (shared with the log, not copied).
    #[must_use]
    pub fn history(&self) -> Vec<SharedLine> {
        self.ring.history()
    }

    /// History plus a receiver for what follows, taken atomically.
    #[must_use]
    pub fn subscribe(&self) -> LogSubscription {
        self.ring.subscribe()
    }
}

/// `now` in one of Go's layouts, as llama-swap prints it.
pub fn timestamp(format: LogTimeFormat, now: &jiff::Zoned) -> String {
    let mut out = String::with_capacity(40);
    write_timestamp(&mut out, format, now);
    out
}

/// Appends [`timestamp`] to `out` (a log line being built), without a
/// `String` of its own.
pub(crate) fn write_timestamp(out: &mut String, format: LogTimeFormat, now: &jiff::Zoned) {
    use std::fmt::Write as _;
    let pattern = match format {
        LogTimeFormat::Ansic => "%a %b %e %H:%M:%S %Y",
        LogTimeFormat::UnixDate => "%a %b %e %H:%M:%S %Z %Y",
        LogTimeFormat::RubyDate => "%a %b %d %H:%M:%S %z %Y",
        LogTimeFormat::Rfc822 => "%d %b %y %H:%M %Z",
        LogTimeFormat::Rfc822Z => "%d %b %y %H:%M %z",
        LogTimeFormat::Rfc850 => "%A, %d-%b-%y %H:%M:%S %Z",
        LogTimeFormat::Rfc1123 => "%a, %d %b %Y %H:%M:%S %Z",
        LogTimeFormat::Rfc1123Z => "%a, %d %b %Y %H:%M:%S %z",
        LogTimeFormat::Kitchen => "%-I:%M%p",
        LogTimeFormat::Rfc3339
        | LogTimeFormat::Rfc3339Nano
        | LogTimeFormat::Stamp
        | LogTimeFormat::StampMilli
        | LogTimeFormat::StampMicro
        | LogTimeFormat::StampNano => "",
    };
    // Writing into a `String` cannot fail; the results are ignored.
    if !pattern.is_empty() {
        let _ = write!(out, "{}", now.strftime(pattern));
        return;
    }
    let nanos = now.subsec_nanosecond().unsigned_abs();
    let stamp = now.strftime("%b %e %H:%M:%S");
    let _ = match format {
        LogTimeFormat::Stamp => write!(out, "{stamp}"),
        LogTimeFormat::StampMilli => write!(out, "{stamp}.{:03}", nanos / 1_000_000),
        LogTimeFormat::StampMicro => write!(out, "{stamp}.{:06}", nanos / 1_000),
        LogTimeFormat::StampNano => write!(out, "{stamp}.{nanos:09}"),
        _ => {
            // RFC 3339: "Z" for UTC, the offset otherwise; nano drops trailing zeros.
            let _ = write!(out, "{}", now.strftime("%Y-%m-%dT%H:%M:%S"));
            if format == LogTimeFormat::Rfc3339Nano && nanos > 0 {
                let mut digits = nanos;
                let mut width = 9;
                while digits.is_multiple_of(10) {
                    digits /= 10;
                    width -= 1;
                }
                let _ = write!(out, ".{digits:0width$}");
            }
            if now.offset().seconds() == 0 {
                out.push('Z');
                Ok(())
            } else {
                write!(out, "{}", now.strftime("%:z"))
            }
        }
    };
}
