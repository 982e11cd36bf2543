#![allow(clippy::unwrap_used)]

use super::*;

const CPUINFO: &str = "\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz
physical id\t: 0
core id\t\t: 0

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz
physical id\t: 0
core id\t\t: 0

processor\t: 2
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz
physical id\t: 1
core id\t\t: 0
";

#[test]
fn cpuinfo_gives_vendor_model_sockets_cores_and_threads() {
    let cpu = cpu_from_cpuinfo(CPUINFO);
    assert_eq!(cpu.vendor.as_deref(), Some("GenuineIntel"));
    assert!(cpu.model.as_deref().unwrap().contains("Gold 6230"));
    assert_eq!(
        (
            cpu.socket_count,
            cpu.physical_core_count,
            cpu.logical_thread_count
        ),
        (Some(2), Some(2), Some(3))
    );
    assert_eq!(cpu_from_cpuinfo(""), Cpu::default());
}

#[test]
fn the_architecture_is_named_as_llama_swap_names_it() {
    let named = |arch| {
        let a = super::architecture(arch);
        (a.name, a.raw_name)
    };
    assert_eq!(named("x86_64"), ("x86_64", Some("amd64")));
    assert_eq!(named("aarch64"), ("arm64", None));
    assert_eq!(named("riscv64"), ("riscv64", None));
    assert_eq!(named("arm"), ("armv7", Some("arm")));
    assert_eq!(named("mips"), ("other", Some("mips")));
}

#[test]
fn os_release_gives_the_distribution_and_its_version() {
    let text = "PRETTY_NAME=\"Debian GNU/Linux 12\"\nID=debian\nVERSION_ID=\"12\"\n";
    assert_eq!(os_release(text), (Some("debian".into()), Some("12".into())));
}

#[test]
fn nvidia_smi_lines_become_accelerators() {
    let gpus = nvidia_accelerators(
        "0, NVIDIA GeForce RTX 4090, 24564, 550.54.14, 450.00\n1, Tesla T4, 15360, 550.54.14, [N/A]\n",
    );
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0].model.as_deref(), Some("NVIDIA GeForce RTX 4090"));
    assert_eq!(gpus[0].memory.capacity_bytes, Some(24_564 * 1024 * 1024));
    assert_eq!(gpus[0].power_limit_watts, Some(450.0));
    assert_eq!(
        gpus[0].driver.as_ref().unwrap().version.as_deref(),
        Some("550.54.14")
    );
    assert_eq!(gpus[1].power_limit_watts, None, "[N/A] is not a value");
    assert_eq!(
        gpus[0].driver.as_ref().unwrap().name.as_deref(),
        Some("NVIDIA"),
        "llama-swap's driver name"
    );
    let unknown = nvidia_accelerators("0, Tesla T4, 15360, [N/A], 70\n");
    assert_eq!(
        unknown[0].driver, None,
        "no version: no driver, as llama-swap"
    );
}

#[test]
fn the_environment_without_markers_is_llama_swaps() {
    let kind = |modules: &str, virt: Option<(Option<i32>, &str)>| {
        let e = environment_beyond_markers(modules, virt.map(|(c, s)| (c, s.to_owned())));
        (e.kind, e.name)
    };
    let kvm_host = "kvm_intel 409600 0 - Live 0x0\nkvm 1327104 1 kvm_intel, Live 0x0\n";
    assert_eq!(kind(kvm_host, None), ("native", None));
    assert_eq!(kind("", Some((Some(1), "none"))), ("native", None));
    assert_eq!(
        kind("", Some((Some(0), "kvm"))),
        ("virtual_machine", Some("KVM".to_owned()))
    );
    assert_eq!(
        kind("", Some((Some(0), "docker"))),
        ("container", Some("Docker".to_owned()))
    );
    assert_eq!(kind("", None), ("unknown", None), "nothing to tell by");
}

#[test]
fn rocm_smi_json_becomes_accelerators_in_card_order() {
    let gpus = rocm_accelerators(
        r#"{"card1": {"Card Series": "Radeon RX 7900 XTX", "VRAM Total Memory (B)": "25753026560"},
            "card0": {"Card model": "0x744c", "VRAM Total Memory (B)": "N/A"}}"#,
    );
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0].model.as_deref(), Some("0x744c"));
    assert_eq!(
        gpus[0].memory.kind, "dedicated",
        "llama-swap's for rocm-smi's cards"
    );
    assert_eq!(
        gpus[0].driver, None,
        "no driver version: no driver, as llama-swap"
    );
    assert_eq!(gpus[1].memory.capacity_bytes, Some(25_753_026_560));
    assert!(rocm_accelerators("not json").is_empty());
}

#[test]
fn drm_cards_are_read_by_vendor() {
    let dir = tempfile::tempdir().unwrap();
    for (card, vendor, vram) in [
        ("card0", "0x1002", Some("17163091968")),
        ("card1", "0x1af4", None),
    ] {
        let device = dir.path().join(card).join("device");
        std::fs::create_dir_all(&device).unwrap();
        std::fs::write(device.join("vendor"), format!("{vendor}\n")).unwrap();
        if let Some(v) = vram {
            std::fs::write(device.join("mem_info_vram_total"), v).unwrap();
        }
    }
    std::fs::create_dir_all(dir.path().join("card0-DP-1")).unwrap();
    let gpus = drm_accelerators(dir.path());
    assert_eq!(gpus.len(), 1, "a virtio card is not a GPU");
    assert_eq!(gpus[0].vendor.as_deref(), Some("AMD"));
    assert_eq!(gpus[0].memory.capacity_bytes, Some(17_163_091_968));
    assert_eq!(gpus[0].driver, None, "no driver bound: none, as llama-swap");
}

#[test]
fn a_drm_cards_driver_is_the_kernel_driver_bound_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let device = dir.path().join("card0").join("device");
    std::fs::create_dir_all(&device).unwrap();
    std::fs::write(device.join("vendor"), "0x8086\n").unwrap();
    let driver = dir.path().join("drivers").join("i915");
    std::fs::create_dir_all(&driver).unwrap();
    std::os::unix::fs::symlink(&driver, device.join("driver")).unwrap();
    let gpus = drm_accelerators(dir.path());
    assert_eq!(gpus[0].vendor.as_deref(), Some("Intel"));
    assert_eq!(gpus[0].memory.kind, "shared_system");
    assert_eq!(
        gpus[0].driver.as_ref().unwrap().name.as_deref(),
        Some("i915")
    );
}

#[tokio::test]
async fn this_machine_gives_a_schema_one_snapshot() {
    let snapshot = detect().await.expect("/proc/meminfo is readable here");
    let json = serde_json::to_value(&snapshot).unwrap();
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["capture"]["scope"], "inference_host");
    assert_eq!(json["capture"]["detector"]["name"], "llama-swap-server");
    assert!(json["memory"]["capacity_bytes"].as_u64().unwrap() > 0);
    assert!(json["accelerators"].is_array());
    for key in [
        "architecture",
        "operating_system",
        "environment",
        "cpu",
        "captured_at",
    ] {
        assert!(json.get(key).is_some(), "{key}");
    }
}

#[test]
fn nvidia_compute_apps_give_each_process_row_in_bytes() {
    let text = "4242, 20480\n4243, [N/A]\n4242, 1024\ngarbage\n";
    assert_eq!(
        parse::nvidia_compute_apps(text),
        [(4242, 20 << 30), (4242, 1 << 30)]
    );
}

#[test]
fn rocm_showpids_gives_the_vram_third_from_the_end_even_after_a_name_with_blanks() {
    let text = r#"{"system": {"PID77": "python3, 1, 2147483648, 0, 12", "PID78": "my server, 2, 1024, 0, 0", "PID79": "bad"}}"#;
    let mut rows = parse::rocm_compute_apps(text);
    rows.sort_unstable();
    assert_eq!(rows, [(77, 2 << 30), (78, 1024)]);
    assert!(parse::rocm_compute_apps("not json").is_empty());
}
