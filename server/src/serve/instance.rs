//! The running parts: supervisor, router and the current HTTP state.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use super::{ServeError, ServeOptions};
use crate::api::{AppState, AppStateBuilder};
use crate::config::Config;
use crate::config::PerformanceConfig;
use crate::launcher::Launcher;
use crate::metrics::{Metrics, SystemSampler};
use crate::priority::Priority;
use crate::router::{Router, RouterHandle, RouterOptions, Submit};
use crate::scheduler::Scheduler;
use crate::store::{History, Retention, StoreError, StoreSettings};
use crate::upstream::{Supervisor, SupervisorOptions};

/// Lines of output kept per model for `/logs`.
const LOG_LINES_PER_MODEL: usize = 2000;
/// How long a reload waits for a changed `store.maxRows`/`store.maxAge` to
/// delete the rows it excludes, or for the database a changed `store.path`
/// left to write its last rows and close (either goes on in the background
/// after).
const RETENTION_WAIT: Duration = Duration::from_secs(30);

/// The configuration being served: one supervisor and one router for the
/// server's whole life, and the HTTP state of the current configuration.
pub(super) struct Instance {
    pub(super) state: AppState,
    router: RouterHandle,
    supervisor: Arc<Supervisor>,
    metrics: Arc<Metrics>,
    /// `hooks.on_startup.preload`, cancelled (aborted) when the instance stops
    /// or a reload starts the next configuration's.
    preload: JoinSet<()>,
    /// The host sampler (`None` with `performance.disabled`), kept across
    /// reloads that do not change `performance`, and the task that samples
    /// with it (aborted when the instance stops or the sampler is replaced).
    system: Option<Arc<SystemSampler>>,
    performance: PerformanceConfig,
    sampling: JoinSet<()>,
    /// The `store` settings the history was opened with (the history given
    /// in the options is taken to be the starting configuration's).
    store: StoreSettings,
}

impl Instance {
    /// Starts the supervisor and router for `config` (no process is spawned
    /// until a request or the preload hook asks for a model).
    pub(super) fn start(config: &Config, options: &ServeOptions) -> Result<Self, ServeError> {
        let settings = config.scheduler_settings();
        let specs = config.process_specs();
        let tls = config.upstream_tls()?;
        let metrics = Arc::new(Metrics::new(
            config.models.iter().map(|m| m.id.clone()),
            config.priority_rules.bands.clone(),
        ));
        let (supervisor, events) = Supervisor::with_options(
            specs,
            LOG_LINES_PER_MODEL,
            SupervisorOptions::default()
                .tls(tls.clone())
                .metrics(Arc::clone(&metrics)),
        );
        let launcher: Arc<dyn Launcher> = supervisor.clone();
        let router = Router::spawn_with(
            settings,
            launcher,
            events,
            RouterOptions::default().metrics(Arc::clone(&metrics)),
        )?;
        let mut sampling = JoinSet::new();
        let system = sampler(config.performance, &mut sampling);
        let state = Self::state_for(config, options, &router, &supervisor, &metrics, tls)
            .system(system.clone())
            .build();
        let mut instance = Self {
            state,
            router,
            supervisor,
            metrics,
            preload: JoinSet::new(),
            system,
            performance: config.performance,
            sampling,
            store: config.activity.store.clone(),
        };
        instance.preload(config);
        Ok(instance)
    }

    /// The HTTP state's builder for `config`, sharing this instance's parts.
    fn state_for<'a>(
        config: &'a Config,
        options: &ServeOptions,
        router: &RouterHandle,
        supervisor: &Arc<Supervisor>,
        metrics: &Arc<Metrics>,
        tls: Option<crate::proxy::UpstreamTls>,
    ) -> AppStateBuilder<'a> {
        AppState::builder(config, router.clone())
            .supervisor(Arc::clone(supervisor))
            .options(options.http.clone())
            .metrics(Arc::clone(metrics))
            .upstream_tls(tls)
    }

    fn preload(&mut self, config: &Config) {
        self.preload.abort_all();
        if !config.hooks.preload.is_empty() {
            self.preload.spawn(preload_models(
                self.router.clone(),
                config.hooks.preload.clone(),
            ));
        }
        if let Some(on_idle) = &config.hooks.on_idle {
            self.preload.spawn(super::idle::preload_when_idle(
                self.router.clone(),
                std::sync::Arc::clone(self.state.activity()),
                std::sync::Arc::clone(&self.metrics),
                on_idle.clone(),
            ));
        }
    }

    /// Switches to `config` in place: models whose process definition is
    /// unchanged keep running with their requests; changed and removed ones
    /// stop once their requests in flight end; waiting requests keep their
    /// order (those of removed models fail); the HTTP state is replaced.
    /// Refused (nothing changes) when the configuration cannot be scheduled.
    pub(super) async fn reload(
        &mut self,
        config: &Config,
        options: &ServeOptions,
    ) -> Result<(), ServeError> {
        let settings = config.scheduler_settings();
        // Checked before anything changes: the supervisor's reconfigure cannot be undone.
        Scheduler::new(&settings)?;
        let tls = config.upstream_tls()?;
        // Opened before anything changes, so a file that cannot be used
        // refuses the reload like any invalid configuration.
        let history = self.reopened_history(&config.activity.store).await?;
        // Applied by the router actor in the same step as the settings, so it
        // decides no start with the old settings for a new definition.
        let supervisor = Arc::clone(&self.supervisor);
        let (specs, upstream_tls) = (config.process_specs(), tls.clone());
        let (retire, retired) = tokio::sync::oneshot::channel();
        self.router
            .reconfigure_with(settings, move || {
                let done = supervisor.reconfigure(specs, upstream_tls);
                let _ = retire.send([done.changed.clone(), done.removed.clone()].concat());
                done.restarts()
            })
            .await
            .map_err(ServeError::Reload)?;
        // Open websockets of a changed or removed model would hold it (and
        // requests for its new definition) for as long as they stay open.
        for id in retired.await.unwrap_or_default() {
            if let Some(entry) = self.state.inner.models.get(&id) {
                entry.retired.cancel();
            }
        }
        self.metrics
            .add_models(config.models.iter().map(|m| m.id.clone()));
        self.metrics.set_bands(config.priority_rules.bands.clone());
        if config.performance != self.performance {
            self.sampling.abort_all();
            self.system = sampler(config.performance, &mut self.sampling);
            self.performance = config.performance;
        }
        let mut next = Self::state_for(
            config,
            options,
            &self.router,
            &self.supervisor,
            &self.metrics,
            tls,
        )
        .system(self.system.clone())
        .replacing(&self.state);
        // The history rows went to until now, when they go elsewhere now.
        let replaced = history
            .as_ref()
            .map(|_| self.state.inner.activity.history());
        if let Some(history) = history {
            next = next.history(history);
        }
        self.state = next.build();
        match replaced {
            // Rows are handed to the history under the ring's lock, and the
            // ring holds the new one now: nothing more goes to the old one,
            // so it is closed once its last rows are written.
            Some(old) => {
                // Bounded: a stalled disk under the old file must not hold
                // the reload (the close goes on in the blocking pool).
                let closing = tokio::task::spawn_blocking(move || old.close());
                if tokio::time::timeout(RETENTION_WAIT, closing).await.is_err() {
                    tracing::warn!(
                        wait = ?RETENTION_WAIT,
                        "the old history database is still writing its last rows; it closes once they are written"
                    );
                }
            }
            None if config.activity.store.retention != self.store.retention => {
                self.apply_retention(config.activity.store.retention.clone())
                    .await;
            }
            None => {}
        }
        self.store = config.activity.store.clone();
        self.preload(config);
        Ok(())
    }

    /// Applies a changed `store.maxRows`/`store.maxAge` to the open database.
    async fn apply_retention(&self, retention: Retention) {
        let history = self.state.inner.activity.history();
        let (max_rows, max_age) = (retention.max_rows, retention.max_age);
        let applied =
            tokio::task::spawn_blocking(move || history.set_retention(retention, RETENTION_WAIT))
                .await
                .unwrap_or(false);
        if applied {
            tracing::info!(
                max_rows,
                ?max_age,
                "store.maxRows/store.maxAge applied to the history database"
            );
        } else {
            tracing::warn!(
                max_rows,
                ?max_age,
                wait = ?RETENTION_WAIT,
                "store.maxRows/store.maxAge: the history database is still deleting what they exclude"
            );
        }
    }

    /// The history for `store` when a reload changes `store.path` (as
    /// llama-swap, which reopens its store only then): the new database, or
    /// memory only without a path; `None` when the path is unchanged (a
    /// changed `maxRows` or `maxAge` is applied to the open database once
    /// the reload is).
    async fn reopened_history(
        &self,
        store: &StoreSettings,
    ) -> Result<Option<Arc<History>>, ServeError> {
        if store.path == self.store.path {
            return Ok(None);
        }
        let Some(path) = store.path.clone() else {
            tracing::info!("store.path removed: the history is kept in memory only from now on");
            return Ok(Some(Arc::new(History::in_memory())));
        };
        let settings = store.clone();
        let opened = tokio::task::spawn_blocking(move || History::open(&settings))
            .await
            .unwrap_or_else(|joined| {
                Err(StoreError::Thread {
                    path: path.clone(),
                    source: std::io::Error::other(joined),
                })
            })
            .map_err(ServeError::Store)?;
        tracing::info!(path = %path.display(), "store.path changed: the history goes to the new database from now on");
        Ok(Some(Arc::new(opened)))
    }

    /// Drains and stops: waiting requests answer 503, responses in flight may
    /// finish until `deadline`, then every upstream is stopped and reaped.
    pub(super) async fn stop(mut self, deadline: Duration, grace: Duration) {
        self.state.drain();
        self.preload.shutdown().await;
        self.sampling.shutdown().await;
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

/// The host sampler for `performance` (none when disabled), sampling every
/// `performance.every` in a task of `tasks`.
fn sampler(performance: PerformanceConfig, tasks: &mut JoinSet<()>) -> Option<Arc<SystemSampler>> {
    if performance.disabled {
        return None;
    }
    let sampler = Arc::new(SystemSampler::new(performance.every));
    tasks.spawn(Arc::clone(&sampler).run());
    Some(sampler)
}

/// `hooks.on_startup.preload`: loads each model in turn like a request would
/// (so swaps apply), holding nothing once it is ready. After a reload a kept
/// model that runs is granted at once: nothing restarts.
async fn preload_models(router: RouterHandle, models: Vec<String>) {
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
