//! Building the handlers' state from a configuration.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{AppState, HttpOptions, Inner, ModelEntry};
use crate::activity::Activity;
use crate::api::error::{peer_stream_error_frames, stream_error_frames};
use crate::api::front::auth::ApiKeys;
use crate::api::front::auth_limit::AuthLimiter;
use crate::api::manage::events::SnapshotCache;
use crate::api::model::body::{BodyBudget, BodyLimits};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::proxy::{Proxy, ProxyOptions, Timeouts, UpstreamTls};
use crate::router::RouterHandle;
use crate::upstream::Supervisor;

/// Builds an [`AppState`]: [`AppState::builder`], the settings that differ
/// from the defaults, then [`build`](Self::build).
#[derive(Debug)]
#[must_use]
pub(crate) struct AppStateBuilder<'a> {
    config: &'a Config,
    router: RouterHandle,
    supervisor: Option<Arc<Supervisor>>,
    options: HttpOptions,
    metrics: Option<Arc<Metrics>>,
    tls: Option<Option<UpstreamTls>>,
    system: Option<Option<Arc<crate::metrics::SystemSampler>>>,
    previous: Option<&'a AppState>,
    history: Option<Arc<crate::store::History>>,
}

impl<'a> AppStateBuilder<'a> {
    pub(super) fn new(config: &'a Config, router: RouterHandle) -> Self {
        Self {
            config,
            router,
            supervisor: None,
            options: HttpOptions::default(),
            metrics: None,
            tls: None,
            system: None,
            previous: None,
            history: None,
        }
    }

    /// Serves `supervisor`'s output in `/logs` (default: the log endpoints
    /// serve nothing), and asks it before forwarding whether the model's
    /// process is ready (default: every granted request is forwarded).
    pub(crate) fn supervisor(mut self, supervisor: Arc<Supervisor>) -> Self {
        self.supervisor = Some(supervisor);
        self
    }

    /// The settings of the HTTP layer (default [`HttpOptions::default`]). The
    /// configuration's `requestBodyLimit`, when set, replaces
    /// [`HttpOptions::max_body_bytes`].
    pub(crate) fn options(mut self, options: HttpOptions) -> Self {
        self.options = options;
        self
    }

    /// Records into `metrics`, shared with the router (default: metrics of
    /// its own, for the configured models and bands).
    pub(crate) fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The TLS client for `https://` upstreams and peers, already built from
    /// the configuration (default: built here; an error is logged and leaves
    /// `https://` upstreams without one).
    pub(crate) fn upstream_tls(mut self, tls: Option<UpstreamTls>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The host sampler of `/metrics` and `/api/performance`, sampling on
    /// its own (default: one made here per `performance`, sampling only
    /// when `/metrics` is scraped; `None` for none).
    pub(crate) fn system(mut self, system: Option<Arc<crate::metrics::SystemSampler>>) -> Self {
        self.system = Some(system);
        self
    }

    /// Takes over from `previous` after a reload: the same drain (a shutdown
    /// drains both) and activity (its requests in flight, rows, captures and
    /// feeds), with the new `metricsMaxInMemory` and `captureBuffer` applied
    /// to it ([`Activity::reconfigure`]); requests still waiting in
    /// `previous` are granted for the new configuration, and `previous`'s
    /// event and log streams end so that their readers reconnect to it.
    pub(crate) fn replacing(mut self, previous: &'a AppState) -> Self {
        self.previous = Some(previous);
        self
    }

    /// With [`replacing`](Self::replacing): finished rows go to `history`
    /// from now on (a reload changed `store.path`; default: where they went).
    pub(crate) fn history(mut self, history: Arc<crate::store::History>) -> Self {
        self.history = Some(history);
        self
    }

    /// The state.
    pub(crate) fn build(self) -> AppState {
        let config = self.config;
        let metrics = self.metrics.unwrap_or_else(|| {
            Arc::new(Metrics::new(
                config.models.iter().map(|m| m.id.clone()),
                config.priority_rules.bands.clone(),
            ))
        });
        let tls = self.tls.unwrap_or_else(|| {
            config.upstream_tls().unwrap_or_else(|error| {
                tracing::error!(%error, "no TLS client for https:// upstreams");
                None
            })
        });
        let mark = self.options.hop_mark.clone();
        // One client (and connection pool) per distinct set of timeouts.
        let mut clients: Vec<Proxy> = Vec::new();
        let mut client_for = |timeouts: &Timeouts| {
            if let Some(client) = clients.iter().find(|c| c.timeouts() == timeouts) {
                return client.clone();
            }
            let client = Proxy::with_options(
                stream_error_frames,
                ProxyOptions::default()
                    .timeouts(*timeouts)
                    .tls(tls.clone())
                    .hop_mark(Some(mark.clone())),
            );
            clients.push(client.clone());
            client
        };
        let models = config
            .models
            .iter()
            .map(|m| {
                let retired = self
                    .previous
                    .and_then(|previous| previous.inner.models.get(&m.id))
                    .map(|entry| entry.retired.clone())
                    .filter(|token| !token.is_cancelled())
                    .unwrap_or_default();
                let entry = ModelEntry {
                    config: m.clone(),
                    client: client_for(&m.timeouts),
                    retired,
                };
                (m.id.clone(), Arc::new(entry))
            })
            .collect();
        // Peers get clients of their own: a stream that breaks mid-response
        // must name the peer, not a local model. They carry this server's
        // mark too: two servers listing each other as peers is a loop.
        let mut peer_clients: Vec<Proxy> = Vec::new();
        let peers = crate::peers::Peers::new(
            &config.peers,
            |timeouts| {
                if let Some(client) = peer_clients.iter().find(|c| c.timeouts() == timeouts) {
                    return client.clone();
                }
                let client = Proxy::with_options(
                    peer_stream_error_frames,
                    ProxyOptions::default()
                        .timeouts(*timeouts)
                        .tls(tls.clone())
                        .hop_mark(Some(mark.clone())),
                );
                peer_clients.push(client.clone());
                client
            },
            &metrics,
        );
        let options = self.options;
        let capture_budget = options
            .capture_buffer
            .unwrap_or(config.activity.capture_buffer);
        let (draining, activity) = match self.previous {
            Some(previous) => {
                let activity = Arc::clone(&previous.inner.activity);
                activity.reconfigure(config.activity.max_in_memory, capture_budget, self.history);
                (previous.inner.draining.clone(), activity)
            }
            None => (
                CancellationToken::new(),
                Arc::new(
                    match &options.history {
                        Some(history) => Activity::with_history(
                            config.activity.max_in_memory,
                            Arc::clone(history),
                        ),
                        None => Activity::new(config.activity.max_in_memory),
                    }
                    .with_key_totals(Arc::clone(&metrics))
                    .with_captures(crate::capture::Captures::new(capture_budget)),
                ),
            ),
        };
        if let Some(captures) = activity.captures() {
            captures.set_secrets(
                config
                    .api_keys
                    .iter()
                    .map(|k| k.expose().to_owned())
                    .collect(),
            );
        }
        let state = AppState {
            inner: Arc::new(Inner {
                router: self.router,
                supervisor: self.supervisor,
                models,
                include_aliases_in_list: config.include_aliases_in_list,
                keys: ApiKeys::new(config.api_keys.iter().map(|k| k.expose())),
                key_rules: crate::api::front::scopes::KeyRules::new(config),
                session_headers: config
                    .activity
                    .session_headers
                    .iter()
                    .filter_map(|name| http::HeaderName::try_from(name.as_str()).ok())
                    .collect(),
                session_header_names: config.activity.session_headers.clone(),
                auth_failures: AuthLimiter::default(),
                ignore_paths: config.upstream.ignore_paths.clone(),
                body_limits: BodyLimits {
                    max_bytes: config.request_body_limit.unwrap_or(options.max_body_bytes),
                    timeout: config.request_body_timeout,
                    budget: Arc::new(BodyBudget::new(options.max_body_bytes_in_flight)),
                },
                proxy_log: options.proxy_log,
                hop_mark: options.hop_mark,
                streams: draining.child_token(),
                draining,
                inflight: TaskTracker::new(),
                metrics,
                system: self.system.unwrap_or_else(|| {
                    (!config.performance.disabled).then(|| {
                        Arc::new(crate::metrics::SystemSampler::new(config.performance.every))
                    })
                }),
                trust: config.trust(),
                names: config.names(),
                selection: crate::selection::Selection::new(config),
                peers,
                activity,
                snapshots: SnapshotCache::default(),
                successor: std::sync::OnceLock::new(),
            }),
        };
        if let Some(previous) = self.previous {
            let _ = previous.inner.successor.set(state.clone());
            previous.inner.streams.cancel();
        }
        state
    }
}
