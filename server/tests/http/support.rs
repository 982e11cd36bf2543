//! The end-to-end harness: a real server on `127.0.0.1:0` whose models are real
//! `mockswap` processes, and helpers to drive and observe both.

#[path = "../common/procs.rs"]
mod procs;
pub(crate) use procs::{
    LIMIT, free_port, free_port_run, is_alive, mockswap_bin, processes_listening_on, wait_exit,
};

use std::collections::BTreeMap;
use std::net::SocketAddr;

use llama_swap_server::config::Config;
use llama_swap_server::{ServeError, ServeOptions, serve_reloading};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// One model of a test config.
#[derive(Debug, Clone)]
pub(crate) struct ModelSpec {
    /// Model ID.
    pub id: &'static str,
    /// Extra mockswap flags (`--gate-closed`, `--load-time 200ms`, ...).
    pub args: &'static str,
    /// Extra YAML lines under the model (indented by the harness).
    pub yaml: &'static str,
}

/// A model with default settings and extra mockswap flags.
pub(crate) fn model(id: &'static str, args: &'static str) -> ModelSpec {
    ModelSpec { id, args, yaml: "" }
}

/// A config whose models are mockswap processes listening on the given ports.
pub(crate) fn config_yaml(models: &[(ModelSpec, u16)]) -> String {
    let bin = mockswap_bin();
    let mut yaml = String::from("healthCheckTimeout: 15\nmodels:\n");
    for (m, port) in models {
        // A test may name the upstream's models itself (useModelName).
        let names = if m.args.contains("--models") {
            String::new()
        } else {
            format!("--models {}", m.id)
        };
        yaml.push_str(&format!(
            "  {id}:\n    cmd: {bin} --listen 127.0.0.1:{port} {names} {args}\n    proxy: http://127.0.0.1:{port}\n",
            id = m.id,
            bin = bin.display(),
            args = m.args,
        ));
        for line in m.yaml.lines().filter(|l| !l.trim().is_empty()) {
            yaml.push_str(&format!("    {}\n", line.trim()));
        }
    }
    yaml
}

/// A running server and its upstreams.
pub(crate) struct Harness {
    /// `http://127.0.0.1:<port>` of the server.
    pub base: String,
    /// A client with no timeouts of its own (tests bound waits with `LIMIT`).
    pub http: reqwest::Client,
    ports: BTreeMap<String, u16>,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServeError>>>,
    yaml: String,
    reloads: mpsc::Sender<Config>,
    /// A key of the server's `apiKeys` (its event stream needs one).
    key: Option<String>,
}

impl Harness {
    /// Starts a server for `models`, with `global_yaml` appended at the top level.
    pub(crate) async fn start(models: &[ModelSpec], global_yaml: &str) -> Self {
        Self::start_with(models, global_yaml, ServeOptions::default()).await
    }

    /// As [`start`](Self::start) with serve options.
    pub(crate) async fn start_with(
        models: &[ModelSpec],
        global_yaml: &str,
        options: ServeOptions,
    ) -> Self {
        let ports: BTreeMap<String, u16> = models
            .iter()
            .map(|m| (m.id.to_owned(), free_port()))
            .collect();
        let placed: Vec<(ModelSpec, u16)> =
            models.iter().map(|m| (m.clone(), ports[m.id])).collect();
        let mut yaml = config_yaml(&placed);
        if global_yaml.contains("healthCheckTimeout:") {
            // The test's own replaces the harness's default.
            yaml = yaml.replacen("healthCheckTimeout: 15\n", "", 1);
        }
        yaml.push_str(global_yaml);
        Self::launch(&yaml, ports, options)
    }

    /// Starts a server for a complete YAML document (no mockswap models).
    pub(crate) async fn start_yaml(yaml: &str) -> Self {
        Self::start_yaml_with(yaml, ServeOptions::default()).await
    }

    /// As [`start_yaml`](Self::start_yaml) with serve options.
    pub(crate) async fn start_yaml_with(yaml: &str, options: ServeOptions) -> Self {
        Self::launch(yaml, BTreeMap::new(), options)
    }

    fn launch(yaml: &str, ports: BTreeMap<String, u16>, options: ServeOptions) -> Self {
        let loaded = Config::loader()
            .yaml("test.yaml", yaml)
            .env(&|_: &str| None)
            .load()
            .unwrap_or_else(|e| panic!("test config does not load: {e}\n{yaml}"));
        let key = loaded
            .config
            .api_keys
            .first()
            .map(|k| k.expose().to_owned());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let listener = tokio::net::TcpListener::from_std(listener).unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let (reloads, reloads_rx) = mpsc::channel(1);
        let task = tokio::spawn(serve_reloading(
            listener,
            loaded.config,
            options,
            reloads_rx,
            async {
                let _ = rx.await;
            },
        ));
        Self {
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
            ports,
            shutdown: Some(tx),
            task: Some(task),
            yaml: yaml.to_owned(),
            reloads,
            key,
        }
    }

    /// Reloads the same configuration (same models, same ports): the server
    /// replaces its router and supervisor.
    pub(crate) async fn reload_same(&self) {
        let loaded = Config::loader()
            .yaml("test.yaml", &self.yaml)
            .env(&|_: &str| None)
            .load()
            .unwrap();
        self.reloads.send(loaded.config).await.unwrap();
    }

    /// Reloads with `models` (kept IDs keep their port, new ones get a free
    /// one) and `global_yaml`; returns once the server has applied it (its
    /// model list shows the new models and not the removed ones).
    pub(crate) async fn reload(&mut self, models: &[ModelSpec], global_yaml: &str) {
        self.send_reload(models, global_yaml).await;
        let mut want: Vec<String> = models.iter().map(|m| m.id.to_owned()).collect();
        want.sort();
        self.wait_for(|h| {
            let want = want.clone();
            async move {
                let body: Value = h.get_json(&h.url("/v1/models")).await;
                let mut ids: Vec<String> = body["data"]
                    .as_array()?
                    .iter()
                    .filter_map(|m| m["id"].as_str().map(str::to_owned))
                    .collect();
                ids.sort();
                (ids == want).then_some(())
            }
        })
        .await;
    }

    /// As [`reload`](Self::reload) without waiting for the server to apply
    /// it (for a reload the server refuses: the next reload is read after it).
    pub(crate) async fn send_reload(&mut self, models: &[ModelSpec], global_yaml: &str) {
        for m in models {
            self.ports.entry(m.id.to_owned()).or_insert_with(free_port);
        }
        let placed: Vec<(ModelSpec, u16)> = models
            .iter()
            .map(|m| (m.clone(), self.ports[m.id]))
            .collect();
        let mut yaml = config_yaml(&placed);
        yaml.push_str(global_yaml);
        let loaded = Config::loader()
            .yaml("test.yaml", &yaml)
            .env(&|_: &str| None)
            .load()
            .unwrap_or_else(|e| panic!("test config does not load: {e}\n{yaml}"));
        self.yaml = yaml;
        self.reloads.send(loaded.config).await.unwrap();
    }

    /// Gives `model` a new port at the next [`reload`](Self::reload) (its
    /// command and upstream address change); returns the old one.
    pub(crate) fn move_port(&mut self, model: &str) -> u16 {
        let old = self.ports[model];
        self.ports.insert(model.to_owned(), free_port());
        old
    }

    /// The pid of the process listening on `model`'s port, if any.
    pub(crate) fn upstream_pid(&self, model: &str) -> Option<u32> {
        processes_listening_on(&[self.ports[model]])
            .first()
            .map(|(pid, _)| *pid)
    }

    /// A URL on the server.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The base URL of a model's mockswap process.
    pub(crate) fn upstream(&self, model: &str) -> String {
        format!("http://127.0.0.1:{}", self.ports[model])
    }

    /// A chat request for `model` with an optional raw `X-Priority` value.
    pub(crate) fn chat(
        &self,
        model: &str,
        priority: Option<&str>,
        stream: bool,
    ) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(self.url("/v1/chat/completions"))
            .json(&json!({
                "model": model,
                "stream": stream,
                "messages": [{"role": "user", "content": "hi"}],
            }));
        if let Some(p) = priority {
            request = request.header("X-Priority", p);
        }
        request
    }

    /// Sends a request in the background; the handle yields status and body.
    pub(crate) fn spawn(&self, request: reqwest::RequestBuilder) -> JoinHandle<(u16, String)> {
        tokio::spawn(async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.text().await.unwrap_or_default())
        })
    }

    /// `GET /api/queue`.
    pub(crate) async fn queue(&self) -> Vec<Value> {
        let body: Value = self.get_json(&self.url("/api/queue")).await;
        body["queue"].as_array().cloned().unwrap_or_default()
    }

    /// `GET /metrics` as text.
    pub(crate) async fn metrics(&self) -> String {
        let response = self.http.get(self.url("/metrics")).send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.text().await.unwrap()
    }

    /// `GET /running`: the IDs of non-stopped models.
    pub(crate) async fn running(&self) -> Vec<String> {
        let body: Value = self.get_json(&self.url("/running")).await;
        body["running"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["model"].as_str().unwrap().to_owned())
            .collect()
    }

    async fn get_json(&self, url: &str) -> Value {
        self.http
            .get(url)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Waits until `/api/queue` holds `n` waiters and returns them.
    pub(crate) async fn wait_queue_len(&self, n: usize) -> Vec<Value> {
        self.wait_for(|h| async move {
            let q = h.queue().await;
            (q.len() == n).then_some(q)
        })
        .await
    }

    /// Waits until the model's mockswap holds `n` requests at its gate, with
    /// mockswap's long-poll; retried on the server's events only while the
    /// process is not up yet (the model becoming ready is an event).
    pub(crate) async fn wait_held(&self, model: &str, n: u64) {
        let timeout_ms = LIMIT.as_millis();
        let url = format!(
            "{}/__mockswap/gate?wait_held={n}&timeout_ms={timeout_ms}",
            self.upstream(model)
        );
        self.wait_for(|h| {
            let url = url.clone();
            async move {
                let response = h.http.get(&url).send().await.ok()?;
                assert_eq!(response.status(), 200, "gate of {model} never held {n}");
                let state: Value = response.json().await.ok()?;
                (state["held"].as_u64() == Some(n)).then_some(())
            }
        })
        .await;
    }

    /// Opens a model's gate so held requests proceed.
    pub(crate) async fn open_gate(&self, model: &str) {
        let url = format!("{}/__mockswap/gate", self.upstream(model));
        let response = self
            .http
            .post(url)
            .json(&json!({"open": true}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    }

    /// The journal of a model's mockswap; `None` when it is not running.
    pub(crate) async fn journal(&self, model: &str) -> Option<Vec<Value>> {
        let url = format!("{}/__mockswap/requests", self.upstream(model));
        let response = self.http.get(url).send().await.ok()?;
        response.json().await.ok()
    }

    /// Evaluates `probe` now and again on every change the server publishes on
    /// `/api/events` (queue, model states, requests in flight, activity,
    /// profile switches) until it yields a value, up to `LIMIT`. The probe must
    /// read server state, or wait on its own like a mockswap long-poll: a
    /// change only an upstream sees wakes nothing here.
    pub(crate) async fn wait_for<'a, T, F, Fut>(&'a self, probe: F) -> T
    where
        F: Fn(&'a Self) -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        ServerEvents::subscribe(&self.base, self.key.as_deref())
            .await
            .until(|| probe(self))
            .await
    }

    /// Signals shutdown without waiting.
    pub(crate) fn begin_shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Shuts the server down, checks it returned cleanly and that no upstream
    /// process is left.
    pub(crate) async fn shutdown(mut self) {
        self.begin_shutdown();
        let task = self.task.take().unwrap();
        let result = tokio::time::timeout(LIMIT, task)
            .await
            .expect("serve did not return after shutdown")
            .expect("serve panicked");
        result.expect("serve returned an error");
        let ports: Vec<u16> = self.ports.values().copied().collect();
        let left = processes_listening_on(&ports);
        assert!(
            left.is_empty(),
            "upstream processes left after shutdown: {left:?}"
        );
    }
}

impl Drop for Harness {
    fn drop(&mut self) {
        // A failed test: the runtime drops the serve task, and the supervisor's
        // drop kills every process group.
        self.begin_shutdown();
    }
}

/// A subscription to a server's `/api/events`, renewed when the stream ends,
/// as the web UI does: a reload drains the instance that served it (which ends
/// its streams at once) after the new instance took over new connections.
pub(crate) struct ServerEvents {
    base: String,
    key: Option<String>,
    response: reqwest::Response,
}

impl ServerEvents {
    /// Subscribes to `<base>/api/events`, with `key` as the bearer token.
    pub(crate) async fn subscribe(base: &str, key: Option<&str>) -> Self {
        let response = Self::connect(base, key).await;
        Self {
            base: base.to_owned(),
            key: key.map(str::to_owned),
            response,
        }
    }

    async fn connect(base: &str, key: Option<&str>) -> reqwest::Response {
        let mut request = reqwest::Client::new().get(format!("{base}/api/events"));
        if let Some(key) = key {
            request = request.bearer_auth(key);
        }
        let response = tokio::time::timeout(LIMIT, request.send())
            .await
            .expect("/api/events answers within LIMIT")
            .expect("/api/events answers");
        assert_eq!(
            response.status(),
            200,
            "/api/events refused the harness's key"
        );
        response
    }

    /// Evaluates `probe` now and after every change until it yields a value,
    /// up to `LIMIT`.
    pub(crate) async fn until<T, F, Fut>(&mut self, probe: F) -> T
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Option<T>>,
    {
        let deadline = tokio::time::Instant::now() + LIMIT;
        loop {
            if let Some(value) = probe().await {
                return value;
            }
            assert!(
                self.changed(deadline).await,
                "condition not reached within {LIMIT:?}"
            );
        }
    }

    /// Waits for the next chunk of events (or a renewed subscription, whose
    /// snapshot may differ) until `deadline`; `false` when it passed first.
    async fn changed(&mut self, deadline: tokio::time::Instant) -> bool {
        match tokio::time::timeout_at(deadline, self.response.chunk()).await {
            Err(_) => false,
            Ok(Ok(Some(_))) => true,
            Ok(Ok(None) | Err(_)) => {
                self.response = Self::connect(&self.base, self.key.as_deref()).await;
                true
            }
        }
    }
}

/// Connects and asks for `path` with a tiny receive window, then reads nothing.
pub(crate) async fn stalled_reader(h: &Harness, path: &str) -> tokio::net::TcpStream {
    let address = h.base.trim_start_matches("http://");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {address}\r\n\r\n");
    stalled_request(h, request.as_bytes()).await
}

/// Connects with a tiny receive window and sends `request` (a whole HTTP/1.1
/// request), then reads nothing.
pub(crate) async fn stalled_request(h: &Harness, request: &[u8]) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt as _;
    let mut stream = small_window(h).await;
    stream.write_all(request).await.unwrap();
    stream
}

/// A connection to the server with a 4 KiB receive window.
pub(crate) async fn small_window(h: &Harness) -> tokio::net::TcpStream {
    let address = h.base.trim_start_matches("http://");
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.connect(address.parse().unwrap()).await.unwrap()
}

/// Reads `stream` until `needle` appears; returns how many bytes came.
pub(crate) async fn read_until_seen(
    stream: &mut (impl tokio::io::AsyncRead + Unpin),
    needle: &str,
) -> usize {
    use tokio::io::AsyncReadExt;
    let mut seen = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    let found = tokio::time::timeout(LIMIT, async {
        loop {
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the stream ended before {needle:?}");
            seen.extend_from_slice(&chunk[..n]);
            // Only the tail can complete the needle; keep the search cheap.
            let from = seen.len().saturating_sub(n + needle.len());
            if seen[from..]
                .windows(needle.len())
                .any(|w| w == needle.as_bytes())
            {
                return;
            }
        }
    })
    .await;
    assert!(found.is_ok(), "no {needle:?} in {} bytes", seen.len());
    seen.len()
}

/// A fresh self-signed certificate for `localhost` and `127.0.0.1`, written
/// to `dir` as `cert.pem` and `key.pem`: their paths and the certificate.
pub(crate) fn self_signed(
    dir: &std::path::Path,
) -> (
    std::path::PathBuf,
    std::path::PathBuf,
    rustls::pki_types::CertificateDer<'static>,
) {
    let made =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key, made.cert.der().clone())
}

/// A TLS client that trusts only `trusted`, for `localhost`.
pub(crate) fn tls_connector(
    trusted: &rustls::pki_types::CertificateDer<'static>,
) -> tokio_rustls::TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(trusted.clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
}
