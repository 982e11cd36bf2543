//! Errors and warnings of configuration loading, each tied to a key path.

use std::fmt;
use std::path::PathBuf;

/// Where a value sits in the YAML document, e.g. `models.qwen.ttl` or
/// `groups.chat.members[1]`.
///
/// Keys that contain characters which would make the path ambiguous (dots, brackets,
/// spaces, quotes) are shown quoted: `models."qwen2.5-7b".ttl`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct KeyPath(Vec<Segment>);

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Segment {
    Key(String),
    Index(usize),
}

impl KeyPath {
    /// The document root.
    #[must_use]
    pub fn root() -> Self {
        Self::default()
    }

    /// Builds a path from plain keys, e.g. `KeyPath::from_keys(["models", "qwen", "ttl"])`.
    #[must_use]
    pub fn from_keys<I, S>(keys: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self(keys.into_iter().map(|k| Segment::Key(k.into())).collect())
    }

    /// This path extended by a map key.
    #[must_use]
    pub fn key(&self, key: &str) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.to_owned()));
        Self(segments)
    }

    /// This path extended by a list index.
    #[must_use]
    pub fn index(&self, index: usize) -> Self {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        Self(segments)
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("(top level)");
        }
        for (i, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Index(index) => write!(f, "[{index}]")?,
                Segment::Key(key) => {
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    let plain = !key.is_empty()
                        && key.chars().all(|c| {
                            !matches!(c, '.' | '[' | ']' | '"' | '\\') && !c.is_whitespace()
                        });
                    if plain {
                        f.write_str(key)?;
                    } else {
                        write!(f, "{key:?}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read the configuration: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not well-formed YAML (or has duplicate keys).
    #[error("{file}: not valid YAML: {}", yaml_message(source))]
    Yaml {
        /// The file, as given.
        file: String,
        /// The parser's error, with line and column.
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// The file goes past one of the YAML reader's limits (README, "Limits").
    #[error(
        "{file}: line {line}: {limit}, past the YAML reader's limit for one file; split the configuration over several files (--config-dir), each has its own limits"
    )]
    YamlLimit {
        /// The file, as given.
        file: String,
        /// Which limit.
        limit: YamlLimit,
        /// Where the parser was when it went past it (1-based).
        line: u64,
    },
    /// Neither a file nor a directory was given.
    #[error("no configuration: give --config FILE, --config-dir DIR, or both")]
    NoSources,
    /// The configuration directory cannot be listed.
    #[error("{}: cannot read the configuration directory: {source}", path.display())]
    ReadDir {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration file is also one of the directory's files (it would be
    /// read twice).
    #[error(
        "{} is also in the configuration directory {} (as {}); remove it from one",
        file.display(),
        dir.display(),
        listed.display()
    )]
    FileInDir {
        /// The `--config` file.
        file: PathBuf,
        /// The `--config-dir` directory.
        dir: PathBuf,
        /// The same file as the directory lists it.
        listed: PathBuf,
    },
    /// Only a directory was given and it holds no `*.yml`/`*.yaml` file.
    #[error("{}: no configuration files (*.yml, *.yaml) in the directory", path.display())]
    EmptyDir {
        /// The directory.
        path: PathBuf,
    },
    /// A file whose top level is not a map of keys.
    #[error("{file}: the top level must be a map of configuration keys, got {found}")]
    NotAMap {
        /// The file.
        file: String,
        /// What it holds instead.
        found: &'static str,
    },
    /// Two configuration files cannot be merged.
    #[error("{file}: {path}: {conflict}")]
    Merge {
        /// The file that brought the conflict.
        file: String,
        /// Where in the document.
        path: KeyPath,
        /// What conflicts.
        conflict: MergeConflict,
    },
    /// The YAML is well-formed but values are invalid. Every problem found is listed.
    #[error("{}", render_issues(file, issues))]
    Invalid {
        /// The file, as given.
        file: String,
        /// Every problem found, in the order the loader met them. Never empty.
        issues: Vec<Issue>,
    },
}

/// A limit of the YAML reader, per configuration file: what
/// [`ConfigError::YamlLimit`] names. Each is documented in the README ("Limits").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum YamlLimit {
    /// Nodes: every key, value, list and map counts one.
    Nodes,
    /// Bytes of text in keys and values.
    Text,
    /// Depth of nested lists and maps.
    Depth,
    /// Anchors (`&name`).
    Anchors,
    /// Aliases (`*name`), also when far more than the anchors they repeat.
    Aliases,
    /// YAML documents (`---`).
    Documents,
}

impl YamlLimit {
    /// The limit's value.
    #[must_use]
    pub fn max(self) -> usize {
        use super::node::{
            MAX_YAML_ANCHORS, MAX_YAML_DEPTH, MAX_YAML_DOCUMENTS, MAX_YAML_NODES, MAX_YAML_TEXT,
        };
        match self {
            Self::Nodes => MAX_YAML_NODES,
            Self::Text => MAX_YAML_TEXT,
            Self::Depth => MAX_YAML_DEPTH,
            Self::Anchors | Self::Aliases => MAX_YAML_ANCHORS,
            Self::Documents => MAX_YAML_DOCUMENTS,
        }
    }

    /// The limit a parser error reports, if it is one of these.
    pub(crate) fn of(error: &serde_saphyr::Error) -> Option<(Self, u64)> {
        use serde_saphyr::budget::BudgetBreach;
        let mut error = error;
        while let serde_saphyr::Error::AliasError { error: inner, .. }
        | serde_saphyr::Error::WithSnippet { error: inner, .. } = error
        {
            error = inner;
        }
        let serde_saphyr::Error::Budget { breach, location } = error else {
            return None;
        };
        let limit = match breach {
            BudgetBreach::Nodes { .. } | BudgetBreach::Events { .. } => Self::Nodes,
            BudgetBreach::ScalarBytes { .. } => Self::Text,
            BudgetBreach::Depth { .. } => Self::Depth,
            BudgetBreach::Anchors { .. } => Self::Anchors,
            BudgetBreach::Aliases { .. } | BudgetBreach::AliasAnchorRatio { .. } => Self::Aliases,
            BudgetBreach::Documents { .. } => Self::Documents,
            _ => return None,
        };
        Some((limit, location.line()))
    }
}

impl fmt::Display for YamlLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let max = self.max();
        match self {
            Self::Nodes => write!(
                f,
                "more than {max} YAML nodes (every key, value, list and map counts one)"
            ),
            Self::Text => write!(f, "more than {max} bytes of keys and values"),
            Self::Depth => write!(f, "lists and maps nested more than {max} deep"),
            Self::Anchors => write!(f, "more than {max} anchors (&name)"),
            Self::Aliases => write!(
                f,
                "more than {max} aliases (*name), or far more aliases than anchors"
            ),
            Self::Documents => write!(f, "more than {max} YAML documents (---)"),
        }
    }
}

/// The parser's message for people editing the file, without advice about the
/// parser's own options, which they cannot set.
fn yaml_message(error: &serde_saphyr::Error) -> String {
    error.render_with_formatter(&serde_saphyr::UserMessageFormatter)
}

fn port_span(first: u16, last: u16) -> String {
    if first == last {
        first.to_string()
    } else {
        format!("{first}-{last}")
    }
}

fn display_size(bytes: u64) -> String {
    if bytes == u64::MAX {
        "more than 18446744073709551615".to_owned()
    } else {
        bytes.to_string()
    }
}

impl ConfigError {
    /// The problems with individual values, if that is what this error is about.
    #[must_use]
    pub fn issues(&self) -> &[Issue] {
        match self {
            ConfigError::Invalid { issues, .. } => issues,
            _ => &[],
        }
    }
}

/// Why two files cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MergeConflict {
    /// An identity map defines the same key in two files.
    #[error("{key:?} is already defined in another configuration file")]
    Duplicate {
        /// The key defined twice (a model ID, a group name, ...).
        key: String,
    },
    /// Two files give the same key different values.
    #[error("a previous file sets a different value")]
    DifferentValue,
    /// A map, a list and a scalar cannot be merged with each other.
    #[error("cannot merge {this} with {previous} from a previous file")]
    DifferentKinds {
        /// What this file has.
        this: &'static str,
        /// What the files before it have.
        previous: &'static str,
    },
}

fn render_issues(file: &str, issues: &[Issue]) -> String {
    let lines: Vec<String> = issues.iter().map(|i| format!("{file}: {i}")).collect();
    lines.join("\n")
}

/// One invalid value: where it is and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct Issue {
    /// The key path of the offending value.
    pub path: KeyPath,
    /// What is wrong.
    pub reason: Reason,
}

/// What is wrong with a value. Messages never include secret values (API keys,
/// environment entries).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Reason {
    /// The value has the wrong YAML type.
    #[error("expected {expected}, got {found}")]
    WrongType {
        /// What the key accepts.
        expected: &'static str,
        /// What was found (a kind, never the value).
        found: &'static str,
    },
    /// A required key is absent.
    #[error("is required")]
    Missing,
    /// A string or list that must have content is empty.
    #[error("must not be empty")]
    Empty,
    /// A number below its minimum.
    #[error("must be >= {min}, got {got}")]
    TooSmall {
        /// The smallest accepted value.
        min: i64,
        /// The value found.
        got: i64,
    },
    /// `parallel` is neither a positive integer nor `auto`.
    #[error(
        "must be a positive integer (the most requests forwarded to the upstream at once, as its --parallel slots) or auto, got {got}"
    )]
    InvalidParallel {
        /// The value found.
        got: String,
    },
    /// A number outside its range.
    #[error("must be between {min} and {max}, got {got}")]
    OutOfRange {
        /// The smallest accepted value.
        min: i64,
        /// The largest accepted value.
        max: i64,
        /// The value found.
        got: i64,
    },
    /// A value outside a fixed set of words.
    #[error("must be one of {}, got {got:?}", allowed.join(", "))]
    NotOneOf {
        /// The accepted words.
        allowed: &'static [&'static str],
        /// The value found.
        got: String,
    },
    /// `${env.NAME}` names a variable that is not set.
    #[error("environment variable {name} is not set (referenced as ${{env.{name}}})")]
    EnvNotSet {
        /// The variable.
        name: String,
    },
    /// `${env.NAME}` names a variable whose value holds a line break or NUL,
    /// which llama-swap refuses too (the value would break the document apart).
    #[error(
        "environment variable {name} contains a line break or NUL, which is not allowed in ${{env.{name}}}"
    )]
    EnvLineBreak {
        /// The variable.
        name: String,
    },
    /// A macro whose value refers to itself.
    #[error("macro {name} contains a self-reference (${{{name}}})")]
    MacroSelfReference {
        /// The macro.
        name: String,
    },
    /// A macro that refers to a macro declared after it (or, for a global
    /// macro, to one only a model declares). llama-swap expands macros from
    /// the last declared to the first, so such a reference is never expanded.
    #[error(
        "macro {user} uses ${{{name}}}, which is declared after it; declare {name} before {user}"
    )]
    MacroDeclaredLater {
        /// The macro that holds the reference.
        user: String,
        /// The macro referred to.
        name: String,
    },
    /// `${name}` names no macro.
    #[error("unknown macro ${{{name}}}")]
    UnknownMacro {
        /// The name used.
        name: String,
    },
    /// A macro name outside `[A-Za-z0-9_-]{1,63}`.
    #[error("invalid macro name {name:?}: use 1 to 63 letters, digits, '_' or '-'")]
    InvalidMacroName {
        /// The name.
        name: String,
    },
    /// A macro defined under a name the loader provides itself.
    #[error("macro name {name} is reserved (PORT, MODEL_ID and PID are provided by the server)")]
    ReservedMacroName {
        /// The name.
        name: String,
    },
    /// A macro whose value is a list or map.
    #[error("a macro value must be a string, number or boolean, got {found}")]
    MacroNotScalar {
        /// What was found.
        found: &'static str,
    },
    /// Macro expansion would produce an absurdly long value (macros that refer to
    /// others several times at every level double at every level).
    #[error(
        "macro expansion would add {} bytes to this value, more than the limit of {limit}; check for macros that refer to other macros several times",
        display_size(*.adds)
    )]
    ExpansionTooLarge {
        /// The bytes expansion would add (saturated at `u64::MAX`).
        adds: u64,
        /// The limit in bytes.
        limit: usize,
    },
    /// Macro expansion would make the whole configuration too large.
    #[error(
        "macro expansion would add more than {limit} bytes to the whole configuration; use large macros in fewer places"
    )]
    ExpansionBudget {
        /// The limit in bytes.
        limit: usize,
    },
    /// A built-in macro used where it has no value.
    #[error("${{{name}}} is only available {where_available}")]
    MacroNotAvailable {
        /// `PORT`, `PID` or `MODEL_ID`.
        name: &'static str,
        /// Where it can be used.
        where_available: &'static str,
    },
    /// The proxy URL uses `${PORT}` but the command does not, so no port is allocated.
    #[error(
        "uses ${{PORT}} but cmd does not; a port is only allocated for models whose cmd uses ${{PORT}}"
    )]
    PortOnlyInProxy,
    /// No `proxy` is set (so it defaults to `http://localhost:${PORT}`) but `cmd` does
    /// not use `${PORT}`.
    #[error(
        "is required when cmd does not use ${{PORT}} (the default http://localhost:${{PORT}} needs a port)"
    )]
    ProxyNeedsPort,
    /// `${PORT}` allocation ran past the last TCP port.
    #[error(
        "no port left to allocate: ${{PORT}} numbering from startPort {start_port} goes past 65535"
    )]
    PortsExhausted {
        /// The configured `startPort`.
        start_port: u16,
    },
    /// An `upstream.ignorePaths` entry that does not compile.
    #[error("{pattern:?} is not a valid regular expression: {reason}")]
    InvalidRegex {
        /// The pattern as written.
        pattern: String,
        /// What the regex compiler said.
        reason: String,
    },
    /// `upstream.caFile` cannot be used.
    #[error("cannot use CA file {}: {reason}", file.display())]
    CaFile {
        /// The file named.
        file: std::path::PathBuf,
        /// Why (unreadable, not PEM, not a usable certificate).
        reason: String,
    },
    /// A proxy URL that is not `http(s)://host[:port][/path]`.
    #[error("must be an http:// or https:// URL with a host, got {got:?}")]
    InvalidUrl {
        /// The value found.
        got: String,
    },
    /// A proxy URL whose port no connection can be made to.
    #[error("port {port} of {got:?} is not a TCP port (1 to 65535)")]
    InvalidUrlPort {
        /// The value found.
        got: String,
        /// Its port, as written.
        port: String,
    },
    /// `checkEndpoint` that is neither a path, an http(s) URL nor `none`.
    #[error(
        "must be a path starting with '/', an http:// or https:// URL, or the word none, got {got:?}"
    )]
    InvalidCheckEndpoint {
        /// The value found.
        got: String,
    },
    /// An `env` entry without `NAME=`.
    #[error("must have the form NAME=value with a non-empty NAME")]
    InvalidEnvEntry,
    /// An API key containing whitespace.
    #[error("an API key must not contain whitespace")]
    ApiKeyWhitespace,
    /// A per-key priority cap names a key that is not in `apiKeys` (the key is not shown).
    #[error("is not one of the keys listed in apiKeys")]
    NotAnApiKey,
    /// A `keys` entry's `maxPriority` for a key `priority.apiKeys` caps too.
    #[error("this key's cap is also set in priority.apiKeys; set it in one place")]
    KeyCapTwice,
    /// A `keys` entry's `name` is one of the API keys (names are shown everywhere).
    #[error(
        "is one of the keys listed in apiKeys; a name is shown in logs and metrics, so it must not be a key"
    )]
    KeyAsName,
    /// `priority.bands` is not a valid set of bands.
    #[error("{0}")]
    InvalidBands(#[source] crate::priority::BandsError),
    /// A command that is empty once comment lines are removed.
    #[error("is empty once comment lines are removed")]
    EmptyCommand,
    /// A command that cannot be split into arguments (an unclosed quote, say).
    #[error("{0}")]
    InvalidCommand(crate::upstream::CommandError),
    /// An alias already claimed by another model.
    #[error("alias {alias:?} is already used by model {model:?}")]
    DuplicateAlias {
        /// The alias.
        alias: String,
        /// The model that claimed it first.
        model: String,
    },
    /// An alias equal to a model ID.
    #[error("alias {alias:?} is also a model ID")]
    AliasIsModelId {
        /// The alias.
        alias: String,
    },
    /// The same entry twice in one list.
    #[error("{item:?} is listed twice")]
    Duplicate {
        /// The entry.
        item: String,
    },
    /// A name that is neither a model ID nor an alias.
    #[error("{name:?} is neither a model ID nor an alias")]
    UnknownModel {
        /// The name.
        name: String,
    },
    /// A selector target that names no model, alias or peer model.
    #[error("{name:?} is neither a model ID, an alias nor a peer model")]
    UnknownTarget {
        /// The name.
        name: String,
    },
    /// A model listed in two groups.
    #[error(
        "model {model:?} is already a member of group {group:?}; a model may be in one group only"
    )]
    InTwoGroups {
        /// The model ID.
        model: String,
        /// The group it was first listed in.
        group: String,
    },
    /// Two priority keys (an ID and an alias, or two aliases) naming the same model.
    #[error("names model {model:?}, which already has a priority through key {first_key:?}")]
    DuplicatePriority {
        /// The model both keys resolve to.
        model: String,
        /// The key that set it first.
        first_key: String,
    },
    /// Fifo priorities configured while the serial scheduler is selected.
    #[error(
        "fifo priorities are set but routing.scheduler.use is serial, which does not rank requests; remove them or use fifo"
    )]
    PriorityUnderSerial,
    /// A key that another key's value makes mandatory is missing.
    #[error("is required when {key} is {value}")]
    RequiredBy {
        /// The key whose value needs this one.
        key: KeyPath,
        /// That value.
        value: &'static str,
    },
    /// A selector ID that is already the name of a model.
    #[error("is already {taken}; a selector needs a name of its own")]
    NameTaken {
        /// What has the name ("a model ID", "an alias of model \"x\"").
        taken: String,
    },
    /// A selector target that is itself a selector.
    #[error(
        "{selector:?} is a selector; a selector's targets must be models (selectors do not chain)"
    )]
    SelectorChain {
        /// The target.
        selector: String,
    },
    /// Two spillover targets naming the same model.
    #[error("names model {model:?}, which is already a target through {first:?}")]
    DuplicateTarget {
        /// The model both resolve to.
        model: String,
        /// The earlier target.
        first: String,
    },
    /// Spillover targets that cannot run at the same time.
    #[error("spillover targets must be able to run at the same time: {why}")]
    SpilloverApart {
        /// What the router rules say.
        why: &'static str,
    },
    /// A profile written as a list (older llama-swap releases).
    #[error(
        "must be a map with description and pins; the list form of older llama-swap releases is no longer supported"
    )]
    LegacyProfileList,
    /// A pin target that is neither a model, an alias, a peer model nor a selector.
    #[error(
        "{name:?} is neither a model ID, an alias, a peer model nor a selector (pins do not chain)"
    )]
    UnknownPinTarget {
        /// The target.
        name: String,
    },
    /// A qualified peer model name (`<peer>/<model>`) that is already used.
    #[error("names {name:?} (peer/model), which is already {taken}; peer model names are reserved")]
    PeerNameTaken {
        /// The qualified name.
        name: String,
        /// What has the name ("a model ID", "a selector", ...).
        taken: String,
    },
    /// Two peers whose qualified model names are spelled the same.
    #[error("names {name:?} (peer/model), which {other} names too")]
    PeerNameAmbiguous {
        /// The qualified name.
        name: String,
        /// The other entry.
        other: KeyPath,
    },
    /// A `warm` selector target that is a peer model (its state is not known here).
    #[error(
        "{name:?} is a peer model; a warm selector's targets must be local models (use pin or spillover)"
    )]
    WarmPeerTarget {
        /// The target.
        name: String,
    },
    /// A matrix that does not compile: bad expression, unknown name, loop, ...
    #[error("{0}")]
    Matrix(#[source] crate::policy::matrix::MatrixError),
    /// A sleep or wake call that is not `METHOD /path` or `/path`.
    #[error("must be an HTTP call such as \"POST /sleep?level=1\" or \"/wake_up\", got {got:?}")]
    InvalidSleepCall {
        /// The value found.
        got: String,
    },
    /// Memory settings that cannot place every model (a model larger than
    /// any GPU, more GPUs than there are, ...).
    #[error("{0}")]
    Memory(#[source] crate::policy::memory::MemoryError),
    /// A size that is neither a whole number of bytes nor a number with a
    /// unit (`KB`, `MB`, `GB`, `KiB`, `MiB`, `GiB`).
    #[error("must be a number of bytes or a size such as 32MiB or 100MB, got {got:?}")]
    InvalidSize {
        /// The value found.
        got: String,
    },
    /// A duration that is not Go's `<number><unit>...` (`30s`, `1m30s`).
    #[error("must be a duration such as 30s or 1m30s, got {got:?}")]
    InvalidDuration {
        /// The value found.
        got: String,
    },
    /// A duration below its minimum.
    #[error("must be at least {min}, got {got}")]
    TooShort {
        /// The minimum, as written in a config.
        min: &'static str,
        /// The value found.
        got: String,
    },
    /// `store.path` is not a place a file can be written (llama-swap's check).
    #[error("{why}")]
    StorePath {
        /// What is wrong.
        why: String,
    },
    /// Two keys that exclude each other are both set.
    #[error("cannot be used together with {other}")]
    ConflictsWith {
        /// The other key.
        other: KeyPath,
    },
}

/// Something in the configuration that was ignored or adjusted; loading continued.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {kind}")]
pub struct ConfigWarning {
    /// The key the warning is about.
    pub path: KeyPath,
    /// What happened.
    pub kind: WarningKind,
}

/// What a [`ConfigWarning`] is about.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WarningKind {
    /// A key llama-swap does not know either (often a typo).
    #[error("unknown key, ignored")]
    UnknownKey,
    /// A llama-swap key this server does not implement yet.
    #[error("not supported yet, ignored")]
    NotSupported,
    /// A value below its minimum that llama-swap raises silently.
    #[error("{got} is below the minimum, {used} is used")]
    Raised {
        /// The configured value.
        got: i64,
        /// The value used instead.
        used: i64,
    },
    /// A filter key naming a parameter the proxy routes on (`model`).
    #[error("{key} is protected (the proxy routes on it); this entry is ignored, as in llama-swap")]
    Protected {
        /// The protected parameter.
        key: &'static str,
    },
    /// The configuration names no model at all.
    #[error("no models are configured; every model request will answer 404 model_not_found")]
    NoModels,
    /// A model without a command (none, or only comment lines): accepted as
    /// llama-swap accepts it, and it fails each time it is asked to start.
    #[error(
        "no command to run: the model loads, but every request for it fails to start it (as in llama-swap)"
    )]
    NoCommand,
    /// A word llama-swap does not know either, which it (and this server)
    /// replaces by a default.
    #[error("{got:?} is not a known value; {used} is used")]
    UnknownWord {
        /// The configured text.
        got: String,
        /// What is used instead.
        used: &'static str,
    },
    /// A group member that is neither a model ID nor an alias; llama-swap
    /// loads the group and never matches the name, this server skips it.
    #[error("{name:?} is neither a model ID nor an alias; it is not a member")]
    MemberNotAModel {
        /// The name.
        name: String,
    },
    /// A name under `hooks.on_startup.preload` that is neither a model ID nor
    /// an alias; llama-swap skips it, and so does this server.
    #[error("{name:?} is neither a model ID nor an alias; it is not preloaded")]
    PreloadNotAModel {
        /// The name.
        name: String,
    },
    /// A full-URL `checkEndpoint` whose host is not the model's `proxy`: only
    /// its path is polled, on the proxy (as llama-swap does).
    #[error("only the path {path:?} of this URL is polled, on the model's proxy {proxy}")]
    CheckEndpointHostIgnored {
        /// The path (and query) that is polled.
        path: String,
        /// The model's proxy URL.
        proxy: String,
    },
    /// A key that has no effect with the current settings.
    #[error("has no effect when {because}")]
    NoEffect {
        /// The setting that makes it moot.
        because: &'static str,
    },
    /// `${PORT}` numbers inside the system's ephemeral port range, from which
    /// the kernel takes the local port of every outgoing connection: one that
    /// holds a model's number keeps that model from starting.
    #[error(
        "{count} model port(s) given by ${{PORT}} ({}) lie in the system's ephemeral port range \
         {low}-{high}, from which outgoing connections take their local ports: a model whose \
         port one of them holds cannot start; set startPort so the models' ports stay below \
         {low} (or above {high})",
        port_span(*.first, *.last)
    )]
    EphemeralPorts {
        /// How many models' ports are in the range.
        count: usize,
        /// The lowest of them.
        first: u16,
        /// The highest of them.
        last: u16,
        /// The range's first port (Linux: `net.ipv4.ip_local_port_range`).
        low: u16,
        /// The range's last port.
        high: u16,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_paths_quote_ambiguous_keys() {
        let path = KeyPath::from_keys(["models", "qwen2.5-7b", "aliases"]).index(2);
        assert_eq!(path.to_string(), r#"models."qwen2.5-7b".aliases[2]"#);
        assert_eq!(
            KeyPath::from_keys(["models", "qwen", "ttl"]).to_string(),
            "models.qwen.ttl"
        );
        assert_eq!(KeyPath::root().to_string(), "(top level)");
    }

    #[test]
    fn invalid_error_lists_every_issue_with_the_file() {
        let err = ConfigError::Invalid {
            file: "config.yaml".into(),
            issues: vec![
                Issue {
                    path: KeyPath::from_keys(["models", "qwen", "ttl"]),
                    reason: Reason::TooSmall { min: 0, got: -5 },
                },
                Issue {
                    path: KeyPath::from_keys(["startPort"]),
                    reason: Reason::Missing,
                },
            ],
        };
        assert_eq!(
            err.to_string(),
            "config.yaml: models.qwen.ttl: must be >= 0, got -5\nconfig.yaml: startPort: is required"
        );
    }
}
