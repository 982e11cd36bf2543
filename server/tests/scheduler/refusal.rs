//! A granted request whose upstream refused it (it had just crashed) is handed
//! back: held until the exit is processed, then placed again with its identity,
//! its priority and its place; failed when the upstream never exits.

use llama_swap_server::testing::scheduler::{ModelState, REFUSAL_GRACE, RouteError};

use crate::support::{Harness, names};

#[test]
fn a_refused_request_waits_for_the_exit_then_starts_its_model_again() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    assert!(h.granted(id));
    h.refused(id);
    // The exit is not processed yet: the request is held, nothing starts.
    assert!(!h.ended(id));
    assert_eq!(h.swaps_of("a"), 1);
    assert_eq!(
        h.s.in_flight("a"),
        1,
        "it still counts on the instance that refused it"
    );
    assert_eq!(h.s.reserved("a"), 1);
    h.exited("a");
    assert_eq!(h.swaps_of("a"), 2, "the exit restarts the model for it");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Starting));
    h.swap_ok("a");
    assert!(h.granted(id));
}

#[test]
fn a_refused_request_whose_exit_was_processed_is_placed_at_once() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    h.exited("a");
    h.refused(id);
    assert_eq!(h.swaps_of("a"), 2);
    h.swap_ok("a");
    assert!(h.granted(id));
}

#[test]
fn a_refused_request_on_a_model_restarted_since_its_grant_is_served_at_once() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    // The crash was processed and another request already started it again.
    h.exited("a");
    let other = h.submit("a", 0);
    h.swap_ok("a");
    assert!(h.granted(other));
    h.refused(id);
    assert!(h.granted(id), "the new instance serves it without waiting");
    assert_eq!(h.swaps_of("a"), 2);
}

#[test]
fn a_refused_request_keeps_its_place_ahead_of_later_work_of_equal_priority() {
    let mut h = Harness::with_models(&["a", "b"]);
    h.make_ready("a");
    let first = h.submit("a", 0);
    // Later work for b waits: a is in flight and one model runs at a time.
    let later = h.submit("b", 0);
    assert!(!h.ended(later));
    h.refused(first);
    // Held: b does not take its turn while a's exit is pending...
    assert_eq!(h.swaps_of("b"), 0);
    h.exited("a");
    // ...and once it is processed, the refused request (earlier arrival) goes first.
    assert_eq!(h.swaps.last().unwrap().0, "a");
    h.swap_ok("a");
    assert!(h.granted(first));
    assert!(!h.ended(later));
    h.done(first);
    h.swap_ok("b");
    assert!(h.granted(later));
}

#[test]
fn a_refused_request_keeps_its_priority() {
    let mut h = Harness::with_models(&["a", "b"]);
    h.make_ready("a");
    let high = h.submit("a", 10);
    let low = h.submit("b", -10);
    h.refused(high);
    h.exited("a");
    let queue = h.s.queue(h.now);
    // a is starting again for the refused one; the low request still waits.
    assert_eq!(queue.len(), 1);
    assert_eq!(queue[0].id, low);
    h.swap_ok("a");
    assert!(h.granted(high));
    assert_eq!(
        h.s.swap_trigger("b"),
        None,
        "b does not start while the refused request runs"
    );
}

#[test]
fn a_refused_request_whose_upstream_never_exits_fails_after_the_grace() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    h.refused(id);
    assert_eq!(h.s.next_wake(), Some(h.now + REFUSAL_GRACE));
    h.advance(REFUSAL_GRACE);
    h.tick();
    assert_eq!(
        h.failed(id),
        Some(&RouteError::UpstreamRefused { model: "a".into() })
    );
    assert_eq!(h.s.reserved("a"), 0);
    assert_eq!(h.s.next_wake(), None);
}

#[test]
fn a_model_that_refuses_but_never_exits_is_evicted_only_after_the_grace() {
    let mut h = Harness::with_models(&["a", "b"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    h.refused(id);
    let other = h.submit("b", 0);
    assert_eq!(h.swaps_of("b"), 0, "the held request still holds a");
    h.advance(REFUSAL_GRACE);
    h.tick();
    assert_eq!(
        h.failed(id),
        Some(&RouteError::UpstreamRefused { model: "a".into() })
    );
    assert_eq!(h.swaps.last().unwrap(), &("b".to_owned(), names(&["a"])));
    h.swap_ok("b");
    assert!(h.granted(other));
}

#[test]
fn shutdown_and_unload_fail_held_requests() {
    let mut h = Harness::with_models(&["a", "b"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    h.refused(id);
    h.unload(Some(&["a"])).unwrap();
    assert_eq!(
        h.failed(id),
        Some(&RouteError::Unloaded { model: "a".into() })
    );

    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    h.refused(id);
    h.shutdown();
    assert_eq!(h.failed(id), Some(&RouteError::ShuttingDown));
}

#[test]
fn a_held_request_whose_client_left_leaves_no_trace() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    h.refused(id);
    h.cancel(id);
    assert_eq!(h.s.pending(), 0);
    assert_eq!(h.s.next_wake(), None);
    h.exited("a");
    assert_eq!(h.swaps_of("a"), 1, "a withdrawn request starts nothing");
}

#[test]
fn refusing_a_request_that_is_not_served_is_ignored() {
    let mut h = Harness::with_models(&["a"]);
    let id = h.submit("a", 0);
    let mut out = Vec::new();
    h.s.refused(h.now, id, &mut out);
    assert!(out.is_empty());
    h.swap_ok("a");
    assert!(h.granted(id));
}

#[test]
fn a_request_refused_after_shutdown_began_fails_at_once() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    h.shutdown();
    h.refused(id);
    assert_eq!(h.failed(id), Some(&RouteError::ShuttingDown));
    assert_eq!(h.s.pending(), 0);
}
