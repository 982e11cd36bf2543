//! The names a configuration defines beyond its models, as loaded:
//! selectors, profiles and their pins, and peers with the models they serve.

use std::time::Duration;

use super::api_key::ApiKey;
use crate::filters::Filters;
use crate::proxy::Timeouts;

/// Default of `selectors.<id>.settings.spillover`.
pub const DEFAULT_SPILLOVER: usize = 1;

/// How a selector picks its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SelectorStrategy {
    /// `pin`: always the first target.
    Pin,
    /// `warm`: the first ready target, else the first starting one, else the first.
    Warm,
    /// `spillover`: the least busy running target while it has fewer than
    /// `spillover` requests of this selector in flight; then a cold target.
    Spillover,
}

impl SelectorStrategy {
    /// The word used in the config (`pin`, `warm`, `spillover`).
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            SelectorStrategy::Pin => "pin",
            SelectorStrategy::Warm => "warm",
            SelectorStrategy::Spillover => "spillover",
        }
    }
}

/// One entry of `selectors`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct SelectorConfig {
    /// The selector's ID (its key), the name requests use.
    pub id: String,
    /// `strategy` (required).
    pub strategy: SelectorStrategy,
    /// `targets` as written (model IDs, aliases or peer models), in order;
    /// never empty.
    pub targets: Vec<String>,
    /// The model ID each target resolves to, in the same order (a peer
    /// model's `peer/model`, or a peer pool's bare name).
    pub target_ids: Vec<String>,
    /// `settings.spillover` (default 1): in-flight requests per target before a
    /// spillover selector starts another target.
    pub spillover: usize,
    /// `name`: display name in `/v1/models`.
    pub name: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `unlisted` (default false): hidden from `/v1/models`, still routable.
    pub unlisted: bool,
    /// `metadata`: free-form data shown in `/v1/models`.
    pub metadata: Option<serde_json::Value>,
}

/// One entry of `profiles`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProfileConfig {
    /// The profile's name (its key).
    pub name: String,
    /// `description`.
    pub description: Option<String>,
    /// `pins`, in file order; never empty.
    pub pins: Vec<Pin>,
}

/// One `pins` entry: while the profile is active, a request naming `name` is
/// handled as if it named `target`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pin {
    /// The name requests use.
    pub name: String,
    /// A model ID, alias, peer model or selector ID; `None` (null or empty in the file)
    /// disables the name: requests for it get 404.
    pub target: Option<String>,
}

impl ProfileConfig {
    /// The pin for a requested name.
    #[must_use]
    pub fn pin(&self, name: &str) -> Option<&Pin> {
        self.pins.iter().find(|p| p.name == name)
    }
}

/// A peer's `timeouts.responseHeader` when not set: llama-swap's 60 s (a peer
/// that accepted a request and says nothing for a minute is taken as stuck).
pub const PEER_RESPONSE_HEADER_TIMEOUT: Duration = Duration::from_secs(60);

/// One entry of `peers`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PeerConfig {
    /// The peer's ID (its key): the first part of `<peer>/<model>` names.
    pub id: String,
    /// `proxy` (required): the peer's base URL (`http://` or `https://`);
    /// request paths are appended to it.
    pub proxy: String,
    /// `apiKey`: sent to the peer as `Authorization: Bearer <key>` and
    /// `x-api-key: <key>`, replacing whatever the client sent. Redacted in
    /// `Debug`.
    pub api_key: Option<ApiKey>,
    /// `models` (required, not empty): the models the peer serves, as it names
    /// them, in file order without duplicates.
    pub models: Vec<String>,
    /// `filters` (`stripParams`, `setParams`, `setParamsByID` keyed by the
    /// name the client asked for): applied to JSON bodies sent to the peer.
    pub filters: Filters,
    /// `timeouts`: llama-swap's model defaults, except `responseHeader`
    /// ([`PEER_RESPONSE_HEADER_TIMEOUT`]).
    pub timeouts: Timeouts,
    /// `concurrencyLimit` (this server's extension; default
    /// [`DEFAULT_PEER_CONCURRENCY_LIMIT`]): the most requests this server has
    /// in flight to the peer at once; more are answered 429 `concurrency_limit`.
    /// It bounds what a loop of peers the hop marks cannot see can pile up.
    pub concurrency_limit: usize,
}

/// A peer's `concurrencyLimit` when it sets none (or 0).
pub const DEFAULT_PEER_CONCURRENCY_LIMIT: usize = 256;

impl PeerConfig {
    /// A peer with no key, no filters and the default peer timeouts.
    #[must_use]
    pub fn new(id: &str, proxy: &str, models: Vec<String>) -> Self {
        Self {
            id: id.to_owned(),
            proxy: proxy.to_owned(),
            api_key: None,
            models,
            filters: Filters::default(),
            timeouts: default_peer_timeouts(),
            concurrency_limit: DEFAULT_PEER_CONCURRENCY_LIMIT,
        }
    }
}

/// A peer's `timeouts` when it sets none.
pub(crate) fn default_peer_timeouts() -> Timeouts {
    Timeouts::default().response_header(Some(PEER_RESPONSE_HEADER_TIMEOUT))
}
