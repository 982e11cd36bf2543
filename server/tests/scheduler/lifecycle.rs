//! Model lifecycle in the pure scheduler: unload, shutdown, TTL, exits, determinism.

use std::time::Duration;

use llama_swap_server::testing::scheduler::{
    Effect, ModelSettings, ModelState, RouteError, StopModel,
};

use crate::support::{Harness, models, names, settings};

fn with_timeouts(list: &[(&str, u64)]) -> Harness {
    let ms = list
        .iter()
        .map(|(id, secs)| {
            let mut m = ModelSettings::new(*id);
            m.unload_timeout = Duration::from_secs(*secs);
            m
        })
        .collect();
    let mut s = settings(ms);
    // Let every model run at once so several can be loaded.
    s.groups = vec![crate::support::group(
        "all",
        &list.iter().map(|(id, _)| *id).collect::<Vec<_>>(),
        false,
        false,
        false,
    )];
    Harness::new(s)
}

fn stop(model: &str, secs: u64) -> StopModel {
    StopModel {
        model: model.to_owned(),
        grace: Duration::from_secs(secs),
        may_sleep: false,
    }
}

/// Issue 31 #7: a swap gave its evicted models `healthCheckTimeout` (120 s by
/// default) to stop, so a model ignoring SIGTERM held the swap for minutes.
#[test]
fn a_swap_stops_each_evicted_model_with_its_own_unload_timeout() {
    let ms = [("a", 45), ("c", 3), ("x", 10)]
        .iter()
        .map(|(id, secs)| {
            let mut m = ModelSettings::new(*id);
            m.unload_timeout = Duration::from_secs(*secs);
            m
        })
        .collect();
    let mut s = settings(ms);
    // a and c run together; x (in the exclusive default group) evicts both.
    s.groups = vec![crate::support::group(
        "pair",
        &["a", "c"],
        false,
        true,
        false,
    )];
    let mut h = Harness::new(s);
    h.make_ready("a");
    h.make_ready("c");
    h.submit("x", 0);
    let swap = h.take().into_iter().find_map(|e| match e {
        Effect::StartSwap { model, evict } => Some((model, evict)),
        _ => None,
    });
    assert_eq!(
        swap,
        Some(("x".to_owned(), vec![stop("a", 45), stop("c", 3)]))
    );
}

#[test]
fn unload_stops_smallest_timeout_first_and_equal_timeouts_together() {
    let mut h = with_timeouts(&[("a", 45), ("c", 10), ("e", 25), ("f", 25)]);
    for m in ["a", "c", "e", "f"] {
        h.make_ready(m);
    }
    let id = h
        .unload(Some(&["a", "e", "c", "f"]))
        .unwrap()
        .expect("running");
    assert_eq!(
        h.stops,
        vec![(
            id,
            vec![
                vec![stop("c", 10)],
                vec![stop("e", 25), stop("f", 25)],
                vec![stop("a", 45)]
            ]
        )]
    );
    for m in ["a", "c", "e", "f"] {
        assert_eq!(h.s.model_state(m), Some(ModelState::Stopping));
    }
    h.stop_done(id);
    assert!(h.s.running().is_empty());
}

#[test]
fn unload_of_everything_skips_stopped_models() {
    let mut h = with_timeouts(&[("a", 45), ("c", 25), ("z", 1)]);
    h.make_ready("a");
    h.make_ready("c");
    h.unload(None).unwrap();
    assert_eq!(h.stops[0].1, vec![vec![stop("c", 25)], vec![stop("a", 45)]]);
}

#[test]
fn unload_of_an_unknown_model_changes_nothing() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    assert_eq!(
        h.unload(Some(&["a", "zzz"])),
        Err(RouteError::UnknownModel {
            model: "zzz".into()
        })
    );
    assert!(h.stops.is_empty());
    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
}

#[test]
fn unload_accepts_aliases() {
    let mut m = ModelSettings::new("a");
    m.aliases = names(&["alpha"]);
    let mut h = Harness::new(settings(vec![m]));
    h.make_ready("a");
    h.unload(Some(&["alpha"])).unwrap().expect("a runs");
    assert_eq!(h.stops[0].1[0][0].model, "a");
}

#[test]
fn request_during_an_unload_waits_for_the_stop_then_starts_again() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    let stop = h.unload(Some(&["a"])).unwrap().unwrap();
    let id = h.submit("a", 0);
    assert_eq!(h.swaps.len(), 1, "no start while the stop runs");
    assert_eq!(h.position(id), Some(1));
    h.stop_done(stop);
    assert_eq!(h.swaps.len(), 2);
    h.swap_ok("a");
    assert!(h.granted(id));
}

#[test]
fn a_start_that_succeeds_after_its_unload_is_stopped_not_left_running() {
    let mut h = with_timeouts(&[("a", 5)]);
    let id = h.submit("a", 0);
    assert_eq!(h.swaps_of("a"), 1);
    let unload = h.unload(Some(&["a"])).unwrap().expect("a is starting");
    assert_eq!(
        h.failed(id),
        Some(&RouteError::Unloaded { model: "a".into() })
    );
    // The unload's stop reached the model before its process was up (nothing
    // to stop), then the start finished: a process runs.
    h.stop_done(unload);
    h.swap_ok("a");
    assert_eq!(h.stops.len(), 2, "the started process is stopped");
    let (again, batches) = h.stops[1].clone();
    assert_eq!(batches, vec![vec![stop("a", 5)]]);
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopping));
    h.stop_done(again);
    assert!(h.s.running().is_empty());
}

#[test]
fn a_start_that_fails_after_its_unload_needs_no_stop() {
    let mut h = with_timeouts(&[("a", 5)]);
    h.submit("a", 0);
    let unload = h.unload(Some(&["a"])).unwrap().expect("a is starting");
    h.stop_done(unload);
    h.swap_err(
        "a",
        llama_swap_server::testing::launcher::LaunchError::ShuttingDown,
    );
    assert_eq!(h.stops.len(), 1);
    assert!(h.s.running().is_empty());
}

#[test]
fn shutdown_stops_every_running_model_and_refuses_new_requests() {
    let mut h = with_timeouts(&[("a", 5), ("b", 7)]);
    h.make_ready("a");
    h.make_ready("b");
    let serving = h.submit("a", 0);
    let id = h.shutdown().expect("models run");
    assert_eq!(h.stops, vec![(id, vec![vec![stop("a", 5), stop("b", 7)]])]);
    assert_eq!(h.try_submit("a", 0), Err(RouteError::ShuttingDown));
    assert_eq!(h.unload(None), Err(RouteError::ShuttingDown));
    assert_eq!(h.shutdown(), None, "idempotent");
    // A request served at shutdown still ends normally.
    h.done(serving);
    h.stop_done(id);
    assert_eq!(h.s.pending(), 0);
    assert!(h.s.running().is_empty());
}

#[test]
fn shutdown_with_nothing_running_has_nothing_to_wait_for() {
    let mut h = Harness::with_models(&["a"]);
    assert_eq!(h.shutdown(), None);
    assert!(h.s.is_shutting_down());
}

#[test]
fn exited_model_is_started_again_by_the_next_request() {
    let mut h = Harness::with_models(&["a"]);
    h.make_ready("a");
    h.exited("a");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
    let id = h.submit("a", 0);
    assert_eq!(h.swaps_of("a"), 2);
    h.swap_ok("a");
    assert!(h.granted(id));
}

#[test]
fn exit_report_during_a_start_is_left_to_the_start_result() {
    let mut h = Harness::with_models(&["a"]);
    let id = h.submit("a", 0);
    h.exited("a");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Starting));
    h.swap_ok("a");
    assert!(h.granted(id));
}

fn with_ttl(secs: u64) -> Harness {
    let mut m = ModelSettings::new("a");
    m.ttl = Some(Duration::from_secs(secs));
    Harness::new(settings(vec![m, ModelSettings::new("b")]))
}

#[test]
fn ttl_unloads_an_idle_model() {
    let mut h = with_ttl(60);
    h.make_ready("a");
    assert_eq!(h.s.next_wake(), Some(h.now + Duration::from_secs(60)));
    h.advance(Duration::from_secs(59));
    h.tick();
    assert!(h.stops.is_empty());
    h.advance(Duration::from_secs(1));
    h.tick();
    assert_eq!(h.stops.len(), 1);
    assert_eq!(h.stops[0].1[0][0].model, "a");
    assert_eq!(h.s.next_wake(), None);
}

#[test]
fn ttl_timer_restarts_after_each_request() {
    let mut h = with_ttl(60);
    h.make_ready("a");
    h.advance(Duration::from_secs(50));
    let id = h.submit("a", 0);
    assert_eq!(h.s.next_wake(), None, "no TTL while a request is admitted");
    h.advance(Duration::from_secs(30));
    h.done(id);
    assert_eq!(h.s.next_wake(), Some(h.now + Duration::from_secs(60)));
    h.advance(Duration::from_secs(30));
    h.tick();
    assert!(h.stops.is_empty());
}

#[test]
fn request_arriving_as_ttl_fires_is_served_after_a_restart() {
    let mut h = with_ttl(1);
    h.make_ready("a");
    h.advance(Duration::from_secs(1));
    h.tick();
    let stop = h.stops[0].0;
    let id = h.submit("a", 0);
    assert!(!h.ended(id));
    h.stop_done(stop);
    h.swap_ok("a");
    assert!(h.granted(id), "no request is lost to a TTL unload");
}

#[test]
fn same_script_gives_same_effects() {
    let run = || {
        let mut h = Harness::new(settings(models(&["a", "b", "c"])));
        let ids: Vec<_> = ["a", "b", "c", "a", "c"]
            .iter()
            .map(|m| h.submit(m, 0))
            .collect();
        h.swap_ok("a");
        h.cancel(ids[2]);
        for id in [ids[0], ids[3]] {
            h.done(id);
        }
        h.swap_ok("b");
        h.log
    };
    assert_eq!(run(), run());
}
