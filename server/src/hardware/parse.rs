//! The text the hardware readings come from: `/proc/cpuinfo`,
//! `/etc/os-release`, `nvidia-smi`'s CSV and `rocm-smi`'s JSON (the GPUs, and
//! the GPU memory each process uses).

use std::collections::BTreeSet;

use super::{Accelerator, AcceleratorMemory, Cpu, Driver};

/// The CPU of `/proc/cpuinfo`.
pub(crate) fn cpu_from_cpuinfo(text: &str) -> Cpu {
    let mut cpu = Cpu::default();
    let mut threads = 0u32;
    let mut sockets = BTreeSet::new();
    let mut cores = BTreeSet::new();
    let mut socket = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key.trim() {
            "processor" => {
                threads += 1;
                socket = None;
            }
            "vendor_id" if cpu.vendor.is_none() => cpu.vendor = Some(value.to_owned()),
            "model name" if cpu.model.is_none() => cpu.model = Some(value.to_owned()),
            "physical id" => {
                socket = Some(value.to_owned());
                sockets.insert(value.to_owned());
            }
            "core id" => {
                cores.insert((socket.clone(), value.to_owned()));
            }
            _ => {}
        }
    }
    let count = |n: usize| u32::try_from(n).ok().filter(|n| *n > 0);
    cpu.logical_thread_count = count(threads as usize);
    cpu.socket_count = count(sockets.len());
    cpu.physical_core_count = count(cores.len());
    cpu
}

/// `ID` and `VERSION_ID` of `/etc/os-release`.
pub(crate) fn os_release(text: &str) -> (Option<String>, Option<String>) {
    let value = |key: &str| {
        text.lines().find_map(|line| {
            let v = line.strip_prefix(key)?.strip_prefix('=')?;
            let v = v.trim().trim_matches('"').trim_matches('\'');
            (!v.is_empty()).then(|| v.to_owned())
        })
    };
    (value("ID"), value("VERSION_ID"))
}

/// `nvidia-smi --query-gpu=index,name,memory.total,driver_version,power.limit
/// --format=csv,noheader,nounits` (memory in MiB).
pub(crate) fn nvidia_accelerators(text: &str) -> Vec<Accelerator> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            let [_, name, memory, driver, power, ..] = f.as_slice() else {
                return None;
            };
            let known = |s: &str| -> Option<String> {
                (!s.is_empty() && !s.starts_with('[') && s != "N/A").then(|| s.to_owned())
            };
            let mib = known(memory).and_then(|m| m.parse::<u64>().ok());
            Some(Accelerator {
                index: 0,
                kind: "gpu",
                vendor: Some("NVIDIA".to_owned()),
                model: known(name),
                architecture: None,
                memory: AcceleratorMemory {
                    kind: "dedicated",
                    capacity_bytes: mib.and_then(|m| m.checked_mul(1024 * 1024)),
                },
                // llama-swap's: a driver only when its version is known.
                driver: known(driver).map(|version| Driver {
                    name: Some("NVIDIA".to_owned()),
                    version: Some(version),
                }),
                power_limit_watts: known(power)
                    .and_then(|p| p.parse::<f64>().ok())
                    .filter(|p| p.is_finite() && *p > 0.0),
            })
        })
        .collect()
}

/// `rocm-smi --showproductname --showmeminfo vram --json`: one object per
/// `cardN` with `Card Series` (or `Card model`) and `VRAM Total Memory (B)`.
pub(crate) fn rocm_accelerators(text: &str) -> Vec<Accelerator> {
    let Ok(serde_json::Value::Object(cards)) = serde_json::from_str::<serde_json::Value>(text)
    else {
        return Vec::new();
    };
    let mut out: Vec<(u32, Accelerator)> = cards
        .iter()
        .filter_map(|(name, card)| {
            let number: u32 = name.strip_prefix("card")?.parse().ok()?;
            let field = |key: &str| {
                card.get(key)
                    .and_then(|v| v.as_str())
                    .map(str::trim)
                    .filter(|v| !v.is_empty() && *v != "N/A")
                    .map(str::to_owned)
            };
            let vram = field("VRAM Total Memory (B)").and_then(|v| v.parse::<u64>().ok());
            Some((
                number,
                Accelerator {
                    index: 0,
                    kind: "gpu",
                    vendor: Some("AMD".to_owned()),
                    model: field("Card Series").or_else(|| field("Card model")),
                    architecture: None,
                    // llama-swap's: rocm-smi's cards are dedicated memory,
                    // and have a driver only when its version is known.
                    memory: AcceleratorMemory {
                        kind: "dedicated",
                        capacity_bytes: vram,
                    },
                    driver: field("Driver version").map(|version| Driver {
                        name: Some("amdgpu".to_owned()),
                        version: Some(version),
                    }),
                    power_limit_watts: None,
                },
            ))
        })
        .collect();
    out.sort_by_key(|(n, _)| *n);
    out.into_iter().map(|(_, a)| a).collect()
}

/// `nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits`:
/// (pid, bytes) per row (memory in MiB; a process on several GPUs has a row
/// on each). Rows without a number (`[N/A]`) are left out.
pub(crate) fn nvidia_compute_apps(text: &str) -> Vec<(u32, u64)> {
    text.lines()
        .filter_map(|line| {
            let (pid, mib) = line.split_once(',')?;
            let pid = pid.trim().parse().ok()?;
            let mib: u64 = mib.trim().parse().ok()?;
            Some((pid, mib.checked_mul(1024 * 1024)?))
        })
        .collect()
}

/// `rocm-smi --showpids --json`: `{"system": {"PID<pid>": "<name>, <gpus>,
/// <vram bytes>, <sdma>, <cu occupancy>"}}` (rocm-smi joins the columns with
/// `, `, so a name with blanks spans several; the VRAM is third from the end).
pub(crate) fn rocm_compute_apps(text: &str) -> Vec<(u32, u64)> {
    let Ok(value) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let Some(system) = value.get("system").and_then(|s| s.as_object()) else {
        return Vec::new();
    };
    system
        .iter()
        .filter_map(|(key, row)| {
            let pid = key.strip_prefix("PID")?.parse().ok()?;
            let fields: Vec<&str> = row.as_str()?.split(',').map(str::trim).collect();
            let vram = fields.len().checked_sub(3).and_then(|i| fields.get(i))?;
            Some((pid, vram.parse().ok()?))
        })
        .collect()
}
