//! What llama-swap's scripts read about the server and its host:
//! `GET /api/version`, `GET /api/hardware`, `GET /api/performance`.

use serde_json::Value;

use crate::support::{Harness, model};

async fn get(h: &Harness, path: &str) -> (u16, Value) {
    let response = h.http.get(h.url(path)).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

#[tokio::test]
async fn version_answers_llama_swaps_three_fields() {
    let h = Harness::start(&[model("a", "")], "").await;
    let (status, body) = get(&h, "/api/version").await;
    assert_eq!(status, 200);
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(body["commit"], llama_swap_server::version::COMMIT);
    assert_eq!(body["build_date"], llama_swap_server::version::BUILD_DATE);
    assert_eq!(body.as_object().unwrap().len(), 3, "{body}");
    h.shutdown().await;
}

#[tokio::test]
async fn hardware_answers_llama_swaps_snapshot_of_this_host() {
    let h = Harness::start(&[model("a", "")], "").await;
    let (status, body) = get(&h, "/api/hardware").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["schema_version"], 1);
    assert_eq!(body["capture"]["method"], "detected");
    assert_eq!(body["operating_system"]["family"], "linux");
    assert!(
        body["memory"]["capacity_bytes"].as_u64().unwrap() > 0,
        "{body}"
    );
    assert!(
        body["cpu"]["logical_thread_count"].as_u64().unwrap() >= 1,
        "{body}"
    );
    assert!(body["accelerators"].is_array());
    // Detected once: the second answer is the same snapshot.
    assert_eq!(
        get(&h, "/api/hardware").await.1["captured_at"],
        body["captured_at"]
    );
    h.shutdown().await;
}
