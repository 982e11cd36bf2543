//! What the handlers share: the router handle, the per-model HTTP settings, the
//! proxy client and the drain signal. Holds no scheduling state.

mod builder;

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::front::auth::ApiKeys;
use super::front::auth_limit::AuthLimiter;
use super::manage::events::SnapshotCache;
use super::model::body::{BodyLimits, DEFAULT_MAX_BODY_BYTES_IN_FLIGHT};
use crate::activity::Activity;
use crate::config::{Config, IgnorePaths, ModelConfig};
use crate::metrics::Metrics;
use crate::priority::Trust;
use crate::proxy::HopMark;
use crate::proxy::Proxy;
use crate::router::{ModelState, RouterHandle};
use crate::upstream::Supervisor;

pub(crate) use builder::AppStateBuilder;

/// Default request body limit: large enough for audio uploads and long prompts.
pub(crate) const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Settings of the HTTP layer that are not part of llama-swap's config file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Largest request body accepted (413 beyond). Default 32 MiB
    /// (`DEFAULT_MAX_BODY_BYTES`).
    pub max_body_bytes: usize,
    /// Most bytes of request bodies read at once across all requests (503
    /// `server_overloaded` beyond). Default 256 MiB
    /// (`DEFAULT_MAX_BODY_BYTES_IN_FLIGHT`).
    pub max_body_bytes_in_flight: usize,
    /// The proxy's own log, served by `/logs` beside the upstreams' output
    /// (default none: only upstream output).
    pub proxy_log: Option<crate::logging::ProxyLog>,
    /// Where finished requests are kept (default: in memory only).
    pub history: Option<Arc<crate::store::History>>,
    /// This server's mark in the requests it sends on (to models and peers),
    /// and what its front refuses as a loop (default: a new one; clones share
    /// it, so every configuration a served instance reloads keeps it).
    pub hop_mark: HopMark,
    /// Overrides the configuration's `captureBuffer` (in bytes) when set.
    pub capture_buffer: Option<usize>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_body_bytes_in_flight: DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
            proxy_log: None,
            history: None,
            hop_mark: HopMark::new(),
            capture_buffer: None,
        }
    }
}

impl HttpOptions {
    /// Keeps `bytes` of compressed captures (0: no captures), whatever the
    /// configuration's `captureBuffer` says.
    #[must_use]
    pub fn capture_buffer(mut self, bytes: usize) -> Self {
        self.capture_buffer = Some(bytes);
        self
    }

    /// Keeps finished requests in `history` (a database opened at start).
    #[must_use]
    pub fn history(mut self, history: Arc<crate::store::History>) -> Self {
        self.history = Some(history);
        self
    }

    /// Sets the request body limit.
    #[must_use]
    pub fn max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    /// Sets the cap on the bytes of request bodies read at once.
    #[must_use]
    pub fn max_body_bytes_in_flight(mut self, bytes: usize) -> Self {
        self.max_body_bytes_in_flight = bytes;
        self
    }

    /// Serves `log` as the proxy's log in `/logs`.
    #[must_use]
    pub fn proxy_log(mut self, log: crate::logging::ProxyLog) -> Self {
        self.proxy_log = Some(log);
        self
    }
}

/// The HTTP view of one configured model: its configuration and the upstream
/// client with its `timeouts`.
#[derive(Debug, Clone)]
pub(crate) struct ModelEntry {
    /// The model as configured (macros expanded).
    pub(crate) config: ModelConfig,
    /// The upstream client with this model's `timeouts` (shared by models
    /// with the same ones).
    pub(crate) client: Proxy,
    /// Cancelled when a reload changes or removes the model's process: its
    /// open websockets then close after its `unloadTimeout`, so requests for
    /// the new definition do not wait on a socket that may never close. Kept
    /// across reloads that keep the process, so it reaches every socket open.
    pub(crate) retired: CancellationToken,
}

/// Shared state of the HTTP handlers. Cheap to clone.
#[derive(Clone, Debug)]
pub(crate) struct AppState {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) router: RouterHandle,
    /// The source of `/logs`; `None` serves empty logs.
    pub(crate) supervisor: Option<Arc<Supervisor>>,
    /// Shared per entry so a request holds its model's settings without copying them.
    pub(crate) models: BTreeMap<String, Arc<ModelEntry>>,
    pub(crate) include_aliases_in_list: bool,
    pub(crate) keys: ApiKeys,
    /// What each API key may do (`keys`): models, `maxConcurrent`, admin,
    /// and the name activity rows and metrics call it by (never the key).
    pub(crate) key_rules: crate::api::front::scopes::KeyRules,
    /// `ui.activity.session_id`: the headers that name a client's session.
    pub(crate) session_headers: Vec<http::HeaderName>,
    /// The same names as configured, for the `uiConfig` event (llama-swap
    /// sends them as written).
    pub(crate) session_header_names: Vec<String>,
    /// Failed API-key attempts per client address.
    pub(crate) auth_failures: AuthLimiter,
    /// `upstream.ignorePaths`.
    pub(crate) ignore_paths: IgnorePaths,
    /// Limits on reading request bodies (size, deadline, shared budget).
    pub(crate) body_limits: BodyLimits,
    /// The proxy's own log for `/logs`; `None` serves upstream output only.
    pub(crate) proxy_log: Option<crate::logging::ProxyLog>,
    /// This server's mark in [`VIA_HEADER`](crate::proxy::VIA_HEADER).
    pub(crate) hop_mark: HopMark,
    /// Cancelled when the server starts shutting down: waiting requests answer
    /// 503, log streams end, new requests are refused.
    pub(crate) draining: CancellationToken,
    /// Ends `/api/events` and `/logs` streams: cancelled with `draining`, or
    /// alone when a reload replaces this state (the page reconnects and sees
    /// the new configuration).
    pub(crate) streams: CancellationToken,
    /// One token per model-dispatched request, held until its response body
    /// ends; also the owner of the websocket pipes.
    pub(crate) inflight: TaskTracker,
    /// What `/metrics` shows; shared with the router actor.
    pub(crate) metrics: Arc<Metrics>,
    /// The host gauges of `/metrics` and the samples of `/api/performance`;
    /// `None` with `performance.disabled`.
    pub(crate) system: Option<Arc<crate::metrics::SystemSampler>>,
    /// Caps on `X-Priority`.
    pub(crate) trust: Trust,
    /// Where a requested name leads (pins, selectors, models, peer models).
    pub(crate) names: crate::names::NameTable,
    /// Which profile is active, and the selectors' picks.
    pub(crate) selection: crate::selection::Selection,
    /// Peers: their clients, in-flight counts and pool statuses.
    pub(crate) peers: crate::peers::Peers,
    /// Requests in flight and the most recent finished ones.
    pub(crate) activity: Arc<Activity>,
    /// The router snapshot shared by every `/api/events` subscriber.
    pub(crate) snapshots: SnapshotCache,
    /// The state of the configuration a reload replaced this one with.
    pub(crate) successor: std::sync::OnceLock<AppState>,
}

impl AppState {
    /// A builder of the state for serving `config` through `router`.
    pub(crate) fn builder(config: &Config, router: RouterHandle) -> AppStateBuilder<'_> {
        AppStateBuilder::new(config, router)
    }

    /// Resolves once no model-dispatched request is in progress any more
    /// (call [`drain`](Self::drain) first, or new ones keep arriving).
    pub(crate) async fn wait_idle(&self) {
        self.inner.inflight.close();
        self.inner.inflight.wait().await;
    }

    /// A token that keeps [`wait_idle`](Self::wait_idle) waiting while it lives.
    pub(crate) fn track(&self) -> TaskTrackerToken {
        self.inner.inflight.token()
    }

    /// The entry of model `id` in the newest configuration, when a reload
    /// replaced this state (`None`: this is the newest, or the model is gone).
    /// A request granted after a reload is for the model's newest definition
    /// (upstream address, filters, timeouts): a changed model grants nothing
    /// on its old process.
    pub(crate) fn latest_model(&self, id: &str) -> Option<Arc<ModelEntry>> {
        let mut latest = self.inner.successor.get()?;
        while let Some(next) = latest.inner.successor.get() {
            latest = next;
        }
        latest.inner.models.get(id).cloned()
    }

    /// True when the router has model `id` ready (not starting, not stopping).
    pub(crate) async fn model_ready(&self, id: &str) -> bool {
        self.inner
            .router
            .running()
            .await
            .iter()
            .any(|m| m.model == id && m.state == ModelState::Ready)
    }

    /// Starts draining: requests still waiting for a model answer 503
    /// `shutting_down`, new ones too, and log streams end. Responses already
    /// streaming are left to finish.
    pub(crate) fn drain(&self) {
        self.inner.draining.cancel();
    }

    /// The requests in flight and the most recent finished ones.
    pub(crate) fn activity(&self) -> &Arc<Activity> {
        &self.inner.activity
    }
}
