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
    // Every interface but the loopback, as llama-swap counts them.
    assert!(!text.contains("interface=\"lo\""), "{text}");
    let net_dev = std::fs::read_to_string("/proc/net/dev").unwrap();
    if let Some(name) = net_dev
        .lines()
        .skip(2)
        .filter_map(|line| Some(line.split_once(':')?.0.trim()))
        .find(|name| *name != "lo")
    {
        let series =
            format!("llamaswap_network_bytes_total{{interface=\"{name}\",direction=\"recv\"}} ");
        assert!(text.contains(&series), "missing {series:?} in\n{text}");
    }
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

#[tokio::test]
async fn performance_serves_llama_swaps_samples_and_filters_them_by_time() {
    let h = Harness::start(&[model("a", "")], "").await;
    let response = h.http.get(h.url("/api/performance")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["enabled"], true);
    assert!(body["gpu_stats"].is_array());
    let stat = &body["sys_stats"][0];
    for field in [
        "timestamp",
        "cpu_util_per_core",
        "mem_total_mb",
        "mem_used_mb",
        "mem_free_mb",
        "swap_total_mb",
        "swap_used_mb",
        "load_avg_1",
        "load_avg_5",
        "load_avg_15",
        "net_io",
    ] {
        assert!(stat.get(field).is_some(), "no {field} in {stat}");
    }
    assert!(stat["mem_total_mb"].as_u64().unwrap() > 0, "{stat}");
    let after = stat["timestamp"].as_str().unwrap();
    let later: serde_json::Value = h
        .http
        .get(h.url(&format!(
            "/api/performance?after={}",
            after.replace('+', "%2B")
        )))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let after_at: jiff::Timestamp = after.parse().unwrap();
    assert!(
        later["sys_stats"].as_array().unwrap().iter().all(|s| {
            s["timestamp"]
                .as_str()
                .unwrap()
                .parse::<jiff::Timestamp>()
                .unwrap()
                > after_at
        }),
        "{later}"
    );
    let bad = h
        .http
        .get(h.url("/api/performance?after=yesterday"))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let body: serde_json::Value = bad.json().await.unwrap();
    assert_eq!(body["error"]["param"], "after");
    assert_eq!(
        body["error"]["message"],
        "invalid 'after' timestamp, use RFC3339 format"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn performance_answers_503_when_disabled() {
    let h = Harness::start(&[model("a", "")], "performance:\n  disabled: true\n").await;
    let response = h.http.get(h.url("/api/performance")).send().await.unwrap();
    assert_eq!(response.status(), 503);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body, serde_json::json!({"enabled": false}));
    h.shutdown().await;
}
