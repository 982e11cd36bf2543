//! The top level of the document: every key, what reads it, and the order
//! they are read in ([`STEPS`]). The keys this server knows, and so the keys
//! macros expand in, are computed from that table.

use std::ops::RangeInclusive;

use super::document::env::EnvLookup;
use super::document::error::{KeyPath, WarningKind};
use super::document::fields::{Diagnostics, Fields};
use super::document::macros::{Scope, read_macros};
use super::document::node::Node;
use super::document::ports::KeptPorts;
use super::globals::{self, GlobalReader, Globals};
use super::hooks::read_hooks;
use super::keys::read_keys;
use super::model::parallel::check_parallel;
use super::model::{ModelDefaults, ParsedModel, read_models};
use super::monitor;
use super::peers::{check_peer_names, read_peers};
use super::priority::read_priority;
use super::profiles::read_profiles;
use super::resolved::api_key::ApiKey;
use super::resolved::names::{PeerConfig, ProfileConfig, SelectorConfig};
use super::resolved::types::{Config, Hooks, PriorityConfig};
use super::resolver::names_so_far;
use super::routing::{Routing, RoutingKeys, read_routing};
use super::selectors::read_selectors;
use crate::names::NameTable;

/// One step of reading the top level.
#[derive(Clone, Copy)]
pub(crate) enum Step {
    /// `macros`: read before anything is expanded, and never expanded itself.
    Macros,
    /// A global setting, read before `models` (which fall back to some).
    Global(&'static str, GlobalReader),
    /// `models`, each expanded with its own macros.
    Models,
    /// `peers`; after it every model name is known.
    Peers,
    /// A section that names models, read once every model name is known.
    Named(&'static str, NamedReader),
    /// A check across sections, made once those before it are read.
    Check(Checker),
    /// A key llama-swap has that this server does not implement: it warns
    /// that it is not supported (never "unknown"). No key is read so today.
    #[allow(dead_code)]
    NotSupported(&'static str),
}

/// Reads a key that names models; `None` when it is absent or null.
pub(crate) type NamedReader =
    for<'a> fn(Option<(&'a Node, KeyPath)>, &mut Named<'a>, &mut Diagnostics);
/// A check across sections.
pub(crate) type Checker = fn(&mut Named<'_>, &mut Diagnostics);

/// Every top-level key, in the order it is read. Adding a key means adding
/// its step here (see "How to add a key" in `config/mod.rs`).
pub(crate) const STEPS: &[Step] = &[
    Step::Macros,
    Step::Global("healthCheckTimeout", globals::health_check_timeout),
    Step::Global("logLevel", globals::log_level),
    Step::Global("logToStdout", globals::log_to_stdout),
    Step::Global("logTimeFormat", globals::log_time_format),
    Step::Global("logRequests", globals::log_requests),
    Step::Global("globalTTL", globals::global_ttl),
    Step::Global("maxQueueWait", globals::max_queue_wait),
    Step::Global("healthCheckInterval", monitor::health_check_interval),
    Step::Global("healthCheckFailures", monitor::health_check_failures),
    Step::Global("maxRestarts", monitor::max_restarts),
    Step::Global("restartWindow", monitor::restart_window),
    Step::Global("requestBodyTimeout", globals::request_body_timeout),
    Step::Global("unloadTimeout", globals::unload_timeout),
    Step::Global("startPort", globals::start_port),
    Step::Global("requestBodyLimit", globals::request_body_limit),
    Step::Global("sendLoadingState", globals::send_loading_state),
    Step::Global("includeAliasesInList", globals::include_aliases_in_list),
    Step::Global("apiKeys", globals::api_keys),
    Step::Global("upstream", globals::upstream),
    Step::Global("performance", globals::performance),
    Step::Global("store", globals::store),
    Step::Global("metricsMaxInMemory", globals::metrics_max_in_memory),
    Step::Global("captureBuffer", globals::capture_buffer),
    Step::Global("ui", globals::ui),
    Step::Models,
    Step::Peers,
    // Read by `routing`, which decides which of them applies.
    Step::Named("groups", |node, named, _| named.legacy_groups = node),
    Step::Named("matrix", |node, named, _| named.legacy_matrix = node),
    Step::Named("routing", read_routing_section),
    Step::Named("selectors", read_selectors_section),
    Step::Named("profiles", read_profiles_section),
    Step::Check(check_peer_names_step),
    Step::Named("priority", |node, named, cx| {
        if let Some((node, path)) = node {
            named.priority = read_priority(node, path, named.api_keys, &named.names, cx);
        }
    }),
    // After `priority`: a key's maxPriority joins its per-key caps.
    Step::Named("keys", |node, named, cx| {
        if let Some((node, path)) = node {
            named.keys = read_keys(
                node,
                &path,
                named.api_keys,
                &named.names,
                &mut named.priority,
                cx,
            );
        }
    }),
    Step::Named("hooks", |node, named, cx| {
        if let Some((node, path)) = node {
            named.hooks = read_hooks(node, path, &named.names, cx);
        }
    }),
];

impl Step {
    /// The top-level key this step reads, if it reads one.
    pub(crate) fn key(self) -> Option<&'static str> {
        match self {
            Step::Macros => Some("macros"),
            Step::Global(key, _) | Step::Named(key, _) | Step::NotSupported(key) => Some(key),
            Step::Models => Some("models"),
            Step::Peers => Some("peers"),
            Step::Check(_) => None,
        }
    }

    /// Whether the global macros expand in this key's values (`models`
    /// expand per model, with their own macros on top; `macros` never).
    fn expands(self) -> bool {
        !matches!(self, Step::Macros | Step::Models | Step::Check(_))
    }
}

/// Every top-level key this server reads, and llama-swap's that it does not
/// implement yet.
#[cfg(test)]
pub(crate) fn known_keys() -> impl Iterator<Item = &'static str> {
    STEPS.iter().filter_map(|step| step.key())
}

/// What the sections that name models read and check, and what they need:
/// the names of models and peers, and what earlier sections produced.
pub(crate) struct Named<'a> {
    pub(crate) names: NameTable,
    pub(crate) models: &'a [ParsedModel],
    pub(crate) peers: &'a [PeerConfig],
    pub(crate) api_keys: &'a [ApiKey],
    /// Every selector ID declared, valid or not (a broken selector is not
    /// also an unknown pin target).
    pub(crate) declared_selectors: Vec<&'a str>,
    pub(crate) legacy_groups: Option<(&'a Node, KeyPath)>,
    pub(crate) legacy_matrix: Option<(&'a Node, KeyPath)>,
    pub(crate) routing: Routing,
    pub(crate) selectors: Vec<SelectorConfig>,
    pub(crate) profiles: Vec<ProfileConfig>,
    pub(crate) priority: PriorityConfig,
    pub(crate) hooks: Hooks,
    pub(crate) keys: Vec<super::resolved::key_scope::KeyScope>,
}

fn read_routing_section<'a>(
    node: Option<(&'a Node, KeyPath)>,
    named: &mut Named<'a>,
    cx: &mut Diagnostics,
) {
    let keys = RoutingKeys {
        routing: node,
        legacy_groups: named.legacy_groups.take(),
        legacy_matrix: named.legacy_matrix.take(),
    };
    named.routing = read_routing(keys, &named.names, cx);
    super::memory::check_memory(
        named.models,
        named.routing.memory.as_ref(),
        &KeyPath::from_keys(["routing", "router"]),
        cx,
    );
    let set = named
        .models
        .iter()
        .filter_map(|m| Some((&m.config, m.parallel_path.as_ref()?)));
    check_parallel(set, &named.routing.scheduler, cx);
}

fn read_selectors_section<'a>(
    node: Option<(&'a Node, KeyPath)>,
    named: &mut Named<'a>,
    cx: &mut Diagnostics,
) {
    let Some((node, path)) = node else {
        return;
    };
    if let Node::Map(entries) = node {
        named.declared_selectors = entries.iter().map(|(k, _)| k.as_str()).collect();
    }
    let matrix = named.routing.matrix.as_ref().map(|(_, compiled)| compiled);
    named.selectors = read_selectors(node, &path, &named.names, &named.routing.groups, matrix, cx);
}

fn read_profiles_section<'a>(
    node: Option<(&'a Node, KeyPath)>,
    named: &mut Named<'a>,
    cx: &mut Diagnostics,
) {
    if let Some((node, path)) = node {
        named.profiles = read_profiles(node, &path, &named.names, &named.declared_selectors, cx);
    }
}

/// Qualified peer names must not be spelled like any other name (see
/// [`check_peer_names`]); checked once selectors and profiles are read.
fn check_peer_names_step(named: &mut Named<'_>, cx: &mut Diagnostics) {
    check_peer_names(
        named.peers,
        &KeyPath::from_keys(["peers"]),
        &named.names,
        &named.selectors,
        &named.profiles,
        cx,
    );
}

/// What a load takes besides the document.
pub(crate) struct Inputs<'a> {
    pub(crate) env: EnvLookup<'a>,
    /// `${PORT}` numbers a reload keeps.
    pub(crate) kept_ports: Option<&'a KeptPorts>,
    /// The system's ephemeral port range, to warn about `${PORT}` numbers in it
    /// (`None`: not checked).
    pub(crate) ephemeral_ports: Option<RangeInclusive<u16>>,
}

/// Builds a [`Config`] from a parsed document. Returns `None` when any issue was
/// found; `cx` then holds them all.
pub(crate) fn build(root: &Node, inputs: &Inputs<'_>, cx: &mut Diagnostics) -> Option<Config> {
    let (env, kept_ports) = (inputs.env, inputs.kept_ports);
    let root_path = KeyPath::root();
    let global_macros = match root.get("macros") {
        Some(node) => read_macros(node, &KeyPath::from_keys(["macros"]), cx),
        None => Vec::new(),
    };
    let global_scope = Scope {
        env,
        global_macros: &global_macros,
        model_macros: &[],
        model_id: None,
    };
    // Keys this server does not know are left as written: helper keys holding
    // YAML anchors (`x-defaults: &d ...`) may hold `${PORT}` or `${MODEL_ID}`,
    // which expand where the anchor is used.
    let expands = |key: &str| {
        STEPS
            .iter()
            .any(|step| step.key() == Some(key) && step.expands())
    };
    let expanded = match root {
        Node::Map(entries) => Node::Map(
            entries
                .iter()
                .map(|(k, v)| {
                    let value = if expands(k) {
                        global_scope.expand(v, &root_path.key(k), false, cx)
                    } else {
                        v.clone()
                    };
                    (k.clone(), value)
                })
                .collect(),
        ),
        other => other.clone(),
    };
    let mut fields = Fields::new(&expanded, root_path, cx)?;
    fields.unsupported(STEPS.iter().filter_map(|step| match step {
        Step::NotSupported(key) => Some(*key),
        _ => None,
    }));

    let mut globals = Globals::default();
    let mut models: Vec<ParsedModel> = Vec::new();
    let mut declared_ids: Vec<String> = Vec::new();
    let mut peers: Vec<PeerConfig> = Vec::new();
    let mut steps = STEPS.iter();
    // Global settings, then models and peers: until every model name is known.
    for step in steps.by_ref() {
        match *step {
            Step::Macros => {
                fields.take("macros");
            }
            Step::Global(key, read) => {
                if let Some((node, path)) = fields.take(key) {
                    read(node, path, &mut globals, cx);
                }
            }
            Step::NotSupported(_) => {}
            Step::Models => {
                let node = fields.take("models");
                if let Some((Node::Map(entries), _)) = node {
                    declared_ids = entries.iter().map(|(k, _)| k.clone()).collect();
                }
                let defaults = ModelDefaults {
                    env,
                    global_macros: &global_macros,
                    global_ttl: globals.global_ttl,
                    max_queue_wait: globals.max_queue_wait,
                    monitor: globals.monitor,
                    unload_timeout: globals.unload_timeout,
                    send_loading_state: globals.send_loading_state,
                    start_port: globals.start_port,
                    kept_ports: kept_ports.and_then(|kept| kept.under(globals.start_port)),
                };
                if let Some((node, path)) = node {
                    models = read_models(node, &path, &defaults, cx);
                }
                if let Some(range) = &inputs.ephemeral_ports {
                    warn_of_ephemeral_ports(&models, range, cx);
                }
            }
            Step::Peers => {
                if let Some((node, path)) = fields.take("peers") {
                    peers = read_peers(node, &path, &global_scope, cx);
                }
                if models.is_empty() && peers.is_empty() && cx.issues.is_empty() {
                    cx.warn(KeyPath::from_keys(["models"]), WarningKind::NoModels);
                }
                break;
            }
            Step::Named(..) | Step::Check(_) => {}
        }
    }
    let mut named = Named {
        names: names_so_far(declared_ids, &models, &peers),
        models: &models,
        peers: &peers,
        api_keys: &globals.api_keys,
        declared_selectors: Vec::new(),
        legacy_groups: None,
        legacy_matrix: None,
        routing: Routing::default(),
        selectors: Vec::new(),
        profiles: Vec::new(),
        priority: PriorityConfig::default(),
        hooks: Hooks::default(),
        keys: Vec::new(),
    };
    for step in steps {
        match *step {
            Step::Named(key, read) => read(fields.take(key), &mut named, cx),
            Step::Check(check) => check(&mut named, cx),
            // The table's order is checked by a test.
            Step::Macros
            | Step::Global(..)
            | Step::NotSupported(_)
            | Step::Models
            | Step::Peers => {}
        }
    }
    fields.finish(cx);

    if !cx.issues.is_empty() {
        return None;
    }
    let Named {
        routing,
        selectors,
        profiles,
        priority,
        hooks,
        keys,
        ..
    } = named;
    Some(Config {
        models: models.into_iter().map(|m| m.config).collect(),
        groups: routing.groups,
        matrix: routing.matrix.map(|(settings, _)| settings),
        memory: routing.memory,
        selectors,
        profiles,
        peers,
        scheduler: routing.scheduler,
        health_check_timeout: globals.health_check_timeout,
        request_body_timeout: globals.request_body_timeout,
        global_ttl: globals.global_ttl,
        max_queue_wait: globals.max_queue_wait,
        unload_timeout: globals.unload_timeout,
        start_port: globals.start_port,
        send_loading_state: globals.send_loading_state,
        include_aliases_in_list: globals.include_aliases_in_list,
        api_keys: globals.api_keys,
        keys,
        hooks,
        log_level: globals.log_level,
        log_to_stdout: globals.log_to_stdout,
        log_time_format: globals.log_time_format,
        log_requests: globals.log_requests,
        request_body_limit: globals.request_body_limit,
        performance: globals.performance,
        activity: globals.activity,
        priority_rules: priority,
        upstream: globals.upstream,
    })
}

/// One warning for every `${PORT}` number in the system's ephemeral range.
fn warn_of_ephemeral_ports(
    models: &[ParsedModel],
    range: &RangeInclusive<u16>,
    cx: &mut Diagnostics,
) {
    let ports: Vec<u16> = models
        .iter()
        .filter_map(|m| m.config.port)
        .filter(|port| range.contains(port))
        .collect();
    let (Some(&first), Some(&last)) = (ports.iter().min(), ports.iter().max()) else {
        return;
    };
    cx.warn(
        KeyPath::from_keys(["startPort"]),
        WarningKind::EphemeralPorts {
            count: ports.len(),
            first,
            last,
            low: *range.start(),
            high: *range.end(),
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Models fall back to global settings, and the sections that name models
    /// need every name: the loop in `build` relies on this order.
    #[test]
    fn steps_are_in_dependency_order() {
        let phase = |step: &Step| match step {
            Step::Macros => 0,
            Step::Global(..) | Step::NotSupported(_) => 1,
            Step::Models => 2,
            Step::Peers => 3,
            Step::Named(..) | Step::Check(_) => 4,
        };
        let phases: Vec<u8> = STEPS.iter().map(phase).collect();
        assert!(phases.is_sorted(), "{phases:?}");
        assert_eq!(phases.iter().filter(|p| **p == 2).count(), 1);
        assert_eq!(phases.iter().filter(|p| **p == 3).count(), 1);
    }

    #[test]
    fn every_key_is_in_the_table_once() {
        let mut keys: Vec<&str> = known_keys().collect();
        let count = keys.len();
        keys.sort_unstable();
        keys.dedup();
        assert_eq!(keys.len(), count, "a key is listed twice");
        // The key that drifted from the hand-kept list.
        assert!(keys.contains(&"requestBodyTimeout"));
    }
}
