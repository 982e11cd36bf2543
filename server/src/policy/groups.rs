//! The group policy (llama-swap's `groups`, the default routing).
//!
//! Groups follow llama-swap (`swap`, `exclusive`, `persistent`; defaults true, true,
//! false). Every model belongs to exactly one group; models that no group lists join
//! the implicit `(default)` group (swap + exclusive), so with no groups at all one
//! model runs at a time. To run target T, a running model R is evicted when
//!
//! - R is in T's group and that group has `swap`, or
//! - R is in another group, T's group is `exclusive` and R's group is not `persistent`.
//!
//! Loading a model of a non-exclusive group therefore never evicts other groups, even
//! exclusive ones: a llama-swap quirk kept so existing configs behave the same.
//!
//! Whether running one model stops another depends on the two models' groups
//! alone, so [`EvictionPolicy::evict`] and [`EvictionPolicy::conflicts`] give
//! the same answer for the same models.

use std::collections::BTreeMap;

use super::EvictionPolicy;

/// A swap group (llama-swap `groups`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSettings {
    /// The group name.
    pub name: String,
    /// Loading a member stops the other running members (llama-swap default: true).
    pub swap: bool,
    /// Loading a member stops running models of other, non-persistent groups (default: true).
    pub exclusive: bool,
    /// Members are never stopped to make room for another group (default: false).
    pub persistent: bool,
    /// Model IDs in this group.
    pub members: Vec<String>,
}

impl GroupSettings {
    /// A group with llama-swap's defaults: `swap: true`, `exclusive: true`, `persistent: false`.
    pub fn new(name: impl Into<String>, members: Vec<String>) -> Self {
        Self {
            name: name.into(),
            swap: true,
            exclusive: true,
            persistent: false,
            members,
        }
    }
}

/// Name of the implicit group of models no configured group lists.
pub(crate) const DEFAULT_GROUP: &str = "(default)";

/// Why a group configuration is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A model is listed by two groups.
    #[error("model {model} is in groups {first} and {second}; a model may be in only one group")]
    ModelInTwoGroups {
        /// The model ID.
        model: String,
        /// The group that listed it first.
        first: String,
        /// The other group.
        second: String,
    },
    /// A group lists the same model twice.
    #[error("group {group} lists model {model} more than once")]
    DuplicateMember {
        /// The group name.
        group: String,
        /// The model ID.
        model: String,
    },
    /// A group lists a model that is not configured.
    #[error("group {group} lists model {model}, which is not configured")]
    UnknownMember {
        /// The group name.
        group: String,
        /// The name it lists.
        model: String,
    },
    /// Two groups share a name.
    #[error("group {group} is defined twice")]
    DuplicateGroup {
        /// The group name.
        group: String,
    },
    /// A configured group uses the name of the implicit group.
    #[error("group name {DEFAULT_GROUP} is reserved for models that no group lists")]
    ReservedGroupName,
}

#[derive(Debug, Clone)]
struct Group {
    /// Only the unit tests ask a model's group by name.
    #[cfg(test)]
    name: String,
    swap: bool,
    exclusive: bool,
    persistent: bool,
}

/// Validated groups, numbered like the sorted model IDs they were built from.
#[derive(Debug, Clone)]
pub(crate) struct Groups {
    /// Model IDs, sorted; a model's index is its position here. The policy
    /// itself works on indices; only the unit tests ask by name.
    #[cfg(test)]
    models: Vec<String>,
    /// Group index of each model.
    group_of: Vec<usize>,
    groups: Vec<Group>,
}

impl Groups {
    /// Validates `groups` against the configured `models` (IDs).
    ///
    /// # Errors
    ///
    /// [`PolicyError`] when a model is in two groups, a group lists a model twice or
    /// lists an unknown one, two groups share a name, or a group is named `(default)`.
    pub(crate) fn new(models: &[String], groups: &[GroupSettings]) -> Result<Self, PolicyError> {
        let mut ids: Vec<String> = models.to_vec();
        ids.sort();
        ids.dedup();
        let mut assigned: Vec<Option<usize>> = vec![None; ids.len()];
        let mut out: Vec<Group> = Vec::with_capacity(groups.len() + 1);
        let mut names: BTreeMap<&str, ()> = BTreeMap::new();
        for (g, settings) in groups.iter().enumerate() {
            if settings.name == DEFAULT_GROUP {
                return Err(PolicyError::ReservedGroupName);
            }
            if names.insert(&settings.name, ()).is_some() {
                return Err(PolicyError::DuplicateGroup {
                    group: settings.name.clone(),
                });
            }
            for member in &settings.members {
                let Ok(index) = ids.binary_search(member) else {
                    return Err(PolicyError::UnknownMember {
                        group: settings.name.clone(),
                        model: member.clone(),
                    });
                };
                match assigned[index] {
                    Some(prev) if prev == g => {
                        return Err(PolicyError::DuplicateMember {
                            group: settings.name.clone(),
                            model: member.clone(),
                        });
                    }
                    Some(prev) => {
                        return Err(PolicyError::ModelInTwoGroups {
                            model: member.clone(),
                            first: groups[prev].name.clone(),
                            second: settings.name.clone(),
                        });
                    }
                    None => assigned[index] = Some(g),
                }
            }
            out.push(Group {
                #[cfg(test)]
                name: settings.name.clone(),
                swap: settings.swap,
                exclusive: settings.exclusive,
                persistent: settings.persistent,
            });
        }
        let default_index = out.len();
        let mut needs_default = false;
        let group_of = assigned
            .into_iter()
            .map(|g| {
                g.unwrap_or_else(|| {
                    needs_default = true;
                    default_index
                })
            })
            .collect();
        if needs_default {
            out.push(Group {
                #[cfg(test)]
                name: DEFAULT_GROUP.to_owned(),
                swap: true,
                exclusive: true,
                persistent: false,
            });
        }
        Ok(Self {
            #[cfg(test)]
            models: ids,
            group_of,
            groups: out,
        })
    }

    /// The running models that must stop before `target` can run, sorted by ID.
    ///
    /// `running` may contain `target` itself and names the policy does not know;
    /// both are ignored. An unknown `target` evicts nothing.
    #[cfg(test)]
    pub(crate) fn evict_for<S: AsRef<str>>(&self, target: &str, running: &[S]) -> Vec<String> {
        let Some(t) = self.index_of(target) else {
            return Vec::new();
        };
        let mut evict: Vec<String> = running
            .iter()
            .filter_map(|r| self.index_of(r.as_ref()))
            .filter(|&r| self.evicts(t, r))
            .map(|r| self.models[r].clone())
            .collect();
        evict.sort();
        evict.dedup();
        evict
    }

    /// The group `model` belongs to (`(default)` for models no group lists).
    #[cfg(test)]
    pub(crate) fn group_of(&self, model: &str) -> Option<&str> {
        self.index_of(model)
            .map(|m| self.groups[self.group_of[m]].name.as_str())
    }

    #[cfg(test)]
    fn index_of(&self, model: &str) -> Option<usize> {
        self.models.binary_search_by(|m| m.as_str().cmp(model)).ok()
    }

    /// Whether running `target` requires stopping `other` (indices into the sorted IDs).
    fn evicts(&self, target: usize, other: usize) -> bool {
        if target == other {
            return false;
        }
        let (tg, og) = (self.group_of[target], self.group_of[other]);
        if tg == og {
            self.groups[tg].swap
        } else {
            self.groups[tg].exclusive && !self.groups[og].persistent
        }
    }
}

impl EvictionPolicy for Groups {
    /// Every running model `target`'s group excludes: groups leave no choice,
    /// so use does not matter.
    fn evict(
        &self,
        target: usize,
        running: &[usize],
        _last_used: &dyn Fn(usize) -> u64,
    ) -> Vec<usize> {
        self.conflicts(target, running)
    }

    fn conflicts(&self, target: usize, models: &[usize]) -> Vec<usize> {
        models
            .iter()
            .copied()
            .filter(|&m| m < self.group_of.len() && target < self.group_of.len())
            .filter(|&m| self.evicts(target, m))
            .collect()
    }

    fn conflicts_with(&self, target: usize, other: usize) -> bool {
        target < self.group_of.len() && other < self.group_of.len() && self.evicts(target, other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    fn group(
        name: &str,
        members: &[&str],
        swap: bool,
        exclusive: bool,
        persistent: bool,
    ) -> GroupSettings {
        GroupSettings {
            name: name.to_owned(),
            swap,
            exclusive,
            persistent,
            members: ids(members),
        }
    }

    #[test]
    fn no_groups_means_one_model_at_a_time() {
        let g = Groups::new(&ids(&["a", "b", "c"]), &[]).unwrap();
        assert_eq!(g.evict_for("a", &["c", "b", "a"]), ids(&["b", "c"]));
        assert_eq!(g.group_of("b"), Some(DEFAULT_GROUP));
    }

    #[test]
    fn model_in_two_groups_is_rejected() {
        let err = Groups::new(
            &ids(&["a", "b"]),
            &[
                group("g1", &["a"], true, true, false),
                group("g2", &["a", "b"], true, true, false),
            ],
        )
        .unwrap_err();
        assert_eq!(
            err,
            PolicyError::ModelInTwoGroups {
                model: "a".into(),
                first: "g1".into(),
                second: "g2".into()
            }
        );
    }

    #[test]
    fn duplicate_member_is_rejected() {
        let err =
            Groups::new(&ids(&["a"]), &[group("g", &["a", "a"], true, true, false)]).unwrap_err();
        assert!(matches!(err, PolicyError::DuplicateMember { .. }));
    }

    #[test]
    fn unknown_member_and_reserved_and_duplicate_group_names_are_rejected() {
        let unknown =
            Groups::new(&ids(&["a"]), &[group("g", &["x"], true, true, false)]).unwrap_err();
        assert!(matches!(unknown, PolicyError::UnknownMember { .. }));
        let reserved = Groups::new(
            &ids(&["a"]),
            &[group(DEFAULT_GROUP, &["a"], true, true, false)],
        )
        .unwrap_err();
        assert_eq!(reserved, PolicyError::ReservedGroupName);
        let twice = Groups::new(
            &ids(&["a", "b"]),
            &[
                group("g", &["a"], true, true, false),
                group("g", &["b"], true, true, false),
            ],
        )
        .unwrap_err();
        assert!(matches!(twice, PolicyError::DuplicateGroup { .. }));
    }

    #[test]
    fn swap_group_evicts_running_sibling() {
        let g = Groups::new(
            &ids(&["a", "b"]),
            &[group("g", &["a", "b"], true, true, false)],
        )
        .unwrap();
        assert_eq!(g.evict_for("b", &["a"]), ids(&["a"]));
    }

    #[test]
    fn non_swap_group_keeps_siblings() {
        let g = Groups::new(
            &ids(&["a", "b"]),
            &[group("g", &["a", "b"], false, false, false)],
        )
        .unwrap();
        assert!(g.evict_for("b", &["a"]).is_empty());
    }

    #[test]
    fn exclusive_group_evicts_other_groups() {
        let g = Groups::new(
            &ids(&["a", "b"]),
            &[
                group("g1", &["a"], true, true, false),
                group("g2", &["b"], true, true, false),
            ],
        )
        .unwrap();
        assert_eq!(g.evict_for("b", &["a"]), ids(&["a"]));
    }

    #[test]
    fn persistent_group_is_never_evicted_by_another_group() {
        let g = Groups::new(
            &ids(&["a", "b"]),
            &[
                group("p", &["a"], true, false, true),
                group("x", &["b"], true, true, false),
            ],
        )
        .unwrap();
        assert!(g.evict_for("b", &["a"]).is_empty());
    }

    #[test]
    fn non_exclusive_group_does_not_evict_exclusive_group() {
        let g = Groups::new(
            &ids(&["a", "b"]),
            &[
                group("g1", &["a"], true, true, false),
                group("g2", &["b"], true, false, false),
            ],
        )
        .unwrap();
        assert!(g.evict_for("b", &["a"]).is_empty());
        assert_eq!(g.evict_for("a", &["b"]), ids(&["b"]));
    }

    #[test]
    fn unlisted_models_join_the_default_group() {
        let g = Groups::new(
            &ids(&["a", "b", "c"]),
            &[group("g", &["a"], true, false, false)],
        )
        .unwrap();
        assert_eq!(g.group_of("b"), Some(DEFAULT_GROUP));
        // (default) is exclusive: running b stops a; running a (non-exclusive) keeps b.
        assert_eq!(g.evict_for("b", &["a", "c"]), ids(&["a", "c"]));
        assert!(g.evict_for("a", &["b"]).is_empty());
    }

    #[test]
    fn target_and_unknown_names_in_running_are_ignored() {
        let g = Groups::new(&ids(&["a", "b"]), &[]).unwrap();
        assert_eq!(g.evict_for("a", &["a", "zzz", "b"]), ids(&["b"]));
        assert!(g.evict_for("zzz", &["a"]).is_empty());
    }

    #[test]
    fn set_questions_answer_by_index_and_skip_the_target() {
        let g = Groups::new(
            &ids(&["a", "b", "c"]),
            &[
                group("g1", &["a", "b"], true, true, false),
                group("p", &["c"], true, false, true),
            ],
        )
        .unwrap();
        // a stops its sibling b, not itself, not the persistent c.
        assert_eq!(g.evict(0, &[0, 1, 2], &|_| 0), vec![1]);
        assert_eq!(g.conflicts(0, &[0, 1, 2]), vec![1]);
        // c is not exclusive: it stops nobody of another group.
        assert!(g.evict(2, &[0, 1], &|_| 0).is_empty());
        // Indices the policy does not know are ignored.
        assert!(g.evict(0, &[7], &|_| 0).is_empty());
        assert!(g.conflicts(9, &[0]).is_empty());
    }
}
