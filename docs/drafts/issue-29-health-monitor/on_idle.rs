//! `hooks.on_idle` (issue 29): the default model back after a quiet spell,
//! yielding to any request like any idle model.

use crate::support::{Harness, model};

#[tokio::test]
async fn default_model_is_loaded_back_once_no_request_has_arrived_for_a_while() {
    let h = Harness::start(
        &[model("chat", ""), model("batch", "")],
        "hooks:\n  on_idle: {after: 1, preload: [chat]}\n",
    )
    .await;
    // The batch job's model takes the only place (one model at a time).
    let response = h.chat("batch", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(h.running().await, vec!["batch"]);

    // A second later nothing has arrived: chat is loaded back, evicting the
    // idle batch model.
    h.wait_for(|h| async move { (h.running().await == vec!["chat"]).then_some(()) })
        .await;
    let journal = h.journal("chat").await.expect("chat runs");
    assert!(journal.is_empty(), "loaded without a request: {journal:?}");

    // It yields like any idle model: a request for batch swaps it out.
    let response = h.chat("batch", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    h.shutdown().await;
}
