//! `minResident` over HTTP with real mockswap upstreams: a model that has just
//! become ready is not stopped for a waiter of the same priority inside its
//! window (the waiter queues), while a strictly higher waiter stops it at once.

use crate::support::{Harness, LIMIT, ModelSpec, model};

#[tokio::test]
async fn an_equal_waiter_queues_inside_min_resident_and_a_higher_one_stops_the_model() {
    let h = Harness::start(
        &[
            ModelSpec {
                // Far longer than the test: only the higher waiter may stop it.
                yaml: "minResident: 600",
                ..model("a", "")
            },
            model("b", ""),
            model("c", ""),
        ],
        "",
    )
    .await;
    let response = h.chat("a", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    // One model at a time (no groups): b would stop a, but a is inside its window.
    let b = h.spawn(h.chat("b", None, false));
    let queue = h.wait_queue_len(1).await;
    assert_eq!(queue[0]["model"], "b");
    assert_eq!(h.running().await, ["a"]);
    // c ranks above what a served: it stops a now; b follows once c is idle.
    let response = h.chat("c", Some("5"), false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let (status, body) = tokio::time::timeout(LIMIT, b).await.unwrap().unwrap();
    assert_eq!(status, 200, "{body}");
    assert_eq!(h.running().await, ["b"]);
    h.shutdown().await;
}
