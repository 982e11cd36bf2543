import os
os.chdir('/work/wt/ops/server/src')
def edit(path, pairs):
    s=open(path).read()
    for old,new in pairs:
        assert s.count(old)==1,(path,old)
        s=s.replace(old,new)
    open(path,'w').write(s)
edit('config/globals.rs',[
("    pub(crate) max_queue_wait: Option<Duration>,\n","    pub(crate) max_queue_wait: Option<Duration>,\n    pub(crate) monitor: crate::upstream::Monitor,\n"),
("            max_queue_wait: None,\n","            max_queue_wait: None,\n            monitor: crate::upstream::Monitor::default(),\n"),
("""/// `requestBodyTimeout` (this server's extension; 0 = none).""","""/// `healthCheckInterval` (this server's extension; 0 = off, the default).
pub(crate) fn health_check_interval(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    let interval = cx.seconds(node, &path).filter(|s| *s > 0).map(secs);
    g.monitor = g.monitor.interval(interval);
}

/// `healthCheckFailures` (this server's extension; default 3, at least 1).
pub(crate) fn health_check_failures(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    if let Some(n) = cx.int_range(node, &path, 1, i64::from(u32::MAX)).and_then(|n| u32::try_from(n).ok()) {
        g.monitor = g.monitor.failures(n);
    }
}

/// `maxRestarts` (this server's extension; default 5, at least 1).
pub(crate) fn max_restarts(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    if let Some(n) = cx.int_range(node, &path, 1, i64::from(u32::MAX)).and_then(|n| u32::try_from(n).ok()) {
        g.monitor = g.monitor.restarts(n, g.monitor.restart_window);
    }
}

/// `restartWindow` (this server's extension; seconds, default 300, at least 1).
pub(crate) fn restart_window(node: &Node, path: KeyPath, g: &mut Globals, cx: &mut Diagnostics) {
    if let Some(s) = cx.int_min(node, &path, 1).and_then(|s| u64::try_from(s).ok()) {
        g.monitor = g.monitor.restarts(g.monitor.max_restarts, secs(s));
    }
}

/// `requestBodyTimeout` (this server's extension; 0 = none).""")])
edit('config/sections.rs',[
('    Step::Global("maxQueueWait", globals::max_queue_wait),\n','    Step::Global("maxQueueWait", globals::max_queue_wait),\n    Step::Global("healthCheckInterval", globals::health_check_interval),\n    Step::Global("healthCheckFailures", globals::health_check_failures),\n    Step::Global("maxRestarts", globals::max_restarts),\n    Step::Global("restartWindow", globals::restart_window),\n'),
("                    max_queue_wait: globals.max_queue_wait,\n","                    max_queue_wait: globals.max_queue_wait,\n                    monitor: globals.monitor,\n"),
])
edit('config/model/mod.rs',[
("    pub(crate) max_queue_wait: Option<Duration>,\n","    pub(crate) max_queue_wait: Option<Duration>,\n    pub(crate) monitor: crate::upstream::Monitor,\n"),
("""    let unload_timeout = match fields.take("unloadTimeout") {""","""    let monitor = read_monitor(&mut fields, defaults.monitor, cx);
    let unload_timeout = match fields.take("unloadTimeout") {"""),
("            max_queue_wait,\n            unload_timeout,\n","            max_queue_wait,\n            monitor,\n            unload_timeout,\n"),
("""fn optional_bool(fields: &mut Fields<'_>, key: &str, cx: &mut Diagnostics) -> Option<bool> {""","""/// A model's `healthCheckInterval` (0 = off for it), `healthCheckFailures`,
/// `maxRestarts` and `restartWindow`, each defaulting to the global one.
fn read_monitor(
    fields: &mut Fields<'_>,
    global: crate::upstream::Monitor,
    cx: &mut Diagnostics,
) -> crate::upstream::Monitor {
    let mut monitor = global;
    if let Some((node, p)) = fields.take("healthCheckInterval") {
        let interval = cx.seconds(node, &p).filter(|s| *s > 0).map(secs);
        monitor = monitor.interval(interval);
    }
    let count = |node: &Node, p: &KeyPath, cx: &mut Diagnostics| {
        cx.int_range(node, p, 1, i64::from(u32::MAX))
            .and_then(|n| u32::try_from(n).ok())
    };
    if let Some((node, p)) = fields.take("healthCheckFailures")
        && let Some(n) = count(node, &p, cx)
    {
        monitor = monitor.failures(n);
    }
    if let Some((node, p)) = fields.take("maxRestarts")
        && let Some(n) = count(node, &p, cx)
    {
        monitor = monitor.restarts(n, monitor.restart_window);
    }
    if let Some((node, p)) = fields.take("restartWindow")
        && let Some(s) = cx.int_min(node, &p, 1).and_then(|s| u64::try_from(s).ok())
    {
        monitor = monitor.restarts(monitor.max_restarts, secs(s));
    }
    monitor
}

fn optional_bool(fields: &mut Fields<'_>, key: &str, cx: &mut Diagnostics) -> Option<bool> {"""),
])
edit('config/resolved/model.rs',[("""    /// `unloadTimeout` (default: the global one).
""","""    /// `healthCheckInterval`, `healthCheckFailures`, `maxRestarts` and
    /// `restartWindow` (this server's extensions; default: the global ones):
    /// how the ready process is watched and how its restarts are paced (the
    /// stop grace of an unhealthy process is `unloadTimeout`).
    pub monitor: crate::upstream::Monitor,
    /// `unloadTimeout` (default: the global one).
""")])
edit('config/resolved/mapping.rs',[("""                health_check_timeout: self.health_check_timeout,
            })""","""                health_check_timeout: self.health_check_timeout,
                monitor: model.monitor.stop_grace(model.unload_timeout),
            })""")])
