//! Maps the resolved configuration onto the structs the scheduler and the upstream
//! supervisor are built from.

use crate::policy::GroupSettings;
use crate::proxy::{TlsSetupError, UpstreamTls};
use crate::scheduler::{ModelSettings, SchedulerKind, SchedulerSettings};
use crate::upstream::ProcessSpec;

use super::types::{Config, SchedulerConfig};

impl Config {
    /// What the scheduler needs: models with their aliases, priority floors, limits
    /// and timeouts; groups; the scheduler kind; and the grace period for models a
    /// swap evicts (llama-swap uses `healthCheckTimeout` for it).
    #[must_use]
    pub fn scheduler_settings(&self) -> SchedulerSettings {
        let models = self
            .models
            .iter()
            .map(|model| ModelSettings {
                id: model.id.clone(),
                aliases: model.aliases.clone(),
                priority: self.priority(&model.id),
                concurrency_limit: model.concurrency_limit,
                unload_timeout: model.unload_timeout,
                ttl: model.ttl,
                max_queued: self.priority_rules.max_queued.get(&model.id).copied(),
                parallel: model.parallel,
                memory: self
                    .memory
                    .as_ref()
                    .map(|_| crate::policy::memory::MemoryModel {
                        memory: model.memory.unwrap_or(0),
                        gpus: model.gpus,
                        persistent: model.persistent,
                    }),
                min_resident: model
                    .min_resident
                    .or(self.priority_rules.min_resident)
                    .filter(|d| !d.is_zero()),
                sleep: model.sleep.as_ref().map(|s| s.memory),
            })
            .collect();
        let groups = self
            .groups
            .iter()
            .map(|group| GroupSettings {
                name: group.name.clone(),
                swap: group.swap,
                exclusive: group.exclusive,
                persistent: group.persistent,
                members: group.members.clone(),
            })
            .collect();
        let kind = match &self.scheduler {
            SchedulerConfig::Fifo { drain_fence, .. } => SchedulerKind::Fifo {
                drain_fence: *drain_fence,
            },
            SchedulerConfig::Serial => SchedulerKind::Serial,
        };
        SchedulerSettings {
            models,
            groups,
            matrix: self.matrix.clone(),
            kind,
            aging_after: self.priority_rules.aging_after,
            min_resident_yields_to: self.priority_rules.min_resident_yields_to,
            memory: self.memory.as_ref().and_then(|m| match &m.gpus {
                crate::config::GpuList::Listed(gpus) => Some(crate::policy::memory::GpuPool {
                    gpus: gpus.clone(),
                    reserve: m.reserve,
                    evict_costs: m.evict_costs.clone(),
                }),
                // Resolved at start (`Config::on_detected_gpus`) before any
                // scheduler is built.
                _ => None,
            }),
        }
    }

    /// What the supervisor needs to run each model, in model-ID order: the expanded
    /// command lines (`${PID}` left in `cmdStop` for stop time), environment, proxy
    /// URL, health check and `healthCheckTimeout`.
    #[must_use]
    pub fn process_specs(&self) -> Vec<ProcessSpec> {
        self.models
            .iter()
            .map(|model| ProcessSpec {
                model: model.id.clone(),
                cmd: model.cmd.clone(),
                cmd_stop: model.cmd_stop.clone(),
                env: model.env.clone(),
                proxy: model.proxy.clone(),
                check_endpoint: model.check_endpoint.clone(),
                health_check_timeout: self.health_check_timeout,
                sleep: model.sleep.as_ref().map(|s| s.mode.clone()),
                // An unhealthy process is stopped as an unload stops it.
                monitor: model.monitor.stop_grace(model.unload_timeout),
            })
            .collect()
    }

    /// The TLS client for `https://` upstreams: the system's roots plus
    /// `upstream.caFile`; `None` when no model or peer uses `https://` and no
    /// CA file is set (the system store is then not read at all).
    ///
    /// # Errors
    ///
    /// `TlsSetupError` when a CA certificate cannot be a trust anchor.
    pub fn upstream_tls(&self) -> Result<Option<UpstreamTls>, TlsSetupError> {
        let https = self.models.iter().any(|m| m.proxy.starts_with("https://"))
            || self.peers.iter().any(|p| p.proxy.starts_with("https://"));
        if !https && self.upstream.ca_certificates.der.is_empty() {
            return Ok(None);
        }
        UpstreamTls::new(&self.upstream.ca_certificates.der).map(Some)
    }
}
