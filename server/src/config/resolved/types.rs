//! The resolved configuration: every default applied, every macro expanded, every
//! port allocated, every alias resolved.

use std::collections::BTreeMap;
use std::time::Duration;

use super::api_key::ApiKey;
use super::model::ModelConfig;
use super::names::{PeerConfig, ProfileConfig, SelectorConfig};
use super::upstream::UpstreamConfig;

/// A loaded, validated llama-swap configuration.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Config {
    /// Every model, sorted by ID.
    pub models: Vec<ModelConfig>,
    /// Groups in file order. Empty means every model is in the implicit default group
    /// (swap + exclusive: one model at a time).
    pub groups: Vec<GroupConfig>,
    /// The matrix (`routing.router.settings.matrix` with `routing.router.use: matrix`,
    /// or the legacy top-level `matrix`), names as written; `None` under group
    /// routing. When set, `groups` is empty.
    pub matrix: Option<crate::policy::matrix::MatrixSettings>,
    /// The memory router (`routing.router.use: memory`, this server's
    /// extension): models are placed on GPUs by the memory they need. When
    /// set, `groups` is empty and `matrix` is `None`.
    pub memory: Option<super::memory::MemoryConfig>,
    /// `selectors`, in file order.
    pub selectors: Vec<SelectorConfig>,
    /// `profiles`, in file order. None is active when the server starts.
    pub profiles: Vec<ProfileConfig>,
    /// `peers`, sorted by ID: other servers whose models requests are
    /// forwarded to (never scheduled here).
    pub peers: Vec<PeerConfig>,
    /// `routing.scheduler`.
    pub scheduler: SchedulerConfig,
    /// `healthCheckTimeout` (default 120 s, at least 15 s): how long a start may take
    /// to become healthy; also the grace period for models evicted by a swap.
    pub health_check_timeout: Duration,
    /// `requestBodyTimeout` (this server's extension; default 120 s, 0 = none):
    /// how long a client may take to send a request body, after which it is
    /// answered 408 and its connection closed.
    pub request_body_timeout: Option<Duration>,
    /// `globalTTL` (default 0 = never): the `ttl` of models that set none.
    pub global_ttl: Option<Duration>,
    /// `maxQueueWait` (this server's extension; default 0 = no bound): how
    /// long a request may wait for its turn when its model sets none; the
    /// default and the cap of the `X-Queue-Timeout` header.
    pub max_queue_wait: Option<Duration>,
    /// `unloadTimeout` (default 10 s): grace period for manual, API and TTL unloads.
    pub unload_timeout: Duration,
    /// `startPort` (default 5800): the first port `${PORT}` allocates.
    pub start_port: u16,
    /// `sendLoadingState` (default false): the global default of the per-model flag.
    pub send_loading_state: bool,
    /// `includeAliasesInList` (default false): list aliases in `/v1/models`.
    pub include_aliases_in_list: bool,
    /// `apiKeys`: when non-empty, requests must present one of them.
    pub api_keys: Vec<ApiKey>,
    /// `keys` (this server's extension): per-key names, models, concurrency
    /// and admin rights, in the order given (see [`KeyScope`](super::key_scope::KeyScope)).
    pub keys: Vec<super::key_scope::KeyScope>,
    /// `hooks`.
    pub hooks: Hooks,
    /// `logLevel` (default info).
    pub log_level: LogLevel,
    /// `logToStdout` (default proxy).
    pub log_to_stdout: LogToStdout,
    /// `logTimeFormat` (default none: no timestamp).
    pub log_time_format: Option<LogTimeFormat>,
    /// `logRequests` (default false).
    pub log_requests: bool,
    /// `performance`: sampling of the system gauges on `/metrics`.
    pub performance: PerformanceConfig,
    /// What is kept of finished requests: `store`, `metricsMaxInMemory`,
    /// `captureBuffer`, `ui.activity.session_id`.
    pub activity: ActivityConfig,
    /// `requestBodyLimit` (this server's extension; default: the serve
    /// options', 32 MiB): the largest request body accepted, 413 beyond.
    pub request_body_limit: Option<usize>,
    /// `priority` (this server's extension): trust caps, bands, aging, queue bounds.
    pub priority_rules: PriorityConfig,
    /// `upstream`: `ignorePaths` for `/upstream/...`, and `caFile` (this
    /// server's extension) for `https://` upstreams.
    pub upstream: UpstreamConfig,
}

/// The `priority:` section: how far `X-Priority` is trusted, how priorities are
/// grouped in metrics, anti-starvation aging and per-model queue bounds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PriorityConfig {
    /// `ignoreHeader` (default false): every `X-Priority` counts as absent.
    pub ignore_header: bool,
    /// `maxHeaderPriority` (default none): ceiling on the header value.
    pub max_header_priority: Option<i32>,
    /// `apiKeys`: (index into the top-level `apiKeys`, ceiling) pairs.
    pub key_caps: Vec<(usize, i32)>,
    /// `bands` (default low < 0, normal 0, elevated > 0): metric label values.
    pub bands: crate::priority::Bands,
    /// `agingAfter` (default off): a waiter older than this ranks ahead of newer work.
    pub aging_after: Option<Duration>,
    /// `maxQueued` (default none): per model ID, most requests that may wait.
    pub max_queued: BTreeMap<String, usize>,
    /// `minResident` (seconds, default off): how long a model that became
    /// ready is kept from swaps for waiters of the same or lower priority
    /// (a model's own `minResident` replaces it).
    pub min_resident: Option<Duration>,
    /// `minResidentYieldsTo` (`higher`, the default, or `none`): who may stop
    /// a model inside its `minResident` window.
    pub min_resident_yields_to: crate::scheduler::ResidencyYield,
}

impl Config {
    /// The model with this ID.
    #[must_use]
    pub fn model(&self, id: &str) -> Option<&ModelConfig> {
        self.models
            .binary_search_by(|m| m.id.as_str().cmp(id))
            .ok()
            .and_then(|i| self.models.get(i))
    }

    /// Resolves a model ID or alias to the model's ID.
    #[must_use]
    pub fn resolve(&self, name: &str) -> Option<&str> {
        if let Some(model) = self.model(name) {
            return Some(&model.id);
        }
        self.models
            .iter()
            .find(|m| m.aliases.iter().any(|a| a == name))
            .map(|m| m.id.as_str())
    }

    /// The configured priority floor of a model: `None` when none is set (requests
    /// then rank by their header alone), and always `None` under the serial scheduler.
    #[must_use]
    pub fn priority(&self, model_id: &str) -> Option<i32> {
        match &self.scheduler {
            SchedulerConfig::Fifo { priorities, .. } => priorities.get(model_id).copied(),
            SchedulerConfig::Serial => None,
        }
    }

    /// The trust rules of the `priority:` section, with one slot per `apiKeys` entry.
    #[must_use]
    pub fn trust(&self) -> crate::priority::Trust {
        let rules = &self.priority_rules;
        let mut key_caps = vec![None; self.api_keys.len()];
        for &(index, cap) in &rules.key_caps {
            if let Some(slot) = key_caps.get_mut(index) {
                *slot = Some(cap);
            }
        }
        crate::priority::Trust::new(rules.ignore_header, rules.max_header_priority, key_caps)
    }

    /// The group a model belongs to, if any explicit group lists it.
    #[must_use]
    pub fn group_of(&self, model_id: &str) -> Option<&GroupConfig> {
        self.groups
            .iter()
            .find(|g| g.members.iter().any(|m| m == model_id))
    }
}

/// One group of `routing.router.settings.groups` (or the legacy top-level `groups`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupConfig {
    /// The group's name.
    pub name: String,
    /// `swap` (default true): members replace each other (one running at a time).
    pub swap: bool,
    /// `exclusive` (default true): starting a member stops models of other groups.
    pub exclusive: bool,
    /// `persistent` (default false): members are never stopped by other groups.
    pub persistent: bool,
    /// `members`: model IDs (aliases in the file are resolved), in file order.
    pub members: Vec<String>,
}

/// `routing.scheduler`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchedulerConfig {
    /// `use: fifo` (the default): waiting requests ranked by priority, then arrival.
    Fifo {
        /// `settings.fifo.priority`, keyed by model ID (aliases resolved).
        priorities: BTreeMap<String, i32>,
        /// `settings.fifo.drainFence` (default true).
        drain_fence: bool,
    },
    /// `use: serial`: one request at a time, in arrival order.
    Serial,
}

/// `hooks`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Hooks {
    /// `on_startup.preload`: model IDs (aliases resolved) loaded at start, in order.
    pub preload: Vec<String>,
    /// `on_idle` (this server's extension): models loaded back once no
    /// request has arrived for a while.
    pub on_idle: Option<OnIdle>,
}

/// `hooks.on_idle: {after, preload}`: once no model request has arrived for
/// `after` and nothing is in flight or waiting, the `preload` models that are
/// not running are loaded (as the startup preload does, at the lowest
/// priority, so any request goes first); once per idle spell.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OnIdle {
    /// `after` (seconds, at least 1).
    pub after: std::time::Duration,
    /// `preload`: model IDs (aliases resolved), in order.
    pub preload: Vec<String>,
}

/// `logLevel`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogLevel {
    /// `debug`.
    Debug,
    /// `info`.
    #[default]
    Info,
    /// `warn`.
    Warn,
    /// `error`.
    Error,
}

/// `logToStdout`: which logs reach the server's stdout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogToStdout {
    /// The proxy's own log.
    #[default]
    Proxy,
    /// The upstream processes' output.
    Upstream,
    /// Both.
    Both,
    /// Nothing.
    None,
}

/// What is kept of finished requests.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ActivityConfig {
    /// `store`: the history database (no path: in memory only).
    pub store: crate::store::StoreSettings,
    /// `metricsMaxInMemory`: finished requests kept in memory (default 1000).
    pub max_in_memory: usize,
    /// `captureBuffer`, in bytes (default 5 MiB; 0 = no captures).
    pub capture_buffer: usize,
    /// `ui.activity.session_id`: request headers naming a session, first
    /// found wins (default `X-Session-ID`, `X-Litellm-Session-Id`).
    pub session_headers: Vec<String>,
}

impl Default for ActivityConfig {
    fn default() -> Self {
        Self {
            store: crate::store::StoreSettings::default(),
            max_in_memory: crate::activity::DEFAULT_CAPACITY,
            capture_buffer: crate::capture::DEFAULT_BUFFER_BYTES,
            session_headers: vec!["X-Session-ID".to_owned(), "X-Litellm-Session-Id".to_owned()],
        }
    }
}

/// `performance`: how `/metrics` samples the system gauges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PerformanceConfig {
    /// `disabled` (default false): no sampling; `/metrics` shows no system gauges.
    pub disabled: bool,
    /// `every` (default 5 s, at least 5 s): the sampling interval.
    pub every: Duration,
}

impl Default for PerformanceConfig {
    fn default() -> Self {
        Self {
            disabled: false,
            every: Duration::from_secs(5),
        }
    }
}

/// `logTimeFormat`: the timestamp in front of each line of the proxy's log,
/// named after Go's time layouts as llama-swap names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogTimeFormat {
    /// `ansic`: `Mon Jan _2 15:04:05 2006`.
    Ansic,
    /// `unixdate`: `Mon Jan _2 15:04:05 MST 2006`.
    UnixDate,
    /// `rubydate`: `Mon Jan 02 15:04:05 -0700 2006`.
    RubyDate,
    /// `rfc822`: `02 Jan 06 15:04 MST`.
    Rfc822,
    /// `rfc822z`: `02 Jan 06 15:04 -0700`.
    Rfc822Z,
    /// `rfc850`: `Monday, 02-Jan-06 15:04:05 MST`.
    Rfc850,
    /// `rfc1123`: `Mon, 02 Jan 2006 15:04:05 MST`.
    Rfc1123,
    /// `rfc1123z`: `Mon, 02 Jan 2006 15:04:05 -0700`.
    Rfc1123Z,
    /// `rfc3339`: `2006-01-02T15:04:05Z07:00`.
    Rfc3339,
    /// `rfc3339nano`: `2006-01-02T15:04:05.999999999Z07:00`.
    Rfc3339Nano,
    /// `kitchen`: `3:04PM`.
    Kitchen,
    /// `stamp`: `Jan _2 15:04:05`.
    Stamp,
    /// `stampmilli`: `Jan _2 15:04:05.000`.
    StampMilli,
    /// `stampmicro`: `Jan _2 15:04:05.000000`.
    StampMicro,
    /// `stampnano`: `Jan _2 15:04:05.000000000`.
    StampNano,
}

impl LogTimeFormat {
    /// Every format with its name, in llama-swap's order.
    pub const ALL: [(&'static str, LogTimeFormat); 15] = [
        ("ansic", LogTimeFormat::Ansic),
        ("unixdate", LogTimeFormat::UnixDate),
        ("rubydate", LogTimeFormat::RubyDate),
        ("rfc822", LogTimeFormat::Rfc822),
        ("rfc822z", LogTimeFormat::Rfc822Z),
        ("rfc850", LogTimeFormat::Rfc850),
        ("rfc1123", LogTimeFormat::Rfc1123),
        ("rfc1123z", LogTimeFormat::Rfc1123Z),
        ("rfc3339", LogTimeFormat::Rfc3339),
        ("rfc3339nano", LogTimeFormat::Rfc3339Nano),
        ("kitchen", LogTimeFormat::Kitchen),
        ("stamp", LogTimeFormat::Stamp),
        ("stampmilli", LogTimeFormat::StampMilli),
        ("stampmicro", LogTimeFormat::StampMicro),
        ("stampnano", LogTimeFormat::StampNano),
    ];

    /// The format of a (lower-case) name, if there is one.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().find(|(n, _)| *n == name).map(|(_, f)| *f)
    }

    /// The format's name in a configuration file.
    #[must_use]
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, f)| *f == self)
            .map_or("", |(n, _)| n)
    }
}
