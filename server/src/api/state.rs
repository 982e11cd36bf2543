//! What the handlers share: the router handle, the per-model HTTP settings, the
//! proxy client and the drain signal. Holds no scheduling state.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use super::front::auth::ApiKeys;
use super::front::auth_limit::AuthLimiter;
use super::manage::events::SnapshotCache;
use super::model::body::{BodyBudget, BodyLimits, DEFAULT_MAX_BODY_BYTES_IN_FLIGHT};
use crate::activity::Activity;
use crate::config::{Config, IgnorePaths};
use crate::metrics::Metrics;
use crate::priority::Trust;
use crate::proxy::{Proxy, ProxyOptions, Timeouts, UpstreamTls};
use crate::router::{ModelState, RouterHandle};
use crate::upstream::Supervisor;

/// Default request body limit: large enough for audio uploads and long prompts.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;

/// Settings of the HTTP layer that are not part of llama-swap's config file.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HttpOptions {
    /// Largest request body accepted (413 beyond). Default
    /// [`DEFAULT_MAX_BODY_BYTES`].
    pub max_body_bytes: usize,
    /// Most bytes of request bodies read at once across all requests (503
    /// `server_overloaded` beyond). Default [`DEFAULT_MAX_BODY_BYTES_IN_FLIGHT`].
    pub max_body_bytes_in_flight: usize,
    /// The proxy's own log, served by `/logs` beside the upstreams' output
    /// (default none: only upstream output).
    pub proxy_log: Option<crate::logging::ProxyLog>,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_body_bytes_in_flight: DEFAULT_MAX_BODY_BYTES_IN_FLIGHT,
            proxy_log: None,
        }
    }
}

impl HttpOptions {
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

/// The HTTP view of one configured model.
#[derive(Debug, Clone)]
pub(crate) struct ModelEntry {
    pub(crate) id: String,
    /// `cmd` as configured (macros expanded), shown by `/running`.
    pub(crate) cmd: String,
    pub(crate) proxy: String,
    pub(crate) aliases: Vec<String>,
    pub(crate) use_model_name: Option<String>,
    pub(crate) send_loading_state: bool,
    pub(crate) unlisted: bool,
    pub(crate) name: Option<String>,
    pub(crate) description: Option<String>,
    pub(crate) metadata: Option<serde_json::Value>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) filters: crate::filters::Filters,
    pub(crate) capabilities: Option<crate::config::Capabilities>,
    /// `compat.ignoreWebsockets`: websockets bypass the scheduler.
    pub(crate) ignore_websockets: bool,
    /// The upstream client with this model's `timeouts` (shared by models
    /// with the same ones).
    pub(crate) client: Proxy,
}

/// Shared state of the HTTP handlers. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
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
    /// Failed API-key attempts per client address.
    pub(crate) auth_failures: AuthLimiter,
    /// `upstream.ignorePaths`.
    pub(crate) ignore_paths: IgnorePaths,
    pub(crate) max_body_bytes: usize,
    /// Limits on reading request bodies (size, deadline, shared budget).
    pub(crate) body_limits: BodyLimits,
    /// The proxy's own log for `/logs`; `None` serves upstream output only.
    pub(crate) proxy_log: Option<crate::logging::ProxyLog>,
    /// Cancelled when the server starts shutting down: waiting requests answer
    /// 503, log streams end, new requests are refused.
    pub(crate) draining: CancellationToken,
    /// Ends `/api/events` and `/logs` streams: cancelled with `draining`, or
    /// alone when a reload replaces this state (the page reconnects and sees
    /// the new configuration).
    pub(crate) streams: CancellationToken,
    /// Requests wait for `true` before they are scheduled; `None` = always open.
    pub(crate) gate: Option<watch::Receiver<bool>>,
    /// One token per model-dispatched request, held until its response body
    /// ends; also the owner of the websocket pipes.
    pub(crate) inflight: TaskTracker,
    /// What `/metrics` shows; shared with the router actor.
    pub(crate) metrics: Arc<Metrics>,
    /// The host gauges of `/metrics`; `None` with `performance.disabled`.
    pub(crate) system: Option<crate::metrics::SystemSampler>,
    /// Caps on `X-Priority`.
    pub(crate) trust: Trust,
    /// Profiles (which one is active) and selectors.
    pub(crate) names: crate::names::Names,
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
    /// State for serving `config` through `router`, with `supervisor`'s logs
    /// (`None`: the log endpoints serve nothing).
    pub fn new(
        config: &Config,
        router: RouterHandle,
        supervisor: Option<Arc<Supervisor>>,
        options: HttpOptions,
    ) -> Self {
        Self::gated(config, router, supervisor, options, None)
    }

    /// As [`new`](Self::new); requests wait before scheduling until `gate`
    /// turns `true` (`None`: never wait).
    pub fn gated(
        config: &Config,
        router: RouterHandle,
        supervisor: Option<Arc<Supervisor>>,
        options: HttpOptions,
        gate: Option<watch::Receiver<bool>>,
    ) -> Self {
        let metrics = Arc::new(Metrics::new(
            config.models.iter().map(|m| m.id.clone()),
            config.priority_rules.bands.clone(),
        ));
        let tls = config.upstream_tls().unwrap_or_else(|error| {
            tracing::error!(%error, "no TLS client for https:// upstreams");
            None
        });
        Self::assemble(config, router, supervisor, options, gate, metrics, tls)
    }

    /// As [`gated`](Self::gated), recording into `metrics` (shared with the router).
    pub(crate) fn assemble(
        config: &Config,
        router: RouterHandle,
        supervisor: Option<Arc<Supervisor>>,
        options: HttpOptions,
        gate: Option<watch::Receiver<bool>>,
        metrics: Arc<Metrics>,
        tls: Option<UpstreamTls>,
    ) -> Self {
        // One client (and connection pool) per distinct set of timeouts.
        let mut clients: Vec<Proxy> = Vec::new();
        let mut client_for = |timeouts: &Timeouts| {
            if let Some(client) = clients.iter().find(|c| c.timeouts() == timeouts) {
                return client.clone();
            }
            let client = Proxy::with_options(
                super::stream_error_frames,
                ProxyOptions::default().timeouts(*timeouts).tls(tls.clone()),
            );
            clients.push(client.clone());
            client
        };
        let models = config
            .models
            .iter()
            .map(|m| {
                let entry = ModelEntry {
                    id: m.id.clone(),
                    cmd: m.cmd.clone(),
                    proxy: m.proxy.clone(),
                    aliases: m.aliases.clone(),
                    use_model_name: m.use_model_name.clone(),
                    send_loading_state: m.send_loading_state,
                    unlisted: m.unlisted,
                    name: m.name.clone(),
                    description: m.description.clone(),
                    metadata: m.metadata.clone(),
                    ttl: m.ttl,
                    filters: m.filters.clone(),
                    capabilities: m.capabilities.clone(),
                    ignore_websockets: m.ignore_websockets,
                    client: client_for(&m.timeouts),
                };
                (m.id.clone(), Arc::new(entry))
            })
            .collect();
        // Peers get clients of their own: a stream that breaks mid-response
        // must name the peer, not a local model; and no loop mark, which a
        // peer served by this same process would take for a loop.
        let mut peer_clients: Vec<Proxy> = Vec::new();
        let peers = crate::peers::Peers::new(
            &config.peers,
            |timeouts| {
                if let Some(client) = peer_clients.iter().find(|c| c.timeouts() == timeouts) {
                    return client.clone();
                }
                let client = Proxy::with_options(
                    super::peer_stream_error_frames,
                    ProxyOptions::default()
                        .timeouts(*timeouts)
                        .tls(tls.clone())
                        .mark_hops(false),
                );
                peer_clients.push(client.clone());
                client
            },
            &metrics,
        );
        let keys = ApiKeys::new(config.api_keys.iter().map(|k| k.expose()));
        let draining = CancellationToken::new();
        Self {
            inner: Arc::new(Inner {
                router,
                supervisor,
                models,
                include_aliases_in_list: config.include_aliases_in_list,
                keys,
                auth_failures: AuthLimiter::default(),
                ignore_paths: config.upstream.ignore_paths.clone(),
                max_body_bytes: options.max_body_bytes,
                body_limits: BodyLimits {
                    max_bytes: options.max_body_bytes,
                    timeout: config.request_body_timeout,
                    budget: Arc::new(BodyBudget::new(options.max_body_bytes_in_flight)),
                },
                proxy_log: options.proxy_log,
                streams: draining.child_token(),
                draining,
                gate,
                inflight: TaskTracker::new(),
                metrics,
                system: (!config.performance.disabled)
                    .then(|| crate::metrics::SystemSampler::new(config.performance.every)),
                trust: config.trust(),
                names: crate::names::Names::new(config),
                peers,
                activity: Arc::new(Activity::default()),
                snapshots: SnapshotCache::default(),
                successor: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Resolves once no model-dispatched request is in progress any more
    /// (call [`drain`](Self::drain) first, or new ones keep arriving).
    pub async fn wait_idle(&self) {
        self.inner.inflight.close();
        self.inner.inflight.wait().await;
    }

    /// A token that keeps [`wait_idle`](Self::wait_idle) waiting while it lives.
    pub(crate) fn track(&self) -> TaskTrackerToken {
        self.inner.inflight.token()
    }

    /// Takes over from `previous` after a reload: the same drain (a shutdown
    /// drains both) and activity feed, and `previous`'s event and log streams
    /// end so that their readers reconnect to this configuration. Call it
    /// before this state serves anything.
    pub(crate) fn succeed(&mut self, previous: &AppState) {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.draining = previous.inner.draining.clone();
            inner.streams = previous.inner.draining.child_token();
            inner.activity = Arc::clone(&previous.inner.activity);
        }
        // Requests still waiting in `previous` are granted for this configuration.
        let _ = previous.inner.successor.set(self.clone());
        previous.inner.streams.cancel();
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
    pub fn drain(&self) {
        self.inner.draining.cancel();
    }

    /// The metrics `/metrics` shows.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The requests in flight and the most recent finished ones.
    pub fn activity(&self) -> &Arc<Activity> {
        &self.inner.activity
    }

    /// The router this state dispatches to.
    pub fn router(&self) -> &RouterHandle {
        &self.inner.router
    }
}
