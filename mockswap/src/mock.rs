//! [`MockSwap`], the in-process handle, and its builder.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::task::TaskTracker;

use crate::error::{StartError, WaitError};
use crate::fault::FaultRule;
use crate::journal::RecordedRequest;
use crate::priority::PriorityHeader;
use crate::reply::ReplyRule;
use crate::report::{requests_table, unmet_report};
use crate::server::{self, Crash, Settings, Shared};
use crate::spec::Fixture;
use crate::state::{Origin, State};
use crate::stream::StreamShape;

/// Default request body limit: 16 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 16 * 1024 * 1024;

/// A running mock: a fake model server and proxy double on a local port.
///
/// Dropping it stops the server and verifies the expectations mounted with
/// [`Expect::mount`](crate::Expect::mount) or [`MockSwap::expect_priority`]; an unmet expectation
/// panics with a report (unless the thread is already panicking).
#[derive(Debug)]
pub struct MockSwap {
    addr: SocketAddr,
    /// What tests set up and the server records (shared with the server).
    pub(crate) state: Arc<State>,
    /// The server's side: stop signals and websocket counts.
    server: Arc<Shared>,
    tracker: TaskTracker,
}

/// Configures a [`MockSwap`] before it starts.
#[derive(Debug, Clone)]
#[must_use]
pub struct MockSwapBuilder {
    listen: SocketAddr,
    settings: Settings,
    gate_open: bool,
    replies: Vec<ReplyRule>,
    faults: Vec<FaultRule>,
}

impl Default for MockSwapBuilder {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            settings: Settings {
                models: None,
                load_time: Duration::ZERO,
                never_healthy: false,
                latency: Duration::ZERO,
                shape: StreamShape::default(),
                crash_after: None,
                crash_mid_stream: false,
                body_limit: DEFAULT_BODY_LIMIT,
                journal_limit: None,
                journal_health: false,
                sleep: crate::server::SleepSettings::default(),
            },
            gate_open: true,
            replies: Vec::new(),
            faults: Vec::new(),
        }
    }
}

impl MockSwapBuilder {
    /// The address to listen on. Default: `127.0.0.1:0` (an ephemeral port).
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// The models served and listed; a request for another model gets 404
    /// `model_not_found`. Default: any model name is accepted.
    pub fn models<I, S>(mut self, models: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.settings.models = Some(models.into_iter().map(Into::into).collect());
        self
    }

    /// `GET /health` answers 503 `{"status":"loading"}`, and model requests 503, until
    /// this long after start (tokio time). Default: ready at once.
    pub fn load_time(mut self, load_time: Duration) -> Self {
        self.settings.load_time = load_time;
        self
    }

    /// How long `POST /sleep` (or `/release_memory_occupation`) takes
    /// before it answers and the model sleeps. Default: at once.
    pub fn sleep_time(mut self, time: Duration) -> Self {
        self.settings.sleep.sleep_time = time;
        self
    }

    /// How long `POST /wake_up` (or `/resume_memory_occupation`) takes before
    /// it answers and the model serves again. Default: at once.
    pub fn wake_time(mut self, time: Duration) -> Self {
        self.settings.sleep.wake_time = time;
        self
    }

    /// The GPU memory the fake model reports holding awake and asleep, in
    /// bytes (`GET /__mockswap/sleep`). Default: 0 and 0.
    pub fn memory(mut self, awake: u64, asleep: u64) -> Self {
        self.settings.sleep.memory = awake;
        self.settings.sleep.sleep_memory = asleep;
        self
    }

    /// Never become healthy. Default: off.
    pub fn never_healthy(mut self, never: bool) -> Self {
        self.settings.never_healthy = never;
        self
    }

    /// Wait this long before answering each model request (after the gate). Default: none.
    pub fn latency(mut self, latency: Duration) -> Self {
        self.settings.latency = latency;
        self
    }

    /// The shape of streamed responses. Default: [`StreamShape::default`].
    pub fn stream_shape(mut self, shape: StreamShape) -> Self {
        self.settings.shape = shape;
        self
    }

    /// Shortcut for the stream shape's token rate. Default: unpaced.
    pub fn tokens_per_second(mut self, rate: f64) -> Self {
        self.settings.shape = self.settings.shape.tokens_per_second(rate);
        self
    }

    /// After this many model requests have completed, stop like a crashed server
    /// (stop accepting, finish what is in flight); [`MockSwap::crashed`] resolves.
    /// Default: never.
    pub fn crash_after(mut self, requests: u64) -> Self {
        self.settings.crash_after = Some(requests);
        self
    }

    /// Cut the first streaming response after a few frames and drop every connection;
    /// [`MockSwap::crashed`] resolves. Default: off.
    pub fn crash_mid_stream(mut self, on: bool) -> Self {
        self.settings.crash_mid_stream = on;
        self
    }

    /// Largest accepted request body; larger gets 413 `body_too_large`. Default: 16 MiB.
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.settings.body_limit = bytes;
        self
    }

    /// Keep only the newest `entries` journal entries (and dispatch-order entries), for
    /// long runs such as benchmarks. Default: keep everything.
    pub fn journal_limit(mut self, entries: usize) -> Self {
        self.settings.journal_limit = Some(entries);
        self
    }

    /// Journal `GET /health` like any other request, for a test of what a client sends
    /// to it (its headers, its `X-Priority`). Default: off, since a supervisor polls it
    /// many times a second.
    pub fn journal_health(mut self, on: bool) -> Self {
        self.settings.journal_health = on;
        self
    }

    /// Start with the gate closed (requests held until [`MockSwap::open_gate`]).
    /// Default: open.
    pub fn gate_closed(mut self) -> Self {
        self.gate_open = false;
        self
    }

    /// Installs a scripted reply.
    pub fn reply(mut self, rule: ReplyRule) -> Self {
        self.replies.push(rule);
        self
    }

    /// Installs a fault.
    pub fn fault(mut self, rule: FaultRule) -> Self {
        self.faults.push(rule);
        self
    }

    /// Installs the replies and faults of a fixture.
    pub fn fixture(mut self, fixture: Fixture) -> Self {
        self.replies.extend(fixture.replies);
        self.faults.extend(fixture.faults);
        self
    }

    /// Binds the listen address and starts serving on the current tokio runtime.
    ///
    /// # Errors
    /// [`StartError`] when the address cannot be bound.
    pub async fn start(self) -> Result<MockSwap, StartError> {
        let listener = TcpListener::bind(self.listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: self.listen,
                source,
            })?;
        MockSwap::serve(listener, self)
    }

    /// Serves on an already bound listener (the caller keeps control of the address).
    ///
    /// # Errors
    /// [`StartError::LocalAddr`] when the listener's address cannot be read.
    pub fn serve(self, listener: TcpListener) -> Result<MockSwap, StartError> {
        MockSwap::serve(listener, self)
    }
}

impl MockSwap {
    /// Starts a mock with default settings on `127.0.0.1:0`.
    ///
    /// # Panics
    /// When no local port can be bound (a test environment problem, reported at once).
    pub async fn start() -> Self {
        match Self::builder().start().await {
            Ok(mock) => mock,
            Err(err) => panic!("mockswap could not start: {err}"),
        }
    }

    /// A builder for a configured mock.
    pub fn builder() -> MockSwapBuilder {
        MockSwapBuilder::default()
    }

    fn serve(listener: TcpListener, builder: MockSwapBuilder) -> Result<Self, StartError> {
        let addr = listener
            .local_addr()
            .map_err(|source| StartError::LocalAddr { source })?;
        let tracker = TaskTracker::new();
        let server = Arc::new(Shared::new(builder.settings, builder.gate_open, &tracker));
        let state = Arc::clone(&server.state);
        for rule in builder.replies {
            state.replies.add(rule);
        }
        for rule in builder.faults {
            state.faults.add(rule);
        }
        server::spawn_accept_loop(listener, Arc::clone(&server), &tracker);
        Ok(Self {
            addr,
            state,
            server,
            tracker,
        })
    }

    /// The base URI, e.g. `http://127.0.0.1:41234` (no trailing slash).
    pub fn uri(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listening address.
    pub fn address(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, oldest first (health polls and the admin API are
    /// not journaled).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.journal.requests()
    }

    /// Journal sequence numbers in the order requests passed the gate.
    pub fn dispatch_order(&self) -> Vec<u64> {
        self.state.journal.dispatch_order()
    }

    /// Forgets every request received so far (sequence numbers keep increasing), so
    /// expectations no longer count them.
    pub fn clear_requests(&self) {
        self.state.journal.clear();
    }

    /// Back to a fresh mock in one call: journal, faults, replies and expectations
    /// cleared, the gate open, no model counted as loaded. Sequence numbers keep
    /// increasing; open websockets stay open. Scoped guards still alive are unmounted
    /// (their own drop still checks them, against the cleared journal).
    pub fn reset(&self) {
        self.state.reset();
    }

    /// The table of every request received (what a failed expectation prints).
    pub fn requests_table(&self) -> String {
        requests_table(&self.requests())
    }

    /// Waits until at least `n` requests are in the journal and returns the journal.
    ///
    /// # Errors
    /// [`WaitError::Requests`] when they did not arrive within `timeout`.
    pub async fn wait_for_requests(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<Vec<RecordedRequest>, WaitError> {
        match tokio::time::timeout(timeout, self.state.journal.wait_for_len(n)).await {
            Ok(()) => Ok(self.requests()),
            Err(_) => {
                let requests = self.requests();
                Err(WaitError::Requests {
                    wanted: n,
                    got: requests.len(),
                    timeout,
                    table: requests_table(&requests),
                })
            }
        }
    }

    /// Asserts the priorities of every request received, in arrival order: `Some(v)` is
    /// exactly one well-formed `X-Priority: v`, `None` is no header at all.
    ///
    /// # Panics
    /// On any difference, with a table of every request received.
    #[track_caller]
    pub fn assert_priorities<I>(&self, expected: I)
    where
        I: IntoIterator<Item = Option<i32>>,
    {
        let expected: Vec<Option<i32>> = expected.into_iter().collect();
        let requests = self.requests();
        let same = expected.len() == requests.len()
            && requests.iter().zip(&expected).all(|(r, e)| match e {
                Some(v) => r.priority == PriorityHeader::Value(*v),
                None => r.priority == PriorityHeader::Absent,
            });
        if !same {
            let shown: Vec<String> = expected
                .iter()
                .map(|e| e.map_or_else(|| "-".to_owned(), |v| v.to_string()))
                .collect();
            panic!(
                "mockswap: priorities differ; expected [{}]\n{}",
                shown.join(", "),
                requests_table(&requests)
            );
        }
    }

    /// Asserts the `X-Queue-Timeout` of every request received, in arrival
    /// order: `Some(d)` is exactly one well-formed value of `d`, `None` no header.
    ///
    /// # Panics
    /// On any difference, with a table of every request received.
    #[track_caller]
    pub fn assert_queue_timeouts<I>(&self, expected: I)
    where
        I: IntoIterator<Item = Option<std::time::Duration>>,
    {
        let expected: Vec<Option<std::time::Duration>> = expected.into_iter().collect();
        let requests = self.requests();
        let same = expected.len() == requests.len()
            && requests.iter().zip(&expected).all(|(r, e)| match e {
                Some(d) => r.queue_timeout.value() == Some(*d),
                None => r.queue_timeout == crate::QueueTimeoutHeader::Absent,
            });
        if !same {
            let shown: Vec<String> = expected
                .iter()
                .map(|e| e.map_or_else(|| "-".to_owned(), |d| format!("{}s", d.as_secs_f64())))
                .collect();
            panic!(
                "mockswap: queue timeouts differ; expected [{}]\n{}",
                shown.join(", "),
                requests_table(&requests)
            );
        }
    }

    /// Closes the gate: model requests arriving from now on are held.
    pub fn close_gate(&self) {
        self.state.gate.set_open(false);
    }

    /// Opens the gate: held requests are released one at a time, highest priority first
    /// (ties in arrival order), each after the previous one's response has completed.
    pub fn open_gate(&self) {
        self.state.gate.set_open(true);
    }

    /// How many requests the gate holds now.
    pub fn held(&self) -> usize {
        self.state.gate.state().held
    }

    /// Waits until the gate holds at least `n` requests.
    ///
    /// # Errors
    /// [`WaitError::Held`] when fewer were held within `timeout`.
    pub async fn wait_for_held(&self, n: usize, timeout: Duration) -> Result<(), WaitError> {
        match tokio::time::timeout(timeout, self.state.gate.wait_held(n)).await {
            Ok(()) => Ok(()),
            Err(_) => Err(WaitError::Held {
                wanted: n,
                got: self.held(),
                timeout,
                table: self.requests_table(),
            }),
        }
    }

    /// How many websockets are open now (upgrades on any path outside `/__mockswap/`
    /// are echoed; see the README).
    pub fn websockets_open(&self) -> usize {
        self.server.sockets.counts().open
    }

    /// How many websocket upgrades were accepted since start.
    pub fn websockets_total(&self) -> u64 {
        self.server.sockets.counts().total
    }

    /// Waits until exactly `n` websockets are open (e.g. 0 after the client closed).
    ///
    /// # Errors
    /// [`WaitError::Websockets`] when the count was still different after `timeout`.
    pub async fn wait_for_websockets_open(
        &self,
        n: usize,
        timeout: Duration,
    ) -> Result<(), WaitError> {
        let mut rx = self.server.sockets.subscribe();
        match tokio::time::timeout(timeout, rx.wait_for(|c| c.open == n)).await {
            Ok(_) => Ok(()),
            Err(_) => Err(WaitError::Websockets {
                wanted: n,
                open: self.websockets_open(),
                timeout,
            }),
        }
    }

    /// Installs a fault (tried after the ones already installed).
    pub fn add_fault(&self, rule: FaultRule) {
        self.state.faults.add(rule);
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.state.faults.clear();
    }

    /// Installs a scripted reply (tried after the ones already installed).
    pub fn add_reply(&self, rule: ReplyRule) {
        self.state.replies.add(rule);
    }

    /// Removes every scripted reply (the echo answers again).
    pub fn clear_replies(&self) {
        self.state.replies.clear();
    }

    /// Resolves when the mock stops on its own because of `crash_after` or
    /// `crash_mid_stream`; never resolves otherwise.
    pub async fn crashed(&self) -> Crash {
        let mut rx = self.server.life.subscribe_crash();
        loop {
            if let Some(crash) = *rx.borrow_and_update() {
                return crash;
            }
            if rx.changed().await.is_err() {
                // The sender lives in `self.shared`; it cannot be gone while `self` is.
                std::future::pending::<()>().await;
            }
        }
    }

    /// Stops gracefully: no new connections, held and hanging requests answer 503
    /// `shutting_down`, streams are cut, and connections close; waits for all of it.
    pub async fn shutdown(&self) {
        self.server.life.shutdown.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// Like [`MockSwap::shutdown`], but first drops every connection at once.
    pub async fn kill(&self) {
        self.server.life.kill.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}

impl Drop for MockSwap {
    fn drop(&mut self) {
        self.server.life.kill.cancel();
        self.tracker.close();
        if std::thread::panicking() {
            return;
        }
        let (mounted, requests) = self.state.snapshot(Some(Origin::Library));
        if let Some(report) = unmet_report(&mounted, &requests) {
            panic!("{report}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handle_and_builder_can_be_shared_across_tasks() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<MockSwap>();
        send_sync::<MockSwapBuilder>();
    }
}
