//! Where a requested name leads: the one place every name a configuration
//! defines is resolved, by the configuration's checks and by the request path
//! alike. Pure: no I/O, no locks, nothing from the layers above.
//!
//! A model request's name goes through these steps, each once:
//!
//! 1. **Profile pin**: while a profile is active, a name equal to one of its
//!    pins is replaced by the pin's target (a model ID or alias, a selector or
//!    a peer model); a pin without a target disables the name. On
//!    `/upstream/<path>` the longest pin that is the path or a `pin/` prefix
//!    of it applies ([`NameTable::upstream_pin`]). Which profile is active is
//!    the caller's (run-time) state.
//! 2. **Selector** (not on `/upstream`): a selector ID leads to the selector;
//!    the caller picks one of its targets (by model states, so at run time)
//!    and resolves the target from step 3 on.
//! 3. **Local model**: a model ID or alias of this server ([`LocalNames`]).
//! 4. **Peer model**: `<peer>/<model>`, or a bare name one peer lists, or a
//!    pool of the peers that list it ([`PeerRoutes`]). Local names win over
//!    bare peer names (llama-swap's rule); qualified peer names cannot clash
//!    with anything (the configuration refuses such clashes).
//!
//! Pins do not chain and selectors never target selectors (the configuration
//! refuses both), so no step repeats.

mod local;
mod peers;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

pub(crate) use local::{Ambiguous, LocalModel, LocalNames};
pub use peers::PeerRoute;
pub(crate) use peers::{PeerRoutes, qualified_name};

/// What a name leads to after the profile step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lead<'a> {
    /// A model of this server.
    Model {
        /// Its ID.
        id: &'a str,
        /// Its index in `LocalNames::ids`.
        index: usize,
    },
    /// A selector: the caller picks a target and resolves it with
    /// `NameTable::target`.
    Selector {
        /// Its ID.
        id: &'a str,
        /// Its place among the selectors, in the order they were given.
        index: usize,
    },
    /// A peer's model, or a pool of peers.
    Peer(PeerRoute<'a>),
}

/// What the active profile does to a requested name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pinned<'a> {
    /// No active profile pins this name.
    No,
    /// The name is pinned to this target.
    To(&'a str),
    /// The active profile (named) disables this name.
    Disabled {
        /// The active profile.
        profile: &'a str,
    },
}

/// An `/upstream/` path rewritten by the active profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UpstreamPin<'a> {
    /// No pin matches the path.
    No,
    /// Forward as if the client had written this path (after `/upstream/`).
    To(String),
    /// The pin that matched disables its name.
    Disabled {
        /// The pin that matched.
        pin: &'a str,
        /// The active profile.
        profile: &'a str,
    },
}

/// One profile's pins: (name, target), no target disabling the name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Profile {
    name: String,
    pins: Vec<(String, Option<String>)>,
}

/// Every name of one configuration and where it leads (see the module
/// documentation for the steps).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameTable {
    local: LocalNames,
    /// Selector ID → its place among the selectors.
    selectors: BTreeMap<String, usize>,
    profiles: Vec<Profile>,
    peers: PeerRoutes,
}

impl NameTable {
    /// The table of `local` models and `peers`, with no selectors or profiles.
    #[must_use]
    pub fn new(local: LocalNames, peers: PeerRoutes) -> Self {
        Self {
            local,
            selectors: BTreeMap::new(),
            profiles: Vec::new(),
            peers,
        }
    }

    /// Adds the selectors, by ID, in the order they were given.
    #[must_use]
    pub fn with_selectors<'a>(mut self, ids: impl IntoIterator<Item = &'a str>) -> Self {
        self.selectors = ids
            .into_iter()
            .enumerate()
            .map(|(index, id)| (id.to_owned(), index))
            .collect();
        self
    }

    /// Adds the profiles, in the order given (a profile is named by its place
    /// here), each with its pins as (name, target or `None` to disable).
    #[must_use]
    pub fn with_profiles<'a, P>(mut self, profiles: impl IntoIterator<Item = (&'a str, P)>) -> Self
    where
        P: IntoIterator<Item = (&'a str, Option<&'a str>)>,
    {
        self.profiles = profiles
            .into_iter()
            .map(|(name, pins)| Profile {
                name: name.to_owned(),
                pins: pins
                    .into_iter()
                    .map(|(pin, target)| (pin.to_owned(), target.map(str::to_owned)))
                    .collect(),
            })
            .collect();
        self
    }

    /// This server's model names.
    #[must_use]
    pub fn local(&self) -> &LocalNames {
        &self.local
    }

    /// The peers' model names.
    #[must_use]
    pub fn peers(&self) -> &PeerRoutes {
        &self.peers
    }

    /// Step 1: what profile `active` (a place in the profiles given) does to
    /// `name`.
    #[must_use]
    pub fn pinned(&self, active: Option<usize>, name: &str) -> Pinned<'_> {
        let Some(profile) = active.and_then(|i| self.profiles.get(i)) else {
            return Pinned::No;
        };
        match profile.pins.iter().find(|(pin, _)| pin == name) {
            None => Pinned::No,
            Some((_, Some(target))) => Pinned::To(target),
            Some((_, None)) => Pinned::Disabled {
                profile: &profile.name,
            },
        }
    }

    /// Step 1 on `/upstream/<tail>`: the longest pin of profile `active` equal
    /// to `tail` or followed by `/` in it is replaced by its target, the rest
    /// of the path kept.
    #[must_use]
    pub fn upstream_pin(&self, active: Option<usize>, tail: &str) -> UpstreamPin<'_> {
        let Some(profile) = active.and_then(|i| self.profiles.get(i)) else {
            return UpstreamPin::No;
        };
        let matched = profile
            .pins
            .iter()
            .filter(|(pin, _)| {
                tail.strip_prefix(pin.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
            .max_by_key(|(pin, _)| pin.len());
        match matched {
            None => UpstreamPin::No,
            Some((pin, Some(target))) => UpstreamPin::To(format!("{target}{}", &tail[pin.len()..])),
            Some((pin, None)) => UpstreamPin::Disabled {
                pin,
                profile: &profile.name,
            },
        }
    }

    /// Steps 2 to 4: where `name` (after the profile step) leads.
    #[must_use]
    pub fn lead(&self, name: &str) -> Option<Lead<'_>> {
        if let Some((id, &index)) = self.selectors.get_key_value(name) {
            return Some(Lead::Selector { id, index });
        }
        self.target(name)
    }

    /// Steps 3 and 4: the model or peer model `name` leads to (what a
    /// selector's target or an `/upstream/` path names).
    #[must_use]
    pub fn target(&self, name: &str) -> Option<Lead<'_>> {
        if let Some(index) = self.local.index(name) {
            let id = self.local.ids()[index].as_str();
            return Some(Lead::Model { id, index });
        }
        self.peers.resolve(name).map(Lead::Peer)
    }

    /// The name a target is known by: a model's ID, a peer model's
    /// `peer/model`, a pool's bare name, a selector's ID.
    #[must_use]
    pub fn canonical_name(&self, lead: Lead<'_>) -> String {
        match lead {
            Lead::Model { id, .. } | Lead::Selector { id, .. } => id.to_owned(),
            Lead::Peer(route) => self.peers.canonical_name(route),
        }
    }

    /// Whether `name` is a selector's ID.
    #[must_use]
    pub fn is_selector(&self, name: &str) -> bool {
        self.selectors.contains_key(name)
    }

    /// Every profile that pins `name`, with the pin's target (`None`: the pin
    /// disables the name).
    pub fn pins_named<'s>(
        &'s self,
        name: &'s str,
    ) -> impl Iterator<Item = (&'s str, Option<&'s str>)> + 's {
        self.profiles.iter().filter_map(move |profile| {
            let (_, target) = profile.pins.iter().find(|(pin, _)| pin == name)?;
            Some((profile.name.as_str(), target.as_deref()))
        })
    }
}
