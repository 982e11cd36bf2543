//! `routing` (groups or matrix, and the scheduler) and the legacy top-level
//! `groups`/`matrix`: they name models, so they are read after them.

use std::collections::BTreeMap;

use super::document::error::{KeyPath, Reason, WarningKind};
use super::document::fields::{Diagnostics, Fields};
use super::document::node::Node;
use super::matrix::read_matrix;
use super::memory::read_memory_settings;
use super::resolved::memory::MemoryConfig;
use super::resolved::types::{GroupConfig, SchedulerConfig};
use crate::names::NameTable;
use crate::policy::matrix::{Matrix, MatrixSettings};

/// The routing-related top-level keys, as found.
pub(crate) struct RoutingKeys<'a> {
    pub(crate) routing: Option<(&'a Node, KeyPath)>,
    pub(crate) legacy_groups: Option<(&'a Node, KeyPath)>,
    pub(crate) legacy_matrix: Option<(&'a Node, KeyPath)>,
}

/// What `routing` and the legacy keys resolve to.
pub(crate) struct Routing {
    pub(crate) groups: Vec<GroupConfig>,
    /// The matrix, when the matrix router is selected (then `groups` is empty).
    pub(crate) matrix: Option<(MatrixSettings, Matrix)>,
    /// The memory router's settings, when it is selected (then `groups` is
    /// empty and `matrix` `None`).
    pub(crate) memory: Option<MemoryConfig>,
    pub(crate) scheduler: SchedulerConfig,
}

/// Reads groups or the matrix, and the scheduler choice.
pub(crate) fn read_routing(
    keys: RoutingKeys<'_>,
    names: &NameTable,
    cx: &mut Diagnostics,
) -> Routing {
    let mut scheduler = default_scheduler();
    let mut router = None;

    if let Some((node, path)) = keys.routing
        && let Some(mut routing) = Fields::new(node, path, cx)
    {
        if let Some((router_node, router_path)) = routing.take("router") {
            router = Some(read_router(router_node, router_path, cx));
        }
        if let Some((sched_node, sched_path)) = routing.take("scheduler") {
            scheduler = read_scheduler(sched_node, sched_path, names, cx);
        }
        routing.finish(cx);
    }

    let conflict = |path: KeyPath, other: &[&str], cx: &mut Diagnostics| {
        cx.error(
            path,
            Reason::ConflictsWith {
                other: KeyPath::from_keys(other.iter().copied()),
            },
        );
    };
    let selected = if let Some(router) = router {
        for (_, path) in [&keys.legacy_matrix, &keys.legacy_groups]
            .into_iter()
            .flatten()
        {
            conflict(path.clone(), &["routing", "router"], cx);
        }
        router
    } else if let Some(matrix) = keys.legacy_matrix {
        if let Some((_, path)) = keys.legacy_groups {
            conflict(path, &["matrix"], cx);
        }
        Router::Matrix(Some(matrix))
    } else {
        Router::Groups(keys.legacy_groups)
    };

    match selected {
        Router::Groups(node) => Routing {
            groups: node
                .map(|(node, path)| read_groups(node, &path, names, cx))
                .unwrap_or_default(),
            matrix: None,
            memory: None,
            scheduler,
        },
        Router::Matrix(node) => Routing {
            groups: Vec::new(),
            matrix: node.and_then(|(node, path)| read_matrix(node, &path, names, cx)),
            memory: None,
            scheduler,
        },
        Router::Memory(node) => Routing {
            groups: Vec::new(),
            matrix: None,
            memory: Some(
                node.map(|(node, path)| read_memory_settings(node, path, names, cx))
                    .unwrap_or_default(),
            ),
            scheduler,
        },
    }
}

impl Default for Routing {
    /// No groups, no matrix, the fifo scheduler: what an absent `routing` means.
    fn default() -> Self {
        Self {
            groups: Vec::new(),
            matrix: None,
            memory: None,
            scheduler: default_scheduler(),
        }
    }
}

fn default_scheduler() -> SchedulerConfig {
    SchedulerConfig::Fifo {
        priorities: BTreeMap::new(),
        drain_fence: true,
    }
}

/// Which router is in use, with the node of its settings.
enum Router<'a> {
    Groups(Option<(&'a Node, KeyPath)>),
    Matrix(Option<(&'a Node, KeyPath)>),
    /// `use: memory` (this server's extension), with `settings.memory`.
    Memory(Option<(&'a Node, KeyPath)>),
}

/// The routers `routing.router.use` accepts (`memory` is this server's).
const ROUTERS: &[&str] = &["group", "matrix", "memory"];

/// Reads `routing.router`. Both `settings.groups` and `settings.matrix` may be
/// present (as in llama-swap); `use` selects one and the other has no effect.
fn read_router<'a>(node: &'a Node, path: KeyPath, cx: &mut Diagnostics) -> Router<'a> {
    let Some(mut router) = Fields::new(node, path.clone(), cx) else {
        return Router::Groups(None);
    };
    let choice = match router.take("use") {
        Some((n, p)) => cx.word(n, &p, ROUTERS),
        None => None,
    };
    let matrix = choice == Some("matrix");
    let (mut groups, mut matrix_node, mut memory_node) = (None, None, None);
    if let Some((settings_node, settings_path)) = router.take("settings")
        && let Some(mut settings) = Fields::new(settings_node, settings_path, cx)
    {
        groups = settings.take("groups");
        matrix_node = settings.take("matrix");
        memory_node = settings.take("memory");
        settings.finish(cx);
    }
    router.finish(cx);
    if choice == Some("memory") {
        for (_, other) in [groups, matrix_node].into_iter().flatten() {
            cx.warn(
                other,
                WarningKind::NoEffect {
                    because: "routing.router.use is memory",
                },
            );
        }
        return Router::Memory(memory_node);
    }
    if let Some((_, memory_path)) = memory_node {
        cx.warn(
            memory_path,
            WarningKind::NoEffect {
                because: "routing.router.use is not memory",
            },
        );
    }
    if matrix {
        if let Some((_, groups_path)) = groups {
            cx.warn(
                groups_path,
                WarningKind::NoEffect {
                    because: "routing.router.use is matrix",
                },
            );
        }
        if matrix_node.is_none() {
            cx.error(
                path.key("settings").key("matrix"),
                Reason::RequiredBy {
                    key: path.key("use"),
                    value: "matrix",
                },
            );
        }
        Router::Matrix(matrix_node)
    } else {
        if let Some((_, matrix_path)) = matrix_node {
            cx.warn(
                matrix_path,
                WarningKind::NoEffect {
                    because: "routing.router.use is not matrix",
                },
            );
        }
        Router::Groups(groups)
    }
}

fn read_groups(
    node: &Node,
    path: &KeyPath,
    names: &NameTable,
    cx: &mut Diagnostics,
) -> Vec<GroupConfig> {
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
        let mut flag = |key: &str, default: bool, cx: &mut Diagnostics| {
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
            for (id, member_path) in resolve_members(names, list, cx) {
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

fn read_scheduler(
    node: &Node,
    path: KeyPath,
    names: &NameTable,
    cx: &mut Diagnostics,
) -> SchedulerConfig {
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
                priorities = read_priorities(n, &p, names, cx);
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
    names: &NameTable,
    cx: &mut Diagnostics,
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
        let Some(id) = names.local().resolve(key) else {
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

/// Resolves a list of group members. A name that is no model is skipped with a
/// warning (llama-swap loads such a group and never matches the name); one
/// that resolves to a model already listed is an error.
fn resolve_members(
    names: &NameTable,
    list: Vec<(String, KeyPath)>,
    cx: &mut Diagnostics,
) -> Vec<(String, KeyPath)> {
    let mut out: Vec<(String, KeyPath)> = Vec::with_capacity(list.len());
    for (name, path) in list {
        match names.local().resolve(&name) {
            None => cx.warn(path, WarningKind::MemberNotAModel { name }),
            Some(id) if out.iter().any(|(o, _)| o == id) => {
                cx.error(path, Reason::Duplicate { item: name });
            }
            Some(id) => out.push((id.to_owned(), path)),
        }
    }
    out
}
