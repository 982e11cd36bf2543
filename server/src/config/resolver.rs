//! The names the configuration gives models (IDs and aliases) and peer
//! models, as a [`NameTable`] for the sections read after `models` and
//! `peers`, and the whole table of a loaded configuration for the request
//! path ([`Config::names`]).

use std::collections::BTreeMap;

use super::model::ParsedModel;
use super::resolved::names::PeerConfig;
use super::resolved::types::Config;
use crate::names::{LocalModel, LocalNames, NameTable, PeerRoutes};

/// The names of the models and peers read so far. `declared_ids` are all
/// keys under `models`, including models that failed to parse, so one broken
/// model does not also produce "unknown model" errors wherever it is named;
/// where two models claim a name the first keeps it (the clash is reported
/// where the models are read).
pub(crate) fn names_so_far(
    mut declared_ids: Vec<String>,
    models: &[ParsedModel],
    peers: &[PeerConfig],
) -> NameTable {
    declared_ids.sort_unstable();
    declared_ids.dedup();
    let aliases: BTreeMap<&str, &[String]> = models
        .iter()
        .map(|m| (m.config.id.as_str(), m.config.aliases.as_slice()))
        .collect();
    let local = LocalNames::first_claim_wins(declared_ids.iter().map(|id| LocalModel {
        id,
        aliases: aliases.get(id.as_str()).copied().unwrap_or_default(),
        listed: true,
    }));
    NameTable::new(local, peer_routes(peers))
}

/// The peers' names.
pub(crate) fn peer_routes(peers: &[PeerConfig]) -> PeerRoutes {
    PeerRoutes::new(peers.iter().map(|p| (p.id.as_str(), &p.models)))
}

impl Config {
    /// Every name this configuration defines and where it leads: models and
    /// aliases, selectors, profile pins, peer models.
    #[must_use]
    pub fn names(&self) -> NameTable {
        let local = LocalNames::first_claim_wins(self.models.iter().map(|m| LocalModel {
            id: &m.id,
            aliases: &m.aliases,
            listed: true,
        }));
        NameTable::new(local, peer_routes(&self.peers))
            .with_selectors(self.selectors.iter().map(|s| s.id.as_str()))
            .with_profiles(self.profiles.iter().map(|p| {
                let pins = p
                    .pins
                    .iter()
                    .map(|pin| (pin.name.as_str(), pin.target.as_deref()));
                (p.name.as_str(), pins)
            }))
    }
}
