use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::scheduler::RequestId;

fn metrics() -> Arc<Metrics> {
    Arc::new(Metrics::new(["a", "b"], Bands::default()))
}

fn entry(model: &str, priority: i32) -> QueueEntry {
    QueueEntry {
        id: RequestId(0),
        model: model.to_owned(),
        requested_priority: priority,
        capped_priority: priority,
        effective_priority: priority,
        position: 1,
        reason: crate::scheduler::WaitReason::Swap,
        aged: false,
        waited: Duration::from_millis(1500),
    }
}

#[test]
fn outcomes_are_counted_by_outcome_code_and_band() {
    let m = metrics();
    m.request(10).served();
    m.request(-10).rejected("concurrency_limit");
    m.request(0).error("model_start_failed");
    drop(m.request(0));
    let text = m.encode();
    for line in [
        "llamaswap_requests_total{outcome=\"served\",code=\"\",band=\"elevated\"} 1\n",
        "llamaswap_requests_total{outcome=\"rejected\",code=\"concurrency_limit\",band=\"low\"} 1\n",
        "llamaswap_requests_total{outcome=\"error\",code=\"model_start_failed\",band=\"normal\"} 1\n",
        "llamaswap_requests_total{outcome=\"cancelled\",code=\"\",band=\"normal\"} 1\n",
    ] {
        assert!(text.contains(line), "missing {line}in\n{text}");
    }
}

#[test]
fn effective_priority_decides_the_band_of_an_admitted_request() {
    let m = metrics();
    let mut outcome = m.request(-10);
    outcome.set_priority(5);
    outcome.served();
    assert!(
        m.encode().contains(
            "llamaswap_requests_total{outcome=\"served\",code=\"\",band=\"elevated\"} 1\n"
        )
    );
}

#[test]
fn queue_gauges_follow_the_router_view_by_model_and_band() {
    let m = metrics();
    m.observe_router(
        &[entry("a", 10), entry("a", 10), entry("b", -3)],
        &[],
        &BTreeSet::new(),
    );
    let text = m.encode();
    assert!(
        text.contains("llamaswap_queue_depth{band=\"elevated\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("llamaswap_queue_depth{band=\"normal\"} 0\n"),
        "{text}"
    );
    assert!(
        text.contains("llamaswap_model_queue_depth{model=\"a\",band=\"elevated\"} 2\n"),
        "{text}"
    );
    assert!(
        text.contains("llamaswap_model_queue_depth{model=\"b\",band=\"low\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("llamaswap_queue_oldest_wait_seconds{band=\"low\"} 1.5\n"),
        "{text}"
    );
    m.observe_router(&[], &[], &BTreeSet::new());
    let text = m.encode();
    assert!(
        text.contains("llamaswap_model_queue_depth{model=\"a\",band=\"elevated\"} 0\n"),
        "{text}"
    );
}

#[test]
fn model_state_gauge_marks_exactly_the_current_state() {
    let m = metrics();
    m.observe_router(
        &[],
        &[RunningModel {
            model: "a".into(),
            state: ModelState::Ready,
            in_flight: 0,
            parallel: None,
            gpus: Vec::new(),
            memory: 0,
            memory_measured: None,
        }],
        &BTreeSet::new(),
    );
    let text = m.encode();
    assert!(
        text.contains("llamaswap_model_state{model=\"a\",state=\"ready\"} 1\n"),
        "{text}"
    );
    assert!(
        text.contains("llamaswap_model_state{model=\"a\",state=\"stopped\"} 0\n"),
        "{text}"
    );
    assert!(
        text.contains("llamaswap_model_state{model=\"b\",state=\"stopped\"} 1\n"),
        "{text}"
    );
}

#[test]
fn a_failed_model_is_in_the_failed_state_and_no_other() {
    let m = metrics();
    m.observe_router(&[], &[], &BTreeSet::from(["b"]));
    let text = m.encode();
    for (state, value) in [("failed", 1), ("stopped", 0), ("ready", 0)] {
        let line = format!("llamaswap_model_state{{model=\"b\",state=\"{state}\"}} {value}\n");
        assert!(text.contains(&line), "{line} not in {text}");
    }
    let line = "llamaswap_model_state{model=\"a\",state=\"failed\"} 0\n";
    assert!(text.contains(line), "{line} not in {text}");
}

#[test]
fn swaps_fence_and_headers_are_counted() {
    let m = metrics();
    m.swap("a", true, Duration::from_millis(300));
    m.swap("unknown-model", false, Duration::from_secs(2));
    m.fence_holds(2);
    m.header(HeaderPriority::Invalid);
    m.header(HeaderPriority::Duplicated);
    m.header(HeaderPriority::Duplicated);
    m.header(HeaderPriority::Value(3));
    m.granted("a", 10, Duration::from_millis(3));
    let text = m.encode();
    for line in [
        "llamaswap_swaps_total{model=\"a\",result=\"ok\"} 1\n",
        "llamaswap_swaps_total{model=\"other\",result=\"failed\"} 1\n",
        "llamaswap_swap_duration_seconds_count{model=\"a\"} 1\n",
        "llamaswap_drain_fence_holds_total 2\n",
        "llamaswap_priority_header_rejected_total{reason=\"invalid\"} 1\n",
        "llamaswap_priority_header_rejected_total{reason=\"duplicated\"} 2\n",
        "llamaswap_queue_wait_seconds_count{band=\"elevated\"} 1\n",
        "llamaswap_model_queue_wait_seconds_bucket{le=\"0.005\",model=\"a\",band=\"elevated\"} 1\n",
    ] {
        assert!(text.contains(line), "missing {line}in\n{text}");
    }
}

#[test]
fn in_flight_per_model_is_shown_against_its_parallel_limit() {
    let m = metrics();
    let ready = |in_flight, parallel| RunningModel {
        model: "a".into(),
        state: ModelState::Ready,
        in_flight,
        parallel,
        gpus: Vec::new(),
        memory: 0,
        memory_measured: None,
    };
    m.observe_router(&[], &[ready(2, Some(2))], &BTreeSet::new());
    let text = m.encode();
    for line in [
        "llamaswap_model_requests_in_flight{model=\"a\"} 2\n",
        "llamaswap_model_requests_in_flight{model=\"b\"} 0\n",
        "llamaswap_model_parallel_slots{model=\"a\"} 2\n",
    ] {
        assert!(text.contains(line), "missing {line}in\n{text}");
    }
    // b has no limit; a without one (or stopped) shows none either.
    assert!(
        !text.contains("llamaswap_model_parallel_slots{model=\"b\"}"),
        "{text}"
    );
    m.observe_router(&[], &[ready(1, None)], &BTreeSet::new());
    let text = m.encode();
    assert!(
        text.contains("llamaswap_model_requests_in_flight{model=\"a\"} 1\n"),
        "{text}"
    );
    assert!(
        !text.contains("llamaswap_model_parallel_slots{model=\"a\"}"),
        "{text}"
    );
}
