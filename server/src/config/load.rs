//! The top level of the document: global keys, then models, then what names models.

use super::error::{KeyPath, Reason, WarningKind};
use super::extras::{read_performance, read_store};
use super::fields::{Diagnostics, Fields, secs};
use super::macros::{EnvLookup, Scope, read_macros};
use super::model::{ModelDefaults, read_models};
use super::node::Node;
use super::peers::{check_peer_names, read_peers};
use super::ports::KeptPorts;
use super::priority::read_priority;
use super::profiles::read_profiles;
use super::routing::{Resolver, RoutingKeys, read_hooks, read_routing};
use super::selectors::read_selectors;
use super::transport::{UpstreamConfig, read_upstream};
use super::types::{
    ApiKey, Config, Hooks, LogLevel, LogTimeFormat, LogToStdout, PerformanceConfig,
};
use crate::scheduler::DEFAULT_UNLOAD_TIMEOUT;

const DEFAULT_HEALTH_CHECK_TIMEOUT: i64 = 120;
/// `requestBodyTimeout` when absent: enough for a 32 MB upload at 2.5 Mbit/s.
const DEFAULT_REQUEST_BODY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);
const MIN_HEALTH_CHECK_TIMEOUT: i64 = 15;
const DEFAULT_START_PORT: u16 = 5800;

/// Keys llama-swap has at the top level that this server does not implement yet.
const UNSUPPORTED_TOP_LEVEL: &[&str] = &["metricsMaxInMemory", "captureBuffer", "ui"];

/// Every top-level key this server reads, and llama-swap's that it does not
/// implement yet. Only these are macro-expanded: anything else (helper keys
/// holding YAML anchors, `x-defaults: &d ...`) is left as written, so an anchor
/// may hold `${PORT}` or `${MODEL_ID}`, which expand where the anchor is used.
const KNOWN_TOP_LEVEL: &[&str] = &[
    "healthCheckTimeout",
    "logLevel",
    "logToStdout",
    "logTimeFormat",
    "logRequests",
    "globalTTL",
    "unloadTimeout",
    "startPort",
    "sendLoadingState",
    "includeAliasesInList",
    "apiKeys",
    "models",
    "routing",
    "groups",
    "matrix",
    "priority",
    "hooks",
    "requestBodyLimit",
    "metricsMaxInMemory",
    "captureBuffer",
    "store",
    "ui",
    "performance",
    "profiles",
    "selectors",
    "peers",
    "upstream",
];

/// Builds a [`Config`] from a parsed document. Returns `None` when any issue was
/// found; `cx` then holds them all.
pub(crate) fn build(
    root: &Node,
    env: EnvLookup<'_>,
    kept_ports: Option<&KeptPorts>,
    cx: &mut Diagnostics,
) -> Option<Config> {
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
    // Global macros apply to every top-level value except `models`, which expands
    // per model with its own macros on top.
    let expanded = match root {
        Node::Map(entries) => Node::Map(
            entries
                .iter()
                .map(|(k, v)| {
                    let value =
                        if k == "models" || k == "macros" || !KNOWN_TOP_LEVEL.contains(&k.as_str())
                        {
                            v.clone()
                        } else {
                            global_scope.expand(v, &root_path.key(k), false, cx)
                        };
                    (k.clone(), value)
                })
                .collect(),
        ),
        other => other.clone(),
    };
    let mut fields = Fields::new(&expanded, root_path, cx)?;
    fields.take("macros");

    let health_check_timeout = match fields.take("healthCheckTimeout") {
        None => DEFAULT_HEALTH_CHECK_TIMEOUT,
        Some((node, path)) => match cx.int_min(node, &path, 0) {
            Some(v) if v < MIN_HEALTH_CHECK_TIMEOUT => {
                cx.warn(
                    path,
                    WarningKind::Raised {
                        got: v,
                        used: MIN_HEALTH_CHECK_TIMEOUT,
                    },
                );
                MIN_HEALTH_CHECK_TIMEOUT
            }
            Some(v) => v,
            None => DEFAULT_HEALTH_CHECK_TIMEOUT,
        },
    };
    let log_level = match fields.take("logLevel") {
        None => LogLevel::default(),
        Some((node, path)) => read_log_level(node, path, cx),
    };
    let log_to_stdout = match fields.take("logToStdout") {
        None => LogToStdout::default(),
        Some((node, path)) => match cx.word(node, &path, &["proxy", "upstream", "both", "none"]) {
            Some("upstream") => LogToStdout::Upstream,
            Some("both") => LogToStdout::Both,
            Some("none") => LogToStdout::None,
            _ => LogToStdout::Proxy,
        },
    };
    let log_time_format = match fields.take("logTimeFormat") {
        None => None,
        Some((node, path)) => read_log_time_format(node, path, cx),
    };
    let log_requests = match fields.take("logRequests") {
        None => false,
        Some((node, path)) => {
            let value = cx.bool(node, &path).unwrap_or(false);
            if value {
                // llama-swap reads the key and ignores it; say so rather than
                // accept it silently.
                cx.warn(
                    path,
                    WarningKind::NoEffect {
                        because: "every request is logged anyway (one INFO line each; logLevel: warn drops them), as llama-swap ignores it too",
                    },
                );
            }
            value
        }
    };
    let global_ttl = fields
        .take("globalTTL")
        .and_then(|(node, path)| cx.seconds(node, &path))
        .filter(|s| *s > 0)
        .map(secs);
    let request_body_timeout = match fields.take("requestBodyTimeout") {
        None => Some(DEFAULT_REQUEST_BODY_TIMEOUT),
        Some((node, path)) => cx
            .seconds(node, &path)
            .and_then(|s| (s > 0).then(|| secs(s))),
    };
    let unload_timeout = fields
        .take("unloadTimeout")
        .and_then(|(node, path)| cx.seconds(node, &path))
        .filter(|s| *s > 0)
        .map_or(DEFAULT_UNLOAD_TIMEOUT, secs);
    let start_port = fields
        .take("startPort")
        .and_then(|(node, path)| cx.int_range(node, &path, 1, i64::from(u16::MAX)))
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(DEFAULT_START_PORT);
    let request_body_limit = fields
        .take("requestBodyLimit")
        .and_then(|(node, path)| read_size(node, path, cx));
    let send_loading_state = flag(&mut fields, "sendLoadingState", cx);
    let include_aliases_in_list = flag(&mut fields, "includeAliasesInList", cx);
    let api_keys = match fields.take("apiKeys") {
        Some((node, path)) => read_api_keys(node, &path, cx),
        None => Vec::new(),
    };
    let upstream = match fields.take("upstream") {
        Some((node, path)) => read_upstream(node, &path, cx),
        None => UpstreamConfig::default(),
    };
    let performance = match fields.take("performance") {
        Some((node, path)) => read_performance(node, path, cx),
        None => PerformanceConfig::default(),
    };
    if let Some((node, path)) = fields.take("store") {
        read_store(node, path, cx);
    }
    fields.unsupported(UNSUPPORTED_TOP_LEVEL);

    let models_node = fields.take("models");
    let declared_ids: Vec<String> = match models_node {
        Some((Node::Map(entries), _)) => entries.iter().map(|(k, _)| k.clone()).collect(),
        _ => Vec::new(),
    };
    let defaults = ModelDefaults {
        env,
        global_macros: &global_macros,
        global_ttl,
        unload_timeout,
        send_loading_state,
        start_port,
        kept_ports: kept_ports.and_then(|kept| kept.under(start_port)),
    };
    let models = match models_node {
        Some((node, path)) => read_models(node, &path, &defaults, cx),
        None => Vec::new(),
    };

    let peers_path = KeyPath::from_keys(["peers"]);
    let peers = match fields.take("peers") {
        Some((node, path)) => read_peers(node, &path, &global_scope, cx),
        None => Vec::new(),
    };
    if models.is_empty() && peers.is_empty() && cx.issues.is_empty() {
        cx.warn(KeyPath::from_keys(["models"]), WarningKind::NoModels);
    }
    let resolver = Resolver::new(declared_ids, &models).with_peers(&peers);

    let routing_keys = RoutingKeys {
        routing: fields.take("routing"),
        legacy_groups: fields.take("groups"),
        legacy_matrix: fields.take("matrix"),
    };
    let routing = read_routing(routing_keys, &resolver, cx);
    super::parallel::check_parallel(&models, &routing.scheduler, cx);
    let selectors = match fields.take("selectors") {
        Some((node, path)) => {
            let matrix = routing.matrix.as_ref().map(|(_, compiled)| compiled);
            read_selectors(node, &path, &resolver, &routing.groups, matrix, cx)
        }
        None => Vec::new(),
    };
    let profiles = match fields.take("profiles") {
        Some((node, path)) => {
            // Every declared selector, so one broken selector is not also an
            // unknown pin target.
            let selector_ids: Vec<&str> = match expanded.get("selectors") {
                Some(Node::Map(entries)) => entries.iter().map(|(k, _)| k.as_str()).collect(),
                _ => Vec::new(),
            };
            read_profiles(node, &path, &resolver, &selector_ids, cx)
        }
        None => Vec::new(),
    };
    check_peer_names(&peers, &peers_path, &resolver, &selectors, &profiles, cx);
    let priority_rules = match fields.take("priority") {
        Some((node, path)) => read_priority(node, path, &api_keys, &resolver, cx),
        None => super::types::PriorityConfig::default(),
    };
    let hooks = match fields.take("hooks") {
        Some((node, path)) => read_hooks(node, path, &resolver, cx),
        None => Hooks::default(),
    };
    fields.finish(cx);

    if !cx.issues.is_empty() {
        return None;
    }
    Some(Config {
        models: models.into_iter().map(|m| m.config).collect(),
        groups: routing.groups,
        matrix: routing.matrix.map(|(settings, _)| settings),
        selectors,
        profiles,
        peers,
        scheduler: routing.scheduler,
        health_check_timeout: secs(u64::try_from(health_check_timeout).unwrap_or(0)),
        request_body_timeout,
        global_ttl,
        unload_timeout,
        start_port,
        send_loading_state,
        include_aliases_in_list,
        api_keys,
        hooks,
        log_level,
        log_to_stdout,
        log_time_format,
        log_requests,
        request_body_limit,
        performance,
        priority_rules,
        upstream,
    })
}

/// `logLevel`, read as llama-swap reads it (trimmed, any case); a word it does
/// not know means `info` there, and here too, with a warning.
fn read_log_level(node: &Node, path: KeyPath, cx: &mut Diagnostics) -> LogLevel {
    let Some(text) = cx.string(node, &path) else {
        return LogLevel::default();
    };
    match text.trim().to_ascii_lowercase().as_str() {
        "debug" => LogLevel::Debug,
        "info" => LogLevel::Info,
        "warn" => LogLevel::Warn,
        "error" => LogLevel::Error,
        _ => {
            cx.warn(
                path,
                WarningKind::UnknownWord {
                    got: text,
                    used: "info",
                },
            );
            LogLevel::Info
        }
    }
}

/// `logTimeFormat`: one of Go's layout names (any case); empty means no
/// timestamp, and so does an unknown name (llama-swap's rule), with a warning.
fn read_log_time_format(node: &Node, path: KeyPath, cx: &mut Diagnostics) -> Option<LogTimeFormat> {
    let text = cx.string(node, &path)?;
    let name = text.trim().to_ascii_lowercase();
    if name.is_empty() {
        return None;
    }
    let format = LogTimeFormat::from_name(&name);
    if format.is_none() {
        cx.warn(
            path,
            WarningKind::UnknownWord {
                got: text,
                used: "no timestamp",
            },
        );
    }
    format
}

/// A size in bytes: a whole number, or a number with a decimal (`KB`, `MB`,
/// `GB`) or binary (`KiB`, `MiB`, `GiB`) unit. At least 1 byte.
fn read_size(node: &Node, path: KeyPath, cx: &mut Diagnostics) -> Option<usize> {
    if let Node::Int(_) = node {
        let bytes = cx.int_min(node, &path, 1)?;
        return usize::try_from(bytes).ok();
    }
    let text = cx.string(node, &path)?;
    match parse_size(&text) {
        Some(bytes) if bytes > 0 => Some(bytes),
        _ => {
            cx.error(path, Reason::InvalidSize { got: text });
            None
        }
    }
}

fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: usize = number.parse().ok()?;
    let factor: usize = match unit.trim() {
        "" | "B" => 1,
        "KB" | "kB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        _ => return None,
    };
    number.checked_mul(factor)
}

fn flag(fields: &mut Fields<'_>, key: &str, cx: &mut Diagnostics) -> bool {
    fields
        .take(key)
        .and_then(|(node, path)| cx.bool(node, &path))
        .unwrap_or(false)
}

/// Reads `apiKeys`. Problems are reported by position only; a key's text never
/// appears in a message.
fn read_api_keys(node: &Node, path: &KeyPath, cx: &mut Diagnostics) -> Vec<ApiKey> {
    let Some(list) = cx.string_list(node, path) else {
        return Vec::new();
    };
    let mut keys = Vec::with_capacity(list.len());
    for (key, key_path) in list {
        if key.chars().any(char::is_whitespace) {
            cx.error(key_path, Reason::ApiKeyWhitespace);
        } else {
            keys.push(ApiKey::new(key));
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_take_decimal_and_binary_units() {
        assert_eq!(parse_size("1024"), Some(1024));
        assert_eq!(parse_size("64MiB"), Some(64 << 20));
        assert_eq!(parse_size("100 MB"), Some(100_000_000));
        assert_eq!(parse_size("2GiB"), Some(2 << 30));
        assert_eq!(parse_size("12 parsecs"), None);
        assert_eq!(parse_size("MB"), None);
    }
}
