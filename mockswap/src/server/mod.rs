//! The HTTP server: accept loop, connections, and the state every handler shares.
//!
//! Connections are served with hyper directly (not through a router framework) because
//! faults need per-connection control: a "reset before headers" fault drops the
//! connection with `SO_LINGER` 0 so the client sees a TCP RST, not a clean close.

mod admin;
mod extract;
mod handler;
mod loading;
mod model_request;
mod websocket;

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::expect::Expectations;
use crate::fault::Faults;
use crate::gate::Gate;
use crate::journal::Journal;
use crate::reply::Replies;
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

/// State shared by every handler.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    pub(crate) started: tokio::time::Instant,
    pub(crate) journal: Journal,
    pub(crate) faults: Faults,
    pub(crate) replies: Replies,
    pub(crate) gate: Gate,
    pub(crate) life: Lifecycle,
    /// Models that served a request and were not unloaded since (what `/running` lists).
    pub(crate) loaded: Mutex<BTreeSet<String>>,
    /// Mounted expectations (library, scoped, admin).
    pub(crate) expectations: Expectations,
    /// Open and total websocket counts.
    pub(crate) sockets: Arc<websocket::Sockets>,
    /// Owns the tasks that outlive a handler (websocket echoes).
    pub(crate) tracker: TaskTracker,
}

impl Shared {
    pub(crate) fn new(settings: Settings, gate_open: bool, tracker: &TaskTracker) -> Self {
        let life = Lifecycle::new(settings.crash_mid_stream);
        let journal_limit = settings.journal_limit;
        let gate = Gate::spawn(gate_open, tracker, life.shutdown.clone());
        Self {
            settings,
            started: tokio::time::Instant::now(),
            journal: Journal::new(journal_limit),
            faults: Faults::default(),
            replies: Replies::default(),
            gate,
            life,
            loaded: Mutex::new(BTreeSet::new()),
            expectations: Expectations::default(),
            sockets: Arc::default(),
            tracker: tracker.clone(),
        }
    }

    pub(crate) fn completion_guard(&self) -> CompletionGuard {
        CompletionGuard {
            life: self.life.clone(),
            crash_after: self.settings.crash_after,
        }
    }

    pub(crate) fn loaded(&self) -> std::sync::MutexGuard<'_, BTreeSet<String>> {
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
    /// Drops the connection with a TCP RST.
    pub(crate) fn reset(&self) {
        self.reset.cancel();
    }
}

/// A TCP stream that, when its connection was reset on purpose, closes with
/// `SO_LINGER` 0 so the peer gets an RST.
struct ResettableStream {
    inner: TcpStream,
    reset: CancellationToken,
}

impl Drop for ResettableStream {
    fn drop(&mut self) {
        if self.reset.is_cancelled() {
            // Best effort: if it fails the client sees a close instead of a reset.
            let _ = self.inner.set_zero_linger();
        }
    }
}

impl AsyncRead for ResettableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for ResettableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Runs the accept loop on `tracker` until the mock stops.
pub(crate) fn spawn_accept_loop(listener: TcpListener, shared: Arc<Shared>, tracker: &TaskTracker) {
    let conn_tracker = tracker.clone();
    tracker.spawn(async move {
        loop {
            let accepted = tokio::select! {
                () = shared.life.shutdown.cancelled() => break,
                accepted = listener.accept() => accepted,
            };
            match accepted {
                Ok((stream, _peer)) => {
                    conn_tracker.spawn(serve_connection(stream, Arc::clone(&shared)));
                }
                Err(err) => {
                    // Per-connection errors (the peer went away before accept) are
                    // harmless; running out of descriptors is retried after a pause so
                    // the loop does not spin.
                    tracing::warn!(error = %err, "accept failed");
                    tokio::select! {
                        () = shared.life.shutdown.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_millis(10)) => {}
                    }
                }
            }
        }
    });
}

async fn serve_connection(stream: TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let reset = CancellationToken::new();
    let control = ConnControl {
        reset: reset.clone(),
    };
    let io = TokioIo::new(ResettableStream {
        inner: stream,
        reset: reset.clone(),
    });
    let handler_shared = Arc::clone(&shared);
    let service = service_fn(move |request| {
        let shared = Arc::clone(&handler_shared);
        let control = control.clone();
        async move { Ok::<_, Infallible>(handler::handle(shared, control, request).await) }
    });
    // No header-read timeout: under a paused tokio clock it would fire at once and
    // close idle keep-alive connections of downstream paused-clock tests.
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .serve_connection(io, service)
        .with_upgrades();
    tokio::pin!(connection);
    let mut graceful = false;
    loop {
        tokio::select! {
            _ = connection.as_mut() => break,
            () = reset.cancelled() => break,
            () = shared.life.kill.cancelled() => break,
            () = shared.life.shutdown.cancelled(), if !graceful => {
                connection.as_mut().graceful_shutdown();
                graceful = true;
            }
        }
    }
}
