//! llama-swap configuration: parsing, macros, validation and resolved models.
//!
//! A user's existing llama-swap `config.yaml` loads unchanged. Loading goes:
//! YAML → a generic, order-preserving tree (`node.rs`) → macro expansion (`macros.rs`)
//! → typed reads that collect every problem with its key path (`fields.rs`, `load.rs`,
//! `model.rs`, `routing.rs`) → a resolved [`Config`] (`types.rs`).
//!
//! - Unknown keys are warnings ([`ConfigWarning`]), as are llama-swap keys this server
//!   does not implement yet (`store`, `performance`, ...).
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
//! let env = |_: &str| None;
//! let loaded = Config::from_yaml_str("config.yaml", yaml, &env)?;
//! let qwen = loaded.config.model("qwen").unwrap();
//! assert_eq!(qwen.cmd, "llama-server --port 5800 -m /models/qwen.gguf");
//! assert_eq!(qwen.proxy, "http://localhost:5800");
//! assert_eq!(loaded.config.priority("qwen"), Some(5));
//! # Ok::<(), llama_swap_server::config::ConfigError>(())
//! ```

mod capabilities;
mod compat;
mod env;
mod error;
mod extras;
mod fields;
mod filters;
mod load;
mod loops;
mod macros;
mod mapping;
mod matrix;
mod model;
mod node;
mod parallel;
mod peers;
mod ports;
mod priority;
mod profiles;
mod routing;
mod selectors;
mod sources;
mod summary;
mod transport;
mod types;

use std::path::Path;

pub use capabilities::Capabilities;
pub use compat::{COMFYUI_MIN_CONCURRENCY, COMFYUI_MODEL_ID};
pub use error::{ConfigError, ConfigWarning, Issue, KeyPath, Reason, WarningKind};
pub use loops::SelfProxy;
pub use macros::EnvLookup;
pub use peers::{PEER_RESPONSE_HEADER_TIMEOUT, PeerConfig};
pub use ports::KeptPorts;
pub use profiles::{Pin, ProfileConfig};
pub use selectors::{DEFAULT_SPILLOVER, SelectorConfig, SelectorStrategy};
pub use sources::{MergeConflict, source_files};
pub use summary::Summary;
pub use transport::{CaCertificates, DEFAULT_IGNORE_PATH, IgnorePaths, UpstreamConfig};
pub(crate) use types::constant_time_eq;
pub use types::{
    ApiKey, Config, GroupConfig, Hooks, LogLevel, LogTimeFormat, LogToStdout, ModelConfig,
    PerformanceConfig, PriorityConfig, SchedulerConfig,
};

/// A configuration that loaded, with what was ignored or adjusted on the way.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The resolved configuration.
    pub config: Config,
    /// Unknown keys, unsupported keys and adjusted values, in the order met.
    pub warnings: Vec<ConfigWarning>,
}

impl Config {
    /// Loads a file, reading `${env.NAME}` from the process environment.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Read`] if the file cannot be read, [`ConfigError::Yaml`] if it is
    /// not valid YAML (duplicate keys included), [`ConfigError::Invalid`] with every
    /// invalid value otherwise.
    pub fn load(path: impl AsRef<Path>) -> Result<Loaded, ConfigError> {
        Self::load_with_env(path, &|name| std::env::var(name).ok())
    }

    /// Loads a file, looking environment variables up through `env`.
    ///
    /// # Errors
    ///
    /// As [`Config::load`].
    pub fn load_with_env(
        path: impl AsRef<Path>,
        env: EnvLookup<'_>,
    ) -> Result<Loaded, ConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::from_yaml_str(&path.display().to_string(), &text, env)
    }

    /// Loads a configuration from YAML text. `file` names the source in messages.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Yaml`] or [`ConfigError::Invalid`], as [`Config::load`].
    pub fn from_yaml_str(
        file: &str,
        yaml: &str,
        env: EnvLookup<'_>,
    ) -> Result<Loaded, ConfigError> {
        let root = sources::parse_document(file, yaml, env)?;
        Self::from_document(file, &root, env, None)
    }

    /// Loads `--config` and/or `--config-dir`: the file first, then the
    /// directory's `*.yml`/`*.yaml` files in name order, merged with
    /// llama-swap's rules (see [`source_files`] and [`MergeConflict`]),
    /// reading `${env.NAME}` from the process environment.
    ///
    /// # Errors
    ///
    /// As [`source_files`] and [`Config::load`], and [`ConfigError::Merge`]
    /// when two files conflict.
    pub fn load_sources(file: Option<&Path>, dir: Option<&Path>) -> Result<Loaded, ConfigError> {
        Self::load_sources_with_env(file, dir, &|name| std::env::var(name).ok())
    }

    /// As [`Config::load_sources`], looking environment variables up through `env`.
    ///
    /// # Errors
    ///
    /// As [`Config::load_sources`].
    pub fn load_sources_with_env(
        file: Option<&Path>,
        dir: Option<&Path>,
        env: EnvLookup<'_>,
    ) -> Result<Loaded, ConfigError> {
        Self::load_sources_with(file, dir, env, None)
    }

    /// As [`Config::load_sources`] for a reload: models that `kept` lists
    /// keep their `${PORT}` numbers (while `startPort` is unchanged), and new
    /// models are numbered past them, so that adding a model does not
    /// renumber, and so restart, the others.
    ///
    /// # Errors
    ///
    /// As [`Config::load_sources`].
    pub fn load_sources_keeping(
        file: Option<&Path>,
        dir: Option<&Path>,
        kept: &KeptPorts,
    ) -> Result<Loaded, ConfigError> {
        Self::load_sources_with(file, dir, &|name| std::env::var(name).ok(), Some(kept))
    }

    /// As [`Config::load_sources_keeping`], looking environment variables up
    /// through `env`.
    ///
    /// # Errors
    ///
    /// As [`Config::load_sources`].
    pub fn load_sources_keeping_with_env(
        file: Option<&Path>,
        dir: Option<&Path>,
        env: EnvLookup<'_>,
        kept: &KeptPorts,
    ) -> Result<Loaded, ConfigError> {
        Self::load_sources_with(file, dir, env, Some(kept))
    }

    fn load_sources_with(
        file: Option<&Path>,
        dir: Option<&Path>,
        env: EnvLookup<'_>,
        kept: Option<&KeptPorts>,
    ) -> Result<Loaded, ConfigError> {
        let files = source_files(file, dir)?;
        let mut merged = node::Node::Null;
        for path in &files {
            let name = path.display().to_string();
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.clone(),
                source,
            })?;
            let root = sources::parse_document(&name, &text, env)?;
            sources::merge(&mut merged, root, &name)?;
        }
        let name = match (files.as_slice(), dir) {
            ([only], _) => only.display().to_string(),
            (_, Some(dir)) => match file {
                Some(file) => format!("{} + {}", file.display(), dir.display()),
                None => dir.display().to_string(),
            },
            _ => String::new(),
        };
        Self::from_document(&name, &merged, env, kept)
    }

    fn from_document(
        file: &str,
        root: &node::Node,
        env: EnvLookup<'_>,
        kept: Option<&KeptPorts>,
    ) -> Result<Loaded, ConfigError> {
        let mut cx = fields::Diagnostics::default();
        match load::build(root, env, kept, &mut cx) {
            Some(config) if cx.issues.is_empty() => Ok(Loaded {
                config,
                warnings: cx.warnings,
            }),
            _ => Err(ConfigError::Invalid {
                file: file.to_owned(),
                issues: cx.issues,
            }),
        }
    }
}
