//! This server's own model names: every model ID and alias, to the model.

use std::collections::BTreeMap;

/// A name that two models claim: [`LocalNames::new`] refuses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ambiguous {
    /// The ID or alias.
    pub name: String,
    /// The model that claimed it first (IDs claim before aliases).
    pub first: String,
    /// The other model.
    pub second: String,
}

/// Every model ID and alias of one configuration, resolved to the model.
///
/// Models are kept sorted by ID: a model's index is its position in
/// [`ids`](Self::ids) (the index the scheduler's per-model calls take). IDs
/// claim their names before aliases do, so an alias that is another model's
/// ID is reported against that model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LocalNames {
    /// Model IDs, sorted.
    ids: Vec<String>,
    /// Every ID and alias → model index.
    by_name: BTreeMap<String, usize>,
}

/// One model as the table is built from it.
#[derive(Debug, Clone, Copy)]
pub struct LocalModel<'a> {
    /// Its ID.
    pub id: &'a str,
    /// Its aliases.
    pub aliases: &'a [String],
    /// Whether requests may name it: a model a reload removed while it still
    /// runs keeps its index but has no names.
    pub listed: bool,
}

impl LocalNames {
    /// The names of `models`, which must be sorted by ID without repeats.
    ///
    /// # Errors
    ///
    /// [`Ambiguous`] when a name would mean two listed models.
    pub fn new<'a>(models: impl IntoIterator<Item = LocalModel<'a>>) -> Result<Self, Ambiguous> {
        Self::build(models, true)
    }

    /// As [`new`](Self::new), but a name two models claim stays with the first
    /// claim: for a configuration whose clashes are reported elsewhere.
    pub fn first_claim_wins<'a>(models: impl IntoIterator<Item = LocalModel<'a>>) -> Self {
        Self::build(models, false).unwrap_or_default()
    }

    fn build<'a>(
        models: impl IntoIterator<Item = LocalModel<'a>>,
        strict: bool,
    ) -> Result<Self, Ambiguous> {
        let models: Vec<LocalModel<'a>> = models.into_iter().collect();
        let ids: Vec<String> = models.iter().map(|m| m.id.to_owned()).collect();
        let mut by_name: BTreeMap<String, usize> = BTreeMap::new();
        let id_names = models
            .iter()
            .enumerate()
            .map(|(index, m)| (index, m.id, m.listed));
        let aliases = models.iter().enumerate().flat_map(|(index, m)| {
            m.aliases
                .iter()
                .map(move |alias| (index, alias.as_str(), m.listed))
        });
        for (index, name, listed) in id_names.chain(aliases) {
            if !listed {
                continue;
            }
            match by_name.get(name) {
                Some(&other) if other == index => {}
                Some(&other) if strict => {
                    return Err(Ambiguous {
                        name: name.to_owned(),
                        first: ids[other].clone(),
                        second: ids[index].clone(),
                    });
                }
                Some(_) => {}
                None => {
                    by_name.insert(name.to_owned(), index);
                }
            }
        }
        Ok(Self { ids, by_name })
    }

    /// The model IDs, sorted: a model's index is its position here.
    #[must_use]
    pub fn ids(&self) -> &[String] {
        &self.ids
    }

    /// The model ID `name` (an ID or an alias) refers to.
    #[must_use]
    pub fn resolve(&self, name: &str) -> Option<&str> {
        self.index(name).map(|m| self.ids[m].as_str())
    }

    /// The index of the model `name` refers to, in the sorted IDs.
    #[must_use]
    pub fn index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model<'a>(id: &'a str, aliases: &'a [String]) -> LocalModel<'a> {
        LocalModel {
            id,
            aliases,
            listed: true,
        }
    }

    #[test]
    fn ids_and_aliases_lead_to_the_model_and_its_index() {
        let aliases = ["chat".to_owned()];
        let names = LocalNames::new([model("a", &[]), model("b", &aliases)]).unwrap();
        assert_eq!(names.resolve("chat"), Some("b"));
        assert_eq!(names.index("chat"), Some(1));
        assert_eq!(names.resolve("a"), Some("a"));
        assert_eq!(names.resolve("c"), None);
    }

    #[test]
    fn an_alias_naming_another_model_is_ambiguous_unless_the_first_claim_wins() {
        let aliases = ["a".to_owned()];
        let models = [model("a", &[]), model("b", &aliases)];
        assert_eq!(
            LocalNames::new(models),
            Err(Ambiguous {
                name: "a".into(),
                first: "a".into(),
                second: "b".into()
            })
        );
        assert_eq!(LocalNames::first_claim_wins(models).resolve("a"), Some("a"));
    }

    #[test]
    fn an_unlisted_model_keeps_its_index_but_has_no_names() {
        let aliases = ["old-alias".to_owned()];
        let gone = LocalModel {
            id: "gone",
            aliases: &aliases,
            listed: false,
        };
        let names = LocalNames::new([gone, model("kept", &[])]).unwrap();
        assert_eq!(names.ids(), ["gone", "kept"]);
        assert_eq!(names.resolve("gone"), None);
        assert_eq!(names.resolve("old-alias"), None);
        assert_eq!(names.index("kept"), Some(1));
    }
}
