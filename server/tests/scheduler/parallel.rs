//! `parallel: N`: at most N requests in flight per model, the rest ranked in
//! the queue and released one by one as responses end, against the pure scheduler.

use llama_swap_server::testing::scheduler::{
    Effect, ModelSettings, ModelState, Parallel, RequestId, RouteError, SchedulerKind, WaitReason,
    WaitStatus,
};

use crate::support::{Harness, group, models, settings};

/// Models `ids` in the default group; `limited` gets `parallel: n`.
fn with_parallel(ids: &[&str], limited: &str, n: usize) -> Harness {
    let mut list = models(ids);
    for m in &mut list {
        if m.id == limited {
            m.parallel = Parallel::limit(n).unwrap();
        }
    }
    Harness::new(settings(list))
}

fn reasons(h: &Harness) -> Vec<(RequestId, WaitReason)> {
    h.s.queue(h.now)
        .into_iter()
        .map(|e| (e.id, e.reason))
        .collect()
}

#[test]
fn without_parallel_every_request_for_a_ready_model_is_served_at_once() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let ids = [h.submit("a", 0), h.submit("a", -10), h.submit("a", 10)];
    assert_eq!(h.grant_order(&ids), ids);
    assert_eq!(h.s.queue_len(), 0);
    assert_eq!(h.s.in_flight("a"), 3);
}

#[test]
fn requests_beyond_the_parallel_limit_wait_with_reason_slots_full() {
    let mut h = with_parallel(&["a"], "a", 2);
    h.make_ready("a");
    let first = h.submit("a", 0);
    let second = h.submit("a", 0);
    let third = h.submit("a", 0);
    assert!(h.granted(first) && h.granted(second));
    assert!(!h.ended(third));
    assert_eq!(h.status[&third], WaitStatus::Queued { position: 1 });
    assert_eq!(reasons(&h), vec![(third, WaitReason::SlotsFull)]);
    assert_eq!(h.s.in_flight("a"), 2);
    assert_eq!(h.s.parallel("a"), Some(2));
    // The one that ends frees its slot for the waiter.
    h.done(second);
    assert!(h.granted(third));
    assert_eq!(h.s.queue_len(), 0);
}

#[test]
fn freed_slot_goes_to_the_highest_waiter_for_the_model() {
    let mut h = with_parallel(&["a"], "a", 1);
    h.make_ready("a");
    let long = h.submit("a", 0);
    let low = h.submit("a", -10);
    let elevated = h.submit("a", 10);
    assert_eq!(h.queue_ids(), vec![elevated, low]);
    assert_eq!(h.position(low), Some(2), "the low one's position went up");
    h.done(long);
    assert_eq!(h.grant_order(&[elevated, low]), vec![elevated]);
    assert_eq!(h.queue_ids(), vec![low]);
    h.done(elevated);
    assert_eq!(h.grant_order(&[elevated, low]), vec![elevated, low]);
}

#[test]
fn equal_priority_waiters_for_a_busy_model_go_in_arrival_order() {
    let mut h = with_parallel(&["a"], "a", 1);
    h.make_ready("a");
    let long = h.submit("a", 5);
    let waiters = [h.submit("a", 5), h.submit("a", 5), h.submit("a", 5)];
    h.done(long);
    for &id in &waiters {
        assert!(h.granted(id));
        h.done(id);
    }
    assert_eq!(h.grant_order(&waiters), waiters);
}

#[test]
fn running_requests_are_never_preempted_by_a_higher_waiter() {
    let mut h = with_parallel(&["a"], "a", 1);
    h.make_ready("a");
    let low = h.submit("a", -10);
    h.take();
    let elevated = h.submit("a", 10);
    // Queued, nothing else: no stop, no failure of the running request.
    assert_eq!(
        h.take(),
        vec![Effect::Positions {
            changes: vec![(elevated, 1)]
        }]
    );
    assert!(h.granted(low) && h.s.in_flight("a") == 1);
    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
    h.done(low);
    assert!(h.granted(elevated));
}

#[test]
fn a_slot_waiter_keeps_its_place_among_waiters_for_other_models() {
    // a runs beside the swap group {b, c}; c waits for b to finish.
    let mut list = models(&["a", "b", "c"]);
    list[0].parallel = Parallel::limit(1).unwrap();
    let mut s = settings(list);
    s.groups = vec![
        group("solo", &["a"], true, false, false),
        group("pair", &["b", "c"], true, false, false),
    ];
    let mut h = Harness::new(s);
    h.make_ready("a");
    h.make_ready("b");
    let busy_b = h.submit("b", 0);
    let busy_a = h.submit("a", 0);
    let elevated_c = h.submit("c", 10);
    let low_a = h.submit("a", -10);
    assert_eq!(h.queue_ids(), vec![elevated_c, low_a]);
    assert_eq!(
        reasons(&h),
        vec![
            (elevated_c, WaitReason::Swap),
            (low_a, WaitReason::SlotsFull)
        ]
    );
    // a's slot frees: its highest waiter goes, though c's waiter ranks above it
    // (c needs b stopped, not a).
    h.done(busy_a);
    assert!(h.granted(low_a));
    assert_eq!(h.queue_ids(), vec![elevated_c]);
    assert_eq!(h.position(elevated_c), Some(1));
    h.done(busy_b);
    assert_eq!(
        h.swaps.last(),
        Some(&("c".to_owned(), vec!["b".to_owned()]))
    );
}

/// a (parallel 2) serves two low requests, a third waits for a slot, and an
/// elevated request for b (same swap group) waits for a to stop.
fn low_traffic_and_elevated_other_model(kind: SchedulerKind) -> (Harness, [RequestId; 4]) {
    let mut list = models(&["a", "b"]);
    list[0].parallel = Parallel::limit(2).unwrap();
    let mut h = Harness::with_kind(settings(list), kind);
    h.make_ready("a");
    let first = h.submit("a", -10);
    let second = h.submit("a", -10);
    let elevated = h.submit("b", 10);
    let third = h.submit("a", -10);
    assert!(h.granted(first) && h.granted(second));
    assert_eq!(h.queue_ids(), vec![elevated, third]);
    h.done(first);
    (h, [first, second, elevated, third])
}

#[test]
fn freed_slot_is_not_refilled_with_lower_work_while_a_higher_waiter_needs_the_model_stopped() {
    let (mut h, [_, second, elevated, third]) =
        low_traffic_and_elevated_other_model(SchedulerKind::Fifo { drain_fence: true });
    assert!(!h.ended(third), "the fence must keep the freed slot empty");
    assert_eq!(h.s.in_flight("a"), 1);
    assert!(h.s.fence_holds() >= 1);
    // More low work for a keeps queueing too.
    let fourth = h.submit("a", -10);
    assert!(!h.ended(fourth));
    h.done(second);
    assert_eq!(
        h.swaps.last(),
        Some(&("b".to_owned(), vec!["a".to_owned()]))
    );
    h.swap_ok("b");
    assert!(h.granted(elevated));
    assert!(!h.ended(third) && !h.ended(fourth));
    h.done(elevated);
    h.swap_ok("a");
    // a is back with two slots: both low waiters, in arrival order.
    assert_eq!(h.grant_order(&[third, fourth]), vec![third, fourth]);
}

#[test]
fn with_the_fence_off_a_freed_slot_is_refilled_and_the_elevated_waiter_waits() {
    let (h, [_, _, elevated, third]) =
        low_traffic_and_elevated_other_model(SchedulerKind::Fifo { drain_fence: false });
    assert!(h.granted(third));
    assert!(!h.ended(elevated));
    assert_eq!(h.s.in_flight("a"), 2);
}

#[test]
fn joiners_of_a_start_beyond_the_limit_wait_ranked_for_a_slot() {
    let mut h = with_parallel(&["a"], "a", 1);
    let starter = h.submit("a", -10);
    let low = h.submit("a", -10);
    let elevated = h.submit("a", 10);
    assert_eq!(h.swaps_of("a"), 1);
    assert_eq!(h.status[&elevated], WaitStatus::Starting);
    h.swap_ok("a");
    // Joiners wait unranked; once the model is ready only one goes, the highest.
    assert_eq!(h.grant_order(&[starter, low, elevated]), vec![elevated]);
    assert_eq!(h.queue_ids(), vec![starter, low]);
    assert_eq!(h.status[&starter], WaitStatus::Queued { position: 1 });
    assert_eq!(h.status[&low], WaitStatus::Queued { position: 2 });
    h.done(elevated);
    h.done(starter);
    assert_eq!(
        h.grant_order(&[starter, low, elevated]),
        vec![elevated, starter, low]
    );
}

#[test]
fn concurrency_limit_counts_slot_waiters_and_requests_in_flight() {
    let mut m = ModelSettings::new("a");
    m.parallel = Parallel::limit(1).unwrap();
    m.concurrency_limit = 3;
    let mut h = Harness::new(settings(vec![m]));
    h.make_ready("a");
    let ids = [h.submit("a", 0), h.submit("a", 0), h.submit("a", 0)];
    assert_eq!(h.s.in_flight("a"), 1);
    assert_eq!(h.s.waiting("a"), 2);
    assert!(matches!(
        h.try_submit("a", 10),
        Err(RouteError::ConcurrencyLimit { .. })
    ));
    h.done(ids[0]);
    assert!(h.try_submit("a", 10).is_ok());
}

#[test]
fn a_cancelled_slot_waiter_leaves_and_counts_return_to_zero() {
    let mut h = with_parallel(&["a"], "a", 1);
    h.make_ready("a");
    let busy = h.submit("a", 0);
    let first = h.submit("a", 0);
    let second = h.submit("a", 0);
    h.cancel(first);
    assert_eq!(h.queue_ids(), vec![second]);
    assert_eq!(h.position(second), Some(1));
    h.done(busy);
    assert!(h.granted(second) && !h.ended(first));
    h.done(second);
    assert_eq!(h.s.reserved("a"), 0);
    assert_eq!(h.s.in_flight("a"), 0);
    assert_eq!(h.s.pending(), 0);
}

#[test]
fn unloading_a_busy_model_fails_its_slot_waiters_and_keeps_the_running_one() {
    let mut h = with_parallel(&["a"], "a", 1);
    h.make_ready("a");
    let busy = h.submit("a", 0);
    let waiter = h.submit("a", 0);
    h.unload(Some(&["a"])).unwrap();
    assert_eq!(
        h.failed(waiter),
        Some(&RouteError::Unloaded { model: "a".into() })
    );
    assert!(h.granted(busy) && h.s.in_flight("a") == 1);
}

#[test]
fn running_models_show_their_requests_in_flight_and_their_limit() {
    let mut h = with_parallel(&["a", "b"], "a", 2);
    h.make_ready("a");
    h.submit("a", 0);
    let running = h.s.running();
    assert_eq!(running.len(), 1);
    assert_eq!((running[0].in_flight, running[0].parallel), (1, Some(2)));
}

#[test]
fn auto_parallel_takes_the_slot_count_the_upstream_reported_at_its_start() {
    let mut m = ModelSettings::new("a");
    m.parallel = Parallel::Auto;
    let mut h = Harness::new(settings(vec![m, ModelSettings::new("b")]));
    assert!(h.s.wants_slots("a"));
    assert!(!h.s.wants_slots("b"));
    assert_eq!(h.s.parallel("a"), None, "no limit before the upstream said");
    let ids = [h.submit("a", 0), h.submit("a", 0)];
    h.s.set_slots("a", Some(1));
    h.swap_ok("a");
    assert_eq!(h.s.parallel("a"), Some(1));
    assert_eq!(h.grant_order(&ids), vec![ids[0]]);
    h.done(ids[0]);
    assert!(h.granted(ids[1]));
}

#[test]
fn auto_parallel_without_a_reported_slot_count_has_no_limit() {
    let mut m = ModelSettings::new("a");
    m.parallel = Parallel::Auto;
    let mut h = Harness::new(settings(vec![m]));
    let ids = [h.submit("a", 0), h.submit("a", 0), h.submit("a", 0)];
    h.s.set_slots("a", None);
    h.swap_ok("a");
    assert_eq!(h.grant_order(&ids), ids);
    // A fixed limit is not changed by a report.
    let mut h = with_parallel(&["a"], "a", 1);
    h.s.set_slots("a", Some(8));
    assert_eq!(h.s.parallel("a"), Some(1));
}
