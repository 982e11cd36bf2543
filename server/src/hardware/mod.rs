//! `GET /api/hardware`: what the machine running the server has, in
//! llama-swap's versioned snapshot (schema 1): architecture, operating
//! system, execution environment, CPU, memory and accelerators.
//!
//! Linux only, like the rest of the server's host readings: `/proc/cpuinfo`,
//! `/proc/meminfo` (lowered to a cgroup memory limit when there is one),
//! `/etc/os-release`, `/proc/sys/kernel/osrelease`, container and WSL
//! markers; GPUs from `nvidia-smi`, then `rocm-smi`, then the DRM sysfs
//! files (`/sys/class/drm/card*/device`: vendor, and amdgpu's VRAM size). A
//! fact that cannot be read is `null`, never guessed. Detected once, on the
//! first request (each command bounded by [`COMMAND_TIMEOUT`]), and kept.

mod parse;

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

use parse::{
    cpu_from_cpuinfo, nvidia_accelerators, nvidia_compute_apps, os_release, rocm_accelerators,
    rocm_compute_apps,
};

/// The longest an external tool may take to answer.
pub(crate) const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// llama-swap's hardware snapshot, schema version 1.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Snapshot {
    /// Always 1.
    pub schema_version: u32,
    /// When it was detected (RFC 3339, UTC).
    pub captured_at: String,
    /// How it was made.
    pub capture: Capture,
    /// The CPU architecture.
    pub architecture: Architecture,
    /// The operating system.
    pub operating_system: OperatingSystem,
    /// Container, virtual machine, WSL or native.
    pub environment: Environment,
    /// The CPU.
    pub cpu: Cpu,
    /// System memory.
    pub memory: Memory,
    /// GPUs, by report index.
    pub accelerators: Vec<Accelerator>,
}

/// How the snapshot was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Capture {
    /// `inference_host`: the machine that runs the server.
    pub scope: &'static str,
    /// `detected`.
    pub method: &'static str,
    /// This server and its version.
    pub detector: Detector,
}

/// The detecting program.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Detector {
    /// `llama-swap-server`.
    pub name: &'static str,
    /// Its version.
    pub version: &'static str,
}

/// The CPU architecture: one of llama-swap's names, and the raw one when
/// it differs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Architecture {
    /// `x86_64`, `arm64`, `armv7`, `ppc64le`, `riscv64`, `s390x` or `other`.
    pub name: &'static str,
    /// The raw name when it differs.
    pub raw_name: Option<&'static str>,
}

/// The operating system.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct OperatingSystem {
    /// `linux`, `macos`, `freebsd` or `other`.
    pub family: &'static str,
    /// The distribution (`/etc/os-release` `ID`).
    pub name: Option<String>,
    /// Its version (`VERSION_ID`).
    pub version: Option<String>,
    /// The kernel release.
    pub kernel: Option<String>,
}

/// Where the server runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Environment {
    /// `native`, `container`, `virtual_machine`, `wsl` or `unknown`.
    pub kind: &'static str,
    /// Its name (`Docker`, `Podman`, `WSL`), when known.
    pub name: Option<String>,
    /// Its version: never known here.
    pub version: Option<String>,
}

/// The CPU.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Cpu {
    /// `vendor_id`.
    pub vendor: Option<String>,
    /// `model name`.
    pub model: Option<String>,
    /// Distinct `physical id`s.
    pub socket_count: Option<u32>,
    /// Distinct cores.
    pub physical_core_count: Option<u32>,
    /// Logical processors.
    pub logical_thread_count: Option<u32>,
}

/// System memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Memory {
    /// Bytes usable by the server (the cgroup limit when lower than `MemTotal`).
    pub capacity_bytes: u64,
}

/// One GPU.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Accelerator {
    /// Report index, from 0.
    pub index: u32,
    /// `gpu`.
    pub kind: &'static str,
    /// `NVIDIA`, `AMD`, `Intel`.
    pub vendor: Option<String>,
    /// The product name.
    pub model: Option<String>,
    /// Never known here.
    pub architecture: Option<String>,
    /// Its memory.
    pub memory: AcceleratorMemory,
    /// Its driver.
    pub driver: Option<Driver>,
    /// The power limit in watts.
    pub power_limit_watts: Option<f64>,
}

/// A GPU's memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct AcceleratorMemory {
    /// `dedicated` or `shared_system` (llama-swap's words).
    pub kind: &'static str,
    /// Bytes.
    pub capacity_bytes: Option<u64>,
}

/// A GPU driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub(crate) struct Driver {
    /// Its name: llama-swap's `NVIDIA` (from `nvidia-smi`), `amdgpu` (from
    /// `rocm-smi`), else the kernel driver's (`nvidia`, `amdgpu`, `i915`).
    pub name: Option<String>,
    /// Its version.
    pub version: Option<String>,
}

/// The machine's snapshot, detected on the first call and kept for the life
/// of the process (as llama-swap detects once, at start); `None` when not
/// even its memory can be read.
pub(crate) async fn snapshot() -> Option<&'static Snapshot> {
    static DETECTED: tokio::sync::OnceCell<Option<Snapshot>> = tokio::sync::OnceCell::const_new();
    DETECTED.get_or_init(detect).await.as_ref()
}

/// The GPUs of the machine whose memory is known (the memory router's
/// `gpus: auto`): each with its report index as id. Empty when none is found.
pub(crate) async fn gpus_with_memory() -> Vec<crate::policy::memory::Gpu> {
    let Some(snapshot) = snapshot().await else {
        return Vec::new();
    };
    snapshot
        .accelerators
        .iter()
        .filter_map(|a| {
            Some(crate::policy::memory::Gpu {
                id: a.index,
                memory: a.memory.capacity_bytes.filter(|&b| b > 0)?,
            })
        })
        .collect()
}

/// The GPU memory each process uses now, as (pid, bytes) rows (a process on
/// several GPUs may have several), from `nvidia-smi`'s per-process query,
/// else `rocm-smi --showpids`. `None` when neither answers (no such tool, no
/// GPU, no answer within [`COMMAND_TIMEOUT`]); read afresh on every call.
pub(crate) async fn compute_apps() -> Option<Vec<(u32, u64)>> {
    if let Some(out) = run(
        "nvidia-smi",
        &[
            "--query-compute-apps=pid,used_memory",
            "--format=csv,noheader,nounits",
        ],
    )
    .await
    {
        return Some(nvidia_compute_apps(&out));
    }
    let out = run("rocm-smi", &["--showpids", "--json"]).await?;
    Some(rocm_compute_apps(&out))
}

/// Detects the machine; `None` when not even its memory can be read.
pub(crate) async fn detect() -> Option<Snapshot> {
    let memory = memory_bytes()?;
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .map(|text| cpu_from_cpuinfo(&text))
        .unwrap_or_default();
    let (name, mut version) = std::fs::read_to_string("/etc/os-release")
        .map(|text| os_release(&text))
        .unwrap_or_default();
    if name.as_deref() == Some("debian") {
        // Debian's point release ("12.11"), as llama-swap (gopsutil) reads it.
        version = read_trimmed("/etc/debian_version").or(version);
    }
    let kernel = read_trimmed("/proc/sys/kernel/osrelease");
    let environment = match marked_environment(kernel.as_deref()) {
        Some(marked) => marked,
        None => {
            let modules = std::fs::read_to_string("/proc/modules").unwrap_or_default();
            environment_beyond_markers(&modules, detect_virt().await)
        }
    };
    let mut accelerators = match run(
        "nvidia-smi",
        &[
            "--query-gpu=index,name,memory.total,driver_version,power.limit",
            "--format=csv,noheader,nounits",
        ],
    )
    .await
    {
        Some(out) => nvidia_accelerators(&out),
        None => Vec::new(),
    };
    if accelerators.is_empty()
        && let Some(out) = run(
            "rocm-smi",
            &["--showproductname", "--showmeminfo", "vram", "--json"],
        )
        .await
    {
        accelerators = rocm_accelerators(&out);
    }
    if accelerators.is_empty() {
        accelerators = drm_accelerators(Path::new("/sys/class/drm"));
    }
    for (index, accelerator) in accelerators.iter_mut().enumerate() {
        accelerator.index = u32::try_from(index).unwrap_or(u32::MAX);
    }
    Some(Snapshot {
        schema_version: 1,
        captured_at: jiff::Timestamp::now().to_string(),
        capture: Capture {
            scope: "inference_host",
            method: "detected",
            detector: Detector {
                name: "llama-swap-server",
                version: crate::version::VERSION,
            },
        },
        architecture: architecture(std::env::consts::ARCH),
        operating_system: OperatingSystem {
            family: match std::env::consts::OS {
                "linux" => "linux",
                "macos" => "macos",
                "freebsd" => "freebsd",
                _ => "other",
            },
            name,
            version,
            kernel,
        },
        environment,
        cpu,
        memory: Memory {
            capacity_bytes: memory,
        },
        accelerators,
    })
}

/// The architecture as llama-swap reports it: named from Go's `GOARCH`
/// (`amd64`, `arm64`, ...), with that raw name where the two differ.
fn architecture(rust_arch: &'static str) -> Architecture {
    let go_arch = match rust_arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "powerpc64" => "ppc64le",
        "x86" => "386",
        other => other,
    };
    let (name, raw_name) = match go_arch {
        "amd64" => ("x86_64", Some(go_arch)),
        "arm64" | "ppc64le" | "riscv64" | "s390x" => (go_arch, None),
        "arm" => ("armv7", Some(go_arch)),
        _ => ("other", Some(go_arch)),
    };
    Architecture { name, raw_name }
}

/// WSL, or a container a marker file names; `None` when there is no marker.
fn marked_environment(kernel: Option<&str>) -> Option<Environment> {
    let named = |kind, name: &str| Environment {
        kind,
        name: Some(name.to_owned()),
        version: None,
    };
    if kernel.is_some_and(|k| {
        let k = k.to_ascii_lowercase();
        k.contains("microsoft") || k.contains("wsl")
    }) {
        return Some(named("wsl", "WSL"));
    }
    if Path::new("/.dockerenv").exists() {
        return Some(named("container", "Docker"));
    }
    if Path::new("/run/.containerenv").exists() {
        return Some(named("container", "Podman"));
    }
    let cgroup = std::fs::read_to_string("/proc/1/cgroup").unwrap_or_default();
    for (marker, name) in [
        ("docker", "Docker"),
        ("kubepods", "Kubernetes"),
        ("lxc", "LXC"),
    ] {
        if cgroup.contains(marker) {
            return Some(named("container", name));
        }
    }
    None
}

/// `systemd-detect-virt`'s exit code and output, when it runs in time.
async fn detect_virt() -> Option<(Option<i32>, String)> {
    let child = tokio::process::Command::new("systemd-detect-virt")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(COMMAND_TIMEOUT, child)
        .await
        .ok()?
        .ok()?;
    Some((
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
    ))
}

/// llama-swap's verdict once no WSL or container marker was found: a
/// hypervisor's host module loaded (`kvm`, `vboxdrv`) is a native host; else
/// `systemd-detect-virt`'s answer (`virt`: its exit code and output), whose
/// exit code 1 ("none") is native too; else `unknown`.
pub(crate) fn environment_beyond_markers(
    modules: &str,
    virt: Option<(Option<i32>, String)>,
) -> Environment {
    let host_module = modules.lines().any(|line| {
        matches!(
            line.split_whitespace().next(),
            Some("kvm" | "kvm_intel" | "kvm_amd" | "vboxdrv")
        )
    });
    let unnamed = |kind| Environment {
        kind,
        name: None,
        version: None,
    };
    if host_module {
        return unnamed("native");
    }
    match virt {
        Some((Some(0), name)) if !name.is_empty() && name != "none" => {
            let kind = if matches!(
                name.as_str(),
                "docker" | "lxc" | "rkt" | "podman" | "containerd" | "systemd-nspawn"
            ) {
                "container"
            } else {
                "virtual_machine"
            };
            let display = match name.as_str() {
                "docker" => "Docker",
                "kvm" => "KVM",
                "vmware" => "VMware",
                "oracle" | "vbox" => "VirtualBox",
                "microsoft" | "hyperv" => "Hyper-V",
                "lxc" => "LXC",
                other => other,
            };
            Environment {
                kind,
                name: Some(display.to_owned()),
                version: None,
            }
        }
        Some((Some(1), _)) => unnamed("native"),
        _ => unnamed("unknown"),
    }
}

/// `MemTotal`, lowered to the cgroup's memory limit when there is a lower one.
fn memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let total = meminfo.lines().find_map(|line| {
        let rest = line.strip_prefix("MemTotal:")?;
        let kib: u64 = rest.split_whitespace().next()?.parse().ok()?;
        kib.checked_mul(1024)
    })?;
    let limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| read_trimmed(path)?.parse::<u64>().ok());
    Some(limit.map_or(total, |limit| limit.min(total)))
}

fn read_trimmed(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

/// A tool's standard output, when it exists, answers in time and succeeds.
async fn run(program: &str, args: &[&str]) -> Option<String> {
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(COMMAND_TIMEOUT, child)
        .await
        .ok()?
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// GPUs named by the DRM sysfs files: the vendor from the PCI id, amdgpu's
/// VRAM size.
pub(crate) fn drm_accelerators(drm: &Path) -> Vec<Accelerator> {
    let Ok(entries) = std::fs::read_dir(drm) else {
        return Vec::new();
    };
    let mut cards: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("card"))
                .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    cards.sort();
    cards
        .iter()
        .filter_map(|card| {
            let device = card.join("device");
            let vendor = std::fs::read_to_string(device.join("vendor")).ok()?;
            let vendor = match vendor.trim().to_ascii_lowercase().as_str() {
                "0x1002" | "0x1022" => "AMD",
                "0x10de" => "NVIDIA",
                "0x8086" => "Intel",
                "0x106b" => "Apple",
                _ => return None,
            };
            // llama-swap's: the kernel driver bound to the device, and the
            // module's version when it has one.
            let driver = std::fs::canonicalize(device.join("driver"))
                .ok()
                .and_then(|path| Some(path.file_name()?.to_str()?.to_owned()));
            let version = driver
                .as_ref()
                .and_then(|name| read_trimmed(&format!("/sys/module/{name}/version")));
            let vram = std::fs::read_to_string(device.join("mem_info_vram_total"))
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
                .filter(|bytes| *bytes > 0);
            Some(Accelerator {
                index: 0,
                kind: "gpu",
                vendor: Some(vendor.to_owned()),
                model: None,
                architecture: None,
                memory: AcceleratorMemory {
                    kind: if vram.is_some() {
                        "dedicated"
                    } else {
                        "shared_system"
                    },
                    capacity_bytes: vram,
                },
                driver: driver.map(|name| Driver {
                    name: Some(name),
                    version,
                }),
                power_limit_watts: None,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
