//! Health monitoring and restart pacing (this server's extensions; top level
//! and per model, a model's own value over the global one):
//!
//! - `healthCheckInterval` (seconds, 0 = off, the default): how often a ready
//!   model's `checkEndpoint` is polled, each poll bounded by the interval;
//! - `healthCheckFailures` (default 3, at least 1): failed or hung polls in a
//!   row after which the model is stopped and started again;
//! - `maxRestarts` (default 5, at least 1) failures within `restartWindow`
//!   (seconds, default 300, at least 1) make a model failed (503
//!   `model_failed`) until the window has passed or an explicit load.
//!
//! What counts as a failure, and the backoff, are in `upstream/monitor.rs`.

use super::document::error::{KeyPath, WarningKind};
use super::document::fields::{Diagnostics, Fields, secs};
use super::document::node::Node;
use super::globals::Globals;
use crate::upstream::Monitor;

/// The keys, at the top level and in a model.
const KEYS: [&str; 4] = [
    "healthCheckInterval",
    "healthCheckFailures",
    "maxRestarts",
    "restartWindow",
];

/// Applies one of [`KEYS`] to `monitor`; an invalid value is reported and
/// leaves it unchanged.
fn apply(
    key: &str,
    node: &Node,
    path: &KeyPath,
    monitor: Monitor,
    cx: &mut Diagnostics,
) -> Monitor {
    let count = |cx: &mut Diagnostics| {
        cx.int_range(node, path, 1, i64::from(u32::MAX))
            .and_then(|n| u32::try_from(n).ok())
    };
    match key {
        "healthCheckInterval" => match cx.seconds(node, path) {
            Some(s) => monitor.interval((s > 0).then(|| secs(s))),
            None => monitor,
        },
        "healthCheckFailures" => match count(cx) {
            Some(n) => monitor.failures(n),
            None => monitor,
        },
        "maxRestarts" => match count(cx) {
            Some(n) => monitor.restarts(n, monitor.restart_window),
            None => monitor,
        },
        "restartWindow" => match cx
            .int_min(node, path, 1)
            .and_then(|s| u64::try_from(s).ok())
        {
            Some(s) => monitor.restarts(monitor.max_restarts, secs(s)),
            None => monitor,
        },
        _ => monitor,
    }
}

/// `healthCheckInterval` at the top level.
pub(crate) fn health_check_interval(
    node: &Node,
    path: KeyPath,
    g: &mut Globals,
    cx: &mut Diagnostics,
) {
    g.monitor = apply(KEYS[0], node, &path, g.monitor, cx);
}

/// `healthCheckFailures` at the top level.
pub(crate) fn health_check_failures(
    node: &Node,
    path: KeyPath,
    g: &mut Globals,
    cx: &mut Diagnostics,
) {
    g.monitor = apply(KEYS[1], node, &path, g.monitor, cx);
}

/// `maxRestarts` at the top level.
pub(crate) fn max_restarts(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    g.monitor = apply(KEYS[2], node, &path, g.monitor, cx);
}

/// `restartWindow` at the top level.
pub(crate) fn restart_window(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    g.monitor = apply(KEYS[3], node, &path, g.monitor, cx);
}

/// A model's keys over the global `monitor`; its own `healthCheckInterval`
/// warns when it has no check endpoint to poll (`checkEndpoint: none`). The
/// stop grace of an unhealthy process is the model's `unloadTimeout` (set
/// where the process is specified).
pub(crate) fn read_model(
    fields: &mut Fields<'_>,
    global: Monitor,
    has_check: bool,
    cx: &mut Diagnostics,
) -> Monitor {
    let mut monitor = global;
    for key in KEYS {
        if let Some((node, path)) = fields.take(key) {
            monitor = apply(key, node, &path, monitor, cx);
            if key == KEYS[0] && monitor.interval.is_some() && !has_check {
                let because = "checkEndpoint is none: there is nothing to poll";
                cx.warn(path, WarningKind::NoEffect { because });
            }
        }
    }
    monitor
}
