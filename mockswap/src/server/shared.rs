//! The server's shared state: settings fixed at start, stop signals, and the mock's
//! [`State`] every handler reads and records into.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::state::State;
use crate::stream::StreamShape;

/// How the mock stopped on its own, as its `--crash-*` settings asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Crash {
    /// The configured number of model requests completed (`crash_after`).
    AfterRequests(u64),
    /// The first streaming response was cut after a few frames (`crash_mid_stream`).
    MidStream,
}

/// Behaviour fixed at start.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) models: Option<Vec<String>>,
    pub(crate) load_time: Duration,
    pub(crate) never_healthy: bool,
    pub(crate) latency: Duration,
    pub(crate) shape: StreamShape,
    pub(crate) crash_after: Option<u64>,
    pub(crate) crash_mid_stream: bool,
    pub(crate) body_limit: usize,
    pub(crate) journal_limit: Option<usize>,
    pub(crate) journal_health: bool,
    /// Sleep and wake (`sleep/`).
    pub(crate) sleep: super::sleep::SleepSettings,
}

/// Stop signals. `shutdown` ends every wait (gate, hang, stall, pacing) and closes
/// connections gracefully; `kill` also drops connections at once. Cancelling `kill`
/// cancels `shutdown` (it is its child).
#[derive(Debug, Clone)]
pub(crate) struct Lifecycle {
    pub(crate) shutdown: CancellationToken,
    pub(crate) kill: CancellationToken,
    crash: watch::Sender<Option<Crash>>,
    completed: Arc<AtomicU64>,
    mid_stream_armed: Arc<AtomicBool>,
}

impl Lifecycle {
    fn new(crash_mid_stream: bool) -> Self {
        let kill = CancellationToken::new();
        Self {
            shutdown: kill.child_token(),
            kill,
            crash: watch::Sender::new(None),
            completed: Arc::new(AtomicU64::new(0)),
            mid_stream_armed: Arc::new(AtomicBool::new(crash_mid_stream)),
        }
    }

    pub(crate) fn crash(&self, crash: Crash) {
        self.crash.send_if_modified(|c| {
            if c.is_some() {
                return false;
            }
            *c = Some(crash);
            true
        });
        match crash {
            Crash::AfterRequests(_) => self.shutdown.cancel(),
            Crash::MidStream => self.kill.cancel(),
        }
    }

    pub(crate) fn subscribe_crash(&self) -> watch::Receiver<Option<Crash>> {
        self.crash.subscribe()
    }

    /// True once, for the first streaming response, when `crash_mid_stream` is set.
    pub(crate) fn take_mid_stream_crash(&self) -> bool {
        self.mid_stream_armed.swap(false, Ordering::SeqCst)
    }
}

/// Counts a completed model request when dropped (with the response body), and crashes
/// the mock after the configured number.
#[derive(Debug)]
pub(crate) struct CompletionGuard {
    life: Lifecycle,
    crash_after: Option<u64>,
}

impl Drop for CompletionGuard {
    fn drop(&mut self) {
        let done = self.life.completed.fetch_add(1, Ordering::SeqCst) + 1;
        if self.crash_after == Some(done) {
            self.life.crash(Crash::AfterRequests(done));
        }
    }
}

/// What every handler shares: the mock's [`State`] (journal, rules, expectations,
/// gate) and what only the server has (settings, clock origin, stop signals, sockets).
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) state: Arc<State>,
    pub(crate) settings: Settings,
    pub(crate) started: tokio::time::Instant,
    pub(crate) life: Lifecycle,
    /// Open and total websocket counts.
    pub(crate) sockets: Arc<Sockets>,
    /// Owns the tasks that outlive a handler (websocket echoes).
    pub(crate) tracker: TaskTracker,
    /// Asleep or awake (`sleep/`).
    pub(crate) sleep: super::sleep::Sleep,
}

impl Shared {
    /// The server's side of a new mock; the state is built here because its gate stops
    /// with the server's shutdown signal.
    pub(crate) fn new(settings: Settings, gate_open: bool, tracker: &TaskTracker) -> Self {
        let life = Lifecycle::new(settings.crash_mid_stream);
        let state = State::new(
            gate_open,
            settings.journal_limit,
            tracker,
            life.shutdown.clone(),
        );
        Self {
            state: Arc::new(state),
            settings,
            started: tokio::time::Instant::now(),
            life,
            sockets: Arc::default(),
            tracker: tracker.clone(),
            sleep: super::sleep::Sleep::default(),
        }
    }

    pub(crate) fn completion_guard(&self) -> CompletionGuard {
        CompletionGuard {
            life: self.life.clone(),
            crash_after: self.settings.crash_after,
        }
    }

    /// Whether `/health` answers 200 now.
    pub(crate) fn healthy(&self) -> bool {
        !self.settings.never_healthy && self.started.elapsed() >= self.settings.load_time
    }
}

/// Per-connection control handed to handlers.
#[derive(Debug, Clone)]
pub(crate) struct ConnControl {
    reset: CancellationToken,
}

impl ConnControl {
    pub(crate) fn new(reset: CancellationToken) -> Self {
        Self { reset }
    }

    /// Drops the connection with a TCP RST.
    pub(crate) fn reset(&self) {
        self.reset.cancel();
    }
}

/// How many websockets are open now, and how many were opened since start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct SocketCounts {
    pub(crate) open: usize,
    pub(crate) total: u64,
}

/// The counters, with a watch so tests can wait for a socket to open or close.
#[derive(Debug)]
pub(crate) struct Sockets {
    counts: watch::Sender<SocketCounts>,
}

impl Default for Sockets {
    fn default() -> Self {
        Self {
            counts: watch::Sender::new(SocketCounts::default()),
        }
    }
}

impl Sockets {
    pub(crate) fn counts(&self) -> SocketCounts {
        *self.counts.borrow()
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<SocketCounts> {
        self.counts.subscribe()
    }

    /// Counts a socket as open until the returned guard is dropped.
    pub(crate) fn opened(self: &Arc<Self>) -> OpenSocket {
        self.counts.send_modify(|c| {
            c.open += 1;
            c.total += 1;
        });
        OpenSocket(Arc::clone(self))
    }
}

/// One open socket; dropping it counts the socket as closed.
pub(crate) struct OpenSocket(Arc<Sockets>);

impl Drop for OpenSocket {
    fn drop(&mut self) {
        self.0
            .counts
            .send_modify(|c| c.open = c.open.saturating_sub(1));
    }
}
