//! `minResident`: a model that has just become ready is not stopped by a swap
//! for a waiter of the same or lower effective priority before it has been
//! ready that long; a strictly higher waiter (or an aged one) may, unless
//! `minResidentYieldsTo: none`. The window runs out on a tick, and what waited
//! goes then.

use std::time::Duration;

use llama_swap_server::testing::scheduler::{
    ModelSettings, ModelState, ResidencyYield, SchedulerSettings, Tick,
};

use crate::support::{Harness, names};

const WINDOW: Duration = Duration::from_secs(30);

/// One model at a time (the default group); `a` has a 30 s `minResident`.
fn settings() -> SchedulerSettings {
    SchedulerSettings::new(vec![
        ModelSettings {
            min_resident: Some(WINDOW),
            ..ModelSettings::new("a")
        },
        ModelSettings::new("b"),
    ])
}

fn swapped_to_b(h: &Harness) -> bool {
    h.swaps.last() == Some(&("b".to_owned(), names(&["a"])))
}

#[test]
fn an_equal_waiter_waits_until_the_model_has_been_resident_for_min_resident() {
    let mut h = Harness::new(settings());
    h.make_ready("a");
    let id = h.submit("b", 0);
    assert!(!swapped_to_b(&h), "a was stopped inside its window");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
    assert_eq!(h.s.next_wake(), Some(Tick::ZERO + WINDOW));
    h.advance(WINDOW - Duration::from_secs(1));
    h.tick();
    assert!(!swapped_to_b(&h));
    h.advance(Duration::from_secs(1));
    h.tick();
    assert!(swapped_to_b(&h), "{:?}", h.swaps);
    h.swap_ok("b");
    assert!(h.granted(id));
}

#[test]
fn a_lower_waiter_does_not_stop_a_model_that_served_a_higher_request() {
    let mut h = Harness::new(settings());
    let first = h.submit("a", 5);
    h.swap_ok("a");
    assert!(h.granted(first));
    h.done(first);
    h.submit("b", 3);
    assert!(!swapped_to_b(&h));
    h.advance(WINDOW);
    h.tick();
    assert!(swapped_to_b(&h));
}

#[test]
fn a_strictly_higher_waiter_stops_the_model_inside_its_window() {
    let mut h = Harness::new(settings());
    h.make_ready("a");
    let id = h.submit("b", 1);
    assert!(swapped_to_b(&h), "{:?}", h.swaps);
    h.swap_ok("b");
    assert!(h.granted(id));
}

#[test]
fn with_yields_to_none_even_a_higher_waiter_waits_for_the_window() {
    let mut s = settings();
    s.min_resident_yields_to = ResidencyYield::Nobody;
    let mut h = Harness::new(s);
    h.make_ready("a");
    h.submit("b", 100);
    assert!(!swapped_to_b(&h));
    h.advance(WINDOW);
    h.tick();
    assert!(swapped_to_b(&h));
}

#[test]
fn an_aged_waiter_stops_the_model_inside_its_window() {
    let mut s = settings();
    s.models[0].min_resident = Some(Duration::from_secs(600));
    s.aging_after = Some(Duration::from_secs(10));
    let mut h = Harness::new(s);
    h.make_ready("a");
    h.submit("b", 0);
    assert!(!swapped_to_b(&h));
    h.advance(Duration::from_secs(10));
    h.tick();
    assert!(
        swapped_to_b(&h),
        "aging did not lift the guard: {:?}",
        h.swaps
    );
}

#[test]
fn the_guarded_model_keeps_serving_requests_of_its_own_meanwhile() {
    let mut h = Harness::new(settings());
    h.make_ready("a");
    h.submit("b", 0);
    let again = h.submit("a", 0);
    assert!(h.granted(again), "an equal waiter for b does not fence a");
    h.done(again);
    h.advance(WINDOW);
    h.tick();
    assert!(swapped_to_b(&h));
}
