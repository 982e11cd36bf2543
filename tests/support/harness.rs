//! The cross-crate harness: the real `llama-swap-server` in-process on
//! `127.0.0.1:0`, real `mockswap` processes as its upstreams, an SDK client
//! pointed at it, and the probes a test needs to watch both sides.
//!
//! A helper that cannot do its job panics with what it was doing and why: it
//! only ever runs inside a test, where a panic is the failure report.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use llama_swap_client::{Client, RetryPolicy};
use llama_swap_server::config::Config;
use llama_swap_server::{ServeError, ServeOptions, serve_with};
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::events::ServerEvents;
use crate::procs::{self, Process};

/// Generous upper bound for anything a test waits for: it turns a hang into a
/// failure, it is never a measurement.
pub const LIMIT: Duration = Duration::from_secs(30);

/// `target/<profile>` of the running test binary (`target/debug/deps/<test>-<hash>`).
pub fn target_dir() -> PathBuf {
    let exe =
        std::env::current_exe().unwrap_or_else(|e| panic!("cannot locate the test binary: {e}"));
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_else(|| panic!("{} has no target directory", exe.display()))
}

/// A binary built into the target directory (`mockswap`, `examples/priority_tiers`).
pub fn built(relative: &str) -> PathBuf {
    let path = target_dir().join(relative);
    assert!(
        path.exists(),
        "{} is missing: scripts/test builds it (cargo build --workspace --bins; \
         cargo test builds examples)",
        path.display()
    );
    path
}

/// The mockswap binary the server launches as an upstream.
pub fn mockswap_bin() -> PathBuf {
    built("mockswap")
}

/// A port for an upstream's command (the server needs a fixed one), reserved
/// for this test process until it exits: no other test process is handed it
/// ([`mockswap::reserve_port`]; issue 31 #12 and a flaky e2e test, where two
/// test processes drew the same free port).
pub fn free_port() -> u16 {
    mockswap::reserve_port().unwrap_or_else(|e| panic!("no port for an upstream: {e}"))
}

/// Sends the in-process server's log (and its upstreams' output) to the test's
/// captured output, which the test runner shows only for a failed test: a
/// failure in CI then says what the server did. `RUST_LOG` overrides the
/// default (the server's info lines, others' warnings). Once per process.
fn capture_server_log() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("warn,llama_swap_server=info,upstream_output=info")
    });
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// One model of a test config, served by a mockswap process.
#[derive(Debug, Clone)]
pub struct Upstream {
    id: String,
    args: String,
    yaml: String,
}

impl Upstream {
    /// A model served by a mockswap with default flags.
    pub fn new(id: &str) -> Upstream {
        Upstream {
            id: id.to_owned(),
            args: String::new(),
            yaml: String::new(),
        }
    }

    /// A model whose mockswap holds every request at its closed gate until the
    /// test opens it (each new process starts closed again).
    pub fn gated(id: &str) -> Upstream {
        Upstream::new(id).args("--gate-closed")
    }

    /// Extra mockswap flags (`--tokens-per-second 2`, ...).
    #[must_use]
    pub fn args(mut self, args: &str) -> Upstream {
        self.args = format!("{} {args}", self.args);
        self
    }

    /// Extra YAML keys under the model (one per line, no indentation needed).
    #[must_use]
    pub fn yaml(mut self, yaml: &str) -> Upstream {
        self.yaml.push_str(yaml);
        self.yaml.push('\n');
        self
    }
}

/// One waiter of `GET /api/queue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    /// Model ID the request waits for.
    pub model: String,
    /// The `X-Priority` the request carried (0 when absent).
    pub requested_priority: i64,
    /// `max(config floor, requested)`.
    pub effective_priority: i64,
    /// 1-based place in the queue.
    pub position: u64,
    /// What it waits for: `"slots full"` (its model's `parallel` slots are
    /// taken) or `"swap"`.
    pub reason: String,
}

impl Waiter {
    fn from_json(entry: &Value) -> Waiter {
        let int = |key: &str| {
            entry[key]
                .as_i64()
                .unwrap_or_else(|| panic!("queue entry without integer {key}: {entry}"))
        };
        Waiter {
            model: entry["model"]
                .as_str()
                .unwrap_or_else(|| panic!("queue entry without model: {entry}"))
                .to_owned(),
            requested_priority: int("requested_priority"),
            effective_priority: int("effective_priority"),
            position: entry["position"]
                .as_u64()
                .unwrap_or_else(|| panic!("queue entry without position: {entry}")),
            reason: entry["reason"]
                .as_str()
                .unwrap_or_else(|| panic!("queue entry without reason: {entry}"))
                .to_owned(),
        }
    }
}

/// The model IDs of a queue snapshot, in queue order.
pub fn models_of(queue: &[Waiter]) -> Vec<&str> {
    queue.iter().map(|w| w.model.as_str()).collect()
}

/// A running server, its upstream ports, and clients for it.
pub struct Stack {
    base: String,
    http: reqwest::Client,
    client: Client,
    ports: BTreeMap<String, u16>,
    upstream_bin: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServeError>>>,
}

impl Stack {
    /// Starts the server for `upstreams` with `global_yaml` appended at the top
    /// level of the config (`sendLoadingState: true`, `routing: ...`).
    pub async fn start(upstreams: &[Upstream], global_yaml: &str) -> Stack {
        let mockswap = mockswap_bin();
        let mut yaml = String::from("healthCheckTimeout: 15\nmodels:\n");
        let mut ports = BTreeMap::new();
        for u in upstreams {
            let port = free_port();
            ports.insert(u.id.clone(), port);
            yaml.push_str(&format!(
                "  {id}:\n    cmd: {bin} --listen 127.0.0.1:{port} --models {id} {args}\n    proxy: http://127.0.0.1:{port}\n",
                id = u.id,
                bin = mockswap.display(),
                args = u.args.trim(),
            ));
            for line in u.yaml.lines().filter(|l| !l.trim().is_empty()) {
                yaml.push_str(&format!("    {}\n", line.trim()));
            }
        }
        yaml.push_str(global_yaml);
        Stack::serve(&yaml, ports, mockswap).await
    }

    async fn serve(yaml: &str, ports: BTreeMap<String, u16>, mockswap: PathBuf) -> Stack {
        let loaded = Config::loader()
            .yaml("e2e.yaml", yaml)
            .env(&|_: &str| None)
            .load()
            .unwrap_or_else(|e| panic!("test config does not load: {e}\n{yaml}"));
        Stack::launch(loaded.config, ports, mockswap).await
    }

    /// Serves a loaded configuration whose models run `upstream_bin` on the
    /// ports the configuration gives them ([`shutdown`](Self::shutdown) checks
    /// that none of those processes is left).
    pub async fn serve_config(config: Config, upstream_bin: &Path) -> Stack {
        let ports: BTreeMap<String, u16> = config
            .models
            .iter()
            .filter_map(|m| m.port.map(|p| (m.id.clone(), p)))
            .collect();
        Stack::launch(config, ports, upstream_bin.to_path_buf()).await
    }

    async fn launch(config: Config, ports: BTreeMap<String, u16>, upstream_bin: PathBuf) -> Stack {
        capture_server_log();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("cannot bind the server's listener: {e}"));
        let addr: SocketAddr = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("listener has no address: {e}"));
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_with(
            listener,
            config,
            ServeOptions::default(),
            async {
                let _ = rx.await;
            },
        ));
        let base = format!("http://{addr}");
        // No retries unless a test asks for them, so every error surfaces as sent.
        let client = Client::builder()
            .base_url(&base)
            .retry_policy(RetryPolicy::none())
            .build()
            .unwrap_or_else(|e| panic!("cannot build the SDK client: {e}"));
        // Upstream processes restart on the same port: a pooled connection to a
        // process that was just stopped would fail the next probe.
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap_or_else(|e| panic!("cannot build the probe client: {e}"));
        Stack {
            base,
            http,
            client,
            ports,
            upstream_bin,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// `http://127.0.0.1:<port>` of the server.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The SDK client for the server (no retries; tests opt in per call).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The base URL of a model's mockswap process.
    pub fn upstream_url(&self, model: &str) -> String {
        let port = self
            .ports
            .get(model)
            .unwrap_or_else(|| panic!("no upstream named {model}"));
        format!("http://127.0.0.1:{port}")
    }

    /// `GET /api/queue`, in queue order.
    pub async fn queue(&self) -> Vec<Waiter> {
        let body = self.get_json(&format!("{}/api/queue", self.base)).await;
        body["queue"]
            .as_array()
            .unwrap_or_else(|| panic!("/api/queue without a queue array: {body}"))
            .iter()
            .map(Waiter::from_json)
            .collect()
    }

    /// `GET /running`: the IDs of models whose process is not stopped.
    pub async fn running(&self) -> Vec<String> {
        let body = self.get_json(&format!("{}/running", self.base)).await;
        body["running"]
            .as_array()
            .unwrap_or_else(|| panic!("/running without a running array: {body}"))
            .iter()
            .filter_map(|m| m["model"].as_str().map(str::to_owned))
            .collect()
    }

    async fn get_json(&self, url: &str) -> Value {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        response
            .json()
            .await
            .unwrap_or_else(|e| panic!("GET {url}: body is not JSON: {e}"))
    }

    /// Waits until `/api/queue` holds exactly `n` waiters and returns them.
    pub async fn wait_queue_len(&self, n: usize) -> Vec<Waiter> {
        self.wait_for(&format!("{n} waiter(s) in /api/queue"), || async {
            let queue = self.queue().await;
            (queue.len() == n).then_some(queue)
        })
        .await
    }

    /// How many requests a model's mockswap holds at its gate; `None` while no
    /// process answers on its port.
    pub async fn held(&self, model: &str) -> Option<u64> {
        let url = format!("{}/__mockswap/gate", self.upstream_url(model));
        let state: Value = self.http.get(url).send().await.ok()?.json().await.ok()?;
        state["held"].as_u64()
    }

    /// Long-polls a model's mockswap until its gate holds at least `n` requests
    /// (mockswap answers on its gate's own change notification) and returns the
    /// count; `None` while no process answers on its port.
    async fn held_at_least(&self, model: &str, n: u64) -> Option<u64> {
        let url = format!(
            "{}/__mockswap/gate?wait_held={n}&timeout_ms={}",
            self.upstream_url(model),
            LIMIT.as_millis()
        );
        let response = self.http.get(&url).send().await.ok()?;
        assert_eq!(
            response.status(),
            200,
            "{model} did not hold {n} request(s) within {LIMIT:?}"
        );
        let state: Value = response.json().await.ok()?;
        state["held"].as_u64()
    }

    /// Waits until a model's mockswap holds exactly `n` requests at its gate.
    /// Until its process answers, the wait follows the server's events (the
    /// model becoming ready is one).
    pub async fn wait_held(&self, model: &str, n: u64) {
        self.wait_for(&format!("{model} holding {n} request(s)"), || async {
            (self.held_at_least(model, n).await == Some(n)).then_some(())
        })
        .await;
    }

    /// Waits until exactly one of `candidates` holds a request at its gate and
    /// returns it: with one model running at a time, that is the waiter the
    /// scheduler picked next. Failing fast on the wrong one beats waiting for
    /// the right one until the limit.
    ///
    /// Woken by the server's events and by a long-poll on every candidate's
    /// gate, whichever answers first: the server has no event for a request
    /// reaching the upstream, the upstream none for starting.
    pub async fn next_started(&self, candidates: &[&str]) -> String {
        let what = format!("one of {candidates:?} to hold a request");
        let mut events = self.events().await;
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            let mut started = Vec::new();
            for model in candidates {
                if self.held(model).await.unwrap_or(0) > 0 {
                    started.push((*model).to_owned());
                }
            }
            assert!(
                started.len() <= 1,
                "several models serve at once: {started:?}"
            );
            if let Some(model) = started.pop() {
                return model;
            }
            // A gate that does not answer (no process yet) must not end the race.
            let gates = candidates.iter().map(|model| {
                Box::pin(async move {
                    if self.held_at_least(model, 1).await.is_none() {
                        std::future::pending::<()>().await;
                    }
                })
            });
            tokio::select! {
                changed = events.changed(deadline) => assert!(changed, "waited {LIMIT:?} for {what}"),
                _ = futures::future::select_all(gates) => {}
            }
        }
    }

    /// Opens a model's gate: the requests it holds proceed, later ones pass.
    pub async fn open_gate(&self, model: &str) {
        self.set_gate(model, true).await;
    }

    /// Closes a model's gate: later requests are held.
    pub async fn close_gate(&self, model: &str) {
        self.set_gate(model, false).await;
    }

    async fn set_gate(&self, model: &str, open: bool) {
        let url = format!("{}/__mockswap/gate", self.upstream_url(model));
        let response = self
            .http
            .post(&url)
            .json(&json!({ "open": open }))
            .send()
            .await
            .unwrap_or_else(|e| panic!("POST {url}: {e}"));
        assert_eq!(response.status(), 200, "POST {url}");
    }

    /// The journal of a model's current mockswap process (`None` when none runs).
    pub async fn journal(&self, model: &str) -> Option<Vec<Value>> {
        let url = format!("{}/__mockswap/requests", self.upstream_url(model));
        self.http.get(url).send().await.ok()?.json().await.ok()
    }

    /// Subscribes to the server's `/api/events`.
    pub async fn events(&self) -> ServerEvents {
        ServerEvents::subscribe(&self.http, &self.base, None).await
    }

    /// Evaluates `probe` now and again on every change the server publishes
    /// (`/api/events`: queue, model states, requests in flight, activity) until
    /// it yields a value; panics naming `what` after [`LIMIT`]. The probe must
    /// read server state (or wait on its own, like a mockswap long-poll): a
    /// change only an upstream sees wakes nothing here.
    pub async fn wait_for<T, F, Fut>(&self, what: &str, probe: F) -> T
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Option<T>>,
    {
        self.events().await.until(what, probe).await
    }

    /// Stops the server, checks that `serve` returned `Ok` and that none of the
    /// upstream processes it started is left.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let task = self
            .task
            .take()
            .unwrap_or_else(|| panic!("shutdown called twice"));
        match tokio::time::timeout(LIMIT, task).await {
            Err(_) => panic!("serve did not return within {LIMIT:?} of the shutdown signal"),
            Ok(Err(join)) => panic!("serve panicked: {join}"),
            Ok(Ok(Err(e))) => panic!("serve returned an error: {e}"),
            Ok(Ok(Ok(()))) => {}
        }
        let ports: Vec<u16> = self.ports.values().copied().collect();
        let left = procs::listening_on(&self.upstream_bin, &ports);
        assert!(
            left.is_empty(),
            "upstream processes left after shutdown: {left:?}"
        );
    }

    /// The upstream processes of this stack that are alive now.
    pub fn live_upstreams(&self) -> Vec<Process> {
        let ports: Vec<u16> = self.ports.values().copied().collect();
        procs::listening_on(&self.upstream_bin, &ports)
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // A failed test unwinds here: the runtime drops the serve task and the
        // supervisor's drop kills every process group it started.
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Awaits a spawned call with [`LIMIT`] as the upper bound.
pub async fn finish<T>(what: &str, handle: JoinHandle<T>) -> T {
    match tokio::time::timeout(LIMIT, handle).await {
        Err(_) => panic!("{what} did not finish within {LIMIT:?}"),
        Ok(Err(join)) => panic!("{what} panicked: {join}"),
        Ok(Ok(value)) => value,
    }
}
