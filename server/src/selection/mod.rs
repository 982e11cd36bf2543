//! The run-time half of a request's renaming (the rules are in
//! [`crate::names`]): which profile is active, and which target each selector
//! picks. A selector's pick depends on model states (`warm`) and on this
//! server's own requests in flight (`spillover`).
//!
//! Selectors: `pin` takes the first target; `warm` the first ready, else the
//! first starting, else the first; `spillover` see [`Selection::choose`].
//!
//! The only state is which profile is active and each spillover selector's
//! reservations; both sit behind tiny critical sections that never cross an
//! `.await`, and none of it is scheduler state. A loaded configuration gets a
//! fresh one: no profile is active at start or after a reload.

mod selectors;
#[cfg(test)]
mod tests;

use tokio::sync::watch;

use crate::config::{Config, ProfileConfig, SelectorConfig};

pub(crate) use selectors::Reservation;

/// Why a selector could not pick a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SelectError {
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
pub(crate) struct UnknownProfile {
    /// The name asked for.
    pub name: String,
}

/// Profiles (with the active one) and selectors of one loaded configuration.
#[derive(Debug)]
pub(crate) struct Selection {
    profiles: Vec<ProfileConfig>,
    /// Index into `profiles`; also how the UI learns of a switch.
    active: watch::Sender<Option<usize>>,
    selectors: Vec<selectors::Selector>,
}

impl Selection {
    /// The profiles and selectors of `config`, with no profile active.
    #[must_use]
    pub(crate) fn new(config: &Config) -> Self {
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
    pub(crate) fn profiles(&self) -> &[ProfileConfig] {
        &self.profiles
    }

    /// The active profile, if any.
    #[must_use]
    pub(crate) fn active(&self) -> Option<&ProfileConfig> {
        let index = *self.active.borrow();
        index.and_then(|i| self.profiles.get(i))
    }

    /// The active profile's place in [`profiles`](Self::profiles), if any:
    /// what [`NameTable::pinned`](crate::names::NameTable::pinned) takes.
    #[must_use]
    pub(crate) fn active_index(&self) -> Option<usize> {
        *self.active.borrow()
    }

    /// Follows switches of the active profile (its index in [`Selection::profiles`],
    /// `None` when off).
    #[must_use]
    pub(crate) fn watch_active(&self) -> watch::Receiver<Option<usize>> {
        self.active.subscribe()
    }

    /// Makes `name` the active profile; `None` (or an empty name) turns profiles
    /// off. Returns whether the active profile changed.
    ///
    /// # Errors
    ///
    /// [`UnknownProfile`] when no profile has that name (the active one stays).
    pub(crate) fn set_active(&self, name: Option<&str>) -> Result<bool, UnknownProfile> {
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

    /// The selector with this ID.
    #[must_use]
    pub(crate) fn selector(&self, id: &str) -> Option<&SelectorConfig> {
        self.find(id).map(|s| &s.config)
    }

    /// Every selector, in file order.
    pub(crate) fn selectors(&self) -> impl Iterator<Item = &SelectorConfig> {
        self.selectors.iter().map(|s| &s.config)
    }

    fn find(&self, id: &str) -> Option<&selectors::Selector> {
        self.selectors.iter().find(|s| s.config.id == id)
    }
}
