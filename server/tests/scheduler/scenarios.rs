//! llama-swap's scheduler and group scenarios (reference sections 3.1 and 3.3),
//! re-expressed against the pure scheduler.

use llama_swap_server::testing::launcher::LaunchError;
use llama_swap_server::testing::policy::PolicyError;
use llama_swap_server::testing::scheduler::{
    CONCURRENCY_RETRY_AFTER, Effect, ModelSettings, ModelState, RouteError, Scheduler,
    SettingsError, Tick, WaitStatus,
};

use crate::support::{Harness, group, models, names, settings};

// ---- 3.1: the FIFO scheduler -------------------------------------------------------

#[test]
fn fast_path_serves_ready_model_without_a_swap() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    assert_eq!(
        h.take(),
        vec![Effect::Grant {
            id,
            model: "a".into()
        }]
    );
}

#[test]
fn admission_reports_config_priority_of_the_model() {
    let mut m = ModelSettings::new("a");
    m.priority = Some(7);
    let mut s = Scheduler::new(&settings(vec![m])).unwrap();
    let admitted = s
        .submit(Tick::ZERO, "a", 0.into(), &mut Vec::new())
        .unwrap();
    assert_eq!(admitted.effective_priority, 7);
    assert_eq!(admitted.model, "a");
}

#[test]
fn unknown_model_is_rejected_without_effects() {
    let mut h = Harness::with_models(&["a"]);
    assert_eq!(
        h.try_submit("nope", 0),
        Err(RouteError::UnknownModel {
            model: "nope".into()
        })
    );
    assert!(h.take().is_empty());
    assert_eq!(h.s.pending(), 0);
}

#[test]
fn stopped_model_is_started_then_served() {
    let mut h = Harness::with_models(&["a"]);
    let id = h.submit("a", 0);
    assert_eq!(h.swaps, vec![("a".to_owned(), vec![])]);
    assert!(!h.granted(id));
    assert_eq!(h.status[&id], WaitStatus::Starting);
    h.swap_ok("a");
    assert!(h.granted(id));
}

#[test]
fn requests_for_a_starting_model_join_its_swap() {
    let mut h = Harness::with_models(&["a"]);
    let ids = [h.submit("a", 0), h.submit("a", 0), h.submit("a", 0)];
    assert_eq!(h.swaps_of("a"), 1);
    h.swap_ok("a");
    assert!(ids.iter().all(|id| h.granted(*id)));
    assert_eq!(h.grant_order(&ids), ids);
}

#[test]
fn failed_start_fails_every_waiter() {
    let mut h = Harness::with_models(&["a"]);
    let ids = [h.submit("a", 0), h.submit("a", 0)];
    let error = LaunchError::HealthCheckTimeout {
        model: "a".into(),
        timeout: std::time::Duration::from_secs(5),
    };
    h.swap_err("a", error.clone());
    for id in ids {
        assert_eq!(h.failed(id), Some(&RouteError::StartFailed(error.clone())));
    }
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
    assert_eq!(h.s.reserved("a"), 0);
}

#[test]
fn evicting_request_queues_until_the_busy_model_drains() {
    let mut h = Harness::with_models(&["a", "b"]);
    let a = h.submit("a", 0);
    let b = h.submit("b", 0);
    assert_eq!(h.swaps_of("b"), 0);
    assert_eq!(h.position(b), Some(1));
    h.swap_ok("a");
    assert!(h.granted(a));
    assert_eq!(h.swaps_of("b"), 0, "b must not start while a serves");
    h.done(a);
    assert_eq!(h.swaps.last(), Some(&("b".to_owned(), names(&["a"]))));
    assert_eq!(h.status[&b], WaitStatus::Starting);
}

#[test]
fn disjoint_swaps_run_in_parallel() {
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![
        group("g1", &["a"], true, false, false),
        group("g2", &["b"], true, false, false),
    ];
    let mut h = Harness::new(s);
    h.submit("a", 0);
    h.submit("b", 0);
    assert_eq!(
        h.swaps,
        vec![("a".to_owned(), vec![]), ("b".to_owned(), vec![])]
    );
}

#[test]
fn swaps_evicting_the_same_model_run_one_after_the_other() {
    // x is shared: a and b both evict it, but not each other.
    let mut s = settings(models(&["a", "b", "x"]));
    // a and b are exclusive (they evict x) but persistent (they never evict each other).
    s.groups = vec![
        group("ga", &["a"], true, true, true),
        group("gb", &["b"], true, true, true),
        group("gx", &["x"], true, false, false),
    ];
    let mut h = Harness::new(s);
    h.make_ready("x");
    h.swaps.clear();
    let a = h.submit("a", 0);
    let b = h.submit("b", 0);
    assert_eq!(h.swaps, vec![("a".to_owned(), names(&["x"]))]);
    assert_eq!(h.position(b), Some(1));
    h.swap_ok("a");
    assert!(h.granted(a));
    assert_eq!(h.swaps.last(), Some(&("b".to_owned(), vec![])));
}

#[test]
fn drain_after_a_swap_starts_every_request_that_no_longer_collides() {
    // a (exclusive) evicts b and c; b and c (non-exclusive) evict nobody.
    let mut s = settings(models(&["a", "b", "c"]));
    s.groups = vec![
        group("ga", &["a"], true, true, false),
        group("gb", &["b"], true, false, false),
        group("gc", &["c"], true, false, false),
    ];
    let mut h = Harness::new(s);
    h.make_ready("b");
    h.make_ready("c");
    let a = h.submit("a", 0);
    assert_eq!(h.swaps.last(), Some(&("a".to_owned(), names(&["b", "c"]))));
    let b = h.submit("b", 0);
    let c = h.submit("c", 0);
    assert_eq!((h.position(b), h.position(c)), (Some(1), Some(2)));
    h.swap_ok("a");
    assert!(h.granted(a));
    assert_eq!(h.swaps_of("b"), 2);
    assert_eq!(h.swaps_of("c"), 2);
    assert_eq!(h.s.queue_len(), 0);
}

#[test]
fn interleaved_requests_collate_into_one_swap_per_model() {
    let mut h = Harness::with_models(&["a", "b", "c"]);
    let ids: Vec<_> = ["a", "b", "c", "a", "b", "c"]
        .iter()
        .map(|m| h.submit(m, 0))
        .collect();
    for m in ["a", "b", "c"] {
        h.swap_ok(m);
        let serving: Vec<_> = h
            .grants
            .iter()
            .filter(|(_, g)| g == m)
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(serving.len(), 2, "{m} serves both of its requests together");
        for id in serving {
            h.done(id);
        }
    }
    for m in ["a", "b", "c"] {
        assert_eq!(h.swaps_of(m), 1, "{m} was loaded once");
        assert_eq!(h.grants_of(m), 2);
    }
    assert!(ids.iter().all(|id| h.granted(*id)));
    assert_eq!(h.s.pending(), 0);
}

#[test]
fn no_swap_while_the_evicted_model_serves() {
    let mut h = Harness::with_models(&["a", "b"]);
    h.make_ready("a");
    let a1 = h.submit("a", 0);
    let a2 = h.submit("a", 0);
    let b = h.submit("b", 0);
    assert!(h.granted(a1) && h.granted(a2));
    h.done(a1);
    assert_eq!(h.swaps_of("b"), 0);
    h.done(a2);
    assert_eq!(h.swaps_of("b"), 1);
    assert_eq!(h.status[&b], WaitStatus::Starting);
}

#[test]
fn shutdown_fails_every_waiter_in_swaps_and_queue() {
    // c evicts a and b; a and b run in parallel (non-exclusive, separate groups).
    let mut s = settings(models(&["a", "b", "c"]));
    s.groups = vec![
        group("ga", &["a"], true, false, false),
        group("gb", &["b"], true, false, false),
        group("gc", &["c"], true, true, false),
    ];
    let mut h = Harness::new(s);
    let waiters = [
        h.submit("a", 0),
        h.submit("a", 0),
        h.submit("b", 0),
        h.submit("b", 0),
        h.submit("c", 0),
    ];
    assert_eq!(h.swaps.len(), 2);
    assert_eq!(h.s.queue_len(), 1);
    h.shutdown();
    for id in waiters {
        assert_eq!(h.failed(id), Some(&RouteError::ShuttingDown));
    }
}

#[test]
fn unload_fails_swap_waiters_and_stops_the_model_once() {
    let mut h = Harness::with_models(&["a"]);
    let ids = [h.submit("a", 0), h.submit("a", 0)];
    let stop = h.unload(Some(&["a"])).unwrap().expect("a is starting");
    for id in ids {
        assert_eq!(
            h.failed(id),
            Some(&RouteError::Unloaded { model: "a".into() })
        );
    }
    assert_eq!(h.stops.len(), 1);
    assert_eq!(h.stops[0].1.len(), 1);
    assert_eq!(h.stops[0].1[0][0].model, "a");
    assert_eq!(
        h.stops[0].1[0][0].grace,
        crate::support::model("a").unload_timeout
    );
    // The aborted start reports after the stop; the model ends stopped and nobody is served.
    h.stop_done(stop);
    h.swap_err("a", LaunchError::Aborted { model: "a".into() });
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
    assert!(h.grants.is_empty());
}

#[test]
fn unload_fails_only_the_queued_requests_of_that_model() {
    let mut h = Harness::with_models(&["a", "b"]);
    let a = h.submit("a", 0);
    let b = h.submit("b", 0);
    assert_eq!(h.unload(Some(&["b"])), Ok(None), "b is not running");
    assert_eq!(
        h.failed(b),
        Some(&RouteError::Unloaded { model: "b".into() })
    );
    assert!(!h.ended(a));
    assert_eq!(h.swaps_of("b"), 0);
    h.swap_ok("a");
    assert!(h.granted(a));
}

#[test]
fn queue_is_ordered_by_model_priority_then_arrival() {
    let mut ms = models(&["a", "b", "c", "d", "z"]);
    for (m, p) in ms.iter_mut().zip([10, 5, 5, 1, 0]) {
        m.priority = Some(p);
    }
    let mut h = Harness::new(settings(ms));
    h.submit("z", 0);
    let b = h.submit("b", 0);
    let d = h.submit("d", 0);
    let c = h.submit("c", 0);
    let a = h.submit("a", 0);
    assert_eq!(h.queue_ids(), vec![a, b, c, d]);
}

#[test]
fn cancelled_queued_request_never_starts_its_model() {
    let mut h = Harness::with_models(&["a", "b"]);
    let a = h.submit("a", 0);
    let b = h.submit("b", 0);
    h.cancel(b);
    assert_eq!(h.s.queue_len(), 0);
    h.swap_ok("a");
    h.done(a);
    assert_eq!(h.swaps_of("b"), 0);
    assert!(
        !h.ended(b),
        "a cancelled request gets no outcome from the scheduler"
    );
    assert_eq!(h.s.reserved("b"), 0);
}

#[test]
fn cancelled_swap_waiter_is_not_served() {
    let mut h = Harness::with_models(&["a"]);
    let live = h.submit("a", 0);
    let gone = h.submit("a", 0);
    h.cancel(gone);
    h.swap_ok("a");
    assert!(h.granted(live));
    assert!(!h.ended(gone));
    assert_eq!(h.grants.len(), 1);
}

#[test]
fn cancel_after_grant_is_a_no_op() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let id = h.submit("a", 0);
    h.cancel(id);
    assert_eq!(h.s.in_flight("a"), 1);
    assert_eq!(h.s.queue_len(), 0);
    h.done(id);
    assert_eq!(h.s.reserved("a"), 0);
}

fn limited(limit: usize) -> Harness {
    let mut m = ModelSettings::new("a");
    m.concurrency_limit = limit;
    Harness::new(settings(vec![m, ModelSettings::new("b")]))
}

#[test]
fn over_the_limit_is_rejected_with_a_retry_hint() {
    let mut h = limited(1);
    h.make_ready("a");
    let first = h.submit("a", 0);
    assert_eq!(
        h.try_submit("a", 0),
        Err(RouteError::ConcurrencyLimit {
            model: "a".into(),
            retry_after: CONCURRENCY_RETRY_AFTER
        })
    );
    assert!(CONCURRENCY_RETRY_AFTER > std::time::Duration::ZERO);
    h.done(first);
    let third = h.submit("a", 0);
    assert!(h.granted(third));
}

#[test]
fn default_concurrency_limit_is_ten() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    for _ in 0..10 {
        let id = h.submit("a", 0);
        assert!(h.granted(id));
    }
    assert!(matches!(
        h.try_submit("a", 0),
        Err(RouteError::ConcurrencyLimit { .. })
    ));
    assert!(
        h.outcomes
            .values()
            .all(|o| *o == crate::support::Outcome::Granted)
    );
}

#[test]
fn custom_limit_counts_swap_waiters() {
    let mut h = limited(2);
    h.submit("a", 0);
    h.submit("a", 0);
    assert!(matches!(
        h.try_submit("a", 0),
        Err(RouteError::ConcurrencyLimit { .. })
    ));
    assert_eq!(h.swaps_of("a"), 1);
    h.swap_ok("a");
    assert_eq!(h.grants_of("a"), 2);
}

#[test]
fn queued_requests_hold_their_reservation() {
    let mut h = limited(2);
    let b = h.submit("b", 0);
    h.swap_ok("b");
    h.submit("a", 0);
    h.submit("a", 0);
    assert!(matches!(
        h.try_submit("a", 0),
        Err(RouteError::ConcurrencyLimit { .. })
    ));
    assert_eq!(h.s.queue_len(), 2);
    h.done(b);
    assert_eq!(h.swaps_of("a"), 1);
    h.swap_ok("a");
    assert_eq!(h.grants_of("a"), 2);
}

#[test]
fn cancelled_queued_request_releases_its_reservation() {
    let mut h = limited(1);
    h.submit("b", 0);
    let queued = h.submit("a", 0);
    assert!(matches!(
        h.try_submit("a", 0),
        Err(RouteError::ConcurrencyLimit { .. })
    ));
    h.cancel(queued);
    h.submit("a", 0);
    assert_eq!(h.s.queue_len(), 1);
}

// ---- 3.3: groups ---------------------------------------------------------------------

#[test]
fn model_in_two_groups_is_refused() {
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![
        group("g1", &["a"], true, true, false),
        group("g2", &["a", "b"], true, true, false),
    ];
    assert!(matches!(
        Scheduler::new(&s),
        Err(SettingsError::Groups(PolicyError::ModelInTwoGroups { .. }))
    ));
}

#[test]
fn swap_group_stops_the_previous_model() {
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![group("g", &["a", "b"], true, true, false)];
    let mut h = Harness::new(s);
    h.make_ready("a");
    let b = h.submit("b", 0);
    assert_eq!(
        h.swaps,
        vec![("a".into(), vec![]), ("b".into(), names(&["a"]))]
    );
    h.swap_ok("b");
    assert!(h.granted(b));
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
}

#[test]
fn non_swap_group_keeps_the_previous_model() {
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![group("g", &["a", "b"], false, false, false)];
    let mut h = Harness::new(s);
    h.make_ready("a");
    h.submit("b", 0);
    h.swap_ok("b");
    assert!(h.evicted().is_empty());
    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
}

#[test]
fn exclusive_group_stops_models_of_other_groups() {
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![
        group("g1", &["a"], true, true, false),
        group("g2", &["b"], true, true, false),
    ];
    let mut h = Harness::new(s);
    h.make_ready("a");
    h.submit("b", 0);
    assert_eq!(h.evicted(), names(&["a"]));
}

#[test]
fn non_exclusive_groups_load_in_parallel() {
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![
        group("g1", &["a"], true, false, false),
        group("g2", &["b"], true, false, false),
    ];
    let mut h = Harness::new(s);
    let a = h.submit("a", 0);
    let b = h.submit("b", 0);
    assert_eq!(h.swaps.len(), 2, "both start before either is ready");
    h.swap_ok("b");
    h.swap_ok("a");
    assert!(h.granted(a) && h.granted(b));
    assert!(h.evicted().is_empty());
}

#[test]
fn same_swap_group_serialises_starts() {
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![group("g", &["a", "b"], true, false, false)];
    let mut h = Harness::new(s);
    let a = h.submit("a", 0);
    let b = h.submit("b", 0);
    assert_eq!(h.swaps_of("b"), 0, "b waits for a's start");
    h.swap_ok("a");
    h.done(a);
    assert_eq!(h.swaps.last(), Some(&("b".into(), names(&["a"]))));
    h.swap_ok("b");
    assert!(h.granted(b));
    assert_eq!(h.evicted(), names(&["a"]), "a stopped exactly once");
}

#[test]
fn persistent_group_is_not_evicted() {
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![
        group("p", &["a"], true, false, true),
        group("x", &["b"], true, true, false),
    ];
    let mut h = Harness::new(s);
    h.make_ready("a");
    h.submit("b", 0);
    h.swap_ok("b");
    assert!(h.evicted().is_empty());
    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
}

#[test]
fn non_exclusive_group_does_not_unload_an_exclusive_one() {
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![
        group("g1", &["a"], true, true, false),
        group("g2", &["b"], true, false, false),
    ];
    let mut h = Harness::new(s);
    h.make_ready("a");
    h.submit("b", 0);
    h.swap_ok("b");
    assert!(h.evicted().is_empty());
    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
    assert_eq!(h.swaps_of("b"), 1);
}

// ---- settings validation ----------------------------------------------------------------

#[test]
fn alias_naming_another_model_is_refused() {
    let mut a = ModelSettings::new("a");
    a.aliases = vec!["b".into()];
    assert_eq!(
        Scheduler::new(&settings(vec![a, ModelSettings::new("b")])).unwrap_err(),
        SettingsError::AmbiguousName {
            name: "b".into(),
            first: "b".into(),
            second: "a".into()
        }
    );
}

#[test]
fn zero_concurrency_limit_and_duplicate_models_are_refused() {
    let mut a = ModelSettings::new("a");
    a.concurrency_limit = 0;
    assert_eq!(
        Scheduler::new(&settings(vec![a])).unwrap_err(),
        SettingsError::ZeroConcurrencyLimit { model: "a".into() }
    );
    assert_eq!(
        Scheduler::new(&settings(models(&["a", "a"]))).unwrap_err(),
        SettingsError::DuplicateModel { model: "a".into() }
    );
}

#[test]
fn requests_by_alias_use_the_model() {
    let mut a = ModelSettings::new("a");
    a.aliases = vec!["alpha".into()];
    let mut h = Harness::new(settings(vec![a]));
    h.submit("alpha", 0);
    assert_eq!(h.swaps, vec![("a".to_owned(), vec![])]);
    assert_eq!(h.s.resolve("alpha"), Some("a"));
}
