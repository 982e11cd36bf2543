//! Loading a configuration away from the async runtime, within a time limit.
//!
//! Reading and checking a configuration is blocking work (files, directory
//! listings, macro expansion) that may not finish: a FIFO or a hung network
//! mount in place of the file blocks `open` forever. Run on the runtime, it
//! would hold a worker thread, and the task waiting for it would keep a
//! graceful shutdown from completing. The load runs on its own thread instead;
//! the caller waits at most the limit and keeps the running configuration when
//! it is exceeded.

use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

/// How many loads past their limit may still be running before [`ConfigLoader`]
/// refuses to start another: a reload after one that hung (a FIFO put in place
/// of the file, then replaced by a real file) still works, and threads stuck in
/// the kernel cannot pile up without bound.
pub(crate) const MAX_STUCK_LOADS: usize = 4;

/// How long [`ConfigLoader`] waits for a configuration by default: far longer
/// than any real configuration takes, short enough that an operator sees the
/// failure.
pub(crate) const DEFAULT_LOAD_LIMIT: Duration = Duration::from_secs(30);

/// Why a load gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum LoadStalled {
    /// The load did not finish within the limit.
    #[error(
        "reading the configuration did not finish within {limit:?} (a file that never \
         ends, such as a FIFO, or an unresponsive network mount?)"
    )]
    TimedOut {
        /// The limit that was exceeded.
        limit: Duration,
    },
    /// Four (`MAX_STUCK_LOADS`) earlier loads ran past their limit and have still
    /// not finished; no other is started until one does, so stuck loads do
    /// not pile up.
    #[error(
        "{MAX_STUCK_LOADS} earlier reloads are still reading the configuration and never \
         finished; no other is started until one does"
    )]
    StillBusy,
    /// The loading thread could not be started, or it panicked.
    #[error("the configuration loader thread failed: {reason}")]
    Failed {
        /// What happened.
        reason: String,
    },
}

/// Runs configuration loads on a thread of their own, one at a time.
///
/// A load that exceeds its limit cannot be interrupted (the thread is blocked
/// in the kernel); the loader keeps its handle, and refuses new loads while
/// four such threads run. Dropping the loader leaves them to end
/// with the process: there is nothing that could stop them sooner.
#[derive(Debug, Default)]
pub(crate) struct ConfigLoader {
    /// Loads that ran past their limit and may still be running.
    stuck: Vec<JoinHandle<()>>,
}

impl ConfigLoader {
    /// A loader with no load running.
    #[must_use]
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Runs `load` on a new thread and waits for its result for at most `limit`.
    ///
    /// # Errors
    ///
    /// [`LoadStalled`] when the load ran past `limit`, four
    /// earlier stuck loads are still running, or the thread could not run.
    pub(crate) async fn load<T, F>(&mut self, limit: Duration, load: F) -> Result<T, LoadStalled>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        // Those that ended on their own: their results went nowhere.
        for ended in self.stuck.extract_if(.., |thread| thread.is_finished()) {
            drop(ended.join());
        }
        if self.stuck.len() >= MAX_STUCK_LOADS {
            return Err(LoadStalled::StillBusy);
        }
        let (tx, rx) = oneshot::channel();
        let thread = std::thread::Builder::new()
            .name("config-load".to_owned())
            .spawn(move || {
                // The receiver is gone when the wait timed out: the result is moot.
                let _ = tx.send(load());
            })
            .map_err(|error| LoadStalled::Failed {
                reason: error.to_string(),
            })?;
        // Kept before waiting, so a caller that gives up on the wait (drops
        // this future) still leaves the thread accounted for.
        self.stuck.push(thread);
        let outcome = tokio::time::timeout(limit, rx).await;
        match outcome {
            Ok(Ok(value)) => {
                if let Some(thread) = self.stuck.pop() {
                    drop(thread.join());
                }
                Ok(value)
            }
            Ok(Err(_)) => Err(LoadStalled::Failed {
                reason: self.stuck.pop().map_or_else(
                    || "it ended without a result".to_owned(),
                    |t| panic_reason(t.join()),
                ),
            }),
            Err(_) => Err(LoadStalled::TimedOut { limit }),
        }
    }
}

fn panic_reason(joined: std::thread::Result<()>) -> String {
    match joined {
        Ok(()) => "it ended without a result".to_owned(),
        Err(payload) => payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .map_or_else(|| "it panicked".to_owned(), |m| format!("it panicked: {m}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_load_that_finishes_returns_its_result() {
        let mut loader = ConfigLoader::new();
        assert_eq!(loader.load(DEFAULT_LOAD_LIMIT, || 7).await, Ok(7));
        assert_eq!(loader.load(DEFAULT_LOAD_LIMIT, || 8).await, Ok(8));
    }

    #[tokio::test]
    async fn a_load_that_never_ends_times_out_and_later_loads_still_run() {
        let mut loader = ConfigLoader::new();
        let (release, blocked) = std::sync::mpsc::channel::<()>();
        // The load blocks until released, so any limit is exceeded; a short
        // one keeps the test quick. (A paused clock cannot be used: it would
        // also time out loads that a real thread is about to finish.)
        let limit = Duration::from_millis(20);
        let stalled = loader.load(limit, move || blocked.recv().is_ok()).await;
        assert_eq!(stalled, Err(LoadStalled::TimedOut { limit }));
        assert_eq!(loader.load(DEFAULT_LOAD_LIMIT, || true).await, Ok(true));
        assert_eq!(loader.load(DEFAULT_LOAD_LIMIT, || 8).await, Ok(8));
        drop(release);
    }

    #[tokio::test]
    async fn loads_are_refused_while_the_most_stuck_ones_run_and_resume_when_one_ends() {
        let mut loader = ConfigLoader::new();
        let limit = Duration::from_millis(20);
        let mut releases = Vec::new();
        for _ in 0..MAX_STUCK_LOADS {
            let (release, blocked) = std::sync::mpsc::channel::<()>();
            releases.push(release);
            let stalled = loader.load(limit, move || blocked.recv().is_ok()).await;
            assert_eq!(stalled, Err(LoadStalled::TimedOut { limit }));
        }
        assert_eq!(
            loader.load(DEFAULT_LOAD_LIMIT, || true).await,
            Err(LoadStalled::StillBusy)
        );
        // Once a stuck load ends, loading works again.
        drop(releases.remove(0));
        let ended = loader.stuck.remove(0);
        ended.join().expect("the stuck load ends");
        assert_eq!(loader.load(DEFAULT_LOAD_LIMIT, || true).await, Ok(true));
        drop(releases);
    }

    #[tokio::test]
    async fn a_load_that_panics_is_an_error_naming_the_panic() {
        let mut loader = ConfigLoader::new();
        let failed = loader
            .load(DEFAULT_LOAD_LIMIT, || -> u8 { panic!("bad yaml") })
            .await;
        assert_eq!(
            failed,
            Err(LoadStalled::Failed {
                reason: "it panicked: bad yaml".to_owned()
            })
        );
    }
}
