//! The configurations compared, each a server config over the same four mockswap
//! upstreams. They add one thing at a time:
//!
//! | setup | what it is |
//! |---|---|
//! | `arrival` | llama-swap's behaviour: one model at a time, `priority.ignoreHeader: true` (every request ranks the same, arrival order) |
//! | `priority` | the `X-Priority` headers count: Elevated chats go before Low jobs (no preemption, drain fence on) |
//! | `minresident` | plus `priority.minResident` |
//! | `aging` | plus `priority.agingAfter`: a Low job that waited that long ranks first |
//! | `sleep` | plus `sleep: vllm` on every model: a swap puts the old model to sleep, a request wakes it |
//! | `memory1` | plus the memory router on one 24 GiB GPU (each model's `memory`, reserve 1 GiB): the two chat models fit together |
//! | `memory` | the same on two 24 GiB GPUs |
//!
//! Every model serves one request at a time (`parallel: 1`, like `llama-server -np 1`)
//! and admits up to 1 000 (`concurrencyLimit`), so no request of the day is refused.

use std::fmt::Write as _;
use std::path::Path;

use crate::plan::{MODELS, ModelSpec};

/// One configuration of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setup {
    Arrival,
    Priority,
    MinResident,
    Aging,
    Sleep,
    MemoryOneGpu,
    Memory,
}

impl Setup {
    /// Every setup, in the order of the table.
    pub(crate) const ALL: [Setup; 7] = [
        Setup::Arrival,
        Setup::Priority,
        Setup::MinResident,
        Setup::Aging,
        Setup::Sleep,
        Setup::MemoryOneGpu,
        Setup::Memory,
    ];

    /// The name `--only` takes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Setup::Arrival => "arrival",
            Setup::Priority => "priority",
            Setup::MinResident => "minresident",
            Setup::Aging => "aging",
            Setup::Sleep => "sleep",
            Setup::MemoryOneGpu => "memory1",
            Setup::Memory => "memory",
        }
    }

    /// The row label of the table.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Setup::Arrival => "arrival order (llama-swap: ignoreHeader)",
            Setup::Priority => "priorities",
            Setup::MinResident => "+ minResident",
            Setup::Aging => "+ agingAfter",
            Setup::Sleep => "+ sleep (vLLM sleep mode)",
            Setup::MemoryOneGpu => "+ memory router, one 24 GiB GPU",
            Setup::Memory => "+ memory router, two 24 GiB GPUs",
        }
    }

    /// The setup named `name`.
    pub(crate) fn named(name: &str) -> Option<Setup> {
        Setup::ALL.into_iter().find(|s| s.name() == name)
    }

    fn sleeps(self) -> bool {
        matches!(self, Setup::Sleep | Setup::MemoryOneGpu | Setup::Memory)
    }

    fn gpus(self) -> usize {
        match self {
            Setup::MemoryOneGpu => 1,
            Setup::Memory => 2,
            _ => 0,
        }
    }
}

/// What the config needs beyond the setup: the time scale, the mockswap binary and
/// the ports of the four upstreams.
#[derive(Debug, Clone)]
pub(crate) struct Scaled<'a> {
    /// Unscaled seconds per replayed second.
    pub scale: f64,
    /// `priority.minResident`, whole seconds of replay time.
    pub min_resident: u64,
    /// `priority.agingAfter`, whole seconds of replay time.
    pub aging_after: u64,
    /// The gap between two streamed tokens, replay seconds.
    pub token_gap: f64,
    pub mockswap: &'a Path,
    pub ports: [u16; 4],
}

/// `d` unscaled seconds as a mockswap duration in replay time (microseconds).
fn scaled(d: f64, scale: f64) -> String {
    format!("{}us", (d / scale * 1e6).round() as u64)
}

/// The mockswap flags of one model.
fn upstream_args(spec: &ModelSpec, setup: Setup, s: &Scaled<'_>) -> String {
    let mut args = format!(
        "--models {} --load-time {} --time-to-first-token {} --tokens-per-second {:.3} --journal-limit 64",
        spec.id,
        scaled(spec.load, s.scale),
        scaled(spec.first_token, s.scale),
        1.0 / s.token_gap,
    );
    if setup.sleeps() {
        let _ = write!(
            args,
            " --sleep-time {} --wake-time {}",
            scaled(spec.sleep, s.scale),
            scaled(spec.wake, s.scale)
        );
    }
    args
}

/// The server's YAML for `setup`.
pub(crate) fn config(setup: Setup, s: &Scaled<'_>) -> String {
    let mut yaml = String::from("healthCheckTimeout: 120\n");
    yaml.push_str("priority:\n");
    if setup == Setup::Arrival {
        yaml.push_str("  ignoreHeader: true\n");
    }
    if !matches!(setup, Setup::Arrival | Setup::Priority) {
        let _ = writeln!(yaml, "  minResident: {}", s.min_resident);
    }
    if !matches!(setup, Setup::Arrival | Setup::Priority | Setup::MinResident) {
        let _ = writeln!(yaml, "  agingAfter: {}", s.aging_after);
    }
    if setup.gpus() > 0 {
        let gpus: Vec<String> = (0..setup.gpus())
            .map(|id| format!("{{id: {id}, memory: 24GiB}}"))
            .collect();
        let _ = write!(
            yaml,
            "routing:\n  router:\n    use: memory\n    settings:\n      memory:\n        gpus: [{}]\n        reserve: 1GiB\n",
            gpus.join(", ")
        );
    }
    yaml.push_str("models:\n");
    for (spec, port) in MODELS.iter().zip(s.ports) {
        let _ = write!(
            yaml,
            "  {id}:\n    cmd: {bin} --listen 127.0.0.1:{port} {args}\n    proxy: http://127.0.0.1:{port}\n    parallel: 1\n    concurrencyLimit: 1000\n",
            id = spec.id,
            bin = s.mockswap.display(),
            args = upstream_args(spec, setup, s),
        );
        if setup.sleeps() {
            yaml.push_str("    sleep: vllm\n");
        }
        if setup.gpus() > 0 {
            let _ = writeln!(yaml, "    memory: {}GiB", spec.memory_gib);
        }
    }
    yaml
}
