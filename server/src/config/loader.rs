//! [`Loader`]: the one way a configuration is loaded, from a file, a
//! directory of files, both, or text in memory.

use std::fmt;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};

use super::document::env::EnvLookup;
use super::document::error::{ConfigError, ConfigWarning};
use super::document::fields::Diagnostics;
use super::document::node::Node;
use super::document::ports::KeptPorts;
use super::document::sources::{self, source_files};
use super::resolved::types::Config;
use super::sections::{self, Inputs};

/// A configuration that loaded, with what was ignored or adjusted on the way.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The resolved configuration.
    pub config: Config,
    /// Unknown keys, unsupported keys and adjusted values, in the order met.
    pub warnings: Vec<ConfigWarning>,
}

/// Where a configuration comes from and how it is read; made by
/// [`Config::loader`], consumed by [`Loader::load`].
///
/// Sources: [`file`](Self::file) (`--config`), [`dir`](Self::dir)
/// (`--config-dir`: its `*.yml`/`*.yaml` files in name order, merged after the
/// file with llama-swap's rules, see [`source_files`] and
/// [`MergeConflict`](super::MergeConflict)), or [`yaml`](Self::yaml) (text in
/// memory, instead of files). `${env.NAME}` is read from the process
/// environment unless [`env`](Self::env) says otherwise.
///
/// ```
/// use llama_swap_server::config::Config;
///
/// let yaml = "models:\n  qwen:\n    cmd: llama-server --port ${PORT}\n";
/// let loaded = Config::loader().yaml("config.yaml", yaml).env(&|_| None).load()?;
/// assert_eq!(loaded.config.model("qwen").unwrap().port, Some(5800));
/// # Ok::<(), llama_swap_server::config::ConfigError>(())
/// ```
#[derive(Clone, Default)]
#[must_use]
pub struct Loader<'a> {
    file: Option<PathBuf>,
    dir: Option<PathBuf>,
    yaml: Option<(String, &'a str)>,
    env: Option<EnvLookup<'a>>,
    kept: Option<&'a KeptPorts>,
    /// `None`: the system's; `Some(None)`: not checked.
    ephemeral_ports: Option<Option<RangeInclusive<u16>>>,
}

impl fmt::Debug for Loader<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Loader")
            .field("file", &self.file)
            .field("dir", &self.dir)
            .field("yaml", &self.yaml.as_ref().map(|(name, _)| name))
            .field("env", &self.env.map(|_| "custom"))
            .field("kept", &self.kept)
            .field("ephemeral_ports", &self.ephemeral_ports)
            .finish()
    }
}

impl Config {
    /// Starts loading a configuration: name its sources, then call
    /// [`Loader::load`].
    pub fn loader<'a>() -> Loader<'a> {
        Loader::default()
    }
}

impl<'a> Loader<'a> {
    /// Reads this file (`--config`); replaces [`yaml`](Self::yaml).
    pub fn file(mut self, path: impl AsRef<Path>) -> Self {
        self.file = Some(path.as_ref().to_owned());
        self.yaml = None;
        self
    }

    /// Reads the directory's `*.yml`/`*.yaml` files (`--config-dir`), after
    /// the [`file`](Self::file) if there is one; replaces [`yaml`](Self::yaml).
    pub fn dir(mut self, path: impl AsRef<Path>) -> Self {
        self.dir = Some(path.as_ref().to_owned());
        self.yaml = None;
        self
    }

    /// Reads `text` instead of files; `name` names it in messages. Replaces
    /// [`file`](Self::file) and [`dir`](Self::dir).
    pub fn yaml(mut self, name: impl Into<String>, text: &'a str) -> Self {
        self.yaml = Some((name.into(), text));
        self.file = None;
        self.dir = None;
        self
    }

    /// Looks `${env.NAME}` up through `env` instead of the process
    /// environment (tests, embedding).
    pub fn env(mut self, env: EnvLookup<'a>) -> Self {
        self.env = Some(env);
        self
    }

    /// For a reload: models that `kept` lists keep their `${PORT}` numbers
    /// (while `startPort` is unchanged), and new models are numbered past
    /// them, so that adding a model does not renumber, and so restart, the
    /// others.
    pub fn keep_ports(mut self, kept: &'a KeptPorts) -> Self {
        self.kept = Some(kept);
        self
    }

    /// The range of local ports the system gives outgoing connections, for
    /// the warning about `${PORT}` numbers inside it (`None`: no warning). By
    /// default the system's (Linux: `net.ipv4.ip_local_port_range`).
    pub fn ephemeral_ports(mut self, range: Option<RangeInclusive<u16>>) -> Self {
        self.ephemeral_ports = Some(range);
        self
    }

    /// Reads, merges, expands and checks the configuration.
    ///
    /// # Errors
    ///
    /// [`ConfigError::NoSources`] without a source; as [`source_files`] for a
    /// directory; [`ConfigError::Read`] when a file cannot be read;
    /// [`ConfigError::Yaml`] when one is not valid YAML (duplicate keys
    /// included); [`ConfigError::NotAMap`]; [`ConfigError::Merge`] when two
    /// files conflict; [`ConfigError::Invalid`] with every invalid value
    /// otherwise.
    pub fn load(self) -> Result<Loaded, ConfigError> {
        let process = |name: &str| std::env::var(name).ok();
        let env: EnvLookup<'_> = match self.env {
            Some(env) => env,
            None => &process,
        };
        let inputs = Inputs {
            env,
            kept_ports: self.kept,
            ephemeral_ports: self
                .ephemeral_ports
                .clone()
                .unwrap_or_else(crate::upstream::ephemeral_ports),
        };
        if let Some((name, text)) = &self.yaml {
            let root = sources::parse_document(name, text, env)?;
            return resolve(name, &root, &inputs);
        }
        let (file, dir) = (self.file.as_deref(), self.dir.as_deref());
        let files = source_files(file, dir)?;
        let mut merged = Node::Null;
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
        resolve(&name, &merged, &inputs)
    }
}

fn resolve(file: &str, root: &Node, inputs: &Inputs<'_>) -> Result<Loaded, ConfigError> {
    let mut cx = Diagnostics::default();
    match sections::build(root, inputs, &mut cx) {
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
