//! `hooks.on_idle` (issue 29): the default model back after a quiet spell,
//! yielding to any request like any idle model.

use crate::support::{Harness, model};

#[tokio::test]
async fn default_model_is_loaded_back_once_no_request_has_arrived_for_a_while() {
    let h = Harness::start(
        &[model("chat", ""), model("batch", "")],
        "hooks:\n  on_idle: {after: 3, preload: [chat]}\n",
    )
    .await;
    // The batch job's model takes the only place (one model at a time).
    let response = h.chat("batch", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(h.running().await, vec!["batch"]);

    // Three seconds later nothing has arrived: chat is loaded back, evicting
    // the idle batch model.
    h.wait_for(|h| async move { (h.running().await == vec!["chat"]).then_some(()) })
        .await;
    let journal = h.journal("chat").await.expect("chat runs");
    assert!(journal.is_empty(), "loaded without a request: {journal:?}");
    let metrics = h.metrics().await;
    assert!(
        metrics.contains("llamaswap_idle_preloads_total{model=\"chat\"} 1\n"),
        "{metrics}"
    );

    // It yields like any idle model: a request for batch swaps it out.
    let response = h.chat("batch", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200);
    h.shutdown().await;
}

#[tokio::test]
async fn a_request_that_outlasts_the_spell_is_never_cut_and_the_preload_waits_for_the_next_quiet() {
    // batch answers after 8 s, twice the quiet spell: the spell passes while
    // it runs, and the preload must neither fire nor cut it. (A spell of
    // 4 s leaves a loaded machine time to look before the next one ends.)
    let h = Harness::start(
        &[model("chat", ""), model("batch", "--latency 8s")],
        "hooks:\n  on_idle: {after: 4, preload: [chat]}\n",
    )
    .await;
    let response = h.chat("batch", None, false).send().await.unwrap();
    assert_eq!(response.status(), 200, "served whole, never preempted");
    // A new spell began when it ended: chat is not loaded yet.
    assert_eq!(h.running().await, vec!["batch"]);
    let metrics = h.metrics().await;
    assert!(
        !metrics.contains("llamaswap_idle_preloads_total{model=\"chat\"} 1"),
        "{metrics}"
    );
    h.wait_for(|h| async move { (h.running().await == vec!["chat"]).then_some(()) })
        .await;
    h.shutdown().await;
}
