import os, shutil
os.chdir('/work/wt/ops/server/src')
def edit(path, pairs):
    s=open(path).read()
    for old,new in pairs:
        assert s.count(old)==1,(path,old)
        s=s.replace(old,new)
    open(path,'w').write(s)
shutil.copy('/tmp/ops-step3/monitor.rs','upstream/monitor.rs')
shutil.copy('/tmp/ops-step3/actor.rs','upstream/actor.rs')
shutil.copy('/tmp/ops-step3/health.rs','upstream/health.rs')
edit('upstream/mod.rs',[
("//! | `health` | polling the check endpoint with a fast-then-slower backoff |\n","//! | `health` | polling the check endpoint with a fast-then-slower backoff |\n//! | `monitor` | health monitoring of ready models, crash-loop backoff and the failed state |\n"),
("//!     health_check_timeout: Duration::from_secs(120),\n//! };","//!     health_check_timeout: Duration::from_secs(120),\n//!     monitor: Monitor::default(),\n//! };"),
("//! use llama_swap_server::upstream::{ProcessSpec, Supervisor};","//! use llama_swap_server::upstream::{Monitor, ProcessSpec, Supervisor};"),
("mod logs;\n","mod logs;\nmod monitor;\n"),
("pub use orphans::{MARKER_VAR, Reclaimed, adopt_orphans, reclaim};\n","pub use monitor::{\n    DEFAULT_HEALTH_CHECK_FAILURES, DEFAULT_MAX_RESTARTS, DEFAULT_RESTART_WINDOW, FIRST_BACKOFF,\n    MAX_BACKOFF, Monitor,\n};\npub use orphans::{MARKER_VAR, Reclaimed, adopt_orphans, reclaim};\n"),
("""    /// How long the upstream has to pass its health check.
    pub health_check_timeout: Duration,
}""","""    /// How long the upstream has to pass its health check.
    pub health_check_timeout: Duration,
    /// How the ready process is watched and its restarts paced (not part of
    /// [`starts_like`](Self::starts_like): read at the next start).
    pub monitor: Monitor,
}"""),
("""    /// Configured (false: removed by a reload, waiting for its task to end).
    listed: bool,
}""","""    /// Configured (false: removed by a reload, waiting for its task to end).
    listed: bool,
    /// Asks the owner task to forget the model's failures (an explicit load).
    clear_failures: Arc<std::sync::atomic::AtomicBool>,
}"""),
("""    /// TLS client for `https://` upstreams (`/props` of `parallel: auto`).
    tls: RwLock<Option<UpstreamTls>>,
}""","""    /// TLS client for `https://` upstreams (`/props` of `parallel: auto`).
    tls: RwLock<Option<UpstreamTls>>,
    /// Where restarts and failed health checks are counted.
    metrics: Option<Arc<crate::metrics::Metrics>>,
}"""),
("""    pub tls: Option<UpstreamTls>,
}

impl SupervisorOptions {""","""    pub tls: Option<UpstreamTls>,
    /// Where restarts and failed health checks are counted (default: nowhere).
    pub metrics: Option<Arc<crate::metrics::Metrics>>,
}

impl SupervisorOptions {
    /// Counts restarts and failed health checks into `metrics`.
    #[must_use]
    pub fn metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }
"""),
("""            tls: RwLock::new(options.tls),
        };""","""            tls: RwLock::new(options.tls),
            metrics: options.metrics,
        };"""),
("""        let actor = ModelActor {""","""        let clear_failures = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let actor = ModelActor {"""),
("""            shutdown_at: self.shutdown_at.subscribe(),
            tls,
        };
        self.tasks.spawn(actor.run());
        ModelHandle {
            requests,
            status: status_rx,
            config,
            listed: true,
        }""","""            shutdown_at: self.shutdown_at.subscribe(),
            tls,
            restarts: monitor::Restarts::default(),
            clear_failures: Arc::clone(&clear_failures),
            metrics: self.metrics.clone(),
        };
        self.tasks.spawn(actor.run());
        ModelHandle {
            requests,
            status: status_rx,
            config,
            listed: true,
            clear_failures,
        }"""),
("""    fn requests(&self, model: &str) -> Option<mpsc::Sender<Request>> {""","""    /// Forgets `model`'s recent failures before its next start (an explicit
    /// load: a failed model is started again at once, without backoff).
    pub fn clear_failures(&self, model: &str) {
        if let Some(handle) = self.read_models().get(model) {
            handle
                .clear_failures
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }

    fn requests(&self, model: &str) -> Option<mpsc::Sender<Request>> {"""),
])
edit('launcher.rs',[("""    /// The start was aborted because the model was stopped or unloaded meanwhile.""","""    /// The model failed `failures` times within its `restartWindow` (exits,
    /// failed starts, failed health checks): starts are refused until that
    /// long has passed since the last failure, or an explicit load.
    #[error("model {model} failed {failures} times within {window:?}; last output:\\n{last_output}")]
    Failed {
        /// The model ID.
        model: String,
        /// Failures within the window.
        failures: u32,
        /// `restartWindow`.
        window: Duration,
        /// The last lines its process wrote.
        last_output: String,
    },
    /// The start was aborted because the model was stopped or unloaded meanwhile."""),
("""            | Self::HealthCheckTimeout { model, .. }
            | Self::Aborted { model } => Some(model),""","""            | Self::HealthCheckTimeout { model, .. }
            | Self::Failed { model, .. }
            | Self::Aborted { model } => Some(model),""")])
edit('api/error.rs',[("""        LaunchError::Aborted { .. } => (StatusCode::SERVICE_UNAVAILABLE, SERVER, "model_unloaded"),""","""        LaunchError::Aborted { .. } => (StatusCode::SERVICE_UNAVAILABLE, SERVER, "model_unloaded"),
        LaunchError::Failed { .. } => (StatusCode::SERVICE_UNAVAILABLE, SERVER, "model_failed"),"""),
("""        LaunchError::Aborted { .. } => {
            "the start was aborted""","""        LaunchError::Failed {
            model,
            failures,
            window,
            last_output,
        } => format!(
            "it failed {failures} times within {} s (restartWindow) and is not started again until that long after its last failure, or POST /api/models/load/{model}; its last output (GET /logs/stream/{model} has more):\\n{last_output}",
            window.as_secs()
        ),
        LaunchError::Aborted { .. } => {
            "the start was aborted""")])
edit('serve/instance.rs',[("""        let (supervisor, events) = Supervisor::with_options(
            specs,
            LOG_LINES_PER_MODEL,
            SupervisorOptions::default().tls(tls.clone()),
        );
        let launcher: Arc<dyn Launcher> = supervisor.clone();
        let metrics = Arc::new(Metrics::new(
            config.models.iter().map(|m| m.id.clone()),
            config.priority_rules.bands.clone(),
        ));""","""        let metrics = Arc::new(Metrics::new(
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
        let launcher: Arc<dyn Launcher> = supervisor.clone();""")])
edit('metrics/mod.rs',[("""//! | `llamaswap_key_requests_total` |""","""//! | `llamaswap_upstream_failures_total` | counter | `model`, `reason` (start_failed, exited, unhealthy, health_check: one failed poll) |
//! | `llamaswap_key_requests_total` |"""),
("""    key_requests: Family<L2, Counter>,
    key_tokens: Family<L2, Counter>,
    swaps""","""    key_requests: Family<L2, Counter>,
    key_tokens: Family<L2, Counter>,
    upstream_failures: Family<L2, Counter>,
    swaps"""),
("""        let key_requests = Family::<L2, Counter>::default();""","""        let upstream_failures = Family::<L2, Counter>::default();
        registry.register(
            "upstream_failures",
            "Failed starts, exits of ready upstreams, unhealthy upstreams and failed health polls, by model",
            upstream_failures.clone(),
        );
        let key_requests = Family::<L2, Counter>::default();"""),
("""            key_requests,
            key_tokens,
            swaps,""","""            key_requests,
            key_tokens,
            upstream_failures,
            swaps,"""),
("""    /// Records one swap to `model` that took `took`.""","""    /// Records a failure of `model`'s upstream (`reason`: start_failed,
    /// exited, unhealthy, health_check).
    pub fn upstream_failure(&self, model: &str, reason: &'static str) {
        self.upstream_failures
            .get_or_create(&[("model", self.model_label_of(model)), ("reason", reason.into())])
            .inc();
    }

    /// Records one swap to `model` that took `took`.""")])
edit('api/manage/activity.rs',[("""    let requested = HeaderPriority::from_headers(&headers).value();""","""    // An explicit load starts a failed model again at once.
    if let Some(supervisor) = &state.inner.supervisor {
        supervisor.clear_failures(&id);
    }
    let requested = HeaderPriority::from_headers(&headers).value();""")])
