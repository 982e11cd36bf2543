//! The configurations compared, each a server config over the same four mockswap
//! upstreams. They add one thing at a time:
//!
//! | setup | what it is |
//! |---|---|
//! | `arrival` | llama-swap's behaviour: one model at a time, `priority.ignoreHeader: true` (every request ranks the same, arrival order) |
//! | `priority` | the `X-Priority` headers count: Elevated chats go before Low jobs (no preemption, drain fence on) |
//! | `minresident` | plus `priority.minResident` |
//! | `sleep` | plus `sleep: vllm` on every model: a swap puts the old model to sleep, a request wakes it |
//! | `memory` | plus the memory router on two 24 GiB GPUs (each model's `memory`), reserve 1 GiB |
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
    Sleep,
    Memory,
}

impl Setup {
    /// Every setup, in the order of the table.
    pub(crate) const ALL: [Setup; 5] = [
        Setup::Arrival,
        Setup::Priority,
        Setup::MinResident,
        Setup::Sleep,
        Setup::Memory,
    ];

    /// The name `--only` takes.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Setup::Arrival => "arrival",
            Setup::Priority => "priority",
            Setup::MinResident => "minresident",
            Setup::Sleep => "sleep",
            Setup::Memory => "memory",
        }
    }

    /// The row label of the table.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Setup::Arrival => "arrival order (llama-swap: ignoreHeader)",
            Setup::Priority => "priorities",
            Setup::MinResident => "+ minResident",
            Setup::Sleep => "+ sleep (vLLM sleep mode)",
            Setup::Memory => "+ memory router, two 24 GiB GPUs",
        }
    }

    /// The setup named `name`.
    pub(crate) fn named(name: &str) -> Option<Setup> {
        Setup::ALL.into_iter().find(|s| s.name() == name)
    }

    fn sleeps(self) -> bool {
        matches!(self, Setup::Sleep | Setup::Memory)
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
    if matches!(setup, Setup::MinResident | Setup::Sleep | Setup::Memory) {
        let _ = writeln!(yaml, "  minResident: {}", s.min_resident);
    }
    if setup == Setup::Memory {
        yaml.push_str(concat!(
            "routing:\n  router:\n    use: memory\n    settings:\n      memory:\n",
            "        gpus: [{id: 0, memory: 24GiB}, {id: 1, memory: 24GiB}]\n",
            "        reserve: 1GiB\n",
        ));
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
        if setup == Setup::Memory {
            let _ = writeln!(yaml, "    memory: {}GiB", spec.memory_gib);
        }
    }
    yaml
}
