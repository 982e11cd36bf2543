//! A reload applies the history's settings as llama-swap's does: a changed
//! `captureBuffer` starts a new capture buffer (0 turns captures off), a
//! changed `metricsMaxInMemory` keeps the newest rows that fit, a changed
//! `store.path` opens the new database (one that cannot be opened refuses the
//! reload) and closes the old one, a changed `store.maxRows` applies to the
//! open database; unchanged settings keep the rows and captures, and ids go on.

use std::path::Path;
use std::sync::Arc;

use llama_swap_server::{History, HttpOptions, Retention, ServeOptions, StoreSettings};
use serde_json::Value;

use crate::support::{Harness, model};

async fn get(h: &Harness, path: &str) -> (u16, Value) {
    let response = h.http.get(h.url(path)).send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap())
}

async fn chat_ok(h: &Harness) {
    let response = h.chat("a", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response.bytes().await.unwrap();
}

/// The ids of the rows `/api/metrics/activity` pages, newest first.
async fn ids(h: &Harness) -> Vec<u64> {
    let (status, page) = get(h, "/api/metrics/activity").await;
    assert_eq!(status, 200, "{page}");
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["id"].as_u64().unwrap())
        .collect()
}

async fn capture_status(h: &Harness, id: u64) -> (u16, Value) {
    get(h, &format!("/api/captures/{id}")).await
}

#[tokio::test]
async fn a_reload_applies_a_changed_capture_buffer_and_keeps_an_unchanged_one() {
    let mut h = Harness::start(&[model("a", "")], "captureBuffer: 5\n").await;
    chat_ok(&h).await;
    assert_eq!(capture_status(&h, 1).await.0, 200);

    // Unchanged (b only tells when the reload is applied): the capture stays.
    h.reload(&[model("a", ""), model("b", "")], "captureBuffer: 5\n")
        .await;
    assert_eq!(
        capture_status(&h, 1).await.0,
        200,
        "an unchanged buffer is kept"
    );

    h.reload(&[model("a", "")], "captureBuffer: 0\n").await;
    let (status, body) = capture_status(&h, 1).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("capture_not_found")),
        "captures are off: {body}"
    );
    chat_ok(&h).await;
    let (_, page) = get(&h, "/api/metrics/activity?limit=1").await;
    assert_eq!(page["data"][0]["id"], 2);
    assert_eq!(page["data"][0]["has_capture"], false, "{page}");

    h.reload(&[model("a", ""), model("b", "")], "captureBuffer: 1\n")
        .await;
    chat_ok(&h).await;
    let (status, capture) = capture_status(&h, 3).await;
    assert_eq!(status, 200, "captures are on again: {capture}");
    assert_eq!(capture["id"], 3);
    h.shutdown().await;
}

#[tokio::test]
async fn a_reload_applies_a_changed_metrics_max_in_memory_keeping_the_newest_rows() {
    let mut h = Harness::start(&[model("a", "")], "metricsMaxInMemory: 5\n").await;
    for _ in 0..4 {
        chat_ok(&h).await;
    }
    h.reload(&[model("a", ""), model("b", "")], "metricsMaxInMemory: 5\n")
        .await;
    assert_eq!(ids(&h).await, [4, 3, 2, 1], "an unchanged ring is kept");

    h.reload(&[model("a", "")], "metricsMaxInMemory: 2\n").await;
    assert_eq!(ids(&h).await, [4, 3], "the newest rows that fit");
    chat_ok(&h).await;
    assert_eq!(ids(&h).await, [5, 4]);

    h.reload(
        &[model("a", ""), model("b", "")],
        "metricsMaxInMemory: 10\n",
    )
    .await;
    for _ in 0..3 {
        chat_ok(&h).await;
    }
    assert_eq!(ids(&h).await, [8, 7, 6, 5, 4], "room for more again");
    h.shutdown().await;
}

fn store_yaml(path: &Path) -> String {
    format!("store:\n  path: {}\n  maxRows: 0\n", path.display())
}

fn open(path: &Path) -> Arc<History> {
    Arc::new(
        History::open(&StoreSettings {
            path: Some(path.to_owned()),
            retention: Retention {
                max_rows: 0,
                max_age: None,
            },
        })
        .unwrap(),
    )
}

#[tokio::test]
async fn a_reload_that_changes_store_path_opens_the_new_database_and_refuses_one_that_cannot_be_opened()
 {
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("first.db"), dir.path().join("second.db"));
    let broken = dir.path().join("broken.db");
    std::fs::write(
        &broken,
        "this is not an SQLite database, it is text\n".repeat(200),
    )
    .unwrap();
    let history = open(&first);
    let options =
        ServeOptions::default().http(HttpOptions::default().history(Arc::clone(&history)));
    let mut h = Harness::start_with(&[model("a", "")], &store_yaml(&first), options).await;
    chat_ok(&h).await;
    chat_ok(&h).await;
    assert_eq!(ids(&h).await, [2, 1]);

    h.reload(&[model("a", ""), model("b", "")], &store_yaml(&second))
        .await;
    chat_ok(&h).await;
    assert_eq!(ids(&h).await, [3], "the new database, ids going on");
    // The first is closed (its log folded in and removed), though the
    // options still hold it: its rows are all in the file.
    assert!(first.exists());
    assert!(
        !dir.path().join("first.db-wal").exists(),
        "the old database is closed"
    );
    assert!(dir.path().join("second.db-wal").exists());

    // Refused: c never appears; the reload after it (d) is applied, so the
    // refused one was read before it.
    h.send_reload(&[model("a", ""), model("c", "")], &store_yaml(&broken))
        .await;
    h.reload(&[model("a", ""), model("d", "")], &store_yaml(&second))
        .await;
    let metrics = h.metrics().await;
    assert!(
        !metrics.contains("model=\"c\""),
        "the reload with the broken database was refused: {metrics}"
    );
    chat_ok(&h).await;
    assert_eq!(ids(&h).await, [4, 3], "still the second database");

    h.reload(&[model("a", "")], &store_yaml(&first)).await;
    chat_ok(&h).await;
    assert_eq!(ids(&h).await, [5, 2, 1], "back to the first one");
    h.shutdown().await;
}

#[tokio::test]
async fn a_reload_that_changes_store_max_rows_prunes_the_open_database_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.db");
    let history = open(&path);
    let options =
        ServeOptions::default().http(HttpOptions::default().history(Arc::clone(&history)));
    let mut h = Harness::start_with(&[model("a", "")], &store_yaml(&path), options).await;
    for _ in 0..5 {
        chat_ok(&h).await;
    }
    assert_eq!(ids(&h).await, [5, 4, 3, 2, 1]);

    let keep_two = format!("store:\n  path: {}\n  maxRows: 2\n", path.display());
    h.reload(&[model("a", ""), model("b", "")], &keep_two).await;
    assert_eq!(ids(&h).await, [5, 4], "the newest two are kept");
    chat_ok(&h).await;
    assert_eq!(ids(&h).await, [6, 5], "the bound holds between deletions");

    // Back to no bound: the row the bound hid (deletion is not per row)
    // shows again, and ids go on.
    h.reload(&[model("a", "")], &store_yaml(&path)).await;
    chat_ok(&h).await;
    assert_eq!(ids(&h).await, [7, 6, 5, 4]);
    h.shutdown().await;
}
