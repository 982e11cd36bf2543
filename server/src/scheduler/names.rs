//! The names a request may use for a model: its ID or one of its aliases.
//! The rules are [`crate::names::LocalNames`]'s, the one resolution of local
//! names; this file builds it from the scheduler's settings.

use super::{ModelSettings, SettingsError};
use crate::names::{Ambiguous, LocalModel, LocalNames};

/// Every model name (ID or alias) of one configuration, resolved to the model.
///
/// The scheduler builds it from its settings (refusing a name that would mean
/// two models) and the router handle shares it, so a handler resolves a name
/// without a round trip to the actor.
pub(crate) type ModelNames = LocalNames;

/// The names of `models`, which must be sorted by ID without repeats; only the
/// models `listed` accepts (by index) have names: the others (removed by a
/// reload, still running) keep their index and cannot be asked for.
pub(super) fn listing(
    models: &[&ModelSettings],
    listed: impl Fn(usize) -> bool,
) -> Result<ModelNames, SettingsError> {
    let entries = models.iter().enumerate().map(|(index, m)| LocalModel {
        id: &m.id,
        aliases: &m.aliases,
        listed: listed(index),
    });
    LocalNames::new(entries).map_err(
        |Ambiguous {
             name,
             first,
             second,
         }| SettingsError::AmbiguousName {
            name,
            first,
            second,
        },
    )
}
