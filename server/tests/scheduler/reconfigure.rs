//! `Scheduler::reconfigure`: a reload applied in place keeps waiters in their
//! order, answers the waiters of removed models, keeps the accounting of
//! requests in flight, and stops changed or removed models only once their
//! requests have ended.

use llama_swap_server::testing::scheduler::{
    Effect, ModelState, Parallel, RequestId, Restarts, RouteError, SchedulerKind, WaitStatus,
};

use crate::support::{Harness, group, models, settings};

/// `a` ready with one slot busy, and requests queued behind it at mixed priorities.
fn busy_a_with_queue() -> (Harness, RequestId, Vec<RequestId>) {
    let mut list = models(&["a", "b"]);
    list[0].parallel = Parallel::limit(1).unwrap();
    let mut h = Harness::new(settings(list));
    h.make_ready("a");
    let serving = h.submit("a", 0);
    assert!(h.granted(serving));
    let queued = vec![
        h.submit("a", 0),
        h.submit("a", 5),
        h.submit("a", 0),
        h.submit("a", 10),
    ];
    (h, serving, queued)
}

fn drain_in_order(h: &mut Harness, mut serving: RequestId, count: usize) -> Vec<RequestId> {
    let mut order = Vec::new();
    for _ in 0..count {
        h.done(serving);
        let (next, _) = *h.grants.last().unwrap();
        assert_ne!(next, serving, "nothing was granted after {serving:?}");
        order.push(next);
        serving = next;
    }
    order
}

#[test]
fn waiters_keep_their_order_across_a_reconfigure_that_adds_a_model() {
    let (mut h, serving, queued) = busy_a_with_queue();
    let before = h.s.queue(h.now);

    let mut list = models(&["a", "b", "c"]);
    list[0].parallel = Parallel::limit(1).unwrap();
    h.reconfigure(&settings(list), &[]).unwrap();

    let after = h.s.queue(h.now);
    let ids = |q: &[llama_swap_server::testing::scheduler::QueueEntry]| {
        q.iter().map(|e| (e.id, e.position)).collect::<Vec<_>>()
    };
    assert_eq!(ids(&after), ids(&before));
    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
    assert_eq!(h.s.in_flight("a"), 1);
    assert_eq!(h.s.reserved("a"), 5);
    assert_eq!(h.swaps_of("a"), 1, "a is not restarted");
    assert!(h.stops.is_empty());

    let order = drain_in_order(&mut h, serving, queued.len());
    assert_eq!(order, [queued[3], queued[1], queued[0], queued[2]]);
    assert_eq!(h.swaps_of("a"), 1, "only the first start");
}

#[test]
fn the_waiters_of_a_removed_model_are_answered_removed_and_its_request_in_flight_ends_first() {
    let mut h = Harness::new(settings(models(&["a", "b"])));
    h.make_ready("a");
    let serving = h.submit("a", 0);
    // b cannot start while a serves (one default group): b's request waits.
    let waiting_b = h.submit("b", 0);
    assert!(!h.ended(waiting_b));
    let stops_before = h.stops.len();

    h.reconfigure(&settings(models(&["b"])), &[]).unwrap();
    assert!(h.granted(serving), "the request in flight is not touched");
    assert!(!h.ended(waiting_b), "a kept model's waiter stays");
    assert_eq!(
        h.stops.len(),
        stops_before,
        "nothing is stopped under a request in flight"
    );
    assert!(matches!(
        h.try_submit("a", 0),
        Err(RouteError::UnknownModel { .. })
    ));
    let a = h.s.running().into_iter().find(|m| m.model == "a").unwrap();
    assert_eq!((a.state, a.in_flight), (ModelState::Ready, 1));

    h.done(serving);
    // Its request ended: a is stopped, and b starts once it is gone.
    let (stop, batches) = h.stops.last().cloned().expect("a is stopped");
    assert_eq!(batches[0][0].model, "a");
    assert_eq!(h.swaps_of("b"), 0);
    h.stop_done(stop);
    assert_eq!(h.swaps.last().unwrap(), &("b".to_owned(), vec![]));
    h.swap_ok("b");
    assert!(h.granted(waiting_b));
    assert!(h.s.running().iter().all(|m| m.model != "a"), "a is stopped");
}

#[test]
fn queued_requests_of_a_removed_model_fail_with_a_clear_error() {
    let mut h = Harness::new(settings(models(&["a", "b"])));
    h.make_ready("b");
    let serving_b = h.submit("b", 0);
    let waiting_a = [h.submit("a", 0), h.submit("a", 3)];

    h.reconfigure(&settings(models(&["b"])), &[]).unwrap();
    for id in waiting_a {
        assert_eq!(
            h.failed(id),
            Some(&RouteError::Removed { model: "a".into() })
        );
    }
    assert!(h.granted(serving_b));
    assert_eq!(h.s.queue_len(), 0);
    assert_eq!(h.s.reserved("b"), 1);
    // Removed and stopped: gone from the snapshot.
    assert!(h.s.running().iter().all(|m| m.model != "a"));
}

#[test]
fn a_removed_model_that_is_idle_is_stopped_at_once() {
    let mut h = Harness::new(settings(models(&["a", "b"])));
    h.make_ready("a");
    h.reconfigure(&settings(models(&["b"])), &[]).unwrap();
    let (id, batches) = h.stops.last().cloned().expect("a stop");
    assert_eq!(batches[0][0].model, "a");
    assert_eq!(
        h.s.running()
            .iter()
            .map(|m| (m.model.as_str(), m.state))
            .collect::<Vec<_>>(),
        [("a", ModelState::Stopping)]
    );
    h.stop_done(id);
    assert!(h.s.running().is_empty());
    // The next reload forgets it.
    h.reconfigure(&settings(models(&["b"])), &[]).unwrap();
    assert!(h.s.running().is_empty());
}

#[test]
fn a_changed_model_is_restarted_only_after_its_request_in_flight_ends() {
    let mut h = Harness::new(settings(models(&["a"])));
    h.make_ready("a");
    let serving = h.submit("a", 0);
    h.reconfigure(&settings(models(&["a"])), &["a"]).unwrap();
    assert!(h.s.is_retired("a"));

    // A new request does not get the old process.
    let next = h.submit("a", 0);
    assert!(!h.ended(next));
    assert!(matches!(
        h.status.get(&next),
        Some(WaitStatus::Queued { .. })
    ));
    assert_eq!(h.s.fast_cap(0), None, "no fast grant on the old process");
    assert!(h.stops.is_empty());

    h.done(serving);
    let (stop, batches) = h.stops.last().cloned().expect("the old process is stopped");
    assert_eq!(batches[0][0].model, "a");
    assert_eq!(h.swaps_of("a"), 1, "not started before the old one is gone");
    h.stop_done(stop);
    assert_eq!(
        h.swaps_of("a"),
        2,
        "the new definition starts for the waiter"
    );
    h.swap_ok("a");
    assert!(h.granted(next));
    assert!(!h.s.is_retired("a"));
}

#[test]
fn a_changed_model_that_is_stopped_just_takes_its_new_definition() {
    let mut h = Harness::new(settings(models(&["a"])));
    h.reconfigure(&settings(models(&["a"])), &["a"]).unwrap();
    assert!(!h.s.is_retired("a"));
    let id = h.submit("a", 0);
    h.swap_ok("a");
    assert!(h.granted(id));
    assert!(h.stops.is_empty());
}

#[test]
fn settings_only_changes_keep_the_model_running_and_apply_to_new_requests() {
    let mut h = Harness::new(settings(models(&["a", "b"])));
    h.make_ready("a");
    let mut list = models(&["a", "b"]);
    list[0].aliases = vec!["alpha".into()];
    list[0].priority = Some(7);
    list[0].ttl = Some(std::time::Duration::from_secs(60));
    h.reconfigure(&settings(list), &[]).unwrap();

    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
    assert!(h.stops.is_empty());
    assert_eq!(h.s.resolve("alpha"), Some("a"));
    let id = h.submit("alpha", 0);
    assert!(h.granted(id), "served by the running process");
    assert_eq!(h.swaps_of("a"), 1);
    h.done(id);
    // The new TTL applies to the kept model.
    h.advance(std::time::Duration::from_secs(61));
    h.tick();
    assert_eq!(h.stops.len(), 1);
}

#[test]
fn a_kept_model_moved_into_a_group_with_a_running_model_waits_for_its_requests() {
    // Before: a and b may run together. After: they swap (one default group).
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![group("both", &["a", "b"], false, false, false)];
    let mut h = Harness::new(s);
    h.make_ready("a");
    h.make_ready("b");
    let serving_a = h.submit("a", 0);
    h.reconfigure(&settings(models(&["a", "b"])), &[]).unwrap();
    // Nothing running is preempted: both stay up.
    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
    assert_eq!(h.s.model_state("b"), Some(ModelState::Ready));
    assert!(h.granted(serving_a));
    // A request for b now needs a stopped: it waits for a's request.
    let for_b = h.submit("b", 0);
    assert!(!h.ended(for_b));
    h.done(serving_a);
    assert_eq!(
        h.swaps.last().unwrap(),
        &("b".to_owned(), vec!["a".to_owned()])
    );
}

#[test]
fn invalid_settings_are_refused_and_change_nothing() {
    let (mut h, _serving, queued) = busy_a_with_queue();
    let before = h.s.queue(h.now);
    let mut bad = settings(models(&["a", "b"]));
    bad.models[1].aliases = vec!["a".into()];
    assert!(h.reconfigure(&bad, &[]).is_err());
    assert_eq!(h.s.queue(h.now), before);
    assert_eq!(h.s.reserved("a"), 1 + queued.len());
    assert!(h.take().iter().all(|e| !matches!(e, Effect::Fail { .. })));
}

#[test]
fn the_concurrency_limit_counts_requests_admitted_before_the_reload() {
    let mut list = models(&["a"]);
    list[0].concurrency_limit = 4;
    let mut h = Harness::new(settings(list));
    h.make_ready("a");
    let ids: Vec<RequestId> = (0..3).map(|_| h.submit("a", 0)).collect();
    let mut list = models(&["a"]);
    list[0].concurrency_limit = 3;
    h.reconfigure(&settings(list), &[]).unwrap();
    assert_eq!(h.s.in_flight("a"), 3);
    assert!(matches!(
        h.try_submit("a", 0),
        Err(RouteError::ConcurrencyLimit { .. })
    ));
    h.done(ids[0]);
    assert!(h.try_submit("a", 0).is_ok());
}

#[test]
fn a_switch_to_the_serial_scheduler_keeps_arrival_order() {
    let (mut h, serving, queued) = busy_a_with_queue();
    let mut list = models(&["a", "b"]);
    list[0].parallel = Parallel::limit(1).unwrap();
    let mut s = settings(list);
    s.kind = SchedulerKind::Serial;
    h.reconfigure(&s, &[]).unwrap();
    let order = drain_in_order(&mut h, serving, queued.len());
    assert_eq!(order, queued);
}

mod props {
    use proptest::prelude::*;

    use llama_swap_server::testing::scheduler::{Parallel, RouteError};

    use crate::support::{Harness, group, models, settings};

    const IDS: [&str; 3] = ["a", "b", "c"];

    fn all_settings() -> llama_swap_server::testing::scheduler::SchedulerSettings {
        let mut list = models(&IDS);
        for m in &mut list {
            m.parallel = Parallel::limit(1).unwrap();
            m.concurrency_limit = 100;
        }
        let mut s = settings(list);
        // All may run at once: with one slot each, waiters queue behind requests in flight.
        s.groups = vec![group("all", &IDS, false, false, false)];
        s
    }

    proptest! {
        #[test]
        fn a_reconfigure_keeps_order_and_accounting_and_answers_removed_waiters(
            submits in proptest::collection::vec((0usize..3, -5i32..5), 1..30),
            removed in proptest::option::of(0usize..3),
            restart in proptest::option::of(0usize..3),
        ) {
            let mut h = Harness::new(all_settings());
            for id in IDS {
                h.make_ready(id);
            }
            let mut ids = Vec::new();
            for (m, p) in &submits {
                ids.push((h.submit(IDS[*m], *p), IDS[*m]));
            }
            let before = h.s.queue(h.now);
            let kept: Vec<&str> = IDS.iter().copied().filter(|id| Some(*id) != removed.map(|r| IDS[r])).collect();
            let accounting: Vec<(usize, usize)> = kept.iter().map(|id| (h.s.reserved(id), h.s.in_flight(id))).collect();

            let mut next = all_settings();
            next.models.retain(|m| kept.contains(&m.id.as_str()));
            next.groups = vec![group("all", &kept, false, false, false)];
            let restart: Vec<&str> = restart.map(|r| IDS[r]).into_iter().collect();
            h.reconfigure(&next, &restart).unwrap();

            // Waiters of kept models: same relative order; of the removed one: answered.
            let after: Vec<_> = h.s.queue(h.now).iter().map(|e| e.id).collect();
            let expected: Vec<_> = before.iter().filter(|e| kept.contains(&e.model.as_str())).map(|e| e.id).collect();
            prop_assert_eq!(after, expected);
            for (id, model) in &ids {
                if !kept.contains(model) && before.iter().any(|e| e.id == *id) {
                    prop_assert_eq!(h.failed(*id), Some(&RouteError::Removed { model: (*model).to_owned() }));
                }
            }
            let now: Vec<(usize, usize)> = kept.iter().map(|id| (h.s.reserved(id), h.s.in_flight(id))).collect();
            prop_assert_eq!(now, accounting);
        }
    }
}

fn waits(changed: &[&str], pairs: &[(&str, &str)]) -> Restarts {
    Restarts {
        changed: changed.iter().map(|m| (*m).to_owned()).collect(),
        waits: pairs
            .iter()
            .map(|(n, o)| ((*n).to_owned(), (*o).to_owned()))
            .collect(),
    }
}

#[test]
fn a_new_definition_on_an_old_process_port_does_not_start_while_that_process_is_up() {
    // b's new definition uses the port a's old one holds (`${PORT}`).
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![group("both", &["a", "b"], false, false, false)];
    let mut h = Harness::new(s.clone());
    h.make_ready("a");
    let serving_a = h.submit("a", 0);
    h.reconfigure_restarts(&s, &waits(&["a", "b"], &[("b", "a")]))
        .unwrap();
    let for_b = h.submit("b", 0);
    assert_eq!(h.swaps_of("b"), 0, "b waits for a's old process");
    h.done(serving_a);
    let (stop, _) = h.stops.last().cloned().expect("a's old process stops");
    assert_eq!(h.swaps_of("b"), 0);
    h.stop_done(stop);
    assert_eq!(h.swaps_of("b"), 1);
    h.swap_ok("b");
    assert!(h.granted(for_b));
}

#[test]
fn an_added_model_on_another_port_starts_while_a_changed_model_serves_out() {
    let mut h = Harness::new(settings(models(&["a"])));
    h.make_ready("a");
    let serving = h.submit("a", 0);
    let mut s = settings(models(&["a", "b"]));
    s.groups = vec![group("both", &["a", "b"], false, false, false)];
    h.reconfigure_restarts(&s, &waits(&["a"], &[])).unwrap();
    let for_b = h.submit("b", 0);
    assert_eq!(h.swaps_of("b"), 1, "nothing of b's is held by a");
    h.swap_ok("b");
    assert!(h.granted(for_b));
    assert!(h.granted(serving), "a still serves its request");
    assert!(h.stops.is_empty());
}

#[test]
fn an_added_model_on_a_removed_model_port_waits_for_its_request_to_end() {
    let mut s = settings(models(&["a", "c"]));
    s.groups = vec![group("both", &["a", "c"], false, false, false)];
    let mut h = Harness::new(s);
    h.make_ready("a");
    let serving = h.submit("a", 0);
    let mut s = settings(models(&["b", "c"]));
    s.groups = vec![group("both", &["b", "c"], false, false, false)];
    h.reconfigure_restarts(&s, &waits(&[], &[("b", "a")]))
        .unwrap();
    let for_b = h.submit("b", 0);
    assert_eq!(h.swaps_of("b"), 0);
    h.done(serving);
    let (stop, _) = h.stops.last().cloned().unwrap();
    h.stop_done(stop);
    h.swap_ok("b");
    assert!(h.granted(for_b));
}

#[test]
fn the_waiters_of_a_start_in_progress_go_back_to_the_queue_and_wait_for_the_new_definition() {
    let mut h = Harness::new(settings(models(&["a"])));
    let joined = h.submit("a", 0);
    assert_eq!(h.swaps_of("a"), 1);
    h.reconfigure(&settings(models(&["a"])), &["a"]).unwrap();
    assert!(matches!(
        h.status.get(&joined),
        Some(WaitStatus::Queued { position: 1 })
    ));
    h.swap_ok("a");
    assert!(
        !h.ended(joined),
        "not granted on a start of either definition"
    );
    let (stop, _) = h
        .stops
        .last()
        .cloned()
        .expect("the start's process is stopped");
    h.stop_done(stop);
    assert_eq!(h.swaps_of("a"), 2);
    h.swap_ok("a");
    assert!(h.granted(joined));
}
