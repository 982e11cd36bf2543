//! `routing` (groups and scheduler), the legacy top-level `groups`/`matrix`, and
//! `hooks`: everything that names models and so is read after them.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{KeyPath, Reason, WarningKind};
use super::fields::{Cx, Fields};
use super::model::ParsedModel;
use super::node::Node;
use super::types::{GroupConfig, Hooks, SchedulerConfig};

/// Resolves the names the config uses for models (IDs or aliases) to IDs.
pub(crate) struct Resolver {
    ids: BTreeSet<String>,
    aliases: BTreeMap<String, String>,
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
        }
    }

    pub(crate) fn resolve(&self, name: &str) -> Option<&str> {
        if let Some(id) = self.ids.get(name) {
            return Some(id);
        }
        self.aliases.get(name).map(String::as_str)
    }

    /// Resolves a list of names, reporting unknown names and names that resolve to a
    /// model already listed.
    fn resolve_list(&self, list: Vec<(String, KeyPath)>, cx: &mut Cx) -> Vec<(String, KeyPath)> {
        let mut out: Vec<(String, KeyPath)> = Vec::with_capacity(list.len());
        for (name, path) in list {
            match self.resolve(&name) {
                None => cx.error(path, Reason::UnknownModel { name }),
                Some(id) if out.iter().any(|(o, _)| o == id) => {
                    cx.error(path, Reason::Duplicate { item: name });
                }
                Some(id) => out.push((id.to_owned(), path)),
            }
        }
        out
    }
}

/// The routing-related top-level keys, as found.
pub(crate) struct RoutingKeys<'a> {
    pub(crate) routing: Option<(&'a Node, KeyPath)>,
    pub(crate) legacy_groups: Option<(&'a Node, KeyPath)>,
    pub(crate) legacy_matrix: Option<(&'a Node, KeyPath)>,
}

/// Reads groups and the scheduler choice.
pub(crate) fn read_routing(
    keys: RoutingKeys<'_>,
    resolver: &Resolver,
    cx: &mut Cx,
) -> (Vec<GroupConfig>, SchedulerConfig) {
    let mut groups_node = None;
    let mut scheduler = default_scheduler();
    let mut router_present = false;

    if let Some((node, path)) = keys.routing
        && let Some(mut routing) = Fields::new(node, path, cx)
    {
        if let Some((router_node, router_path)) = routing.take("router") {
            router_present = true;
            groups_node = read_router(router_node, router_path, cx);
        }
        if let Some((sched_node, sched_path)) = routing.take("scheduler") {
            scheduler = read_scheduler(sched_node, sched_path, resolver, cx);
        }
        routing.finish(cx);
    }

    if let Some((_, path)) = &keys.legacy_matrix {
        cx.warn(path.clone(), WarningKind::MatrixNotSupported);
    }
    if let Some((node, path)) = keys.legacy_groups {
        if router_present {
            cx.error(
                path,
                Reason::ConflictsWith {
                    other: KeyPath::from_keys(["routing", "router"]),
                },
            );
        } else if keys.legacy_matrix.is_some() {
            cx.error(
                path,
                Reason::ConflictsWith {
                    other: KeyPath::from_keys(["matrix"]),
                },
            );
        } else {
            groups_node = Some((node, path));
        }
    }

    let groups = match groups_node {
        Some((node, path)) => read_groups(node, &path, resolver, cx),
        None => Vec::new(),
    };
    (groups, scheduler)
}

fn default_scheduler() -> SchedulerConfig {
    SchedulerConfig::Fifo {
        priorities: BTreeMap::new(),
        drain_fence: true,
    }
}

/// Reads `routing.router`; returns the groups node when group routing is in effect.
fn read_router<'a>(node: &'a Node, path: KeyPath, cx: &mut Cx) -> Option<(&'a Node, KeyPath)> {
    let mut router = Fields::new(node, path, cx)?;
    let matrix = match router.take("use") {
        Some((n, p)) => match cx.word(n, &p, &["group", "matrix"]) {
            Some("matrix") => {
                cx.warn(p, WarningKind::MatrixNotSupported);
                true
            }
            _ => false,
        },
        None => false,
    };
    let mut groups = None;
    if let Some((settings_node, settings_path)) = router.take("settings")
        && let Some(mut settings) = Fields::new(settings_node, settings_path, cx)
    {
        let found_groups = settings.take("groups");
        if let Some((_, matrix_path)) = settings.take("matrix") {
            if let Some((_, groups_path)) = &found_groups {
                cx.error(
                    matrix_path,
                    Reason::ConflictsWith {
                        other: groups_path.clone(),
                    },
                );
            } else if !matrix {
                cx.warn(matrix_path, WarningKind::NotSupported);
            }
        }
        match found_groups {
            Some((_, groups_path)) if matrix => cx.warn(
                groups_path,
                WarningKind::NoEffect {
                    because: "routing.router.use is matrix",
                },
            ),
            other => groups = other,
        }
        settings.finish(cx);
    }
    router.finish(cx);
    groups
}

fn read_groups(node: &Node, path: &KeyPath, resolver: &Resolver, cx: &mut Cx) -> Vec<GroupConfig> {
    let Node::Map(entries) = node else {
        return cx
            .wrong_type(path, "a map of group names to group settings", node)
            .unwrap_or_default();
    };
    let mut groups: Vec<GroupConfig> = Vec::with_capacity(entries.len());
    let mut member_of: BTreeMap<String, String> = BTreeMap::new();
    for (name, group_node) in entries {
        let group_path = path.key(name);
        let Some(mut fields) = Fields::new(group_node, group_path.clone(), cx) else {
            continue;
        };
        let mut flag = |key: &str, default: bool, cx: &mut Cx| {
            fields
                .take(key)
                .and_then(|(n, p)| cx.bool(n, &p))
                .unwrap_or(default)
        };
        let swap = flag("swap", true, cx);
        let exclusive = flag("exclusive", true, cx);
        let persistent = flag("persistent", false, cx);
        let mut members = Vec::new();
        if let Some((n, p)) = fields.take("members")
            && let Some(list) = cx.string_list(n, &p)
        {
            for (id, member_path) in resolver.resolve_list(list, cx) {
                if let Some(first) = member_of.get(&id) {
                    cx.error(
                        member_path,
                        Reason::InTwoGroups {
                            model: id,
                            group: first.clone(),
                        },
                    );
                } else {
                    member_of.insert(id.clone(), name.clone());
                    members.push(id);
                }
            }
        }
        fields.finish(cx);
        groups.push(GroupConfig {
            name: name.clone(),
            swap,
            exclusive,
            persistent,
            members,
        });
    }
    groups
}

fn read_scheduler(node: &Node, path: KeyPath, resolver: &Resolver, cx: &mut Cx) -> SchedulerConfig {
    let Some(mut fields) = Fields::new(node, path, cx) else {
        return default_scheduler();
    };
    let serial = match fields.take("use") {
        Some((n, p)) => cx.word(n, &p, &["fifo", "serial"]) == Some("serial"),
        None => false,
    };
    let mut priorities = BTreeMap::new();
    let mut drain_fence = true;
    if let Some((settings_node, settings_path)) = fields.take("settings")
        && let Some(mut settings) = Fields::new(settings_node, settings_path, cx)
    {
        if let Some((fifo_node, fifo_path)) = settings.take("fifo")
            && let Some(mut fifo) = Fields::new(fifo_node, fifo_path, cx)
        {
            if let Some((n, p)) = fifo.take("priority") {
                priorities = read_priorities(n, &p, resolver, cx);
                if serial && !priorities.is_empty() {
                    cx.error(p, Reason::PriorityUnderSerial);
                }
            }
            if let Some((n, p)) = fifo.take("drainFence") {
                if let Some(value) = cx.bool(n, &p) {
                    drain_fence = value;
                }
                if serial {
                    cx.warn(
                        p,
                        WarningKind::NoEffect {
                            because: "routing.scheduler.use is serial",
                        },
                    );
                }
            }
            fifo.finish(cx);
        }
        settings.finish(cx);
    }
    fields.finish(cx);
    if serial {
        SchedulerConfig::Serial
    } else {
        SchedulerConfig::Fifo {
            priorities,
            drain_fence,
        }
    }
}

/// Reads `fifo.priority`. Keys may be model IDs or aliases (llama-swap accepts alias
/// keys but never applies them; here they apply to the model they name).
fn read_priorities(
    node: &Node,
    path: &KeyPath,
    resolver: &Resolver,
    cx: &mut Cx,
) -> BTreeMap<String, i32> {
    let Node::Map(entries) = node else {
        return cx
            .wrong_type(path, "a map of model IDs or aliases to integers", node)
            .unwrap_or_default();
    };
    let mut priorities = BTreeMap::new();
    let mut first_key: BTreeMap<String, String> = BTreeMap::new();
    for (key, value) in entries {
        let key_path = path.key(key);
        let Some(id) = resolver.resolve(key) else {
            cx.error(key_path, Reason::UnknownModel { name: key.clone() });
            continue;
        };
        if let Some(first) = first_key.get(id) {
            cx.error(
                key_path,
                Reason::DuplicatePriority {
                    model: id.to_owned(),
                    first_key: first.clone(),
                },
            );
            continue;
        }
        let Some(priority) =
            cx.int_range(value, &key_path, i64::from(i32::MIN), i64::from(i32::MAX))
        else {
            continue;
        };
        first_key.insert(id.to_owned(), key.clone());
        priorities.insert(id.to_owned(), i32::try_from(priority).unwrap_or_default());
    }
    priorities
}

/// Reads `hooks`.
pub(crate) fn read_hooks(node: &Node, path: KeyPath, resolver: &Resolver, cx: &mut Cx) -> Hooks {
    let mut hooks = Hooks::default();
    let Some(mut fields) = Fields::new(node, path, cx) else {
        return hooks;
    };
    if let Some((startup_node, startup_path)) = fields.take("on_startup")
        && let Some(mut startup) = Fields::new(startup_node, startup_path, cx)
    {
        if let Some((n, p)) = startup.take("preload")
            && let Some(list) = cx.string_list(n, &p)
        {
            hooks.preload = resolver
                .resolve_list(list, cx)
                .into_iter()
                .map(|(id, _)| id)
                .collect();
        }
        startup.finish(cx);
    }
    fields.finish(cx);
    hooks
}
