//! The top-level scalar settings (timeouts, ports, logging, `apiKeys`, ...):
//! read first, because models fall back to some of them.

use std::time::Duration;

use super::document::error::{KeyPath, Reason, WarningKind};
use super::document::fields::{Diagnostics, secs};
use super::document::node::Node;
use super::resolved::api_key::ApiKey;
use super::resolved::types::ActivityConfig;
use super::resolved::types::{LogLevel, LogTimeFormat, LogToStdout, PerformanceConfig};
use super::resolved::upstream::UpstreamConfig;
use crate::scheduler::DEFAULT_UNLOAD_TIMEOUT;

const DEFAULT_HEALTH_CHECK_TIMEOUT: Duration = Duration::from_secs(120);
/// `requestBodyTimeout` when absent: enough for a 32 MB upload at 2.5 Mbit/s.
const DEFAULT_REQUEST_BODY_TIMEOUT: Duration = Duration::from_secs(120);
const MIN_HEALTH_CHECK_TIMEOUT: i64 = 15;
const DEFAULT_START_PORT: u16 = 5800;

/// What the global keys say, each at its default until read.
#[derive(Debug)]
pub(crate) struct Globals {
    pub(crate) health_check_timeout: Duration,
    pub(crate) log_level: LogLevel,
    pub(crate) log_to_stdout: LogToStdout,
    pub(crate) log_time_format: Option<LogTimeFormat>,
    pub(crate) log_requests: bool,
    pub(crate) global_ttl: Option<Duration>,
    pub(crate) max_queue_wait: Option<Duration>,
    /// `healthCheckInterval`, `healthCheckFailures`, `maxRestarts`, `restartWindow`.
    pub(crate) monitor: crate::upstream::Monitor,
    pub(crate) request_body_timeout: Option<Duration>,
    pub(crate) unload_timeout: Duration,
    pub(crate) start_port: u16,
    pub(crate) request_body_limit: Option<usize>,
    pub(crate) send_loading_state: bool,
    pub(crate) include_aliases_in_list: bool,
    pub(crate) api_keys: Vec<ApiKey>,
    pub(crate) upstream: UpstreamConfig,
    pub(crate) performance: PerformanceConfig,
    pub(crate) activity: ActivityConfig,
}

impl Default for Globals {
    fn default() -> Self {
        Self {
            health_check_timeout: DEFAULT_HEALTH_CHECK_TIMEOUT,
            log_level: LogLevel::default(),
            log_to_stdout: LogToStdout::default(),
            log_time_format: None,
            log_requests: false,
            global_ttl: None,
            max_queue_wait: None,
            monitor: crate::upstream::Monitor::default(),
            request_body_timeout: Some(DEFAULT_REQUEST_BODY_TIMEOUT),
            unload_timeout: DEFAULT_UNLOAD_TIMEOUT,
            start_port: DEFAULT_START_PORT,
            request_body_limit: None,
            send_loading_state: false,
            include_aliases_in_list: false,
            api_keys: Vec::new(),
            upstream: UpstreamConfig::default(),
            performance: PerformanceConfig::default(),
            activity: ActivityConfig::default(),
        }
    }
}

/// A reader of one global key, called when the key has a value.
pub(crate) type GlobalReader = fn(&Node, KeyPath, &mut Globals, &mut Diagnostics);

/// `healthCheckTimeout` (at least 15 s; less is raised, with a warning).
pub(crate) fn health_check_timeout(
    node: &Node,
    path: KeyPath,
    g: &mut Globals,
    cx: &mut Diagnostics,
) {
    let seconds = match cx.int_min(node, &path, 0) {
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
        None => return,
    };
    g.health_check_timeout = secs(u64::try_from(seconds).unwrap_or(0));
}

/// `logLevel`, read as llama-swap reads it (trimmed, any case); a word it does
/// not know means `info` there, and here too, with a warning.
pub(crate) fn log_level(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    let Some(text) = cx.string(node, &path) else {
        return;
    };
    g.log_level = match text.trim().to_ascii_lowercase().as_str() {
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
    };
}

/// `logToStdout`: `proxy`, `upstream`, `both` or `none`.
pub(crate) fn log_to_stdout(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    g.log_to_stdout = match cx.word(node, &path, &["proxy", "upstream", "both", "none"]) {
        Some("upstream") => LogToStdout::Upstream,
        Some("both") => LogToStdout::Both,
        Some("none") => LogToStdout::None,
        _ => LogToStdout::Proxy,
    };
}

/// `logTimeFormat`: one of Go's layout names (any case); empty means no
/// timestamp, and so does an unknown name (llama-swap's rule), with a warning.
pub(crate) fn log_time_format(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    let Some(text) = cx.string(node, &path) else {
        return;
    };
    let name = text.trim().to_ascii_lowercase();
    if name.is_empty() {
        return;
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
    g.log_time_format = format;
}

/// `logRequests`: read, and said to have no effect when true.
pub(crate) fn log_requests(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
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
    g.log_requests = value;
}

/// `globalTTL` (0 = never).
pub(crate) fn global_ttl(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    g.global_ttl = cx.seconds(node, &path).filter(|s| *s > 0).map(secs);
}

/// `maxQueueWait` (this server's extension; 0 = no bound): how long a request
/// may wait for its turn, the default and the cap of `X-Queue-Timeout`.
pub(crate) fn max_queue_wait(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    g.max_queue_wait = cx.seconds(node, &path).filter(|s| *s > 0).map(secs);
}

/// `requestBodyTimeout` (this server's extension; 0 = none).
pub(crate) fn request_body_timeout(
    node: &Node,
    path: KeyPath,
    g: &mut Globals,
    cx: &mut Diagnostics,
) {
    g.request_body_timeout = cx
        .seconds(node, &path)
        .and_then(|s| (s > 0).then(|| secs(s)));
}

/// `unloadTimeout` (0 = the default).
pub(crate) fn unload_timeout(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    if let Some(s) = cx.seconds(node, &path).filter(|s| *s > 0) {
        g.unload_timeout = secs(s);
    }
}

/// `startPort`: the first `${PORT}` number.
pub(crate) fn start_port(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    if let Some(port) = cx
        .int_range(node, &path, 1, i64::from(u16::MAX))
        .and_then(|p| u16::try_from(p).ok())
    {
        g.start_port = port;
    }
}

/// `requestBodyLimit` (this server's extension).
pub(crate) fn request_body_limit(
    node: &Node,
    path: KeyPath,
    g: &mut Globals,
    cx: &mut Diagnostics,
) {
    g.request_body_limit = read_size(node, path, cx);
}

/// `sendLoadingState`: the default of the per-model key.
pub(crate) fn send_loading_state(
    node: &Node,
    path: KeyPath,
    g: &mut Globals,
    cx: &mut Diagnostics,
) {
    g.send_loading_state = cx.bool(node, &path).unwrap_or(false);
}

/// `includeAliasesInList`.
pub(crate) fn include_aliases_in_list(
    node: &Node,
    path: KeyPath,
    g: &mut Globals,
    cx: &mut Diagnostics,
) {
    g.include_aliases_in_list = cx.bool(node, &path).unwrap_or(false);
}

/// `apiKeys`. Problems are reported by position only; a key's text never
/// appears in a message.
pub(crate) fn api_keys(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    let Some(list) = cx.string_list(node, &path) else {
        return;
    };
    for (key, key_path) in list {
        if key.chars().any(char::is_whitespace) {
            cx.error(key_path, Reason::ApiKeyWhitespace);
        } else {
            g.api_keys.push(ApiKey::new(key));
        }
    }
}

/// `upstream` (see [`super::upstream`]).
pub(crate) fn upstream(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    g.upstream = super::upstream::read_upstream(node, &path, cx);
}

/// `performance` (see [`super::extras`]).
pub(crate) fn performance(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    g.performance = super::extras::read_performance(node, path, cx);
}

/// `store`: the history database (`path`, and this server's `maxRows` and
/// `maxAge`).
pub(crate) fn store(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    g.activity.store = super::extras::read_store(node, path, cx);
}

/// `metricsMaxInMemory`: finished requests kept in memory (0 or less: 1000,
/// as in llama-swap).
pub(crate) fn metrics_max_in_memory(
    node: &Node,
    path: KeyPath,
    g: &mut Globals,
    cx: &mut Diagnostics,
) {
    if let Some(n) = cx.int(node, &path) {
        g.activity.max_in_memory = usize::try_from(n)
            .ok()
            .filter(|n| *n > 0)
            .unwrap_or(crate::activity::DEFAULT_CAPACITY);
    }
}

/// `captureBuffer`: megabytes of request/response captures (0 or less: off).
pub(crate) fn capture_buffer(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    if let Some(mb) = cx.int(node, &path) {
        g.activity.capture_buffer = usize::try_from(mb).unwrap_or(0).saturating_mul(1024 * 1024);
    }
}

/// `ui`: `activity.session_id`, the request headers that name a session.
pub(crate) fn ui(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    if let Some(headers) = super::extras::read_ui(node, path, cx) {
        g.activity.session_headers = headers;
    }
}

/// A size in bytes: a whole number, or a number with a decimal (`KB`, `MB`,
/// `GB`) or binary (`KiB`, `MiB`, `GiB`) unit. At least 1 byte.
fn read_size(node: &Node, path: KeyPath, cx: &mut Diagnostics) -> Option<usize> {
    if let Node::Int(..) = node {
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
