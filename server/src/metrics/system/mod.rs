//! The host gauges llama-swap serves on `/metrics` (and its Grafana dashboard
//! reads), under llama-swap's names: CPU utilisation per core, memory, swap,
//! load average, network bytes, and the GPU gauges.
//!
//! System values come from Linux `/proc` (`stat`, `meminfo`, `loadavg`,
//! `net/dev`). GPU values come from `nvidia-smi` when it is on `PATH`, and
//! from amdgpu's sysfs files (`/sys/class/drm/card*/device`); a gauge a
//! source does not report is left out rather than guessed, and
//! `llamaswap_gpu_available` says whether any GPU could be read at all.
//!
//! Samples are taken every `performance.every` by a task the serving
//! instance owns (kept for an hour for `GET /api/performance`, see
//! `history`), and on a scrape when the latest is older than that; the CPU
//! utilisation is the share of busy time since the previous sample (since the
//! sampler was made, for the first). `performance.disabled` turns it off.

mod history;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Mutex as AsyncMutex;

/// Busy and total jiffies of one CPU line of `/proc/stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CpuTimes {
    busy: u64,
    total: u64,
}

/// The per-core times in `/proc/stat` (`cpu0`, `cpu1`, ...), in core order.
pub(crate) fn parse_proc_stat(text: &str) -> Vec<CpuTimes> {
    text.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|line| {
            let fields: Vec<u64> = line
                .split_whitespace()
                .skip(1)
                .filter_map(|f| f.parse().ok())
                .collect();
            // user nice system idle iowait irq softirq steal (guest is in user).
            let total: u64 = fields.iter().take(8).sum();
            let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
            CpuTimes {
                busy: total.saturating_sub(idle),
                total,
            }
        })
        .collect()
}

/// Busy share (0-100) of each core between two snapshots.
pub(crate) fn utilisation(before: &[CpuTimes], after: &[CpuTimes]) -> Vec<f64> {
    after
        .iter()
        .enumerate()
        .map(|(i, now)| {
            let then = before.get(i).copied().unwrap_or_default();
            let total = now.total.saturating_sub(then.total);
            let busy = now.busy.saturating_sub(then.busy);
            if total == 0 {
                0.0
            } else {
                100.0 * busy as f64 / total as f64
            }
        })
        .collect()
}

/// What `/proc/meminfo` says, in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Memory {
    total: u64,
    free: u64,
    available: u64,
    swap_total: u64,
    swap_free: u64,
}

pub(crate) fn parse_meminfo(text: &str) -> Memory {
    let mut memory = Memory::default();
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(key), Some(value)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(kib) = value.parse::<u64>() else {
            continue;
        };
        let bytes = kib * 1024;
        match key {
            "MemTotal:" => memory.total = bytes,
            "MemFree:" => memory.free = bytes,
            "MemAvailable:" => memory.available = bytes,
            "SwapTotal:" => memory.swap_total = bytes,
            "SwapFree:" => memory.swap_free = bytes,
            _ => {}
        }
    }
    memory
}

/// The 1, 5 and 15 minute load averages of `/proc/loadavg`.
pub(crate) fn parse_loadavg(text: &str) -> Option<[f64; 3]> {
    let mut fields = text.split_whitespace().map(str::parse::<f64>);
    Some([
        fields.next()?.ok()?,
        fields.next()?.ok()?,
        fields.next()?.ok()?,
    ])
}

/// `(interface, received bytes, sent bytes)` of `/proc/net/dev`, without
/// the loopback interface (as llama-swap's): a proxy's own traffic to its
/// upstreams would swamp the machine's.
pub(crate) fn parse_net_dev(text: &str) -> Vec<(String, u64, u64)> {
    text.lines()
        .skip(2)
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            if name.trim() == "lo" {
                return None;
            }
            let fields: Vec<u64> = rest
                .split_whitespace()
                .filter_map(|f| f.parse().ok())
                .collect();
            Some((name.trim().to_owned(), *fields.first()?, *fields.get(8)?))
        })
        .collect()
}

/// One GPU's gauges; `None` where the source does not report the value.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Gpu {
    id: u32,
    name: String,
    uuid: Option<String>,
    temperature_c: Option<f64>,
    util_pct: Option<f64>,
    memory_util_pct: Option<f64>,
    memory_used_bytes: Option<f64>,
    memory_total_bytes: Option<f64>,
    fan_pct: Option<f64>,
    power_w: Option<f64>,
}

/// The fields asked of `nvidia-smi`, in order.
const NVIDIA_QUERY: &str = "index,name,uuid,temperature.gpu,utilization.gpu,utilization.memory,memory.used,memory.total,fan.speed,power.draw";

/// `nvidia-smi --query-gpu=<NVIDIA_QUERY> --format=csv,noheader,nounits`.
pub(crate) fn parse_nvidia_smi(text: &str) -> Vec<Gpu> {
    let number = |s: &str| s.trim().parse::<f64>().ok();
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() < 10 {
                return None;
            }
            let mib = |s: &str| number(s).map(|v| v * 1024.0 * 1024.0);
            Some(Gpu {
                id: f[0].parse().ok()?,
                name: f[1].to_owned(),
                uuid: Some(f[2].to_owned()).filter(|u| !u.is_empty()),
                temperature_c: number(f[3]),
                util_pct: number(f[4]),
                memory_util_pct: number(f[5]),
                memory_used_bytes: mib(f[6]),
                memory_total_bytes: mib(f[7]),
                fan_pct: number(f[8]),
                power_w: number(f[9]),
            })
        })
        .collect()
}

fn read_number(path: &Path) -> Option<f64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The amdgpu cards under `drm` (normally `/sys/class/drm`).
pub(crate) fn read_amdgpu(drm: &Path) -> Vec<Gpu> {
    let Ok(entries) = std::fs::read_dir(drm) else {
        return Vec::new();
    };
    let mut cards: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
            name.is_some_and(|n| {
                n.strip_prefix("card").is_some_and(|rest| {
                    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit())
                })
            })
        })
        .collect();
    cards.sort();
    let mut gpus = Vec::new();
    for card in cards {
        let device = card.join("device");
        let vendor = std::fs::read_to_string(device.join("vendor")).unwrap_or_default();
        if vendor.trim() != "0x1002" {
            continue;
        }
        let hwmon = std::fs::read_dir(device.join("hwmon"))
            .ok()
            .and_then(|mut d| d.next())
            .and_then(Result::ok)
            .map(|e| e.path());
        let from_hwmon = |file: &str| hwmon.as_ref().and_then(|h| read_number(&h.join(file)));
        let used = read_number(&device.join("mem_info_vram_used"));
        let total = read_number(&device.join("mem_info_vram_total"));
        let name = std::fs::read_to_string(device.join("product_name"))
            .map(|n| n.trim().to_owned())
            .unwrap_or_else(|_| "AMD GPU".to_owned());
        gpus.push(Gpu {
            id: u32::try_from(gpus.len()).unwrap_or(u32::MAX),
            name,
            uuid: std::fs::read_to_string(device.join("unique_id"))
                .ok()
                .map(|u| u.trim().to_owned()),
            temperature_c: from_hwmon("temp1_input").map(|m| m / 1000.0),
            util_pct: read_number(&device.join("gpu_busy_percent")),
            memory_util_pct: read_number(&device.join("mem_busy_percent")),
            memory_used_bytes: used,
            memory_total_bytes: total,
            fan_pct: from_hwmon("pwm1").map(|p| p * 100.0 / 255.0),
            power_w: from_hwmon("power1_average")
                .or_else(|| from_hwmon("power1_input"))
                .map(|uw| uw / 1_000_000.0),
        });
    }
    gpus
}

/// One sample of everything.
#[derive(Debug, Clone, Default)]
struct Sample {
    cpu: Vec<f64>,
    memory: Option<Memory>,
    load: Option<[f64; 3]>,
    network: Vec<(String, u64, u64)>,
    gpus: Vec<Gpu>,
}

/// Where the gauges are read from (the real system, or files in a test).
#[derive(Debug, Clone)]
pub(crate) struct Sources {
    pub(crate) proc: PathBuf,
    pub(crate) drm: PathBuf,
    /// Look for `nvidia-smi` on `PATH`.
    pub(crate) nvidia: bool,
}

impl Default for Sources {
    fn default() -> Self {
        Self {
            proc: PathBuf::from("/proc"),
            drm: PathBuf::from("/sys/class/drm"),
            nvidia: true,
        }
    }
}

/// Samples the host for `/metrics`, at most once per interval.
#[derive(Debug)]
pub(crate) struct SystemSampler {
    every: Duration,
    sources: Sources,
    /// The CPU times of the previous sample, for utilisation.
    cpu_before: Mutex<Vec<CpuTimes>>,
    /// The latest sample and when it was taken; held across the (async)
    /// sampling so concurrent scrapes sample once.
    latest: AsyncMutex<Option<(Instant, Sample)>>,
    /// The last hour of samples taken by [`run`](Self::run).
    ring: history::Ring,
}

impl SystemSampler {
    /// A sampler reading the real system every `every` at most.
    #[must_use]
    pub(crate) fn new(every: Duration) -> Self {
        Self::with_sources(every, Sources::default())
    }

    pub(crate) fn with_sources(every: Duration, sources: Sources) -> Self {
        let before = std::fs::read_to_string(sources.proc.join("stat"))
            .map(|t| parse_proc_stat(&t))
            .unwrap_or_default();
        Self {
            every,
            sources,
            cpu_before: Mutex::new(before),
            latest: AsyncMutex::new(None),
            ring: history::Ring::new(every),
        }
    }

    async fn sample(&self) -> Sample {
        let read = |name: &str| std::fs::read_to_string(self.sources.proc.join(name)).ok();
        let now = read("stat")
            .map(|t| parse_proc_stat(&t))
            .unwrap_or_default();
        let cpu = {
            let mut before = self
                .cpu_before
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let cpu = utilisation(&before, &now);
            *before = now;
            cpu
        };
        let mut gpus = if self.sources.nvidia {
            nvidia_gpus().await
        } else {
            Vec::new()
        };
        if gpus.is_empty() {
            gpus = read_amdgpu(&self.sources.drm);
        }
        Sample {
            cpu,
            memory: read("meminfo").map(|t| parse_meminfo(&t)),
            load: read("loadavg").and_then(|t| parse_loadavg(&t)),
            network: read("net/dev")
                .map(|t| parse_net_dev(&t))
                .unwrap_or_default(),
            gpus,
        }
    }

    /// The gauges as OpenMetrics text (no `# EOF`).
    pub(crate) async fn encode(&self) -> String {
        let mut latest = self.latest.lock().await;
        let fresh = latest
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < self.every);
        if !fresh {
            *latest = Some((Instant::now(), self.sample().await));
        }
        let sample = latest.as_ref().map(|(_, s)| s.clone()).unwrap_or_default();
        drop(latest);
        render(&sample)
    }
}

/// GPUs as `nvidia-smi` reports them; none when it is not installed or fails.
async fn nvidia_gpus() -> Vec<Gpu> {
    let output = tokio::process::Command::new("nvidia-smi")
        .arg(format!("--query-gpu={NVIDIA_QUERY}"))
        .arg("--format=csv,noheader,nounits")
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(5), output).await {
        Ok(Ok(out)) if out.status.success() => {
            parse_nvidia_smi(&String::from_utf8_lossy(&out.stdout))
        }
        _ => Vec::new(),
    }
}

/// A label value with `"`, `\` and newlines escaped.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn gauge(out: &mut String, name: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} gauge");
}

fn render(sample: &Sample) -> String {
    let mut out = String::new();
    if !sample.cpu.is_empty() {
        gauge(
            &mut out,
            "llamaswap_cpu_util_percent",
            "CPU utilization per core (0-100)",
        );
        for (core, pct) in sample.cpu.iter().enumerate() {
            let _ = writeln!(out, "llamaswap_cpu_util_percent{{core=\"{core}\"}} {pct}");
        }
    }
    if let Some(m) = sample.memory {
        for (name, help, value) in [
            (
                "llamaswap_memory_total_bytes",
                "Total memory in bytes",
                m.total,
            ),
            (
                "llamaswap_memory_used_bytes",
                "Used memory in bytes (total minus available)",
                m.total.saturating_sub(m.available),
            ),
            (
                "llamaswap_memory_free_bytes",
                "Free memory in bytes",
                m.free,
            ),
            (
                "llamaswap_swap_total_bytes",
                "Total swap in bytes",
                m.swap_total,
            ),
            (
                "llamaswap_swap_used_bytes",
                "Used swap in bytes",
                m.swap_total.saturating_sub(m.swap_free),
            ),
        ] {
            gauge(&mut out, name, help);
            let _ = writeln!(out, "{name} {value}");
        }
    }
    if let Some([one, five, fifteen]) = sample.load {
        gauge(&mut out, "llamaswap_load_average", "Load average");
        for (interval, value) in [("1m", one), ("5m", five), ("15m", fifteen)] {
            let _ = writeln!(
                out,
                "llamaswap_load_average{{interval=\"{interval}\"}} {value}"
            );
        }
    }
    if !sample.network.is_empty() {
        let _ = writeln!(
            out,
            "# HELP llamaswap_network_bytes Total network bytes transferred"
        );
        let _ = writeln!(out, "# TYPE llamaswap_network_bytes counter");
        for (iface, recv, sent) in &sample.network {
            let iface = label(iface);
            let _ = writeln!(
                out,
                "llamaswap_network_bytes_total{{interface=\"{iface}\",direction=\"recv\"}} {recv}"
            );
            let _ = writeln!(
                out,
                "llamaswap_network_bytes_total{{interface=\"{iface}\",direction=\"sent\"}} {sent}"
            );
        }
    }
    gauge(
        &mut out,
        "llamaswap_gpu_available",
        "1 when GPU gauges could be read (nvidia-smi or amdgpu sysfs), 0 when no GPU could be read on this host",
    );
    let _ = writeln!(
        out,
        "llamaswap_gpu_available {}",
        u8::from(!sample.gpus.is_empty())
    );
    type Pick = fn(&Gpu) -> Option<f64>;
    let gpu_gauges: [(&str, &str, Pick); 8] = [
        (
            "llamaswap_gpu_temperature_celsius",
            "GPU temperature in Celsius",
            |g| g.temperature_c,
        ),
        (
            "llamaswap_gpu_util_percent",
            "GPU utilization percent (0-100)",
            |g| g.util_pct,
        ),
        (
            "llamaswap_gpu_memory_util_percent",
            "GPU memory utilization percent (0-100)",
            |g| g.memory_util_pct,
        ),
        (
            "llamaswap_gpu_memory_used_bytes",
            "GPU memory used in bytes",
            |g| g.memory_used_bytes,
        ),
        (
            "llamaswap_gpu_memory_total_bytes",
            "GPU memory total in bytes",
            |g| g.memory_total_bytes,
        ),
        (
            "llamaswap_gpu_fan_speed_percent",
            "GPU fan speed percent (0-100)",
            |g| g.fan_pct,
        ),
        (
            "llamaswap_gpu_power_draw_watts",
            "GPU power draw in watts",
            |g| g.power_w,
        ),
        (
            "llamaswap_gpu_vram_temperature_celsius",
            "GPU VRAM temperature in Celsius",
            |_| None,
        ),
    ];
    for (name, help, pick) in gpu_gauges {
        let values: Vec<(&Gpu, f64)> = sample
            .gpus
            .iter()
            .filter_map(|g| pick(g).map(|v| (g, v)))
            .collect();
        if values.is_empty() {
            continue;
        }
        gauge(&mut out, name, help);
        for (gpu, value) in values {
            let uuid = gpu
                .uuid
                .as_deref()
                .map(|u| format!(",uuid=\"{}\"", label(u)))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{name}{{id=\"{}\",name=\"{}\"{uuid}}} {value}",
                gpu.id,
                label(&gpu.name)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests;
