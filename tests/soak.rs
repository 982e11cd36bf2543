//! Reliability soak (docs/DESIGN.md section 8): the real `llama-swap-server` binary with real
//! `mockswap` upstream processes under a seeded mix of models, priorities, streaming and
//! client disconnects (while queued, mid-swap, mid-stream), one upstream that crashes
//! every few requests, a priority-order phase, clients trickling bodies they never
//! finish, requests forwarded to a peer (a second server) beside log and event
//! subscribers that never read, a reload with requests in flight, and a shutdown with
//! work in flight.
//!
//! Asserted: every request resolves within a generous bound; no server error; the queue
//! is empty and nothing is left in flight afterwards; requests are served in priority
//! order; SIGTERM stops the server cleanly and leaves no process behind (every process
//! carrying this run's environment marker is gone).
//!
//! Short by default (a few seconds, 300 requests); `SOAK_REQUESTS=5000` for a long run,
//! `SOAK_SEED=<n>` for another deterministic mix. Needs the binaries built first
//! (`cargo build --workspace --bins`, which `scripts/test` does).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use llama_swap_suite::events::ServerEvents;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

/// No request may take longer than this (the longest legitimate one is a few swaps).
const REQUEST_BOUND: Duration = Duration::from_secs(60);
/// Stable models (never fail) and the one whose upstream crashes.
const STABLE: [&str; 3] = ["alpha", "beta", "gamma"];
const CRASHY: &str = "crashy";
/// Models of the priority-order phase, and the one held busy while its queue fills.
const ORDERED: [&str; 4] = ["p1", "p2", "p3", "p4"];
const HOLD: &str = "hold";
/// A model whose only request disconnects while queued, and the file its start would leave.
const GHOST: &str = "ghost";
const GHOST_TRACE: &str = "ghost-started";

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Directory of the workspace binaries: this test runs from `target/<profile>/deps`.
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap();
    let dir = if dir.ends_with("deps") {
        dir.parent().unwrap()
    } else {
        dir
    };
    for bin in ["mockswap", "llama-swap-server"] {
        assert!(
            dir.join(bin).is_file(),
            "{} is missing: run `cargo build --workspace --bins` first (scripts/test does)",
            dir.join(bin).display()
        );
    }
    dir.to_path_buf()
}

/// The first of `count` consecutive free ports, reserved for this process
/// ([`mockswap::reserve_ports`]: below the kernel's ephemeral range, so they cannot
/// collide with the local ends of client connections, and never handed to another
/// test process).
fn upstream_ports(count: u16) -> u16 {
    mockswap::reserve_ports(count).unwrap_or_else(|e| panic!("no {count} ports: {e}"))
}

/// The model only the peer serves, reached through the soak's server.
const REMOTE: &str = "remote";

/// The peer: a second server whose only model is [`REMOTE`].
fn peer_config(bin: &Path) -> String {
    let port = upstream_ports(1);
    format!(
        "healthCheckTimeout: 30\nmodels:\n  {REMOTE}:\n    cmd: {} --listen 127.0.0.1:{port} --load-time 20ms --tokens-per-second 400\n    proxy: http://127.0.0.1:{port}\n    concurrencyLimit: 1000\n",
        bin.join("mockswap").display()
    )
}

/// The model the reload phase adds.
const ADDED: &str = "delta";
/// `requestBodyTimeout` of the soak's server, short so the slow-body phase is quick.
const BODY_TIMEOUT_SECS: u64 = 2;

fn config(bin: &Path, dir: &Path) -> String {
    let mock = bin.join("mockswap");
    let entry = |name: &str, args: &str| {
        format!(
            "  {name}:\n    cmd: {} --listen 127.0.0.1:${{PORT}} {args}\n    proxy: http://127.0.0.1:${{PORT}}\n    concurrencyLimit: 1000\n",
            mock.display()
        )
    };
    let mut yaml = format!(
        "healthCheckTimeout: 30\nrequestBodyTimeout: {BODY_TIMEOUT_SECS}\nstartPort: {}\n\
         routing:\n  scheduler:\n    settings:\n      fifo:\n        priority:\n          p1: -5\n          p4: 5\n\
         models:\n",
        upstream_ports(16)
    );
    for model in STABLE {
        yaml.push_str(&entry(
            model,
            "--latency 5ms --load-time 30ms --tokens-per-second 400",
        ));
    }
    yaml.push_str(&entry(
        CRASHY,
        "--load-time 30ms --crash-after 4 --tokens-per-second 400",
    ));
    for model in ORDERED {
        yaml.push_str(&entry(model, "--load-time 20ms"));
    }
    yaml.push_str(&entry(HOLD, "--gate-closed"));
    // Never to be started: its only request is withdrawn while queued. Starting it
    // would leave a file behind.
    yaml.push_str(&format!(
        "  {GHOST}:\n    cmd: touch {}\n    proxy: http://127.0.0.1:1\n",
        dir.join(GHOST_TRACE).display()
    ));
    yaml
}

/// `config` as the reload phase writes it: one more model (whose ID sorts
/// before most others; the reload keeps the others' `${PORT}` numbers), and the
/// first stable model's command changed (a longer load time), so that one
/// restarts.
fn config_with(base: &str, bin: &Path, model: &str) -> String {
    let changed = base.replacen(
        "--load-time 30ms --tokens-per-second 400",
        "--load-time 31ms --tokens-per-second 400",
        1,
    );
    assert_ne!(
        changed, base,
        "the first stable model's command was not found"
    );
    // The models come first; top-level sections after them (peers) stay after.
    let (models, rest) = match changed.find("\npeers:") {
        Some(at) => changed.split_at(at + 1),
        None => (changed.as_str(), ""),
    };
    format!(
        "{models}  {model}:\n    cmd: {} --listen 127.0.0.1:${{PORT}} --load-time 20ms\n    proxy: http://127.0.0.1:${{PORT}}\n    concurrencyLimit: 1000\n{rest}",
        bin.join("mockswap").display()
    )
}

/// The server process, its address, and the marker its children inherit.
struct Server {
    child: Child,
    addr: SocketAddr,
    marker: String,
    dir: tempfile::TempDir,
    stdout: tokio::task::JoinHandle<()>,
}

impl Server {
    /// The soak's server, with `extra` (top-level YAML) after its models.
    async fn start(bin: &Path, extra: &str) -> Self {
        Self::start_yaml(bin, |dir| format!("{}{extra}", config(bin, dir))).await
    }

    /// A server for the configuration `yaml` writes (given its directory).
    async fn start_yaml(bin: &Path, yaml: impl FnOnce(&Path) -> String) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.yaml");
        std::fs::write(&path, yaml(dir.path())).unwrap();
        let marker = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let mut child = Command::new(bin.join("llama-swap-server"))
            .arg("--config")
            .arg(&path)
            .args(["--listen", "127.0.0.1:0"])
            .env("SOAK_MARKER", &marker)
            .env("MOCKSWAP_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        // The first stdout line names the bound address; later lines are drained.
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
            .await
            .expect("server printed nothing for 20 s")
            .unwrap()
            .unwrap_or_default();
        let stdout =
            tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let mut server = Self {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            marker,
            dir,
            stdout,
        };
        server.addr = first
            .strip_prefix("listening on http://")
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("unexpected first line {first:?}:\n{}", server.log()));
        server
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }
}

impl Drop for Server {
    /// A failed assertion unwinds past the test's own shutdown: `kill_on_drop` would
    /// SIGKILL the server and orphan its upstreams, so kill every process carrying
    /// this run's marker (the server and its descendants) here instead.
    fn drop(&mut self) {
        for pid in marked_processes(&self.marker) {
            if let Ok(pid) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Every live process whose environment carries `marker` (the server's descendants).
fn marked_processes(marker: &str) -> Vec<u32> {
    let needle = format!("SOAK_MARKER={marker}");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ
            .split(|b| *b == 0)
            .any(|var| var == needle.as_bytes())
        {
            // A zombie still listed but already dead has no threads to run: skip it.
            let state = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            if !state.contains(") Z ") {
                found.push(pid);
            }
        }
    }
    found
}

#[derive(Debug, Clone, Copy)]
enum Header {
    Absent,
    Value(i32),
    Garbage,
}

#[derive(Debug, Clone, Copy)]
enum Cut {
    Never,
    /// The client goes away after this long (queued, mid-swap or mid-response).
    After(Duration),
    /// The client goes away after the first streamed chunk.
    MidStream,
}

#[derive(Debug, Clone)]
struct Spec {
    model: &'static str,
    header: Header,
    stream: bool,
    cut: Cut,
}

#[derive(Debug)]
enum Outcome {
    /// A status and, for streams, whether `[DONE]` arrived.
    Answered { status: u16, complete: bool },
    /// We went away on purpose.
    Cut,
    /// The connection failed.
    Transport(#[allow(dead_code, reason = "read through Debug in failure messages")] String),
    /// Nothing within the bound.
    Hung,
}

fn spec(rng: &mut StdRng) -> Spec {
    let model = if rng.random_bool(0.15) {
        CRASHY
    } else {
        STABLE[rng.random_range(0..STABLE.len())]
    };
    let header = match rng.random_range(0..6) {
        0 | 1 => Header::Absent,
        2 => Header::Value(10),
        3 => Header::Value(-10),
        4 => Header::Value(rng.random_range(-3..=3)),
        _ => Header::Garbage,
    };
    let stream = rng.random_bool(0.4);
    let cut = match rng.random_range(0..10) {
        0 => Cut::After(Duration::from_millis(rng.random_range(0..120))),
        1 if stream => Cut::MidStream,
        _ => Cut::Never,
    };
    Spec {
        model,
        header,
        stream,
        cut,
    }
}

fn chat(
    client: &reqwest::Client,
    server: &Server,
    model: &str,
    header: Header,
    stream: bool,
) -> reqwest::RequestBuilder {
    let mut request = client
        .post(server.url("/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(
            serde_json::json!({
                "model": model,
                "stream": stream,
                "messages": [{"role": "user", "content": "one two three four five six"}],
            })
            .to_string(),
        );
    match header {
        Header::Absent => {}
        Header::Value(v) => request = request.header("x-priority", v.to_string()),
        Header::Garbage => request = request.header("x-priority", "high, 3"),
    }
    request
}

async fn send(client: reqwest::Client, server: Arc<Server>, spec: Spec) -> Outcome {
    let exchange = async {
        let response = match chat(&client, &server, spec.model, spec.header, spec.stream)
            .send()
            .await
        {
            Ok(response) => response,
            Err(err) => return Outcome::Transport(err.to_string()),
        };
        let status = response.status().as_u16();
        let mut body = response.bytes_stream();
        let mut text = Vec::new();
        while let Some(chunk) = body.next().await {
            match chunk {
                Ok(bytes) => {
                    text.extend_from_slice(&bytes);
                    if matches!(spec.cut, Cut::MidStream) {
                        return Outcome::Cut;
                    }
                }
                Err(_) => break,
            }
        }
        let complete = !spec.stream || String::from_utf8_lossy(&text).contains("data: [DONE]");
        Outcome::Answered { status, complete }
    };
    let bound = match spec.cut {
        Cut::After(after) => after,
        _ => REQUEST_BOUND,
    };
    match tokio::time::timeout(bound, exchange).await {
        Ok(outcome) => outcome,
        Err(_) if matches!(spec.cut, Cut::After(_)) => Outcome::Cut,
        Err(_) => Outcome::Hung,
    }
}

/// Evaluates `probe` now and again on every change the server publishes on
/// `/api/events` (a reload renews the subscription) until it yields a value, or
/// `None` once `deadline` has passed.
async fn on_events<T, F, Fut>(
    client: &reqwest::Client,
    server: &Server,
    deadline: Instant,
    probe: F,
) -> Option<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let mut events = ServerEvents::subscribe(client, &server.url(""), None).await;
    let deadline = tokio::time::Instant::from_std(deadline);
    loop {
        if let Some(value) = probe().await {
            return Some(value);
        }
        if !events.changed(deadline).await {
            return None;
        }
    }
}

async fn get_queue(client: &reqwest::Client, server: &Server) -> serde_json::Value {
    client
        .get(server.url("/api/queue"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Waits until `GET /api/queue` is empty; returns the last answer.
async fn queue_drained(client: &reqwest::Client, server: &Server) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    let drained = on_events(client, server, deadline, || async {
        let queue = get_queue(client, server).await;
        waiters(&queue).is_empty().then_some(queue)
    })
    .await;
    match drained {
        Some(queue) => queue,
        None => get_queue(client, server).await,
    }
}

/// The non-zero in-progress and queue-depth lines of `/metrics`.
async fn busy_lines(client: &reqwest::Client, server: &Server) -> Vec<String> {
    let text = client
        .get(server.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        text.contains("llamaswap_requests_in_progress"),
        "/metrics has no llamaswap_requests_in_progress:\n{text}"
    );
    text.lines()
        .filter(|l| {
            l.starts_with("llamaswap_requests_in_progress")
                || l.starts_with("llamaswap_queue_depth")
        })
        .filter(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) != Some(0.0))
        .map(str::to_owned)
        .collect()
}

/// Waits until `/metrics` shows nothing in progress or queued; returns the non-zero lines.
async fn idle_metrics(client: &reqwest::Client, server: &Server) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    let idle = on_events(client, server, deadline, || async {
        busy_lines(client, server).await.is_empty().then_some(())
    })
    .await;
    match idle {
        Some(()) => Vec::new(),
        None => busy_lines(client, server).await,
    }
}

/// Once the server holds some requests in progress or queued, bounded by
/// `within` (they may all finish first).
async fn some_busy(client: &reqwest::Client, server: &Server, within: Duration) {
    let deadline = Instant::now() + within;
    on_events(client, server, deadline, || async {
        (!busy_lines(client, server).await.is_empty()).then_some(())
    })
    .await;
}

/// Waits until `GET /api/queue` lists exactly `n` waiters.
async fn queue_reaches(client: &reqwest::Client, server: &Server, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let reached = on_events(client, server, deadline, || async {
        (waiters(&get_queue(client, server).await).len() == n).then_some(())
    })
    .await;
    if reached.is_none() {
        let queue = get_queue(client, server).await;
        panic!("the queue never held {n} waiters: {queue}");
    }
}

/// The waiters of a `GET /api/queue` answer, in the order listed.
fn waiters(queue: &serde_json::Value) -> Vec<serde_json::Value> {
    queue
        .as_array()
        .or_else(|| queue.get("queue").and_then(|q| q.as_array()))
        .or_else(|| queue.get("waiting").and_then(|q| q.as_array()))
        .cloned()
        .unwrap_or_default()
}

/// The mixed phase: every request resolves, and only as its model allows.
async fn mixed_phase(client: &reqwest::Client, server: &Arc<Server>, requests: usize, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let specs: Vec<Spec> = (0..requests).map(|_| spec(&mut rng)).collect();
    let in_flight = Arc::new(Semaphore::new(env_or("SOAK_CLIENTS", 24)));
    let mut set = JoinSet::new();
    for (i, spec) in specs.into_iter().enumerate() {
        let permit = Arc::clone(&in_flight).acquire_owned().await.unwrap();
        let (client, server) = (client.clone(), Arc::clone(server));
        set.spawn(async move {
            let outcome = send(client, server, spec.clone()).await;
            drop(permit);
            (i, spec, outcome)
        });
    }
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (i, spec, outcome) = joined.unwrap();
        let key = match &outcome {
            Outcome::Answered { status, .. } => format!("{}:{status}", spec.model == CRASHY),
            other => format!("{}:{other:?}", spec.model == CRASHY)
                .chars()
                .take(40)
                .collect(),
        };
        *tally.entry(key).or_default() += 1;
        let acceptable = match (&outcome, spec.model == CRASHY) {
            (Outcome::Hung, _) => false,
            (Outcome::Cut, _) => true,
            (
                Outcome::Answered {
                    status: 200,
                    complete,
                },
                crashy,
            ) => *complete || crashy,
            // A crashing upstream may fail the requests it had (502) or was starting (502/503).
            (
                Outcome::Answered {
                    status: 502 | 503, ..
                },
                true,
            ) => true,
            (Outcome::Transport(_), true) => true,
            _ => false,
        };
        if !acceptable {
            failures.push(format!("request {i} {spec:?}: {outcome:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} requests ended wrongly (tally {tally:?}):\n{}\nserver log:\n{}",
        failures.len(),
        failures.join("\n"),
        server.log()
    );
    eprintln!("mixed phase: {requests} requests, outcomes (crashy:status) {tally:?}");
}

/// The slow-body phase: clients that declare a 1 MB body and trickle a few bytes of
/// it are answered 408 at `requestBodyTimeout` and closed, while ordinary requests
/// sent meanwhile are served.
async fn slow_body_phase(client: &reqwest::Client, server: &Arc<Server>, rng: &mut StdRng) {
    const SLOW: usize = 16;
    let mut slow = JoinSet::new();
    for _ in 0..SLOW {
        let addr = server.addr;
        slow.spawn(async move {
            let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream
                .write_all(
                    b"POST /v1/chat/completions HTTP/1.1\r\nhost: soak\r\n\
                      content-type: application/json\r\ncontent-length: 1048576\r\n\r\n{",
                )
                .await
                .unwrap();
            // The client's pace, not a synchronisation: a byte every 100 ms for
            // half the timeout, then silence (bytes the server has not read when
            // it closes would turn its close into a reset that loses the answer).
            let trickle = Duration::from_secs(BODY_TIMEOUT_SECS) / 2;
            let started = Instant::now();
            while started.elapsed() < trickle {
                tokio::time::sleep(Duration::from_millis(100)).await;
                if stream.write_all(b" ").await.is_err() {
                    break;
                }
            }
            let mut answer = Vec::new();
            let read = tokio::time::timeout(REQUEST_BOUND, stream.read_to_end(&mut answer)).await;
            (read.is_ok(), String::from_utf8_lossy(&answer).into_owned())
        });
    }
    let mut ordinary = JoinSet::new();
    for _ in 0..20 {
        let spec = Spec {
            model: STABLE[rng.random_range(0..STABLE.len())],
            cut: Cut::Never,
            ..spec(rng)
        };
        let (client, server) = (client.clone(), Arc::clone(server));
        ordinary.spawn(async move { (spec.clone(), send(client, server, spec).await) });
    }
    while let Some(joined) = ordinary.join_next().await {
        let (spec, outcome) = joined.unwrap();
        assert!(
            matches!(
                outcome,
                Outcome::Answered {
                    status: 200,
                    complete: true
                }
            ),
            "request beside the slow bodies {spec:?}: {outcome:?}\n{}",
            server.log()
        );
    }
    while let Some(joined) = slow.join_next().await {
        let (closed, answer) = joined.unwrap();
        assert!(closed, "a slow body's connection was not closed");
        assert!(
            answer.starts_with("HTTP/1.1 408") && answer.contains("request_timeout"),
            "a slow body was answered {answer:?}"
        );
    }
    eprintln!(
        "slow-body phase: {SLOW} trickling bodies answered 408, 20 requests beside them served"
    );
}

/// The reload phase: SIGHUP with a configuration that adds a model and changes
/// one, while requests are in flight. The added model sorts before most others,
/// yet they keep their `${PORT}` numbers and so their processes; the changed one
/// restarts once its requests in flight end. Either way every request is served
/// (only the crashing upstream may fail), none is refused with 503, and the new
/// model is then served.
async fn reload_phase(
    client: &reqwest::Client,
    server: &Arc<Server>,
    bin: &Path,
    rng: &mut StdRng,
) {
    let path = server.dir.path().join("config.yaml");
    let base = std::fs::read_to_string(&path).unwrap();
    std::fs::write(&path, config_with(&base, bin, ADDED)).unwrap();
    let mut set = JoinSet::new();
    for _ in 0..40 {
        let spec = Spec {
            cut: Cut::Never,
            ..spec(rng)
        };
        let (client, server) = (client.clone(), Arc::clone(server));
        set.spawn(async move { (spec.clone(), send(client, server, spec).await) });
    }
    // Once the server holds some of them (bounded: they may all finish first).
    some_busy(client, server, Duration::from_secs(5)).await;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(server.child.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).unwrap();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    while let Some(joined) = set.join_next().await {
        let (spec, outcome) = joined.unwrap();
        let crashy = spec.model == CRASHY;
        let acceptable = match &outcome {
            Outcome::Answered {
                status: 200,
                complete,
            } => *complete || crashy,
            // The crashing upstream's requests may fail (502, or 503 when its
            // restart fails); never one of a healthy model, kept or changed.
            Outcome::Answered {
                status: 502 | 503, ..
            }
            | Outcome::Transport(_) => crashy,
            _ => false,
        };
        assert!(
            acceptable,
            "request across the reload {spec:?}: {outcome:?}\n{}",
            server.log()
        );
        if let Outcome::Answered { status, .. } = outcome {
            *tally.entry(format!("{crashy}:{status}")).or_default() += 1;
        }
    }
    // The new configuration is in force: the added model is listed and served.
    // The reload ends the event stream of the state it replaces; the next
    // subscription lists the new model.
    let deadline = Instant::now() + REQUEST_BOUND;
    let listed = on_events(client, server, deadline, || async {
        let models: serde_json::Value = client
            .get(server.url("/v1/models"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        models["data"]
            .as_array()
            .is_some_and(|rows| rows.iter().any(|m| m["id"] == ADDED))
            .then_some(())
    })
    .await;
    assert!(
        listed.is_some(),
        "{ADDED} never listed after the reload:\n{}",
        server.log()
    );
    let outcome = send(
        client.clone(),
        Arc::clone(server),
        Spec {
            model: ADDED,
            header: Header::Absent,
            stream: false,
            cut: Cut::Never,
        },
    )
    .await;
    assert!(
        matches!(
            outcome,
            Outcome::Answered {
                status: 200,
                complete: true
            }
        ),
        "the added model after the reload: {outcome:?}\n{}",
        server.log()
    );
    eprintln!("reload phase: 40 requests across a reload, outcomes (crashy:status) {tally:?}");
}

/// The priority phase: `hold` is busy (its upstream's gate is closed), requests for
/// p1..p4 queue one by one with known arrival order; once the gate opens they must be
/// served model by model in (effective priority, first arrival) order.
async fn priority_phase(client: &reqwest::Client, server: &Arc<Server>, rng: &mut StdRng) {
    let holder = {
        let (client, server) = (client.clone(), Arc::clone(server));
        tokio::spawn(async move {
            chat(&client, &server, HOLD, Header::Absent, false)
                .send()
                .await
                .map(|r| r.status())
        })
    };
    // Wait for the held request to reach the upstream's gate: the server's
    // events until the model is ready (its address is in `/running`), then
    // mockswap's long-poll on the gate, asked directly so that the wait is not
    // itself a request the scheduler sees.
    let wait = Duration::from_secs(20);
    let proxy = on_events(client, server, Instant::now() + wait, || async {
        let running: serde_json::Value = client
            .get(server.url("/running"))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        running["running"].as_array()?.iter().find_map(|m| {
            (m["model"] == HOLD && m["state"] == "ready")
                .then(|| m["proxy"].as_str().map(str::to_owned))
                .flatten()
        })
    })
    .await
    .unwrap_or_else(|| panic!("{HOLD} never became ready:\n{}", server.log()));
    let gate: serde_json::Value = client
        .get(format!(
            "{proxy}/__mockswap/gate?wait_held=1&timeout_ms={}",
            wait.as_millis()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        gate["held"], 1,
        "the hold request never reached its upstream: {gate}"
    );
    // One header per model.
    let headers: Vec<Header> = ORDERED
        .iter()
        .map(|_| match rng.random_range(0..4) {
            0 => Header::Absent,
            1 => Header::Garbage,
            2 => Header::Value(rng.random_range(1..=9)),
            _ => Header::Value(-rng.random_range(1..=9)),
        })
        .collect();
    let effective = |m: usize| {
        let header = match headers[m] {
            Header::Value(v) => v,
            Header::Absent | Header::Garbage => 0,
        };
        // Config floors: p1 -5, p4 5; the others have none and rank by the header
        // alone (a header can raise a floor, never go below it).
        match ORDERED[m] {
            "p1" => header.max(-5),
            "p4" => header.max(5),
            _ => header,
        }
    };
    let arrivals: Vec<usize> = (0..8).map(|_| rng.random_range(0..ORDERED.len())).collect();
    let mut waiting = JoinSet::new();
    for (n, &m) in arrivals.iter().enumerate() {
        let (task_client, task_server, header) = (client.clone(), Arc::clone(server), headers[m]);
        waiting.spawn(async move {
            let status = chat(&task_client, &task_server, ORDERED[m], header, false)
                .send()
                .await
                .map(|r| r.status().as_u16());
            (n, m, status, Instant::now())
        });
        // Arrival order is the contract under test: wait until this one is queued.
        queue_reaches(client, server, n + 1).await;
    }
    // A client that goes away while queued is removed and never causes a model load.
    let ghost = {
        let (client, server) = (client.clone(), Arc::clone(server));
        tokio::spawn(async move {
            chat(&client, &server, GHOST, Header::Value(100), false)
                .send()
                .await
                .map(|r| r.status())
        })
    };
    queue_reaches(client, server, arrivals.len() + 1).await;
    ghost.abort();
    queue_reaches(client, server, arrivals.len()).await;

    // The queue ranks them: position order is effective priority descending.
    let queue: serde_json::Value = client
        .get(server.url("/api/queue"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = waiters(&queue);
    let ranks: Vec<i64> = listed
        .iter()
        .map(|w| {
            w.get("effective_priority")
                .and_then(serde_json::Value::as_i64)
                .unwrap()
        })
        .collect();
    assert!(
        ranks.windows(2).all(|w| w[0] >= w[1]),
        "queue not ranked: {queue}"
    );
    for waiter in &listed {
        let model = waiter
            .get("model")
            .and_then(serde_json::Value::as_str)
            .unwrap();
        let m = ORDERED.iter().position(|o| *o == model).unwrap();
        assert_eq!(
            waiter
                .get("effective_priority")
                .and_then(serde_json::Value::as_i64),
            Some(i64::from(effective(m))),
            "effective priority of {model} with header {:?}",
            headers[m]
        );
    }
    // Open the gate; this request must pass the fence, so it outranks every waiter.
    let opened = client
        .post(server.url(&format!("/upstream/{HOLD}/__mockswap/gate")))
        .header("x-priority", "100")
        .json(&serde_json::json!({"open": true}))
        .send()
        .await
        .unwrap();
    assert!(opened.status().is_success(), "gate: {}", opened.status());
    assert_eq!(holder.await.unwrap().unwrap(), 200);
    let mut done = Vec::new();
    while let Some(joined) = waiting.join_next().await {
        let (n, m, status, at) = joined.unwrap();
        assert_eq!(
            status.ok(),
            Some(200),
            "priority phase request {n} for {}:\n{}",
            ORDERED[m],
            server.log()
        );
        done.push((m, at));
    }
    assert!(
        !server.dir.path().join(GHOST_TRACE).exists(),
        "the withdrawn request started its model"
    );
    // Expected model order: by effective priority, then by first arrival.
    let mut models: Vec<usize> = Vec::new();
    for &m in &arrivals {
        if !models.contains(&m) {
            models.push(m);
        }
    }
    models.sort_by_key(|&m| std::cmp::Reverse(effective(m)));
    for pair in models.windows(2) {
        let last_of_first = done
            .iter()
            .filter(|(m, _)| *m == pair[0])
            .map(|(_, t)| *t)
            .max()
            .unwrap();
        let first_of_next = done
            .iter()
            .filter(|(m, _)| *m == pair[1])
            .map(|(_, t)| *t)
            .min()
            .unwrap();
        assert!(
            last_of_first < first_of_next,
            "{} (priority {}) was served after {} (priority {}); arrivals {:?}, headers {:?}",
            ORDERED[pair[0]],
            effective(pair[0]),
            ORDERED[pair[1]],
            effective(pair[1]),
            arrivals.iter().map(|&m| ORDERED[m]).collect::<Vec<_>>(),
            headers
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn soak_every_request_resolves_in_priority_order_and_nothing_is_left_behind() {
    let bin = bin_dir();
    let requests = env_or("SOAK_REQUESTS", 300usize);
    let seed = env_or("SOAK_SEED", 0x50a4_u64);
    let peer = Server::start_yaml(&bin, |_| peer_config(&bin)).await;
    let peers = format!(
        "peers:\n  far:\n    proxy: http://{}\n    models: [{REMOTE}]\n",
        peer.addr
    );
    let server = Arc::new(Server::start(&bin, &peers).await);
    let client = reqwest::Client::builder().build().unwrap();
    let started = Instant::now();

    mixed_phase(&client, &server, requests, seed).await;
    peer_phase(&client, &server, &peer, seed).await;
    let mut rng = StdRng::seed_from_u64(seed ^ 0xface);
    for _ in 0..requests.div_ceil(300) {
        priority_phase(&client, &server, &mut rng).await;
    }
    slow_body_phase(&client, &server, &mut rng).await;
    reload_phase(&client, &server, &bin, &mut rng).await;

    let queue = queue_drained(&client, &server).await;
    assert!(
        waiters(&queue).is_empty(),
        "queue not empty after the soak: {queue}"
    );
    let idle = idle_metrics(&client, &server).await;
    assert!(
        idle.is_empty(),
        "scheduler counters not back to zero: {idle:?}"
    );
    let running: serde_json::Value = client
        .get(server.url("/running"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    eprintln!("after the load: /running = {running}");

    // The marker finds the server and its upstreams while they run (else the orphan check
    // below would prove nothing).
    let alive = marked_processes(&server.marker);
    assert!(
        alive.len() >= 2,
        "expected the server and at least one upstream to carry the marker, found {alive:?}"
    );

    // Shutdown with work in flight: every request still resolves.
    let mut last = JoinSet::new();
    let mut rng = StdRng::seed_from_u64(seed ^ 0xdead);
    for _ in 0..6 {
        let (client, server) = (client.clone(), Arc::clone(&server));
        let spec = Spec {
            cut: Cut::Never,
            ..spec(&mut rng)
        };
        last.spawn(async move {
            let crashy = spec.model == CRASHY;
            (crashy, send(client, server, spec).await)
        });
    }
    // Signal once the server holds some of them (bounded: they may all finish first).
    if !last.is_empty() {
        some_busy(&client, &server, Duration::from_secs(5)).await;
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(server.child.id().unwrap()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    while let Some(joined) = last.join_next().await {
        let (crashy, outcome) = joined.unwrap();
        let acceptable = match outcome {
            // Finished, or refused while waiting because the server is shutting down.
            Outcome::Answered {
                status: 200,
                complete,
            } => complete || crashy,
            Outcome::Answered { status: 503, .. } => true,
            Outcome::Answered { status: 502, .. } | Outcome::Transport(_) => crashy,
            _ => false,
        };
        assert!(acceptable, "request during shutdown: {outcome:?}");
    }
    let mut server = Arc::into_inner(server).expect("every request task has ended");
    let status = tokio::time::timeout(Duration::from_secs(45), server.child.wait())
        .await
        .expect("server did not exit within 45 s of SIGTERM")
        .unwrap();
    assert!(
        status.success(),
        "server exit status {status}:\n{}",
        server.log()
    );
    // Its stdout closed with it.
    tokio::time::timeout(Duration::from_secs(5), &mut server.stdout)
        .await
        .unwrap()
        .unwrap();
    let left = marked_processes(&server.marker);
    assert!(
        left.is_empty(),
        "processes left behind after shutdown: {left:?}"
    );
    peer.terminate().await;
    eprintln!(
        "soak: {requests} requests (seed {seed}) in {:?}",
        started.elapsed()
    );
}

impl Server {
    /// SIGTERM, then a clean exit leaving no process carrying its marker.
    async fn terminate(mut self) {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id().unwrap()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let status = tokio::time::timeout(Duration::from_secs(45), self.child.wait())
            .await
            .expect("server did not exit within 45 s of SIGTERM")
            .unwrap();
        assert!(status.success(), "exit status {status}:\n{}", self.log());
        let left = marked_processes(&self.marker);
        assert!(left.is_empty(), "processes left behind: {left:?}");
    }

    /// The server process's resident memory in KiB (`VmRSS`).
    fn rss_kib(&self) -> u64 {
        let status = self
            .child
            .id()
            .and_then(|pid| std::fs::read_to_string(format!("/proc/{pid}/status")).ok())
            .unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    }
}

/// A subscriber of `path` with a tiny receive window that never reads its answer.
async fn stalled_subscriber(server: &Server, path: &str) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(server.addr).await.unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: {}\r\n\r\n", server.addr).as_bytes())
        .await
        .unwrap();
    stream
}

/// The peer phase: requests for a model only the peer serves go through the soak's
/// server (streams, clients that leave mid-stream or early), while subscribers of
/// `/logs/stream` and `/api/events` that never read sit on both servers and one that
/// reads follows the log. Every request resolves; afterwards both servers are idle.
async fn peer_phase(client: &reqwest::Client, server: &Arc<Server>, peer: &Server, seed: u64) {
    const REQUESTS: usize = 60;
    let mut stalled = Vec::new();
    for target in [&**server, peer] {
        for path in ["/logs/stream", "/api/events", "/logs/stream", "/api/events"] {
            stalled.push(stalled_subscriber(target, path).await);
        }
    }
    let following = client.get(server.url("/logs/stream")).send().await.unwrap();
    assert_eq!(following.status(), 200);
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let reader = tokio::spawn(async move {
        let mut body = following.bytes_stream();
        let mut read = 0usize;
        loop {
            tokio::select! {
                _ = &mut stopped => return read,
                chunk = body.next() => match chunk {
                    Some(Ok(bytes)) => read += bytes.len(),
                    _ => return read,
                },
            }
        }
    });
    let rss_before = server.rss_kib();

    let mut rng = StdRng::seed_from_u64(seed ^ 0x9ee4);
    let in_flight = Arc::new(Semaphore::new(12));
    let mut set = JoinSet::new();
    for i in 0..REQUESTS {
        let stream = rng.random_bool(0.5);
        let cut = match rng.random_range(0..10) {
            0 => Cut::After(Duration::from_millis(rng.random_range(0..80))),
            1 | 2 if stream => Cut::MidStream,
            _ => Cut::Never,
        };
        let spec = Spec {
            model: REMOTE,
            header: Header::Absent,
            stream,
            cut,
        };
        let permit = Arc::clone(&in_flight).acquire_owned().await.unwrap();
        let (client, server) = (client.clone(), Arc::clone(server));
        set.spawn(async move {
            let outcome = send(client, server, spec.clone()).await;
            drop(permit);
            (i, spec, outcome)
        });
    }
    let mut failures = Vec::new();
    while let Some(joined) = set.join_next().await {
        let (i, spec, outcome) = joined.unwrap();
        let fine = matches!(
            outcome,
            Outcome::Cut
                | Outcome::Answered {
                    status: 200,
                    complete: true
                }
        );
        if !fine {
            failures.push(format!("request {i} {spec:?}: {outcome:?}"));
        }
    }
    assert!(
        failures.is_empty(),
        "peer requests ended wrongly:\n{}\nserver log:\n{}\npeer log:\n{}",
        failures.join("\n"),
        server.log(),
        peer.log()
    );
    for (name, target) in [("server", &**server), ("peer", peer)] {
        let idle = idle_metrics(client, target).await;
        assert!(
            idle.is_empty(),
            "{name} not idle after the peer phase: {idle:?}"
        );
    }
    let rss_after = server.rss_kib();
    let _ = stop.send(());
    let read = reader.await.unwrap();
    assert!(read > 0, "the reading log subscriber got nothing");
    drop(stalled);
    eprintln!(
        "peer phase: {REQUESTS} requests through the peer beside 8 subscribers that never read; \
         server RSS {rss_before} KiB before, {rss_after} KiB after; the reading subscriber got {read} bytes"
    );
}
