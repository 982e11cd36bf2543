//! llama-swap configuration: parsing, macros, validation and resolved models.
//!
//! # How to add a key
//!
//! 1. **Where it lands**: a field on the resolved type in `resolved/`
//!    ([`Config`] in `resolved/types.rs`, [`ModelConfig`] in
//!    `resolved/model.rs`, a selector, profile or peer in `resolved/names.rs`),
//!    with a doc comment giving the key, its default and what it does.
//! 2. **Who reads it**: a top-level key gets a step in `sections.rs`'s
//!    `STEPS` table (a global setting: a reader in `globals.rs`; a section
//!    naming models: a `Step::Named` after `Step::Peers`). That table is the
//!    list of known keys: a key not in it is reported as unknown and its
//!    macros are not expanded. A key of a model is taken in
//!    `model/mod.rs::read_model` (its own file in `model/` when it has parts);
//!    a key inside a section in that section's reader. Read it with the
//!    `Diagnostics` helpers (`document/fields.rs`) so a bad value names its
//!    key path, and add a `Reason` or `WarningKind` (`document/error.rs`) for
//!    a new problem. A llama-swap key this server does not implement is a
//!    `Step::NotSupported` (or `Fields::unsupported`): it warns, it is never
//!    accepted silently.
//! 3. **What it drives**: map it onto the scheduler or the supervisor in
//!    `resolved/mapping.rs` if they need it, and show it in `--check-config`
//!    (`resolved/summary.rs`) when it changes behaviour.
//! 4. **Tests and docs**: a fixture under `tests/fixtures/config/` and a test
//!    in `tests/config/` (including the error for a bad value), and the key in
//!    `docs/DESIGN.md`'s configuration section, marked as this server's
//!    extension when llama-swap has no such key.
//!
//! # The folder
//!
//! - `document/`: the machinery. YAML to a generic, order-preserving tree
//!   (`node`), files and how they merge (`sources`), `${env.NAME}` (`env`),
//!   macros (`macros`), `${PORT}` numbers (`ports`), typed reads collecting
//!   every problem (`fields`), errors and warnings (`error`).
//! - `model/`: one entry of `models` and its parts (`command`, `parallel`,
//!   `compat`, `capabilities`, `filters`, `timeouts`).
//! - the top-level sections, beside them: `sections` (the table of every
//!   top-level key and the order they are read in), `globals`, `peers`,
//!   `routing` and `matrix`, `selectors`, `profiles`, `priority`, `hooks`,
//!   `upstream`, `extras`, and `resolver` (model and peer names for the
//!   sections read after them).
//! - `resolved/`: the output side. The resolved types, their mapping onto the
//!   scheduler and supervisor settings, the `--check-config` summary and the
//!   self-proxy check.
//! - `loader`: [`Loader`], the one entry point.
//!
//! # Behaviour
//!
//! - Unknown keys are warnings ([`ConfigWarning`]). Every top-level key of
//!   llama-swap's is read (`metricsMaxInMemory`, `captureBuffer`, `store` and
//!   `ui` included); a llama-swap key this server did not implement would warn
//!   that it is not supported (`Step::NotSupported`), and none does today.
//! - [`Config::scheduler_settings`] and [`Config::process_specs`] map the result onto
//!   what the scheduler and the upstream supervisor are built from.
//! - Invalid values are fatal: [`ConfigError::Invalid`] lists every [`Issue`] as
//!   `file: key.path: reason`.
//! - Differences from llama-swap, on purpose: priority keys that are aliases apply to
//!   their model (llama-swap ignores them), unknown names in `hooks.on_startup.preload`
//!   and in priority maps are errors (llama-swap drops them), fifo priorities under
//!   `use: serial` are refused, and `routing.scheduler.settings.fifo.drainFence` is new.
//!
//! ```
//! use llama_swap_server::config::Config;
//!
//! let yaml = r#"
//! macros:
//!   server: llama-server --port ${PORT}
//! models:
//!   qwen:
//!     cmd: ${server} -m /models/${MODEL_ID}.gguf
//!     aliases: [chat]
//! routing:
//!   scheduler:
//!     settings:
//!       fifo:
//!         priority: { chat: 5 }
//! "#;
//! let loaded = Config::loader().yaml("config.yaml", yaml).env(&|_| None).load()?;
//! let qwen = loaded.config.model("qwen").unwrap();
//! assert_eq!(qwen.cmd, "llama-server --port 5800 -m /models/qwen.gguf");
//! assert_eq!(qwen.proxy, "http://localhost:5800");
//! assert_eq!(loaded.config.priority("qwen"), Some(5));
//! # Ok::<(), llama_swap_server::config::ConfigError>(())
//! ```

mod document;
mod extras;
mod globals;
mod hooks;
mod keys;
mod loader;
mod matrix;
mod memory;
mod model;
mod monitor;
mod peers;
mod priority;
mod profiles;
mod resolved;
mod resolver;
mod routing;
mod sections;
mod selectors;
mod upstream;

pub use document::env::EnvLookup;
pub use document::error::{
    ConfigError, ConfigWarning, Issue, KeyPath, MergeConflict, Reason, WarningKind, YamlLimit,
};
pub use document::ports::KeptPorts;
pub use document::sources::source_files;
pub use loader::{Loaded, Loader};
pub use resolved::api_key::ApiKey;
pub(crate) use resolved::api_key::constant_time_eq;
pub use resolved::key_scope::KeyScope;
pub use resolved::loops::SelfProxy;
pub use resolved::memory::{GpuList, MemoryConfig, SleepConfig};
pub use resolved::model::{COMFYUI_MIN_CONCURRENCY, COMFYUI_MODEL_ID, Capabilities, ModelConfig};
pub use resolved::names::{
    DEFAULT_PEER_CONCURRENCY_LIMIT, DEFAULT_SPILLOVER, PEER_RESPONSE_HEADER_TIMEOUT, PeerConfig,
    Pin, ProfileConfig, SelectorConfig, SelectorStrategy,
};
pub use resolved::summary::Summary;
pub use resolved::types::{
    Config, GroupConfig, Hooks, LogLevel, LogTimeFormat, LogToStdout, OnIdle, PerformanceConfig,
    PriorityConfig, SchedulerConfig,
};
pub use resolved::upstream::{CaCertificates, DEFAULT_IGNORE_PATH, IgnorePaths, UpstreamConfig};
