use super::*;

const STAT_BEFORE: &str = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 10 0 10 80 0 0 0 0 0 0\ncpu1 0 0 0 100 0 0 0 0 0 0\nintr 1 2 3\n";
const STAT_AFTER: &str =
    "cpu  60 0 10 130 0 0 0 0 0 0\ncpu0 60 0 10 130 0 0 0 0 0 0\ncpu1 0 0 25 175 0 0 0 0 0 0\n";
const MEMINFO: &str = "MemTotal:       1000 kB\nMemFree:         200 kB\nMemAvailable:    600 kB\nSwapTotal:       100 kB\nSwapFree:         40 kB\n";
const NET_DEV: &str = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n  eth0: 5 1 0 0 0 0 0 0 7 1 0 0 0 0 0 0\n";

#[test]
fn cpu_utilisation_is_the_busy_share_between_samples_per_core() {
    let before = parse_proc_stat(STAT_BEFORE);
    let after = parse_proc_stat(STAT_AFTER);
    assert_eq!(before.len(), 2, "the aggregate line is not a core");
    assert_eq!(utilisation(&before, &after), [50.0, 25.0]);
}

#[test]
fn meminfo_loadavg_and_net_dev_are_read() {
    let m = parse_meminfo(MEMINFO);
    assert_eq!(
        (m.total, m.free, m.available),
        (1_024_000, 204_800, 614_400)
    );
    assert_eq!(
        parse_loadavg("0.50 1.25 2.00 3/200 999\n"),
        Some([0.5, 1.25, 2.0])
    );
    assert_eq!(
        parse_net_dev(NET_DEV),
        [("eth0".to_owned(), 5, 7)],
        "the loopback is left out, as llama-swap leaves it"
    );
}

#[test]
fn nvidia_smi_csv_becomes_gpu_gauges_and_missing_values_stay_missing() {
    let gpus = parse_nvidia_smi(
        "0, NVIDIA GeForce RTX 3090, GPU-abc, 61, 87, 40, 20000, 24576, 55, 310.50\n1, Tesla P40, GPU-def, 40, 0, 0, 0, 24576, [N/A], [N/A]\n",
    );
    assert_eq!(gpus.len(), 2);
    assert_eq!(gpus[0].temperature_c, Some(61.0));
    assert_eq!(gpus[0].memory_total_bytes, Some(24576.0 * 1024.0 * 1024.0));
    assert_eq!(gpus[1].fan_pct, None, "no invented fan speed");
    let text = render(&Sample {
        gpus,
        ..Sample::default()
    });
    assert!(text.contains("llamaswap_gpu_available 1\n"), "{text}");
    assert!(
        text.contains(
            "llamaswap_gpu_power_draw_watts{id=\"0\",name=\"NVIDIA GeForce RTX 3090\",uuid=\"GPU-abc\"} 310.5\n"
        ),
        "{text}"
    );
    assert!(
        !text.contains("llamaswap_gpu_fan_speed_percent{id=\"1\""),
        "{text}"
    );
    assert!(!text.contains("vram_temperature"), "never reported: {text}");
}

#[test]
fn amdgpu_sysfs_cards_are_read_and_other_vendors_skipped() {
    let drm = tempfile::tempdir().unwrap();
    let card = drm.path().join("card0/device");
    std::fs::create_dir_all(card.join("hwmon/hwmon3")).unwrap();
    for (file, value) in [
        ("vendor", "0x1002"),
        ("gpu_busy_percent", "42"),
        ("mem_info_vram_used", "1048576"),
        ("mem_info_vram_total", "8589934592"),
        ("hwmon/hwmon3/temp1_input", "55000"),
        ("hwmon/hwmon3/power1_average", "120000000"),
    ] {
        std::fs::write(card.join(file), value).unwrap();
    }
    let other = drm.path().join("card1/device");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("vendor"), "0x8086").unwrap();
    std::fs::create_dir_all(drm.path().join("card0-DP-1")).unwrap();
    let gpus = read_amdgpu(drm.path());
    assert_eq!(gpus.len(), 1);
    assert_eq!(gpus[0].util_pct, Some(42.0));
    assert_eq!(gpus[0].temperature_c, Some(55.0));
    assert_eq!(gpus[0].power_w, Some(120.0));
    assert_eq!(gpus[0].fan_pct, None);
}

#[tokio::test]
async fn a_sampler_renders_llama_swaps_names_and_samples_once_per_interval() {
    let proc = tempfile::tempdir().unwrap();
    std::fs::write(proc.path().join("stat"), STAT_BEFORE).unwrap();
    std::fs::create_dir(proc.path().join("net")).unwrap();
    std::fs::write(proc.path().join("net/dev"), NET_DEV).unwrap();
    std::fs::write(proc.path().join("meminfo"), MEMINFO).unwrap();
    std::fs::write(proc.path().join("loadavg"), "0.50 1.25 2.00 3/200 999\n").unwrap();
    let sources = Sources {
        proc: proc.path().to_owned(),
        drm: proc.path().join("no-drm"),
        nvidia: false,
    };
    let sampler = SystemSampler::with_sources(Duration::from_secs(3600), sources);
    std::fs::write(proc.path().join("stat"), STAT_AFTER).unwrap();
    let text = sampler.encode().await;
    for line in [
        "llamaswap_cpu_util_percent{core=\"0\"} 50\n",
        "llamaswap_cpu_util_percent{core=\"1\"} 25\n",
        "llamaswap_memory_total_bytes 1024000\n",
        "llamaswap_memory_used_bytes 409600\n",
        "llamaswap_memory_free_bytes 204800\n",
        "llamaswap_swap_total_bytes 102400\n",
        "llamaswap_swap_used_bytes 61440\n",
        "llamaswap_load_average{interval=\"15m\"} 2\n",
        "# TYPE llamaswap_network_bytes counter\n",
        "llamaswap_network_bytes_total{interface=\"eth0\",direction=\"sent\"} 7\n",
        "llamaswap_gpu_available 0\n",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
    assert!(!text.contains("llamaswap_gpu_util_percent"), "{text}");
    // Within the interval the same sample is served.
    std::fs::write(proc.path().join("loadavg"), "9.00 9.00 9.00 1/1 1\n").unwrap();
    assert_eq!(sampler.encode().await, text);
}

#[tokio::test]
async fn recorded_samples_are_served_in_llama_swaps_shape_and_filtered_by_time() {
    let proc = tempfile::tempdir().unwrap();
    std::fs::write(proc.path().join("stat"), STAT_BEFORE).unwrap();
    std::fs::create_dir(proc.path().join("net")).unwrap();
    std::fs::write(proc.path().join("net/dev"), NET_DEV).unwrap();
    // 4 GiB total, 1 GiB available, 512 MiB free; 2 GiB swap, half used.
    std::fs::write(
        proc.path().join("meminfo"),
        "MemTotal: 4194304 kB\nMemFree: 524288 kB\nMemAvailable: 1048576 kB\nSwapTotal: 2097152 kB\nSwapFree: 1048576 kB\n",
    )
    .unwrap();
    std::fs::write(proc.path().join("loadavg"), "0.50 1.25 2.00 3/200 999\n").unwrap();
    let sources = Sources {
        proc: proc.path().to_owned(),
        drm: proc.path().join("no-drm"),
        nvidia: false,
    };
    let sampler = SystemSampler::with_sources(Duration::from_secs(5), sources);
    assert!(
        sampler.performance(None).sys_stats.is_empty(),
        "nothing sampled yet"
    );
    std::fs::write(proc.path().join("stat"), STAT_AFTER).unwrap();
    sampler.record().await;
    let json = serde_json::to_value(sampler.performance(None)).unwrap();
    assert_eq!(json["enabled"], true);
    assert_eq!(json["gpu_stats"], serde_json::json!([]));
    let stat = &json["sys_stats"][0];
    assert_eq!(stat["cpu_util_per_core"], serde_json::json!([50.0, 25.0]));
    assert_eq!(
        (
            &stat["mem_total_mb"],
            &stat["mem_used_mb"],
            &stat["mem_free_mb"]
        ),
        (
            &serde_json::json!(4096),
            &serde_json::json!(3072),
            &serde_json::json!(512)
        )
    );
    assert_eq!(
        (&stat["swap_total_mb"], &stat["swap_used_mb"]),
        (&serde_json::json!(2048), &serde_json::json!(1024))
    );
    assert_eq!(stat["load_avg_15"], 2.0);
    assert_eq!(
        stat["net_io"][0],
        serde_json::json!({"name": "eth0", "bytes_recv": 5, "bytes_sent": 7})
    );
    let taken: jiff::Timestamp = stat["timestamp"].as_str().unwrap().parse().unwrap();
    // Only samples strictly after `after` are served.
    let at = u64::try_from(taken.as_millisecond()).unwrap();
    assert_eq!(sampler.performance(Some(at - 1)).sys_stats.len(), 1);
    assert!(sampler.performance(Some(at)).sys_stats.is_empty());
}

#[test]
fn the_ring_keeps_an_hour_of_samples_and_drops_the_oldest() {
    let ring = history::Ring::new(Duration::from_secs(1800));
    for at in 1..=3 {
        ring.push(at, Sample::default());
    }
    let sampler = SystemSampler {
        ring,
        ..SystemSampler::with_sources(Duration::from_secs(1800), Sources::default())
    };
    let kept: Vec<_> = sampler
        .performance(None)
        .sys_stats
        .iter()
        .map(|s| serde_json::to_value(s).unwrap()["timestamp"].clone())
        .collect();
    assert_eq!(
        kept,
        ["1970-01-01T00:00:00.002Z", "1970-01-01T00:00:00.003Z"],
        "two samples an hour apart are kept at 30 min"
    );
}
