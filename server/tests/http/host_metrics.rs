//! `/metrics` also serves the host gauges llama-swap's Grafana dashboard
//! reads, under llama-swap's names, read from this machine's `/proc`; GPU
//! gauges only where a GPU can be read (`llamaswap_gpu_available` says which).

use crate::support::{Harness, model};

#[tokio::test]
async fn metrics_serve_llama_swaps_host_gauges_before_the_end_marker() {
    let h = Harness::start(&[model("a", "")], "").await;
    let text = h.metrics().await;
    for series in [
        "llamaswap_cpu_util_percent{core=\"0\"} ",
        "llamaswap_memory_total_bytes ",
        "llamaswap_memory_used_bytes ",
        "llamaswap_memory_free_bytes ",
        "llamaswap_swap_used_bytes ",
        "llamaswap_load_average{interval=\"1m\"} ",
        "llamaswap_network_bytes_total{interface=\"lo\",direction=\"recv\"} ",
        "llamaswap_gpu_available ",
        // Our own series are still there.
        "llamaswap_requests_in_progress ",
    ] {
        assert!(text.contains(series), "missing {series:?} in\n{text}");
    }
    let total: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("llamaswap_memory_total_bytes "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(total > 1 << 20, "{total}");
    assert_eq!(text.trim_end().lines().last(), Some("# EOF"));
    h.shutdown().await;
}

#[tokio::test]
async fn performance_disabled_leaves_the_host_gauges_out() {
    let h = Harness::start(&[model("a", "")], "performance:\n  disabled: true\n").await;
    let text = h.metrics().await;
    assert!(!text.contains("llamaswap_cpu_util_percent"), "{text}");
    assert!(!text.contains("llamaswap_gpu_available"), "{text}");
    assert!(text.contains("llamaswap_requests_in_progress "), "{text}");
    h.shutdown().await;
}
