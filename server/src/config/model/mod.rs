//! One entry of `models`: macro expansion, `${PORT}` allocation, per-model keys.

use std::collections::BTreeMap;
use std::time::Duration;

pub(crate) mod capabilities;
pub(crate) mod command;
pub(crate) mod compat;
pub(crate) mod filters;
pub(crate) mod parallel;
pub(crate) mod placement;
pub(crate) mod timeouts;

use capabilities::read_capabilities;
use command::{read_check_endpoint, read_command, read_proxy, strip_comment_lines};
use compat::read_ignore_websockets;
use filters::{expand_by_id_keys, read_filters};
use parallel::read_parallel;
use placement::read_placement;
use timeouts::read_timeouts;

use crate::config::document::env::EnvLookup;
use crate::config::document::error::{KeyPath, Reason, WarningKind};
use crate::config::document::fields::{Diagnostics, Fields, secs};
use crate::config::document::macros::{
    PORT_PLACEHOLDER, Scope, port_uses, read_macros, substitute_port,
};
use crate::config::document::node::Node;
use crate::config::document::ports::PortAllocator;
use crate::config::resolved::model::{COMFYUI_MIN_CONCURRENCY, COMFYUI_MODEL_ID, ModelConfig};
use crate::filters::Filters;
use crate::proxy::Timeouts;
use crate::scheduler::{DEFAULT_CONCURRENCY_LIMIT, Parallel};

const DEFAULT_CHECK_ENDPOINT: &str = "/health";
const DEFAULT_PROXY: &str = "http://localhost:${PORT}";

/// Global values a model falls back to.
pub(crate) struct ModelDefaults<'a> {
    pub(crate) env: EnvLookup<'a>,
    pub(crate) global_macros: &'a [(String, Node)],
    pub(crate) global_ttl: Option<Duration>,
    pub(crate) max_queue_wait: Option<Duration>,
    pub(crate) monitor: crate::upstream::Monitor,
    pub(crate) unload_timeout: Duration,
    pub(crate) send_loading_state: bool,
    pub(crate) start_port: u16,
    /// `${PORT}` numbers a reload keeps (see [`crate::config::document::ports`]).
    pub(crate) kept_ports: Option<&'a std::collections::BTreeMap<String, u16>>,
}

/// A model plus where its aliases were written, for cross-model checks.
pub(crate) struct ParsedModel {
    pub(crate) config: ModelConfig,
    pub(crate) alias_paths: Vec<KeyPath>,
    /// Where `parallel` was written, when it was.
    pub(crate) parallel_path: Option<KeyPath>,
    /// The model's own path (`models.<id>`).
    pub(crate) model_path: KeyPath,
    /// Where `memory`, `gpus` and `persistent` were written, those present.
    pub(crate) placement_paths: Vec<KeyPath>,
    /// Where `memory` was written.
    pub(crate) memory_path: Option<KeyPath>,
    /// Where `gpus` was written.
    pub(crate) gpus_path: Option<KeyPath>,
}

/// Reads `models`. Models are handled in ID order, which is also the order `${PORT}`
/// numbers are handed out in (as llama-swap does), so ports do not depend on the
/// order of the file.
pub(crate) fn read_models(
    node: &Node,
    path: &KeyPath,
    defaults: &ModelDefaults<'_>,
    cx: &mut Diagnostics,
) -> Vec<ParsedModel> {
    let entries: BTreeMap<&str, &Node> = match node {
        Node::Map(entries) => entries.iter().map(|(k, v)| (k.as_str(), v)).collect(),
        Node::Null => BTreeMap::new(),
        other => {
            cx.wrong_type::<()>(path, "a map of model IDs to model settings", other);
            return Vec::new();
        }
    };
    let mut ports = PortAllocator::new(defaults.start_port, defaults.kept_ports);
    let mut models = Vec::with_capacity(entries.len());
    for (id, model_node) in entries {
        let model_path = path.key(id);
        if id.trim().is_empty() {
            cx.error(model_path, Reason::Empty);
            continue;
        }
        if let Some(model) = read_model(id, model_node, &model_path, defaults, &mut ports, cx) {
            models.push(model);
        }
    }
    check_aliases(&models, cx);
    models
}

fn read_model(
    id: &str,
    node: &Node,
    path: &KeyPath,
    defaults: &ModelDefaults<'_>,
    ports: &mut PortAllocator<'_>,
    cx: &mut Diagnostics,
) -> Option<ParsedModel> {
    let Node::Map(raw) = node else {
        return cx.wrong_type(path, "a map of model settings", node);
    };
    let model_macros = match node.get("macros") {
        Some(m) => read_macros(m, &path.key("macros"), cx),
        None => Vec::new(),
    };
    let scope = Scope {
        env: defaults.env,
        global_macros: defaults.global_macros,
        model_macros: &model_macros,
        model_id: Some(id),
    };

    let mut expanded = Vec::with_capacity(raw.len() + 1);
    for (key, value) in raw {
        if key == "macros" {
            expanded.push((key.clone(), Node::Null));
            continue;
        }
        let value = match (key.as_str(), value) {
            // Comment lines go before expansion so a commented-out `${PORT}` does not
            // allocate a port.
            ("cmd" | "cmdStop", Node::Str(text)) => Node::Str(strip_comment_lines(text)),
            _ => value.clone(),
        };
        let pid_allowed = key == "cmdStop";
        let mut value = scope.expand(&value, &path.key(key), pid_allowed, cx);
        if key == "filters" {
            expand_by_id_keys(&scope, &mut value, &path.key(key), cx);
        }
        expanded.push((key.clone(), value));
    }

    let cmd_uses_port = matches!(
        expanded.iter().find(|(k, _)| k == "cmd"),
        Some((_, Node::Str(cmd))) if cmd.contains(PORT_PLACEHOLDER)
    );
    let proxy_is_default = !expanded
        .iter()
        .any(|(k, v)| k == "proxy" && !matches!(v, Node::Null));
    if proxy_is_default {
        expanded.retain(|(k, _)| k != "proxy");
        expanded.push(("proxy".to_owned(), Node::Str(DEFAULT_PROXY.to_owned())));
    }
    let mut expanded = Node::Map(expanded);
    placement::reject_gpu_elsewhere(&expanded, path, cx);

    let port = if cmd_uses_port {
        match ports.take(id) {
            Some(port) => {
                substitute_port(&mut expanded, port);
                Some(port)
            }
            None => {
                cx.error(
                    path.key("cmd"),
                    Reason::PortsExhausted {
                        start_port: defaults.start_port,
                    },
                );
                return None;
            }
        }
    } else {
        let mut uses = Vec::new();
        port_uses(&expanded, path, &mut uses);
        let proxy_path = path.key("proxy");
        for use_path in uses {
            let reason = if use_path != proxy_path {
                Reason::MacroNotAvailable {
                    name: "PORT",
                    where_available: "in models whose cmd uses ${PORT}",
                }
            } else if proxy_is_default {
                Reason::ProxyNeedsPort
            } else {
                Reason::PortOnlyInProxy
            };
            cx.error(use_path, reason);
        }
        None
    };

    let mut fields = Fields::new(&expanded, path.clone(), cx)?;
    fields.take("macros");
    let cmd = match fields.take("cmd") {
        // llama-swap loads it, and fails to start it.
        Some((Node::Str(text), cmd_path)) if strip_comment_lines(text).trim().is_empty() => {
            cx.warn(cmd_path, WarningKind::NoCommand);
            Some(String::new())
        }
        Some((node, cmd_path)) => read_command(node, &cmd_path, cx),
        // llama-swap loads it, and fails to start it.
        None => {
            cx.warn(path.key("cmd"), WarningKind::NoCommand);
            Some(String::new())
        }
    };
    let cmd_stop = fields
        .take("cmdStop")
        .and_then(|(node, p)| read_command(node, &p, cx));
    let proxy = fields
        .take("proxy")
        .and_then(|(node, p)| read_proxy(node, &p, cx));

    let mut aliases = Vec::new();
    let mut alias_paths = Vec::new();
    if let Some((node, list_path)) = fields.take("aliases")
        && let Some(list) = cx.string_list(node, &list_path)
    {
        for (alias, alias_path) in list {
            if aliases.contains(&alias) {
                cx.error(alias_path, Reason::Duplicate { item: alias });
            } else {
                aliases.push(alias);
                alias_paths.push(alias_path);
            }
        }
    }

    let mut env = Vec::new();
    if let Some((node, list_path)) = fields.take("env")
        && let Some(list) = cx.string_list(node, &list_path)
    {
        for (entry, entry_path) in list {
            match entry.split_once('=') {
                Some((name, value)) if !name.trim().is_empty() => {
                    env.push((name.trim().to_owned(), value.to_owned()));
                }
                _ => cx.error(entry_path, Reason::InvalidEnvEntry),
            }
        }
    }

    let check_endpoint = match fields.take("checkEndpoint") {
        None => Some(DEFAULT_CHECK_ENDPOINT.to_owned()),
        Some((node, p)) => read_check_endpoint(node, p, proxy.as_deref(), cx),
    };

    // -1 is llama-swap's "unset" and falls back to globalTTL; 0 means never.
    let ttl = match fields.take("ttl") {
        None => defaults.global_ttl,
        Some((Node::Int(-1, _), _)) => defaults.global_ttl,
        Some((node, p)) => cx.seconds(node, &p).and_then(|s| (s > 0).then(|| secs(s))),
    };
    let min_resident = fields
        .take("minResident")
        .and_then(|(node, p)| cx.seconds(node, &p))
        .map(secs);
    // 0 here lifts the global bound for this model.
    let max_queue_wait = match fields.take("maxQueueWait") {
        None => defaults.max_queue_wait,
        Some((node, p)) => cx.seconds(node, &p).and_then(|s| (s > 0).then(|| secs(s))),
    };
    let monitor = crate::config::monitor::read_model(
        &mut fields,
        defaults.monitor,
        check_endpoint.is_some(),
        cx,
    );
    let unload_timeout = match fields.take("unloadTimeout") {
        None => defaults.unload_timeout,
        Some((node, p)) => match cx.seconds(node, &p) {
            Some(0) | None => defaults.unload_timeout,
            Some(s) => secs(s),
        },
    };
    let concurrency_limit = match fields.take("concurrencyLimit") {
        None => DEFAULT_CONCURRENCY_LIMIT,
        Some((node, p)) => match cx.seconds(node, &p) {
            Some(0) | None => DEFAULT_CONCURRENCY_LIMIT,
            Some(n) => {
                let limit = usize::try_from(n).unwrap_or(usize::MAX);
                if id == COMFYUI_MODEL_ID && limit < COMFYUI_MIN_CONCURRENCY {
                    cx.warn(
                        p,
                        WarningKind::Raised {
                            got: i64::try_from(n).unwrap_or(i64::MAX),
                            used: COMFYUI_MIN_CONCURRENCY as i64,
                        },
                    );
                }
                limit
            }
        },
    };
    // ComfyUI's page sends many requests at once (llama-swap's floor).
    let concurrency_limit = if id == COMFYUI_MODEL_ID {
        concurrency_limit.max(COMFYUI_MIN_CONCURRENCY)
    } else {
        concurrency_limit
    };
    let (parallel, parallel_path) = match fields.take("parallel") {
        None => (Parallel::Unlimited, None),
        Some((node, p)) => (read_parallel(node, &p, cx), Some(p)),
    };
    let unlisted = optional_bool(&mut fields, "unlisted", cx).unwrap_or(false);
    let send_loading_state =
        optional_bool(&mut fields, "sendLoadingState", cx).unwrap_or(defaults.send_loading_state);
    let use_model_name = optional_text(&mut fields, "useModelName", cx);
    let name = optional_text(&mut fields, "name", cx);
    let description = optional_text(&mut fields, "description", cx);
    let metadata = fields.take("metadata").map(|(node, _)| node.to_json());
    let (filters, by_id_paths) = match fields.take("filters") {
        Some((node, p)) => read_filters(node, &p, cx),
        None => (Filters::default(), Vec::new()),
    };
    // Each setParamsByID name routes to this model (llama-swap registers them
    // as aliases); the model's own ID and names already listed are not repeated.
    for (name, name_path) in by_id_paths {
        if name != id && !aliases.contains(&name) {
            aliases.push(name);
            alias_paths.push(name_path);
        }
    }
    let timeouts = match fields.take("timeouts") {
        Some((node, p)) => read_timeouts(node, &p, cx),
        None => Timeouts::default(),
    };
    let capabilities = fields
        .take("capabilities")
        .and_then(|(node, p)| read_capabilities(node, &p, cx));
    let ignore_websockets = read_ignore_websockets(id, fields.take("compat"), cx);
    let placement = read_placement(&mut fields, cx);
    let sleep = placement::read_sleep(&mut fields, cx);
    fields.finish(cx);

    Some(ParsedModel {
        config: ModelConfig {
            id: id.to_owned(),
            cmd: cmd?,
            cmd_stop,
            proxy: proxy?,
            port,
            aliases,
            env,
            check_endpoint,
            ttl,
            min_resident,
            max_queue_wait,
            monitor,
            unload_timeout,
            unlisted,
            use_model_name,
            name,
            description,
            metadata,
            concurrency_limit,
            parallel,
            send_loading_state,
            filters,
            timeouts,
            capabilities,
            ignore_websockets,
            memory: placement.memory,
            gpus: placement.gpus.unwrap_or(1),
            persistent: placement.persistent,
            sleep,
        },
        alias_paths,
        parallel_path,
        model_path: path.clone(),
        placement_paths: placement.paths,
        memory_path: placement.memory_path,
        gpus_path: placement.gpus_path,
    })
}

fn optional_bool(fields: &mut Fields<'_>, key: &str, cx: &mut Diagnostics) -> Option<bool> {
    let (node, path) = fields.take(key)?;
    cx.bool(node, &path)
}

/// A string key where an empty value means "not set".
fn optional_text(fields: &mut Fields<'_>, key: &str, cx: &mut Diagnostics) -> Option<String> {
    let (node, path) = fields.take(key)?;
    cx.string(node, &path).filter(|s| !s.is_empty())
}

/// Aliases must be unique across models and must not shadow a model ID.
fn check_aliases(models: &[ParsedModel], cx: &mut Diagnostics) {
    let ids: Vec<&str> = models.iter().map(|m| m.config.id.as_str()).collect();
    let mut owners: BTreeMap<&str, &str> = BTreeMap::new();
    for model in models {
        for (alias, alias_path) in model.config.aliases.iter().zip(&model.alias_paths) {
            if ids.binary_search(&alias.as_str()).is_ok() {
                cx.error(
                    alias_path.clone(),
                    Reason::AliasIsModelId {
                        alias: alias.clone(),
                    },
                );
            } else if let Some(owner) = owners.get(alias.as_str()) {
                cx.error(
                    alias_path.clone(),
                    Reason::DuplicateAlias {
                        alias: alias.clone(),
                        model: (*owner).to_owned(),
                    },
                );
            } else {
                owners.insert(alias, &model.config.id);
            }
        }
    }
}
