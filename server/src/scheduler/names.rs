//! The names a request may use for a model: its ID or one of its aliases.

use std::collections::BTreeMap;

use super::{ModelSettings, SettingsError};

/// Every model name (ID or alias) of one configuration, resolved to the model.
///
/// The one resolution of aliases at run time: the scheduler builds it from its
/// settings (refusing a name that would mean two models) and the router handle
/// shares it, so a handler resolves a name without a round trip to the actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelNames {
    /// Model IDs, sorted: a model's index is its position here.
    ids: Vec<String>,
    /// Every ID and alias → model index.
    by_name: BTreeMap<String, usize>,
}

impl ModelNames {
    /// The names of `models`, which must be sorted by ID without repeats; only
    /// the models `listed` accepts (by index) have names: the others (removed
    /// by a reload, still running) keep their index and cannot be asked for.
    pub(super) fn listing(
        models: &[&ModelSettings],
        listed: impl Fn(usize) -> bool,
    ) -> Result<Self, SettingsError> {
        let ids: Vec<String> = models.iter().map(|m| m.id.clone()).collect();
        let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
        // IDs first, so an alias that names another model is reported against that model.
        let id_names = models.iter().enumerate().map(|(index, m)| (index, &m.id));
        let aliases = models
            .iter()
            .enumerate()
            .flat_map(|(index, m)| m.aliases.iter().map(move |alias| (index, alias)));
        for (index, name) in id_names.chain(aliases) {
            if !listed(index) {
                continue;
            }
            match by_name.get(name) {
                Some(&other) if other == index => {}
                Some(&other) => {
                    return Err(SettingsError::AmbiguousName {
                        name: name.clone(),
                        first: ids[other].clone(),
                        second: ids[index].clone(),
                    });
                }
                None => {
                    by_name.insert(name.clone(), index);
                }
            }
        }
        Ok(Self { ids, by_name })
    }

    /// The model IDs, sorted: a model's index is its position here.
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The model ID `name` (an ID or an alias) refers to.
    pub fn resolve(&self, name: &str) -> Option<&str> {
        self.index(name).map(|m| self.ids[m].as_str())
    }

    /// The index of the model `name` refers to, in the sorted IDs (the
    /// index the scheduler's per-model calls such as
    /// [`Scheduler::fast_cap`](super::Scheduler::fast_cap) take).
    pub fn index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }
}
