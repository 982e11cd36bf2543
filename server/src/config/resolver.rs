//! The names the configuration gives models (IDs and aliases) and peer
//! models, for the sections read after `models` and `peers`.

use std::collections::{BTreeMap, BTreeSet};

use super::model::ParsedModel;
use super::resolved::names::PeerConfig;

/// Resolves the names the config uses for models (IDs or aliases) to IDs.
pub(crate) struct Resolver {
    ids: BTreeSet<String>,
    aliases: BTreeMap<String, String>,
    peers: Vec<PeerConfig>,
    peer_routes: crate::peers::PeerRoutes,
}

impl Resolver {
    /// `declared_ids` are all keys under `models`, including models that failed to
    /// parse, so one broken model does not also produce "unknown model" errors
    /// wherever it is named.
    pub(crate) fn new(
        declared_ids: impl IntoIterator<Item = String>,
        models: &[ParsedModel],
    ) -> Self {
        let mut aliases = BTreeMap::new();
        for model in models {
            for alias in &model.config.aliases {
                aliases
                    .entry(alias.clone())
                    .or_insert_with(|| model.config.id.clone());
            }
        }
        Self {
            ids: declared_ids.into_iter().collect(),
            aliases,
            peers: Vec::new(),
            peer_routes: crate::peers::PeerRoutes::default(),
        }
    }

    /// Adds the names of `peers`' models (see [`Resolver::resolve_peer`]).
    pub(crate) fn with_peers(mut self, peers: &[PeerConfig]) -> Self {
        self.peer_routes = crate::peers::PeerRoutes::new(peers);
        self.peers = peers.to_vec();
        self
    }

    /// The name a peer model goes by (`peer/model`, or a pool's bare name)
    /// when `name` is no local model or alias but names a peer model.
    pub(crate) fn resolve_peer(&self, name: &str) -> Option<String> {
        if self.resolve(name).is_some() {
            return None;
        }
        self.peer_routes
            .resolve(name)
            .map(|route| route.canonical_name(&self.peers))
    }

    /// Every declared model ID, sorted.
    pub(crate) fn ids(&self) -> impl Iterator<Item = &str> {
        self.ids.iter().map(String::as_str)
    }

    pub(crate) fn resolve(&self, name: &str) -> Option<&str> {
        if let Some(id) = self.ids.get(name) {
            return Some(id);
        }
        self.aliases.get(name).map(String::as_str)
    }
}
