//! Priority semantics (docs/DESIGN.md section 2): the five behaviours, the drain fence,
//! queue positions and the serial scheduler, against the pure scheduler.

use std::time::Duration;

use llama_swap_server::testing::scheduler::{
    Effect, ModelSettings, RouteError, Scheduler, SchedulerKind, SettingsError, Tick, WaitStatus,
};

use crate::support::{Harness, models, names, settings};

const LOW: i32 = -10;
const HIGH: i32 = 10;

fn with_priorities(list: &[(&str, i32)]) -> Harness {
    let ms = list
        .iter()
        .map(|(id, p)| {
            let mut m = ModelSettings::new(*id);
            m.priority = Some(*p);
            m
        })
        .collect();
    Harness::new(settings(ms))
}

/// The model of the first swap started after `from` swaps.
fn next_swap(h: &Harness, from: usize) -> Option<&str> {
    h.swaps.get(from).map(|(m, _)| m.as_str())
}

// ---- the five behaviours --------------------------------------------------------------

#[test]
fn high_priority_waiter_dispatched_before_earlier_low() {
    let mut h = Harness::with_models(&["a", "b", "c"]);
    h.make_ready("a");
    let running = h.submit("a", 0);
    let low = h.submit("b", LOW);
    let high = h.submit("c", HIGH);
    assert_eq!(h.queue_ids(), vec![high, low]);
    let before = h.swaps.len();
    h.done(running);
    assert_eq!(next_swap(&h, before), Some("c"));
    h.swap_ok("c");
    assert!(h.granted(high));
    assert!(!h.ended(low));
}

#[test]
fn equal_priority_keeps_arrival_order() {
    let mut h = Harness::with_models(&["a", "b", "c"]);
    h.make_ready("a");
    let running = h.submit("a", 0);
    let first = h.submit("b", 5);
    let second = h.submit("c", 5);
    let third = h.submit("b", 5);
    assert_eq!(h.queue_ids(), vec![first, second, third]);
    let before = h.swaps.len();
    h.done(running);
    // b starts for `first`, and `third` (same model) joins that start.
    assert_eq!(next_swap(&h, before), Some("b"));
    assert_eq!(h.status[&third], WaitStatus::Starting);
    h.swap_ok("b");
    assert_eq!(h.grant_order(&[first, second, third]), vec![first, third]);
}

#[test]
fn running_low_request_is_not_preempted_by_high() {
    let mut h = Harness::with_models(&["a", "b", "c"]);
    h.make_ready("a");
    let low_running = h.submit("a", LOW);
    let low_waiting = h.submit("c", LOW);
    let swaps_before = h.swaps.len();
    let high = h.submit("b", HIGH);
    assert_eq!(
        h.swaps.len(),
        swaps_before,
        "no swap while the low request runs"
    );
    assert!(
        h.stops.is_empty(),
        "nothing is stopped under a running request"
    );
    assert_eq!(h.s.in_flight("a"), 1);
    assert_eq!(h.position(high), Some(1));
    h.done(low_running);
    assert_eq!(
        next_swap(&h, swaps_before),
        Some("b"),
        "high is first out of the queue"
    );
    h.swap_ok("b");
    assert!(h.granted(high));
    assert!(!h.ended(low_waiting));
}

#[test]
fn config_model_priority_applies_without_header() {
    let mut h = with_priorities(&[("a", 0), ("b", 0), ("c", 5)]);
    h.make_ready("a");
    let running = h.submit("a", 0);
    let plain = h.submit("b", 0);
    let configured = h.submit("c", 0);
    assert_eq!(h.queue_ids(), vec![configured, plain]);
    let before = h.swaps.len();
    h.done(running);
    assert_eq!(next_swap(&h, before), Some("c"));
}

#[test]
fn effective_priority_is_max_of_config_and_header() {
    let mut h = with_priorities(&[("a", 0), ("b", 0), ("c", 5)]);
    h.make_ready("a");
    let running = h.submit("a", 0);
    let header_three = h.submit("b", 3);
    let header_minus_ten = h.submit("c", -10);
    let entries = h.s.queue(h.now);
    assert_eq!(entries[0].id, header_minus_ten);
    assert_eq!(entries[0].requested_priority, -10);
    assert_eq!(entries[0].effective_priority, 5);
    assert_eq!(entries[1].id, header_three);
    assert_eq!(entries[1].effective_priority, 3);
    let before = h.swaps.len();
    h.done(running);
    assert_eq!(next_swap(&h, before), Some("c"));

    let mut s = Scheduler::new(&settings(vec![{
        let mut m = ModelSettings::new("c");
        m.priority = Some(5);
        m
    }]))
    .unwrap();
    let raised = s
        .submit(Tick::ZERO, "c", 9.into(), &mut Vec::new())
        .unwrap();
    assert_eq!(
        raised.effective_priority, 9,
        "the header can raise the floor"
    );
}

#[test]
fn low_header_ranks_below_no_header_when_the_model_has_no_floor() {
    // Without a configured floor the header alone ranks: Low (-10) must not collapse
    // to Normal (0), or the SDK's Low tier would mean nothing.
    let mut h = Harness::with_models(&["a", "b", "c"]);
    h.make_ready("a");
    let running = h.submit("a", 0);
    let low = h.submit("b", LOW);
    let normal = h.submit("c", 0);
    let entries = h.s.queue(h.now);
    assert_eq!(entries[0].id, normal);
    assert_eq!(entries[1].id, low);
    assert_eq!(entries[1].requested_priority, LOW);
    assert_eq!(entries[1].effective_priority, LOW);
    let before = h.swaps.len();
    h.done(running);
    assert_eq!(next_swap(&h, before), Some("c"));
}

#[test]
fn an_explicit_zero_floor_lifts_low_headers_to_zero() {
    let mut h = with_priorities(&[("a", 0), ("b", 0)]);
    h.make_ready("a");
    let _running = h.submit("a", 0);
    let _low = h.submit("b", LOW);
    let entries = h.s.queue(h.now);
    assert_eq!(entries[0].effective_priority, 0);
}

// ---- the drain fence --------------------------------------------------------------------

#[test]
fn fence_makes_new_low_requests_for_the_loaded_model_queue_behind_elevated_waiter() {
    let mut h = Harness::with_models(&["a", "b"]);
    h.make_ready("a");
    let running = h.submit("a", LOW);
    let high = h.submit("b", HIGH);
    let late_low = h.submit("a", LOW);
    assert!(
        !h.granted(late_low),
        "fenced: a is ready but an elevated waiter needs it stopped"
    );
    assert_eq!(h.queue_ids(), vec![high, late_low]);
    let before = h.swaps.len();
    h.done(running);
    assert_eq!(h.swaps.get(before), Some(&("b".to_owned(), names(&["a"]))));
    h.swap_ok("b");
    assert!(h.granted(high));
    h.done(high);
    // Now the fenced request starts a again.
    assert_eq!(h.swaps.last(), Some(&("a".to_owned(), names(&["b"]))));
    h.swap_ok("a");
    assert!(h.granted(late_low));
}

/// Steady low traffic to a loaded model: every new request arrives while the
/// previous one still runs. Returns whether the elevated request for b was started
/// while traffic still flowed.
fn steady_low_traffic(kind: SchedulerKind) -> (bool, usize) {
    let mut h = Harness::with_kind(settings(models(&["a", "b"])), kind);
    h.make_ready("a");
    let mut current = h.submit("a", LOW);
    let high = h.submit("b", HIGH);
    let mut served_low_after_high = 0;
    for _ in 0..100 {
        let next = h.submit("a", LOW);
        if h.granted(next) {
            served_low_after_high += 1;
        }
        h.done(current);
        if h.status.get(&high) == Some(&WaitStatus::Starting) {
            return (true, served_low_after_high);
        }
        current = next;
    }
    (false, served_low_after_high)
}

#[test]
fn fence_bounds_the_wait_of_elevated_request_to_running_work() {
    let (started, low_served_meanwhile) =
        steady_low_traffic(SchedulerKind::Fifo { drain_fence: true });
    assert!(started, "b starts as soon as the running request on a ends");
    assert_eq!(low_served_meanwhile, 0);
}

#[test]
fn without_fence_steady_low_traffic_starves_elevated_request() {
    let (started, low_served_meanwhile) =
        steady_low_traffic(SchedulerKind::Fifo { drain_fence: false });
    assert!(
        !started,
        "llama-swap behaviour: the fast path keeps a busy forever"
    );
    assert_eq!(low_served_meanwhile, 100);
}

#[test]
fn fence_never_triggers_with_equal_priorities() {
    let mut h = Harness::with_models(&["a", "b"]);
    h.make_ready("a");
    let running = h.submit("a", 0);
    let waiting = h.submit("b", 0);
    let same = h.submit("a", 0);
    assert!(
        h.granted(same),
        "equal priority: fast path as in llama-swap"
    );
    h.done(running);
    assert!(!h.ended(waiting));
    h.done(same);
    assert_eq!(h.status[&waiting], WaitStatus::Starting);
}

#[test]
fn fence_does_not_hold_requests_at_or_above_the_waiter_priority() {
    let mut h = Harness::with_models(&["a", "b"]);
    h.make_ready("a");
    h.submit("a", LOW);
    h.submit("b", 5);
    let equal = h.submit("a", 5);
    let higher = h.submit("a", 7);
    assert!(h.granted(equal) && h.granted(higher));
}

#[test]
fn fenced_requests_go_when_the_elevated_waiter_leaves() {
    let mut h = Harness::with_models(&["a", "b"]);
    h.make_ready("a");
    h.submit("a", LOW);
    let high = h.submit("b", HIGH);
    let fenced = h.submit("a", LOW);
    assert!(!h.granted(fenced));
    h.cancel(high);
    assert!(h.granted(fenced), "the fence lifts with its cause");
}

/// b (exclusive) must stop a and c; a and c (non-exclusive) can run together. a serves
/// a low request, an elevated request for b waits for it, then a low request for c
/// arrives. Returns the harness and the swaps started before a's request ended.
fn low_start_behind_elevated_waiter(kind: SchedulerKind) -> (Harness, Vec<(String, Vec<String>)>) {
    let mut s = settings(models(&["a", "b", "c"]));
    s.groups = vec![
        crate::support::group("ga", &["a"], true, false, false),
        crate::support::group("gb", &["b"], true, true, false),
        crate::support::group("gc", &["c"], true, false, false),
    ];
    let mut h = Harness::with_kind(s, kind);
    h.make_ready("a");
    h.swaps.clear();
    let running = h.submit("a", LOW);
    h.submit("b", HIGH);
    h.submit("c", LOW);
    let before = h.swaps.clone();
    h.done(running);
    (h, before)
}

#[test]
fn fence_keeps_low_request_from_starting_a_model_the_elevated_waiter_must_stop() {
    let (h, before) = low_start_behind_elevated_waiter(SchedulerKind::Fifo { drain_fence: true });
    assert!(
        before.is_empty(),
        "c is not started while b waits: b would have to stop it"
    );
    assert_eq!(
        h.swaps[0],
        ("b".to_owned(), names(&["a"])),
        "b starts as soon as a is free"
    );
}

#[test]
fn without_fence_low_request_starts_a_model_the_elevated_waiter_must_then_wait_for() {
    let (mut h, before) =
        low_start_behind_elevated_waiter(SchedulerKind::Fifo { drain_fence: false });
    assert_eq!(before, vec![("c".to_owned(), vec![])]);
    h.swap_ok("c");
    // c now serves, so b must also wait for c's request, not only a's.
    assert_eq!(h.swaps.len(), 1, "b is still not started");
    assert_eq!(h.s.in_flight("c"), 1);
}

// ---- queue positions ----------------------------------------------------------------------

#[test]
fn positions_go_up_when_higher_priority_work_arrives() {
    let mut h = Harness::with_models(&["a", "b", "c"]);
    h.make_ready("a");
    h.submit("a", 0);
    let low = h.submit("b", LOW);
    assert_eq!(h.position(low), Some(1));
    let high = h.submit("c", HIGH);
    assert_eq!(h.position(high), Some(1));
    assert_eq!(h.position(low), Some(2), "positions can go up");
}

#[test]
fn positions_are_reported_only_when_they_change() {
    let mut h = Harness::with_models(&["a", "b", "c"]);
    h.make_ready("a");
    let running = h.submit("a", 0);
    let first = h.submit("b", 5);
    h.take();
    let second = h.submit("c", 0);
    let statuses: Vec<_> = h
        .take()
        .into_iter()
        .filter(|e| matches!(e, Effect::Positions { .. }))
        .collect();
    assert_eq!(
        statuses,
        vec![Effect::Positions {
            changes: vec![(second, 2)]
        }],
        "the request ahead keeps position 1 and hears nothing"
    );
    h.cancel(first);
    assert_eq!(h.position(second), Some(1));
    h.done(running);
    assert_eq!(h.status[&second], WaitStatus::Starting);
}

#[test]
fn queue_snapshot_lists_waiters_in_position_order_with_wait_time() {
    let mut h = Harness::with_models(&["a", "b", "c"]);
    h.make_ready("a");
    h.submit("a", 0);
    let b = h.submit("b", 0);
    h.advance(Duration::from_millis(250));
    let c = h.submit("c", 3);
    h.advance(Duration::from_millis(750));
    let q = h.s.queue(h.now);
    assert_eq!(q.len(), 2);
    assert_eq!((q[0].id, q[0].position, q[0].model.as_str()), (c, 1, "c"));
    assert_eq!(q[0].waited, Duration::from_millis(750));
    assert_eq!((q[1].id, q[1].position, q[1].model.as_str()), (b, 2, "b"));
    assert_eq!(q[1].waited, Duration::from_millis(1000));
}

// ---- serial ---------------------------------------------------------------------------------

fn serial(ids: &[&str]) -> Harness {
    Harness::with_kind(settings(models(ids)), SchedulerKind::Serial)
}

#[test]
fn serial_rejects_a_non_zero_priority() {
    let mut h = serial(&["a"]);
    assert_eq!(
        h.try_submit("a", 10),
        Err(RouteError::PriorityNotSupported { priority: 10 })
    );
    assert_eq!(
        h.try_submit("a", -1),
        Err(RouteError::PriorityNotSupported { priority: -1 })
    );
    assert!(h.try_submit("a", 0).is_ok());
    assert_eq!(h.s.reserved("a"), 1);
}

#[test]
fn serial_refuses_configured_priorities() {
    let mut m = ModelSettings::new("a");
    m.priority = Some(3);
    let mut s = settings(vec![m]);
    s.kind = SchedulerKind::Serial;
    assert_eq!(
        Scheduler::new(&s).unwrap_err(),
        SettingsError::PriorityWithSerial {
            model: "a".into(),
            priority: 3
        }
    );
}

#[test]
fn serial_serves_one_request_at_a_time_in_arrival_order() {
    let mut h = serial(&["a", "b"]);
    h.make_ready("a");
    let ids = [h.submit("a", 0), h.submit("b", 0), h.submit("a", 0)];
    assert!(h.granted(ids[0]));
    assert!(
        !h.ended(ids[1]) && !h.ended(ids[2]),
        "one at a time even for a ready model"
    );
    assert_eq!(h.position(ids[1]), Some(1));
    assert_eq!(h.position(ids[2]), Some(2));
    h.done(ids[0]);
    assert_eq!(h.swaps.last(), Some(&("b".to_owned(), names(&["a"]))));
    h.swap_ok("b");
    assert!(h.granted(ids[1]));
    assert_eq!(h.position(ids[2]), Some(1));
    h.done(ids[1]);
    h.swap_ok("a");
    h.done(ids[2]);
    assert_eq!(h.grant_order(&ids), ids);
    assert_eq!(h.s.pending(), 0);
}

#[test]
fn a_request_that_could_join_a_start_does_not_overtake_an_equal_one_held_by_the_fence() {
    use crate::support::group;
    // a and b run together; c runs alone (its group is exclusive).
    let mut s = settings(models(&["a", "b", "c"]));
    s.groups = vec![
        group("pair", &["a", "b"], false, false, false),
        group("solo", &["c"], true, true, false),
    ];
    let mut h = Harness::new(s);
    h.submit("a", -10);
    let elevated = h.submit("c", 0);
    // b cannot run beside c, whose waiter ranks higher: the fence holds it.
    let first = h.submit("b", -10);
    // A request of c's rank may start b (beside the starting a).
    let starter = h.submit("b", 0);
    assert_eq!(h.swaps.last(), Some(&("b".to_owned(), Vec::new())));
    // Another -10 for b arrives while b starts: it must not go before `first`.
    let second = h.submit("b", -10);
    h.swap_ok("b");
    assert_eq!(
        h.grant_order(&[starter, first, second]),
        [starter, first, second]
    );
    assert!(!h.granted(elevated));
}
