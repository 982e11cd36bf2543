//! Names a request may use beyond model IDs and aliases: the pins of the active
//! profile and selectors (llama-swap's `profiles` and `selectors`).
//!
//! A request's model name goes through two steps before the model is looked up:
//!
//! 1. **Profile**: while a profile is active, a name equal to one of its pins is
//!    replaced by the pin's target (a model, alias or selector); a pin without a
//!    target disables the name. On `/upstream/<path>` the longest pin that is the
//!    path or a `pin/` prefix of it applies. At most one profile is active; none
//!    is when a configuration is loaded (at start and after every reload).
//! 2. **Selector** (not on `/upstream`): a selector ID is replaced by one of its
//!    targets: `pin` the first; `warm` the first ready, else the first starting,
//!    else the first; `spillover` see [`Names::choose`].
//!
//! Pins do not chain and selectors never target selectors (the config refuses
//! both), so each step runs once. The only state is which profile is active and
//! each spillover selector's reservations; both sit behind tiny critical sections
//! that never cross an `.await`, and none of it is scheduler state.

mod selectors;
#[cfg(test)]
mod tests;

use tokio::sync::watch;

use crate::config::{Config, ProfileConfig, SelectorConfig};

pub use selectors::Reservation;

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

/// Why a selector could not pick a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SelectError {
    /// Every target of a spillover selector is being stopped.
    #[error(
        "selector {selector:?} has no available spillover target: every target is being stopped"
    )]
    NoSpilloverTarget {
        /// The selector.
        selector: String,
    },
}

/// `PUT /api/profiles/active` named a profile that is not configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile {name:?} is not configured")]
pub struct UnknownProfile {
    /// The name asked for.
    pub name: String,
}

/// Profiles (with the active one) and selectors of one loaded configuration.
#[derive(Debug)]
pub struct Names {
    profiles: Vec<ProfileConfig>,
    /// Index into `profiles`; also how the UI learns of a switch.
    active: watch::Sender<Option<usize>>,
    selectors: Vec<selectors::Selector>,
}

impl Names {
    /// The profiles and selectors of `config`, with no profile active.
    #[must_use]
    pub fn new(config: &Config) -> Self {
        Self {
            profiles: config.profiles.clone(),
            active: watch::Sender::new(None),
            selectors: config
                .selectors
                .iter()
                .cloned()
                .map(selectors::Selector::new)
                .collect(),
        }
    }

    /// Every configured profile, in file order.
    #[must_use]
    pub fn profiles(&self) -> &[ProfileConfig] {
        &self.profiles
    }

    /// The active profile, if any.
    #[must_use]
    pub fn active(&self) -> Option<&ProfileConfig> {
        let index = *self.active.borrow();
        index.and_then(|i| self.profiles.get(i))
    }

    /// Follows switches of the active profile (its index in [`Names::profiles`],
    /// `None` when off).
    #[must_use]
    pub fn watch_active(&self) -> watch::Receiver<Option<usize>> {
        self.active.subscribe()
    }

    /// Makes `name` the active profile; `None` (or an empty name) turns profiles
    /// off. Returns whether the active profile changed.
    ///
    /// # Errors
    ///
    /// [`UnknownProfile`] when no profile has that name (the active one stays).
    pub fn set_active(&self, name: Option<&str>) -> Result<bool, UnknownProfile> {
        let index = match name.filter(|n| !n.is_empty()) {
            None => None,
            Some(name) => Some(
                self.profiles
                    .iter()
                    .position(|p| p.name == name)
                    .ok_or_else(|| UnknownProfile {
                        name: name.to_owned(),
                    })?,
            ),
        };
        Ok(self.active.send_if_modified(|active| {
            let changed = *active != index;
            *active = index;
            changed
        }))
    }

    /// What the active profile does to a name from a body, form or query.
    #[must_use]
    pub fn pinned(&self, name: &str) -> Pinned<'_> {
        let Some(profile) = self.active() else {
            return Pinned::No;
        };
        match profile.pin(name) {
            None => Pinned::No,
            Some(pin) => match pin.target.as_deref() {
                Some(target) => Pinned::To(target),
                None => Pinned::Disabled {
                    profile: &profile.name,
                },
            },
        }
    }

    /// What the active profile does to an `/upstream/` path (`tail` is the part
    /// after `/upstream/`): the longest pin equal to the path or followed by `/`
    /// in it is replaced by its target, the rest of the path kept.
    #[must_use]
    pub fn upstream_pin(&self, tail: &str) -> UpstreamPin<'_> {
        let Some(profile) = self.active() else {
            return UpstreamPin::No;
        };
        let matched = profile
            .pins
            .iter()
            .filter(|pin| {
                tail.strip_prefix(pin.name.as_str())
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
            .max_by_key(|pin| pin.name.len());
        match matched {
            None => UpstreamPin::No,
            Some(pin) => match &pin.target {
                Some(target) => UpstreamPin::To(format!("{target}{}", &tail[pin.name.len()..])),
                None => UpstreamPin::Disabled {
                    pin: &pin.name,
                    profile: &profile.name,
                },
            },
        }
    }

    /// The selector with this ID.
    #[must_use]
    pub fn selector(&self, id: &str) -> Option<&SelectorConfig> {
        self.find(id).map(|s| &s.config)
    }

    /// Every selector, in file order.
    pub fn selectors(&self) -> impl Iterator<Item = &SelectorConfig> {
        self.selectors.iter().map(|s| &s.config)
    }

    fn find(&self, id: &str) -> Option<&selectors::Selector> {
        self.selectors.iter().find(|s| s.config.id == id)
    }
}
