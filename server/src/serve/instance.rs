//! One configuration's running parts: supervisor, router and HTTP state.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{ServeError, ServeOptions};
use crate::api::AppState;
use crate::config::Config;
use crate::launcher::Launcher;
use crate::metrics::Metrics;
use crate::priority::Priority;
use crate::router::{Router, RouterHandle, RouterOptions, Submit};
use crate::upstream::{Supervisor, SupervisorOptions};

/// Lines of output kept per model for `/logs`.
const LOG_LINES_PER_MODEL: usize = 2000;

/// A configuration being served.
pub(super) struct Instance {
    pub(super) state: AppState,
    router: RouterHandle,
    supervisor: Arc<Supervisor>,
    /// `hooks.on_startup.preload`, cancelled (aborted) when the instance stops.
    preload: JoinSet<()>,
}

impl Instance {
    /// Starts the supervisor and router for `config` (no process is spawned
    /// until a request or the preload hook asks for a model).
    ///
    /// With a `gate`, requests wait until it turns `true` before they are
    /// scheduled (a reload waits for the old instance's upstreams to stop).
    pub(super) fn start(
        config: &Config,
        options: &ServeOptions,
        gate: Option<watch::Receiver<bool>>,
    ) -> Result<Self, ServeError> {
        let settings = config.scheduler_settings();
        let specs = config.process_specs();
        let tls = config.upstream_tls()?;
        let (supervisor, events) = Supervisor::with_options(
            specs,
            LOG_LINES_PER_MODEL,
            SupervisorOptions::default().tls(tls.clone()),
        );
        let launcher: Arc<dyn Launcher> = supervisor.clone();
        let metrics = Arc::new(Metrics::new(
            config.models.iter().map(|m| m.id.clone()),
            config.priority_rules.bands.clone(),
        ));
        let router = Router::spawn_with(
            settings,
            launcher,
            events,
            RouterOptions::default().metrics(Arc::clone(&metrics)),
        )?;
        let mut http = options.http.clone();
        if let Some(limit) = config.request_body_limit {
            http = http.max_body_bytes(limit);
        }
        let state = AppState::assemble(
            config,
            router.clone(),
            Some(supervisor.clone()),
            http,
            gate.clone(),
            metrics,
            tls,
        );
        let mut preload = JoinSet::new();
        if !config.hooks.preload.is_empty() {
            preload.spawn(preload_models(
                router.clone(),
                config.hooks.preload.clone(),
                gate,
            ));
        }
        Ok(Self {
            state,
            router,
            supervisor,
            preload,
        })
    }

    /// Drains and stops: waiting requests answer 503, responses in flight may
    /// finish until `deadline`, then every upstream is stopped and reaped.
    pub(super) async fn stop(mut self, deadline: Duration, grace: Duration) {
        self.state.drain();
        self.preload.shutdown().await;
        if tokio::time::timeout(deadline, self.state.wait_idle())
            .await
            .is_err()
        {
            tracing::warn!(
                ?deadline,
                "responses still in flight at the drain deadline; their upstreams are stopped"
            );
        }
        self.router.shutdown().await;
        self.supervisor.shutdown(grace).await;
    }
}

/// `hooks.on_startup.preload`: loads each model in turn like a request would
/// (so swaps apply), holding nothing once it is ready. After a reload it
/// first waits, like requests do, for the old upstreams to be gone.
async fn preload_models(
    router: RouterHandle,
    models: Vec<String>,
    gate: Option<watch::Receiver<bool>>,
) {
    if let Some(mut gate) = gate
        && gate.wait_for(|open| *open).await.is_err()
    {
        return;
    }
    for model in models {
        let outcome = match router
            .submit(Submit {
                model: model.clone(),
                priority: Priority::default(),
            })
            .await
        {
            Ok(ticket) => ticket.granted().await.map(drop),
            Err(error) => Err(error),
        };
        match outcome {
            Ok(()) => tracing::info!(%model, "preloaded"),
            Err(error) => tracing::warn!(%model, %error, "preload failed"),
        }
    }
}
