//! A human-readable account of a resolved configuration (`--check-config`).

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use super::model::ModelConfig;
use super::names::{SelectorStrategy, default_peer_timeouts};
use super::types::{Config, SchedulerConfig};
use super::upstream::UpstreamConfig;
use crate::filters::Filters;
use crate::names::{PeerRoute, qualified_name};
use crate::policy::matrix::MatrixSettings;
use crate::proxy::Timeouts;
use crate::scheduler::Parallel;

/// Renders a [`Config`] for people: the scheduler, global settings, every model
/// with what was resolved for it, and the groups. API keys are counted, never shown.
pub struct Summary<'a>(&'a Config);

impl Config {
    /// A printable account of this configuration, as `--check-config` shows it.
    #[must_use]
    pub fn summary(&self) -> Summary<'_> {
        Summary(self)
    }
}

fn seconds(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

/// A name as written when it prints on one line as itself; else quoted with
/// its control characters escaped (`"a\nb"`), so a model ID holding a newline
/// cannot pass for two lines of this account.
fn shown(name: &str) -> Cow<'_, str> {
    if name.chars().any(char::is_control) {
        Cow::Owned(format!("{name:?}"))
    } else {
        Cow::Borrowed(name)
    }
}

/// Names, [`shown`] and joined with `, `.
fn shown_all<'a>(names: impl IntoIterator<Item = &'a str>) -> String {
    names.into_iter().map(shown).collect::<Vec<_>>().join(", ")
}

fn ttl(ttl: Option<Duration>) -> String {
    ttl.map_or_else(|| "never".to_owned(), seconds)
}

impl fmt::Display for Summary<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let config = self.0;
        match &config.scheduler {
            SchedulerConfig::Fifo { drain_fence, .. } => writeln!(
                f,
                "scheduler: fifo (priority queue, drain fence {})",
                if *drain_fence { "on" } else { "off" }
            )?,
            SchedulerConfig::Serial => {
                writeln!(
                    f,
                    "scheduler: serial (one request at a time, arrival order)"
                )?;
            }
        }
        writeln!(
            f,
            "healthCheckTimeout: {}, requestBodyTimeout: {}, globalTTL: {}, unloadTimeout: {}, startPort: {}, apiKeys: {}",
            seconds(config.health_check_timeout),
            config
                .request_body_timeout
                .map_or_else(|| "none".to_owned(), seconds),
            ttl(config.global_ttl),
            seconds(config.unload_timeout),
            config.start_port,
            config.api_keys.len(),
        )?;
        let rules = &config.priority_rules;
        writeln!(
            f,
            "priority: {}; bands: {}; aging: {}; maxQueued: {}; minResident: {}",
            config.trust().describe(),
            rules.bands,
            rules
                .aging_after
                .map_or_else(|| "off".to_owned(), |a| format!("after {}", seconds(a))),
            if rules.max_queued.is_empty() {
                "none".to_owned()
            } else {
                rules
                    .max_queued
                    .iter()
                    .map(|(m, n)| format!("{}={n}", shown(m)))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            match (rules.min_resident, rules.min_resident_yields_to) {
                (None, _) => "off".to_owned(),
                (Some(d), crate::scheduler::ResidencyYield::Higher) => {
                    format!("{}, yields to higher", seconds(d))
                }
                (Some(d), crate::scheduler::ResidencyYield::Nobody) => {
                    format!("{}, yields to none", seconds(d))
                }
            },
        )?;

        writeln!(f, "models ({}):", config.models.len())?;
        for model in &config.models {
            write_model(f, config, model)?;
        }

        if let Some(matrix) = &config.matrix {
            write_matrix(f, matrix)?;
        } else if config.groups.is_empty() {
            writeln!(
                f,
                "groups: none (every model in the default group: one at a time)"
            )?;
        } else {
            writeln!(f, "groups ({}):", config.groups.len())?;
            for group in &config.groups {
                writeln!(
                    f,
                    "  {}: swap={} exclusive={} persistent={} members=[{}]",
                    shown(&group.name),
                    group.swap,
                    group.exclusive,
                    group.persistent,
                    shown_all(group.members.iter().map(String::as_str))
                )?;
            }
            let loners: Vec<&str> = config
                .models
                .iter()
                .filter(|m| config.group_of(&m.id).is_none())
                .map(|m| m.id.as_str())
                .collect();
            if !loners.is_empty() {
                writeln!(
                    f,
                    "  (default): swap=true exclusive=true persistent=false members=[{}]",
                    shown_all(loners)
                )?;
            }
        }
        if !config.selectors.is_empty() {
            writeln!(f, "selectors ({}):", config.selectors.len())?;
            for selector in &config.selectors {
                let spillover = if selector.strategy == SelectorStrategy::Spillover {
                    format!(" spillover={}", selector.spillover)
                } else {
                    String::new()
                };
                writeln!(
                    f,
                    "  {}: {} [{}]{spillover}{}",
                    shown(&selector.id),
                    selector.strategy.as_str(),
                    shown_all(selector.targets.iter().map(String::as_str)),
                    if selector.unlisted { " (unlisted)" } else { "" },
                )?;
            }
        }
        if !config.profiles.is_empty() {
            writeln!(
                f,
                "profiles ({}; none active at start):",
                config.profiles.len()
            )?;
            for profile in &config.profiles {
                let pins: Vec<String> = profile
                    .pins
                    .iter()
                    .map(|p| {
                        format!(
                            "{} -> {}",
                            shown(&p.name),
                            p.target
                                .as_deref()
                                .map_or(Cow::Borrowed("(disabled)"), shown)
                        )
                    })
                    .collect();
                writeln!(f, "  {}: {}", shown(&profile.name), pins.join(", "))?;
            }
        }
        write_peers(f, config)?;
        if !config.hooks.preload.is_empty() {
            writeln!(
                f,
                "preload: {}",
                shown_all(config.hooks.preload.iter().map(String::as_str))
            )?;
        }
        write_upstream(f, &config.upstream)
    }
}

fn write_matrix(f: &mut fmt::Formatter<'_>, matrix: &MatrixSettings) -> fmt::Result {
    writeln!(
        f,
        "router: matrix ({} sets; the cheapest combination holding the model wins, ties to the earlier set)",
        matrix.sets.len()
    )?;
    for set in &matrix.sets {
        writeln!(f, "  {}: {}", shown(&set.name), shown(&set.expr))?;
    }
    let pairs = |items: Vec<String>| {
        if items.is_empty() {
            "none".to_owned()
        } else {
            items.join(", ")
        }
    };
    writeln!(
        f,
        "  vars: {}",
        pairs(
            matrix
                .vars
                .iter()
                .map(|(k, v)| format!("{}={}", shown(k), shown(v)))
                .collect()
        )
    )?;
    writeln!(
        f,
        "  evict_costs: {} (others 1)",
        pairs(
            matrix
                .evict_costs
                .iter()
                .map(|(k, c)| format!("{}={c}", shown(k)))
                .collect()
        )
    )?;
    writeln!(f, "  models in no set run alone")
}

fn write_model(f: &mut fmt::Formatter<'_>, config: &Config, model: &ModelConfig) -> fmt::Result {
    writeln!(f, "  {}", shown(&model.id))?;
    let port = model.port.map_or_else(
        || "none (cmd does not use ${PORT})".to_owned(),
        |p| p.to_string(),
    );
    writeln!(f, "    port:        {port}")?;
    writeln!(f, "    proxy:       {}", model.proxy)?;
    let mut cmd = String::new();
    for (i, line) in model.cmd.lines().enumerate() {
        if i > 0 {
            cmd.push_str("\n                 ");
        }
        cmd.push_str(line.trim());
    }
    writeln!(f, "    cmd:         {cmd}")?;
    if let Some(stop) = &model.cmd_stop {
        writeln!(f, "    cmdStop:     {stop}")?;
    }
    let aliases = if model.aliases.is_empty() {
        "-".to_owned()
    } else {
        shown_all(model.aliases.iter().map(String::as_str))
    };
    writeln!(f, "    aliases:     {aliases}")?;
    match config.scheduler {
        SchedulerConfig::Fifo { .. } => match config.priority(&model.id) {
            Some(floor) => writeln!(
                f,
                "    priority:    {floor} (floor; X-Priority may raise it)"
            )?,
            None => writeln!(f, "    priority:    X-Priority alone (no floor)")?,
        },
        SchedulerConfig::Serial => writeln!(f, "    priority:    none (serial scheduler)")?,
    }
    writeln!(f, "    ttl:         {}", ttl(model.ttl))?;
    if let Some(wait) = model.max_queue_wait {
        writeln!(
            f,
            "    queue wait:  at most {} (maxQueueWait; X-Queue-Timeout may lower it)",
            seconds(wait)
        )?;
    }
    if let Some(interval) = model.monitor.interval {
        writeln!(
            f,
            "    health:      {} polled every {} (healthCheckInterval); restarted after {} failed in a row",
            model.check_endpoint.as_deref().unwrap_or("nothing"),
            seconds(interval),
            model.monitor.failures
        )?;
    }
    writeln!(f, "    concurrency: {}", model.concurrency_limit)?;
    match model.parallel {
        Parallel::Unlimited => {}
        Parallel::Limit(n) => writeln!(
            f,
            "    parallel:    {n} in flight at most (more wait in the ranked queue)"
        )?,
        Parallel::Auto => writeln!(
            f,
            "    parallel:    auto (the upstream's /props total_slots once ready)"
        )?,
    }
    writeln!(
        f,
        "    health:      {}",
        model.check_endpoint.as_deref().unwrap_or("none")
    )?;
    if model.unlisted {
        writeln!(f, "    unlisted:    true")?;
    }
    if model.ignore_websockets {
        writeln!(
            f,
            "    websockets:  ignored (never start the model, not counted as in flight)"
        )?;
    }
    write_filters_and_timeouts(f, &model.filters, &model.timeouts, &Timeouts::default())
}

/// The `--check-config` section of `peers`: each peer, the names its models
/// answer to, and the bare names that are pools or shadowed by local names.
fn write_peers(f: &mut fmt::Formatter<'_>, config: &Config) -> fmt::Result {
    let peers = &config.peers;
    if peers.is_empty() {
        return Ok(());
    }
    writeln!(
        f,
        "peers ({}; forwarded, never scheduled here):",
        peers.len()
    )?;
    let names = config.names();
    let routes = names.peers();
    let local = |name: &str| names.local().resolve(name).is_some();
    for (index, peer) in peers.iter().enumerate() {
        writeln!(
            f,
            "  {}: {} (apiKey {})",
            shown(&peer.id),
            peer.proxy,
            if peer.api_key.is_some() {
                "set: sent instead of the caller's"
            } else {
                "none: the caller's credentials pass unless this server's apiKeys took them"
            }
        )?;
        let names: Vec<String> = peer
            .models
            .iter()
            .map(|model| {
                let bare = match routes.resolve(model) {
                    _ if local(model) => " (bare name: the local model)",
                    Some(PeerRoute::Peer { peer: p, .. }) if p == index => "",
                    Some(PeerRoute::Pool { .. }) => " (bare name: a pool)",
                    _ => " (bare name: another peer's)",
                };
                format!("{}{bare}", shown(&qualified_name(&peer.id, model)))
            })
            .collect();
        writeln!(f, "    models:      {}", names.join(", "))?;
        writeln!(
            f,
            "    concurrency: {} requests in flight at most",
            peer.concurrency_limit
        )?;
        write_filters_and_timeouts(f, &peer.filters, &peer.timeouts, &default_peer_timeouts())?;
    }
    let pools: Vec<String> = routes
        .bare()
        .filter(|(name, listed)| listed.len() > 1 && !local(name))
        .filter(|(name, _)| matches!(routes.resolve(name), Some(PeerRoute::Pool { .. })))
        .map(|(name, listed)| {
            let ids: Vec<&str> = listed
                .iter()
                .filter_map(|&i| peers.get(i).map(|p| p.id.as_str()))
                .collect();
            format!("{} -> [{}]", shown(name), shown_all(ids))
        })
        .collect();
    if !pools.is_empty() {
        writeln!(
            f,
            "  pools (the peer with the model ready, else the least busy): {}",
            pools.join("; ")
        )?;
    }
    Ok(())
}

/// The `filters` and (when not `defaults`) `timeouts` lines of a model or peer.
fn write_filters_and_timeouts(
    f: &mut fmt::Formatter<'_>,
    filters: &Filters,
    timeouts: &Timeouts,
    defaults: &Timeouts,
) -> fmt::Result {
    if !filters.is_empty() {
        let list = |items: Vec<&str>| {
            if items.is_empty() {
                "-".to_owned()
            } else {
                items.join(", ")
            }
        };
        writeln!(
            f,
            "    filters:     strip [{}], set [{}], by name [{}]",
            list(filters.strip_params().collect()),
            list(filters.set_params().collect()),
            list(filters.by_id_names().collect()),
        )?;
    }
    if timeouts != defaults {
        let t = timeouts;
        let s = |d: Option<std::time::Duration>| {
            d.map_or_else(|| "off".to_owned(), |d| format!("{}s", d.as_secs()))
        };
        writeln!(
            f,
            "    timeouts:    connect {}, keepalive {}, responseHeader {}, tlsHandshake {}, expectContinue {}, idleConn {}, bodyIdle {}",
            s(t.connect),
            s(t.keepalive),
            s(t.response_header),
            s(t.tls_handshake),
            s(t.expect_continue),
            s(t.idle_conn),
            s(t.body_idle),
        )?;
    }
    Ok(())
}

/// The `--check-config` line of the `upstream` section.
fn write_upstream(f: &mut fmt::Formatter<'_>, upstream: &UpstreamConfig) -> fmt::Result {
    let ca = match &upstream.ca_certificates.file {
        Some(file) => format!(
            "{} ({} certificates)",
            file.display(),
            upstream.ca_certificates.der.len()
        ),
        None => "none (system roots only)".to_owned(),
    };
    writeln!(
        f,
        "upstream: ignorePaths [{}]; caFile {ca}",
        upstream
            .ignore_paths
            .patterns()
            .collect::<Vec<_>>()
            .join(", ")
    )
}
