//! The matrix router over HTTP with real mockswap upstreams: set mates run side
//! by side, the cheapest combination decides what stops, a model in no set runs
//! alone, `+ref` sets, and the drain fence under the matrix.

use crate::support::{Harness, LIMIT, model};

async fn finish(handle: tokio::task::JoinHandle<(u16, String)>) -> (u16, String) {
    tokio::time::timeout(LIMIT, handle).await.unwrap().unwrap()
}

async fn ok(h: &Harness, model: &str) {
    let response = h.chat(model, None, false).send().await.unwrap();
    assert_eq!(response.status(), 200, "{model}");
}

const ROUTED: &str = "
routing:
  router:
    use: matrix
    settings:
      matrix:
        vars: { g: gemma, q: qwen, v: voxtral, e: reranker, L: llama70b }
        evict_costs: { v: 5 }
        sets:
          llms: g | q
          with_tts: +llms & v
          mega: +with_tts & e
          big: L
";

fn five() -> Vec<crate::support::ModelSpec> {
    ["gemma", "qwen", "voxtral", "reranker", "llama70b"]
        .into_iter()
        .map(|id| model(id, ""))
        .collect()
}

#[tokio::test]
async fn set_mates_run_side_by_side_and_a_referenced_set_extends_them() {
    let h = Harness::start(&five(), ROUTED).await;
    ok(&h, "gemma").await;
    ok(&h, "voxtral").await;
    ok(&h, "reranker").await;
    assert_eq!(h.running().await, ["gemma", "reranker", "voxtral"]);
    // qwen takes gemma's place in mega; the others stay.
    ok(&h, "qwen").await;
    assert_eq!(h.running().await, ["qwen", "reranker", "voxtral"]);
    h.shutdown().await;
}

#[tokio::test]
async fn a_model_only_in_a_set_of_its_own_stops_everything_else() {
    let h = Harness::start(&five(), ROUTED).await;
    ok(&h, "gemma").await;
    ok(&h, "voxtral").await;
    ok(&h, "llama70b").await;
    assert_eq!(h.running().await, ["llama70b"]);
    ok(&h, "voxtral").await;
    assert_eq!(h.running().await, ["voxtral"]);
    h.shutdown().await;
}

#[tokio::test]
async fn the_cheapest_combination_keeps_the_expensive_model() {
    let h = Harness::start(
        &[model("a", ""), model("b", ""), model("c", "")],
        "
matrix:
  evict_costs: { b: 10 }
  sets:
    bc: b & c
    a_with_c: a & c
    a_with_b: a & b
",
    )
    .await;
    ok(&h, "b").await;
    ok(&h, "c").await;
    assert_eq!(h.running().await, ["b", "c"]);
    ok(&h, "a").await;
    assert_eq!(
        h.running().await,
        ["a", "b"],
        "c (cost 1) goes, b (cost 10) stays"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_model_in_no_set_runs_alone() {
    let h = Harness::start(
        &[model("a", ""), model("b", ""), model("loner", "")],
        "matrix:\n  sets:\n    ab: a & b\n",
    )
    .await;
    ok(&h, "a").await;
    ok(&h, "b").await;
    ok(&h, "loner").await;
    assert_eq!(h.running().await, ["loner"]);
    ok(&h, "a").await;
    assert_eq!(h.running().await, ["a"]);
    h.shutdown().await;
}

#[tokio::test]
async fn the_fence_under_the_matrix_lets_the_elevated_request_through_steady_low_traffic() {
    let h = Harness::start(
        &[model("a", "--gate-closed"), model("b", "--gate-closed")],
        "matrix:\n  sets:\n    only_a: a\n    only_b: b\n",
    )
    .await;
    let first = h.spawn(h.chat("a", Some("-10"), false));
    h.wait_held("a", 1).await;
    let high = h.spawn(h.chat("b", Some("10"), false));
    h.wait_queue_len(1).await;
    // a is ready and free to take more, but b waits at a higher priority for a
    // to stop: the new low request queues behind it.
    let late_low = h.spawn(h.chat("a", Some("-10"), false));
    let queue = h.wait_queue_len(2).await;
    let order: Vec<&str> = queue.iter().map(|e| e["model"].as_str().unwrap()).collect();
    assert_eq!(order, ["b", "a"]);

    h.open_gate("a").await;
    assert_eq!(finish(first).await.0, 200);
    h.wait_held("b", 1).await;
    assert_eq!(h.running().await, ["b"]);
    h.open_gate("b").await;
    assert_eq!(finish(high).await.0, 200);
    // a was stopped and starts again with its gate closed.
    h.wait_held("a", 1).await;
    h.open_gate("a").await;
    assert_eq!(finish(late_low).await.0, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn set_mates_serve_concurrently_with_no_swap_between_them() {
    let h = Harness::start(
        &[model("a", "--gate-closed"), model("b", "--gate-closed")],
        "matrix:\n  sets:\n    pair: a & b\n",
    )
    .await;
    let on_a = h.spawn(h.chat("a", None, false));
    let on_b = h.spawn(h.chat("b", None, false));
    h.wait_held("a", 1).await;
    h.wait_held("b", 1).await;
    assert_eq!(h.running().await, ["a", "b"]);
    h.open_gate("a").await;
    h.open_gate("b").await;
    assert_eq!(finish(on_a).await.0, 200);
    assert_eq!(finish(on_b).await.0, 200);
    h.shutdown().await;
}

#[tokio::test]
async fn of_two_evictions_of_equal_cost_the_least_recently_used_model_stops() {
    let sets = "
routing:
  router:
    use: matrix
    settings:
      matrix:
        sets:
          pair: a & b
          with_a: t & a
          with_b: t & b
";
    let h = Harness::start(&[model("a", ""), model("b", ""), model("t", "")], sets).await;
    ok(&h, "b").await;
    ok(&h, "a").await;
    ok(&h, "b").await;
    assert_eq!(h.running().await, ["a", "b"]);
    // t runs beside either; a was used less recently than b.
    ok(&h, "t").await;
    assert_eq!(h.running().await, ["b", "t"]);
    h.shutdown().await;
}
