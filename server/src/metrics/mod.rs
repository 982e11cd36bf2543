//! Prometheus metrics of the server, encoded with `prometheus-client`.
//!
//! Every label value comes from a bounded set: configured model IDs (a name
//! that is not configured becomes `other`), configured [`Bands`], and fixed
//! words (outcomes, error codes, model states). A client sending random
//! priorities or model names cannot grow the number of series.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `llamaswap_requests_total` | counter | `outcome` (served, error, cancelled, rejected), `code` (error code, empty otherwise), `band` |
//! | `llamaswap_queue_depth` | gauge | `band` |
//! | `llamaswap_model_queue_depth` | gauge | `model`, `band` |
//! | `llamaswap_queue_oldest_wait_seconds` | gauge | `band` |
//! | `llamaswap_queue_wait_seconds` | histogram | `band` |
//! | `llamaswap_model_queue_wait_seconds` | histogram | `model`, `band` |
//! | `llamaswap_queue_timeouts_total` | counter | `model`, `band` (requests that left the queue at their `X-Queue-Timeout` or `maxQueueWait`) |
//! | `llamaswap_requests_in_progress` | gauge | |
//! | `llamaswap_idle_preloads_total` | counter | `model` (loaded back by `hooks.on_idle`) |
//! | `llamaswap_upstream_failures_total` | counter | `model`, `reason` (start_failed, exited: a monitored ready process exited, health_check: one failed poll, unhealthy: `healthCheckFailures` in a row, failed: the failure that made the model failed) |
//! | `llamaswap_key_requests_total` | counter | `key` (the names of `keys`, `key<N>` for others), `outcome` (ok, error) |
//! | `llamaswap_key_tokens_total` | counter | `key`, `kind` (input, output) |
//! | `llamaswap_swaps_total` | counter | `model`, `result` (ok, failed) |
//! | `llamaswap_swap_duration_seconds` | histogram | `model` |
//! | `llamaswap_drain_fence_holds_total` | counter | |
//! | `llamaswap_subscriber_lags_total` | counter | `feed` (activity, log): times an `/api/events` reader fell behind a feed (activity rows are then sent from the in-memory history, log lines are dropped with a note) |
//! | `llamaswap_priority_header_rejected_total` | counter | `reason` (invalid, duplicated) |
//! | `llamaswap_priority_capped_total` | counter | |
//! | `llamaswap_model_state` | gauge (1 for the current state) | `model`, `state` (`stopped`, `starting`, `ready`, `stopping`, `sleeping`, `failed`: `maxRestarts` failures within `restartWindow`) |
//! | `llamaswap_model_requests_in_flight` | gauge | `model` |
//! | `llamaswap_model_parallel_slots` | gauge (while a model with a `parallel` limit is up) | `model` |
//! | `llamaswap_model_gpu_memory_bytes` | gauge (memory router: bytes a model that is up or asleep holds on each of its GPUs) | `model`, `gpu` |
//! | `llamaswap_placement_gpu_memory_bytes` | gauge (memory router: each configured or detected GPU) | `gpu`, `kind` (total, reserve, used, free) |
//! | `llamaswap_peer_requests_in_flight` | gauge | `peer` (configured peer IDs) |
//! | `llamaswap_peer_failures_total` | counter | `peer`, `reason` (unreachable, timeout, busy) |
//!
//! With `store.path` set, `llamaswap_history_rows_total{outcome}` (written,
//! dropped, failed) counts the activity rows handed to the history database.
//!
//! Beside these, [`SystemSampler`] renders the host gauges llama-swap serves
//! (and its Grafana dashboard reads) under llama-swap's names:
//! `llamaswap_cpu_util_percent{core}`, `llamaswap_memory_{total,used,free}_bytes`,
//! `llamaswap_swap_{total,used}_bytes`, `llamaswap_load_average{interval}`,
//! `llamaswap_network_bytes_total{interface,direction}`, the
//! `llamaswap_gpu_*{id,name,uuid}` gauges where a GPU can be read, and
//! `llamaswap_gpu_available`.

mod outcome;
mod placement;
mod system;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicI64, AtomicU64};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

pub(crate) use outcome::RequestOutcome;
pub(crate) use system::SystemSampler;

use crate::priority::{Bands, HeaderPriority};
use crate::scheduler::{ModelState, QueueEntry, RunningModel};

/// Content type of [`Metrics::encode`]'s output.
pub(crate) const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Label value for a model name that is not configured.
pub(crate) const OTHER_MODEL: &str = "other";

/// Wait-time bucket bounds in seconds (a swap can take minutes).
const WAIT_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0, 120.0,
];

/// Swap-duration bucket bounds in seconds.
const SWAP_BUCKETS: [f64; 10] = [0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0];

type L1 = [(&'static str, Label); 1];
type L2 = [(&'static str, Label); 2];
type L3 = [(&'static str, Label); 3];

/// A label value: a fixed word, or a configured name (model, band, peer)
/// shared rather than copied, so that recording a request allocates nothing.
/// Equal and hashed by its text, whichever form it has.
#[derive(Debug, Clone)]
enum Label {
    Word(&'static str),
    Name(std::sync::Arc<str>),
}

impl Label {
    fn as_str(&self) -> &str {
        match self {
            Self::Word(word) => word,
            Self::Name(name) => name,
        }
    }
}

impl PartialEq for Label {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Label {}

impl std::hash::Hash for Label {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl From<&'static str> for Label {
    fn from(word: &'static str) -> Self {
        Self::Word(word)
    }
}

impl From<String> for Label {
    fn from(name: String) -> Self {
        Self::Name(name.into())
    }
}

impl From<&String> for Label {
    fn from(name: &String) -> Self {
        Self::Name(name.as_str().into())
    }
}

impl prometheus_client::encoding::EncodeLabelValue for Label {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

/// The configured bands and their names as shared labels.
#[derive(Debug)]
struct BandLabels {
    bands: std::sync::Arc<Bands>,
    names: Names,
}

impl BandLabels {
    fn new(bands: Bands) -> Self {
        let mut names = Names::default();
        for band in bands.iter() {
            names.insert(&band.name);
        }
        Self {
            bands: std::sync::Arc::new(bands),
            names,
        }
    }

    /// The label of the band `priority` falls in.
    fn of(&self, priority: i32) -> Label {
        let name = self.bands.name_of(priority);
        self.names
            .get(name)
            .unwrap_or_else(|| Label::from(name.to_owned()))
    }

    /// Every band's label, in the bands' order.
    fn labels(&self) -> Vec<Label> {
        self.bands
            .iter()
            .map(|band| {
                self.names
                    .get(&band.name)
                    .unwrap_or_else(|| Label::from(&band.name))
            })
            .collect()
    }
}

/// The configured names as shared labels, looked up by their text.
#[derive(Debug, Default)]
struct Names(BTreeSet<std::sync::Arc<str>>);

impl Names {
    fn get(&self, name: &str) -> Option<Label> {
        self.0
            .get(name)
            .map(|n| Label::Name(std::sync::Arc::clone(n)))
    }

    fn insert(&mut self, name: &str) -> Label {
        if let Some(label) = self.get(name) {
            return label;
        }
        let name: std::sync::Arc<str> = name.into();
        self.0.insert(std::sync::Arc::clone(&name));
        Label::Name(name)
    }
}

fn wait_histogram() -> Histogram {
    Histogram::new(WAIT_BUCKETS)
}

fn swap_histogram() -> Histogram {
    Histogram::new(SWAP_BUCKETS)
}

/// Every metric of one served configuration. Shared (`Arc`) by the HTTP layer
/// and the router actor; recording is lock-free or a short read lock.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Replaced by a reload (`set_bands`); series of old bands stay, frozen.
    bands: std::sync::RwLock<BandLabels>,
    /// The configured models; a reload adds its new ones (series of removed
    /// models stay, frozen).
    models: std::sync::RwLock<Names>,
    requests: Family<L3, Counter>,
    queue_depth: Family<L1, Gauge>,
    model_queue_depth: Family<L2, Gauge>,
    oldest_wait: Family<L1, Gauge<f64, AtomicU64>>,
    queue_wait: Family<L1, Histogram, fn() -> Histogram>,
    model_queue_wait: Family<L2, Histogram, fn() -> Histogram>,
    in_progress: Gauge<i64, AtomicI64>,
    queue_timeouts: Family<L2, Counter>,
    key_requests: Family<L2, Counter>,
    key_tokens: Family<L2, Counter>,
    upstream_failures: Family<L2, Counter>,
    idle_preloads: Family<L1, Counter>,
    swaps: Family<L2, Counter>,
    swap_duration: Family<L1, Histogram, fn() -> Histogram>,
    fence_holds: Counter,
    subscriber_lags: Family<L1, Counter>,
    header_rejected: Family<L1, Counter>,
    capped: Counter,
    model_state: Family<L2, Gauge>,
    model_in_flight: Family<L1, Gauge>,
    model_slots: Family<L1, Gauge>,
    model_gpu_memory: Family<L2, Gauge>,
    placement_gpu_memory: Family<L2, Gauge>,
    peer_in_flight: Family<L1, Gauge>,
    peer_failures: Family<L2, Counter>,
}

impl Metrics {
    /// Metrics for the configured `models` (IDs) with priority `bands`.
    pub fn new<I, S>(models: I, bands: Bands) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut registry = Registry::with_prefix("llamaswap");
        let requests = Family::<L3, Counter>::default();
        registry.register(
            "requests",
            "Model requests by outcome, error code and priority band",
            requests.clone(),
        );
        let queue_depth = Family::<L1, Gauge>::default();
        registry.register(
            "queue_depth",
            "Requests waiting in the ranked queue",
            queue_depth.clone(),
        );
        let model_queue_depth = Family::<L2, Gauge>::default();
        registry.register(
            "model_queue_depth",
            "Requests waiting in the ranked queue, by model",
            model_queue_depth.clone(),
        );
        let oldest_wait = Family::<L1, Gauge<f64, AtomicU64>>::default();
        registry.register(
            "queue_oldest_wait_seconds",
            "Longest current wait in the queue",
            oldest_wait.clone(),
        );
        let queue_wait: Family<L1, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(wait_histogram);
        registry.register(
            "queue_wait_seconds",
            "Time from admission to grant of granted requests",
            queue_wait.clone(),
        );
        let model_queue_wait: Family<L2, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(wait_histogram);
        registry.register(
            "model_queue_wait_seconds",
            "Time from admission to grant of granted requests, by model",
            model_queue_wait.clone(),
        );
        let in_progress = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "requests_in_progress",
            "Model requests admitted and not yet finished",
            in_progress.clone(),
        );
        let queue_timeouts = Family::<L2, Counter>::default();
        registry.register(
            "queue_timeouts",
            "Requests that left the queue at their X-Queue-Timeout or maxQueueWait, by model",
            queue_timeouts.clone(),
        );
        let idle_preloads = Family::<L1, Counter>::default();
        registry.register(
            "idle_preloads",
            "Models loaded back by hooks.on_idle after a quiet spell",
            idle_preloads.clone(),
        );
        let upstream_failures = Family::<L2, Counter>::default();
        registry.register(
            "upstream_failures",
            "Failed starts, exits of monitored upstreams, failed health checks and unhealthy or failed upstreams, by model and reason",
            upstream_failures.clone(),
        );
        let key_requests = Family::<L2, Counter>::default();
        registry.register(
            "key_requests",
            "Finished model requests by API key name (never the key) and outcome",
            key_requests.clone(),
        );
        let key_tokens = Family::<L2, Counter>::default();
        registry.register(
            "key_tokens",
            "Prompt (input) and generated (output) tokens the upstreams reported, by API key name",
            key_tokens.clone(),
        );
        let swaps = Family::<L2, Counter>::default();
        registry.register(
            "swaps",
            "Model starts (stopping the models in the way first), by result",
            swaps.clone(),
        );
        let swap_duration: Family<L1, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(swap_histogram);
        registry.register(
            "swap_duration_seconds",
            "Time to stop the evicted models and make a model ready",
            swap_duration.clone(),
        );
        let fence_holds = Counter::default();
        registry.register(
            "drain_fence_holds",
            "Requests the drain fence held back for higher-priority work (each counted once)",
            fence_holds.clone(),
        );
        let subscriber_lags = Family::<L1, Counter>::default();
        registry.register(
            "subscriber_lags",
            "Times an /api/events reader fell behind a feed",
            subscriber_lags.clone(),
        );
        let header_rejected = Family::<L1, Counter>::default();
        registry.register(
            "priority_header_rejected",
            "X-Priority headers that could not be used and counted as 0",
            header_rejected.clone(),
        );
        let capped = Counter::default();
        registry.register(
            "priority_capped",
            "Requests whose X-Priority was lowered by a configured cap or ignored",
            capped.clone(),
        );
        let model_state = Family::<L2, Gauge>::default();
        registry.register(
            "model_state",
            "1 for the state each configured model is in",
            model_state.clone(),
        );
        let model_in_flight = Family::<L1, Gauge>::default();
        registry.register(
            "model_requests_in_flight",
            "Requests forwarded to each model's upstream and not finished",
            model_in_flight.clone(),
        );
        let model_slots = Family::<L1, Gauge>::default();
        registry.register(
            "model_parallel_slots",
            "The parallel limit of models that have one: most requests in flight at once",
            model_slots.clone(),
        );
        let model_gpu_memory = Family::<L2, Gauge>::default();
        registry.register(
            "model_gpu_memory_bytes",
            "Memory router: bytes each model that is up or asleep holds on each of its GPUs",
            model_gpu_memory.clone(),
        );
        let placement_gpu_memory = Family::<L2, Gauge>::default();
        registry.register(
            "placement_gpu_memory_bytes",
            "Memory router: each GPU's total, reserved, used and free bytes as it counts them",
            placement_gpu_memory.clone(),
        );
        let peer_in_flight = Family::<L1, Gauge>::default();
        registry.register(
            "peer_requests_in_flight",
            "Requests forwarded to a peer whose response has not ended",
            peer_in_flight.clone(),
        );
        let peer_failures = Family::<L2, Counter>::default();
        registry.register(
            "peer_failures",
            "Requests a peer could not take: not reachable, or a transport timeout ran out",
            peer_failures.clone(),
        );
        let metrics = Self {
            registry,
            bands: std::sync::RwLock::new(BandLabels::new(bands)),
            models: std::sync::RwLock::new(Names::default()),
            requests,
            queue_depth,
            model_queue_depth,
            oldest_wait,
            queue_wait,
            model_queue_wait,
            in_progress,
            queue_timeouts,
            key_requests,
            key_tokens,
            upstream_failures,
            idle_preloads,
            swaps,
            swap_duration,
            fence_holds,
            subscriber_lags,
            header_rejected,
            capped,
            model_state,
            model_in_flight,
            model_slots,
            model_gpu_memory,
            placement_gpu_memory,
            peer_in_flight,
            peer_failures,
        };
        metrics.add_models(models);
        metrics.zero_series();
        metrics
    }

    /// Creates the series that should read 0 before anything happened, so a
    /// dashboard sees them from the first scrape.
    fn zero_series(&self) {
        let bands = self.band_labels();
        for band in bands.labels() {
            let _ = self.queue_depth.get_or_create(&[("band", band.clone())]);
            let _ = self.oldest_wait.get_or_create(&[("band", band.clone())]);
            let _ = self.queue_wait.get_or_create(&[("band", band)]);
        }
        for reason in ["invalid", "duplicated"] {
            let _ = self
                .header_rejected
                .get_or_create(&[("reason", reason.into())]);
        }
    }

    fn band_labels(&self) -> std::sync::RwLockReadGuard<'_, BandLabels> {
        self.bands
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn model_names(&self) -> std::sync::RwLockReadGuard<'_, Names> {
        self.models
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The configured bands.
    pub fn bands(&self) -> std::sync::Arc<Bands> {
        std::sync::Arc::clone(&self.band_labels().bands)
    }

    /// The bands a reload configured (requests label by them from now on).
    pub fn set_bands(&self, bands: Bands) {
        *self
            .bands
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = BandLabels::new(bands);
        self.zero_series();
    }

    /// Adds the models a reload configured (kept ones keep their series).
    pub fn add_models<I, S>(&self, models: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut names = self
            .models
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for model in models {
            names.insert(&model.into());
        }
    }

    fn model_set(&self) -> Vec<Label> {
        self.model_names()
            .0
            .iter()
            .map(|n| Label::Name(std::sync::Arc::clone(n)))
            .collect()
    }

    /// The band label of a priority.
    pub fn band(&self, priority: i32) -> String {
        self.band_label(priority).as_str().to_owned()
    }

    fn band_label(&self, priority: i32) -> Label {
        self.band_labels().of(priority)
    }

    /// The model label of a name: itself if configured, [`OTHER_MODEL`] otherwise.
    fn model_label_of(&self, model: &str) -> Label {
        self.model_names()
            .get(model)
            .unwrap_or(Label::Word(OTHER_MODEL))
    }

    /// Starts tracking one model request at header priority `priority`; see
    /// [`RequestOutcome`].
    pub fn request(self: &std::sync::Arc<Self>, priority: i32) -> RequestOutcome {
        RequestOutcome::new(std::sync::Arc::clone(self), self.band_label(priority))
    }

    fn record_outcome(&self, outcome: &'static str, code: &'static str, band: Label) {
        self.requests
            .get_or_create(&[
                ("outcome", outcome.into()),
                ("code", code.into()),
                ("band", band),
            ])
            .inc();
    }

    /// Sets the number of model requests admitted and not yet finished.
    pub fn set_in_progress(&self, n: usize) {
        self.in_progress.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Records an X-Priority header that could not be used.
    pub fn header(&self, priority: HeaderPriority) {
        let reason = match priority {
            HeaderPriority::Invalid => "invalid",
            HeaderPriority::Duplicated => "duplicated",
            HeaderPriority::Absent | HeaderPriority::Value(_) => return,
        };
        self.header_rejected
            .get_or_create(&[("reason", reason.into())])
            .inc();
    }

    /// Records a request whose header priority a cap lowered (or that was ignored).
    pub fn capped(&self) {
        self.capped.inc();
    }

    /// Records that a request for `model` at effective `priority` waited
    /// `waited` before its grant.
    pub fn granted(&self, model: &str, priority: i32, waited: Duration) {
        let band = self.band_label(priority);
        let secs = waited.as_secs_f64();
        self.queue_wait
            .get_or_create(&[("band", band.clone())])
            .observe(secs);
        self.model_queue_wait
            .get_or_create(&[("model", self.model_label_of(model)), ("band", band)])
            .observe(secs);
    }

    /// Records a request for `model` (an ID) at effective `priority` that
    /// left the queue at its queue timeout.
    pub fn queue_timeout(&self, model: &str, priority: i32) {
        let band = self.band_label(priority);
        self.queue_timeouts
            .get_or_create(&[("model", self.model_label_of(model)), ("band", band)])
            .inc();
    }

    /// Records a finished request of the API key named `key` (a configured
    /// name, so the label set stays bounded) and the tokens it used.
    pub fn key_finished(
        &self,
        key: &std::sync::Arc<str>,
        ok: bool,
        input: Option<u64>,
        output: Option<u64>,
    ) {
        let name = Label::Name(std::sync::Arc::clone(key));
        let outcome = if ok { "ok" } else { "error" };
        self.key_requests
            .get_or_create(&[("key", name.clone()), ("outcome", outcome.into())])
            .inc();
        for (kind, tokens) in [("input", input), ("output", output)] {
            if let Some(tokens) = tokens {
                self.key_tokens
                    .get_or_create(&[("key", name.clone()), ("kind", kind.into())])
                    .inc_by(tokens);
            }
        }
    }

    /// Records that `hooks.on_idle` loaded `model` back.
    pub fn idle_preload(&self, model: &str) {
        self.idle_preloads
            .get_or_create(&[("model", self.model_label_of(model))])
            .inc();
    }

    /// Records a failure of `model`'s upstream (`reason`: start_failed,
    /// exited, health_check, unhealthy, failed).
    pub fn upstream_failure(&self, model: &str, reason: &'static str) {
        self.upstream_failures
            .get_or_create(&[
                ("model", self.model_label_of(model)),
                ("reason", reason.into()),
            ])
            .inc();
    }

    /// Records one swap to `model` that took `took`.
    pub fn swap(&self, model: &str, ok: bool, took: Duration) {
        let model = self.model_label_of(model);
        let result = if ok { "ok" } else { "failed" };
        self.swaps
            .get_or_create(&[("model", model.clone()), ("result", result.into())])
            .inc();
        self.swap_duration
            .get_or_create(&[("model", model)])
            .observe(took.as_secs_f64());
    }

    /// The in-flight gauge of a configured peer (created at 0, with its
    /// failure series). Only [`crate::peers::Peers`] calls it, once per
    /// configured peer, so the label values stay bounded.
    pub fn peer_in_flight(&self, peer: &str) -> Gauge {
        let label = Label::from(peer.to_owned());
        for reason in ["unreachable", "timeout"] {
            let _ = self
                .peer_failures
                .get_or_create(&[("peer", label.clone()), ("reason", reason.into())]);
        }
        self.peer_in_flight
            .get_or_create(&[("peer", label)])
            .clone()
    }

    /// Counts a request `peer` could not take (`reason`: unreachable, timeout,
    /// busy: at its `concurrencyLimit`).
    pub fn peer_failed(&self, peer: &str, reason: &'static str) {
        self.peer_failures
            .get_or_create(&[("peer", peer.to_owned().into()), ("reason", reason.into())])
            .inc();
    }

    /// Counts a reader of `/api/events` that fell behind `feed` (`activity`
    /// or `log`).
    pub fn subscriber_lagged(&self, feed: &'static str) {
        self.subscriber_lags
            .get_or_create(&[("feed", feed.into())])
            .inc();
    }

    /// Counts requests the drain fence held back.
    pub fn fence_holds(&self, n: u64) {
        if n > 0 {
            self.fence_holds.inc_by(n);
        }
    }

    /// Sets the queue and model gauges from the router's view and the failed
    /// models (whose state is `failed`, whatever the router says) at scrape
    /// time.
    pub fn observe_router(
        &self,
        queue: &[QueueEntry],
        running: &[RunningModel],
        failed: &std::collections::BTreeSet<&str>,
    ) {
        let models = self.model_set();
        let bands = self.band_labels();
        let mut depth: BTreeMap<(String, String), (Label, Label, i64)> = BTreeMap::new();
        let mut band_depth: BTreeMap<String, (Label, i64)> = BTreeMap::new();
        let mut oldest: BTreeMap<String, (Label, Duration)> = BTreeMap::new();
        for band in bands.labels() {
            let key = band.as_str().to_owned();
            band_depth.insert(key.clone(), (band.clone(), 0));
            oldest.insert(key.clone(), (band.clone(), Duration::ZERO));
            for model in &models {
                depth.insert(
                    (model.as_str().to_owned(), key.clone()),
                    (model.clone(), band.clone(), 0),
                );
            }
        }
        for entry in queue {
            let band = bands.of(entry.effective_priority);
            let model = self.model_label_of(&entry.model);
            let key = band.as_str().to_owned();
            depth
                .entry((model.as_str().to_owned(), key.clone()))
                .or_insert_with(|| (model, band.clone(), 0))
                .2 += 1;
            band_depth
                .entry(key.clone())
                .or_insert_with(|| (band.clone(), 0))
                .1 += 1;
            let o = &mut oldest.entry(key).or_insert((band, Duration::ZERO)).1;
            *o = (*o).max(entry.waited);
        }
        drop(bands);
        for (model, band, n) in depth.into_values() {
            self.model_queue_depth
                .get_or_create(&[("model", model), ("band", band)])
                .set(n);
        }
        for (band, n) in band_depth.into_values() {
            self.queue_depth.get_or_create(&[("band", band)]).set(n);
        }
        for (band, waited) in oldest.into_values() {
            self.oldest_wait
                .get_or_create(&[("band", band)])
                .set(waited.as_secs_f64());
        }
        for model in &models {
            let entry = running.iter().find(|r| r.model == model.as_str());
            let current = entry.map_or(ModelState::Stopped, |r| r.state);
            let label = [("model", model.clone())];
            self.model_in_flight
                .get_or_create(&label)
                .set(entry.map_or(0, |r| i64::try_from(r.in_flight).unwrap_or(i64::MAX)));
            // Shown while the model is up and has a limit (an `auto` one has
            // it once its upstream said, after each start).
            match entry.and_then(|r| r.parallel) {
                Some(slots) => {
                    self.model_slots
                        .get_or_create(&label)
                        .set(i64::try_from(slots).unwrap_or(i64::MAX));
                }
                None => {
                    self.model_slots.remove(&label);
                }
            }
            let current = if failed.contains(model.as_str()) {
                "failed"
            } else {
                current.as_str()
            };
            for state in [
                ModelState::Stopped.as_str(),
                ModelState::Starting.as_str(),
                ModelState::Ready.as_str(),
                ModelState::Stopping.as_str(),
                ModelState::Sleeping.as_str(),
                "failed",
            ] {
                self.model_state
                    .get_or_create(&[("model", model.clone()), ("state", state.into())])
                    .set(i64::from(state == current));
            }
        }
    }

    /// The OpenMetrics text of every metric ([`CONTENT_TYPE`]).
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(8192);
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests;
