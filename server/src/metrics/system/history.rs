//! `GET /api/performance`: the host and GPU samples of the last hour, taken
//! every `performance.every` by a task the serving instance owns, in
//! llama-swap's shape (`sys_stats`, `gpu_stats`).

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use serde::{Serialize, Serializer};

use super::{Gpu, Sample, SystemSampler};

/// How far back the samples go (llama-swap keeps an hour).
pub(crate) const SPAN: Duration = Duration::from_secs(3600);

/// Samples kept, oldest first, each with when it was taken (ms since the epoch).
#[derive(Debug)]
pub(super) struct Ring {
    samples: Mutex<VecDeque<(u64, Sample)>>,
    capacity: usize,
}

impl Ring {
    /// A ring for an hour of samples taken every `every` (at least one).
    pub(super) fn new(every: Duration) -> Self {
        let capacity = usize::try_from(SPAN.as_millis() / every.as_millis().max(1))
            .unwrap_or(usize::MAX)
            .max(1);
        Self {
            samples: Mutex::new(VecDeque::new()),
            capacity,
        }
    }

    pub(super) fn push(&self, at_ms: u64, sample: Sample) {
        let mut samples = self.lock();
        if samples.len() >= self.capacity {
            samples.pop_front();
        }
        samples.push_back((at_ms, sample));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, Sample)>> {
        // A push or a copy: a panic cannot leave it half-changed.
        self.samples
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// What `GET /api/performance` answers (llama-swap's shape).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Performance {
    /// Always true: a disabled monitor answers `{"enabled":false}` instead.
    pub(crate) enabled: bool,
    /// Host samples, oldest first.
    pub(crate) sys_stats: Vec<SysStat>,
    /// One entry per GPU per sample, oldest first.
    pub(crate) gpu_stats: Vec<GpuStat>,
}

/// One host sample (llama-swap's `SysStat`; sizes in MiB).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct SysStat {
    #[serde(serialize_with = "rfc3339")]
    timestamp: u64,
    cpu_util_per_core: Vec<f64>,
    mem_total_mb: u64,
    mem_used_mb: u64,
    mem_free_mb: u64,
    swap_total_mb: u64,
    swap_used_mb: u64,
    load_avg_1: f64,
    load_avg_5: f64,
    load_avg_15: f64,
    net_io: Vec<NetIo>,
}

/// One interface's byte counters.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct NetIo {
    name: String,
    bytes_recv: u64,
    bytes_sent: u64,
}

/// One GPU in one sample (llama-swap's `GpuStat`; a value the source does
/// not report is 0, as llama-swap sends it).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct GpuStat {
    #[serde(serialize_with = "rfc3339")]
    timestamp: u64,
    id: u32,
    name: String,
    uuid: String,
    temp_c: i64,
    vram_temp_c: i64,
    gpu_util_pct: f64,
    mem_util_pct: f64,
    mem_used_mb: i64,
    mem_total_mb: i64,
    fan_speed_pct: f64,
    power_draw_w: f64,
}

const MIB: u64 = 1024 * 1024;

impl SysStat {
    fn of(at_ms: u64, sample: &Sample) -> Self {
        let memory = sample.memory.unwrap_or_default();
        let [one, five, fifteen] = sample.load.unwrap_or_default();
        Self {
            timestamp: at_ms,
            cpu_util_per_core: sample.cpu.clone(),
            mem_total_mb: memory.total / MIB,
            mem_used_mb: memory.total.saturating_sub(memory.available) / MIB,
            mem_free_mb: memory.free / MIB,
            swap_total_mb: memory.swap_total / MIB,
            swap_used_mb: memory.swap_total.saturating_sub(memory.swap_free) / MIB,
            load_avg_1: one,
            load_avg_5: five,
            load_avg_15: fifteen,
            net_io: sample
                .network
                .iter()
                .map(|(name, recv, sent)| NetIo {
                    name: name.clone(),
                    bytes_recv: *recv,
                    bytes_sent: *sent,
                })
                .collect(),
        }
    }
}

impl GpuStat {
    // Whole degrees and MiB, as llama-swap reports them.
    #[allow(clippy::cast_possible_truncation)]
    fn of(at_ms: u64, gpu: &Gpu) -> Self {
        let mib = |bytes: Option<f64>| bytes.map_or(0, |b| (b / MIB as f64).round() as i64);
        Self {
            timestamp: at_ms,
            id: gpu.id,
            name: gpu.name.clone(),
            uuid: gpu.uuid.clone().unwrap_or_default(),
            temp_c: gpu.temperature_c.map_or(0, |t| t.round() as i64),
            vram_temp_c: 0,
            gpu_util_pct: gpu.util_pct.unwrap_or(0.0),
            mem_util_pct: gpu.memory_util_pct.unwrap_or(0.0),
            mem_used_mb: mib(gpu.memory_used_bytes),
            mem_total_mb: mib(gpu.memory_total_bytes),
            fan_speed_pct: gpu.fan_pct.unwrap_or(0.0),
            power_draw_w: gpu.power_w.unwrap_or(0.0),
        }
    }
}

fn rfc3339<S: Serializer>(ms: &u64, serializer: S) -> Result<S::Ok, S::Error> {
    let at = i64::try_from(*ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok());
    match at {
        Some(at) => serializer.collect_str(&at),
        None => serializer.serialize_str(""),
    }
}

impl SystemSampler {
    /// Takes a sample now and keeps it (for `/metrics` too, which then
    /// needs no sample of its own until it is `every` old).
    pub(crate) async fn record(&self) {
        let mut latest = self.latest.lock().await;
        let sample = self.sample().await;
        *latest = Some((std::time::Instant::now(), sample.clone()));
        drop(latest);
        self.ring.push(unix_ms(), sample);
    }

    /// Samples every `every` until the task is aborted (the serving
    /// instance owns it).
    pub(crate) async fn run(self: std::sync::Arc<Self>) {
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            self.record().await;
        }
    }

    /// Whether no sample was kept yet.
    pub(crate) fn nothing_recorded(&self) -> bool {
        self.ring.lock().is_empty()
    }

    /// The samples taken after `after_ms` (ms since the epoch), or all.
    pub(crate) fn performance(&self, after_ms: Option<u64>) -> Performance {
        let samples = self.ring.lock();
        let kept = samples
            .iter()
            .filter(|(at, _)| after_ms.is_none_or(|after| *at > after));
        let mut sys_stats = Vec::new();
        let mut gpu_stats = Vec::new();
        for (at, sample) in kept {
            sys_stats.push(SysStat::of(*at, sample));
            gpu_stats.extend(sample.gpus.iter().map(|g| GpuStat::of(*at, g)));
        }
        Performance {
            enabled: true,
            sys_stats,
            gpu_stats,
        }
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
