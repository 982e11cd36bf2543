//! The scheduler with the matrix policy: llama-swap's `router/matrix_test.go`
//! (conflicts evicted, set members coexist and load in parallel, incompatible
//! starts queue), the cheapest combination, run-alone models, `+ref`, and
//! priority and the drain fence working unchanged on top.

use llama_swap_server::testing::policy::matrix::{MatrixSet, MatrixSettings};
use llama_swap_server::testing::scheduler::{ModelState, Scheduler, SettingsError, WaitStatus};

use crate::support::{Harness, models, names, settings};

const LOW: i32 = -10;
const HIGH: i32 = 10;

fn matrix(ids: &[&str], sets: &[(&str, &str)], costs: &[(&str, u32)]) -> Harness {
    let mut s = settings(models(ids));
    s.matrix = Some(MatrixSettings {
        vars: Vec::new(),
        evict_costs: costs.iter().map(|(m, c)| ((*m).to_owned(), *c)).collect(),
        sets: sets.iter().map(|(n, e)| MatrixSet::new(*n, *e)).collect(),
    });
    Harness::new(s)
}

fn swap(model: &str, evict: &[&str]) -> (String, Vec<String>) {
    (model.to_owned(), names(evict))
}

#[test]
fn a_swap_evicts_running_models_that_share_no_set_with_the_target() {
    let mut h = matrix(&["a", "b"], &[("s_a", "a"), ("s_b", "b")], &[]);
    h.make_ready("a");
    let id = h.submit("b", 0);
    assert_eq!(h.swaps.last(), Some(&swap("b", &["a"])));
    h.swap_ok("b");
    assert!(h.granted(id));
}

#[test]
fn models_that_share_a_set_run_together() {
    let mut h = matrix(&["a", "b"], &[("s_ab", "a & b")], &[]);
    h.make_ready("a");
    let id = h.submit("b", 0);
    assert_eq!(h.swaps.last(), Some(&swap("b", &[])));
    h.swap_ok("b");
    assert!(h.granted(id));
    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
}

#[test]
fn models_of_one_combination_load_in_parallel() {
    let mut h = matrix(&["a", "b"], &[("s_ab", "a & b")], &[]);
    let first = h.submit("a", 0);
    let second = h.submit("b", 0);
    assert_eq!(
        h.swaps,
        vec![swap("a", &[]), swap("b", &[])],
        "both start at once"
    );
    h.swap_ok("b");
    h.swap_ok("a");
    assert!(h.granted(first) && h.granted(second));
}

#[test]
fn a_request_that_cannot_run_beside_a_starting_model_queues_then_evicts_it() {
    let mut h = matrix(&["a", "b"], &[("s_a", "a"), ("s_b", "b")], &[]);
    let first = h.submit("a", 0);
    // a is only starting, but it counts as running: b must wait to evict it.
    let second = h.submit("b", 0);
    assert_eq!(h.swaps, vec![swap("a", &[])]);
    assert_eq!(h.queue_ids(), vec![second]);
    h.swap_ok("a");
    assert!(h.granted(first));
    assert_eq!(h.swaps.len(), 1, "no eviction of a model that serves");
    h.done(first);
    assert_eq!(h.swaps.last(), Some(&swap("b", &["a"])));
    h.swap_ok("b");
    assert!(h.granted(second));
}

#[test]
fn the_cheapest_combination_decides_what_is_evicted() {
    let mut h = matrix(
        &["a", "b", "c"],
        &[
            ("bc", "b & c"),
            ("a_with_c", "a & c"),
            ("a_with_b", "a & b"),
        ],
        &[("b", 10)],
    );
    h.make_ready("b");
    h.make_ready("c");
    h.submit("a", 0);
    assert_eq!(h.swaps.last(), Some(&swap("a", &["c"])), "b costs 10, c 1");
}

#[test]
fn a_model_in_no_set_runs_alone() {
    let mut h = matrix(&["a", "b", "loner"], &[("ab", "a & b")], &[]);
    h.make_ready("a");
    h.make_ready("b");
    let alone = h.submit("loner", 0);
    assert_eq!(h.swaps.last(), Some(&swap("loner", &["a", "b"])));
    h.swap_ok("loner");
    h.done(alone);
    let back = h.submit("a", 0);
    assert_eq!(h.swaps.last(), Some(&swap("a", &["loner"])));
    h.swap_ok("a");
    assert!(h.granted(back));
}

#[test]
fn a_referenced_set_extends_the_combinations_of_the_set_that_uses_it() {
    let mut h = matrix(
        &["g", "q", "v", "e"],
        &[
            ("llms", "g | q"),
            ("with_tts", "+llms & v"),
            ("mega", "+with_tts & e"),
        ],
        &[],
    );
    h.make_ready("g");
    h.make_ready("v");
    h.submit("e", 0);
    assert_eq!(
        h.swaps.last(),
        Some(&swap("e", &[])),
        "g, v and e fit in mega"
    );
    h.swap_ok("e");
    h.submit("q", 0);
    assert_eq!(
        h.swaps.last(),
        Some(&swap("q", &["g"])),
        "q replaces g; v and e stay"
    );
}

#[test]
fn a_ready_model_is_served_without_a_swap_while_its_set_mates_run() {
    let mut h = matrix(&["a", "b"], &[("s_ab", "a & b")], &[]);
    h.make_ready("a");
    h.make_ready("b");
    let swaps = h.swaps.len();
    let id = h.submit("a", 0);
    assert!(h.granted(id));
    assert_eq!(h.swaps.len(), swaps);
}

#[test]
fn the_swap_reason_names_the_set_and_the_cost() {
    let mut h = matrix(
        &["a", "b", "c"],
        &[("bc", "b & c"), ("pair", "a & (b | c)")],
        &[("c", 3)],
    );
    h.make_ready("b");
    h.make_ready("c");
    assert!(h.s.swap_reason("a").is_none(), "no swap in progress");
    h.submit("a", 0);
    assert_eq!(h.swaps.last(), Some(&swap("a", &["b"])));
    assert_eq!(
        h.s.swap_reason("a"),
        Some("matrix set pair (a & (b | c)), evict cost 1")
    );
}

#[test]
fn an_elevated_request_overtakes_queued_low_ones_under_the_matrix() {
    let mut h = matrix(
        &["a", "b", "c"],
        &[("s_a", "a"), ("s_b", "b"), ("s_c", "c")],
        &[],
    );
    h.make_ready("a");
    let busy = h.submit("a", 0);
    let low = h.submit("b", LOW);
    let high = h.submit("c", HIGH);
    assert_eq!(h.queue_ids(), vec![high, low]);
    h.done(busy);
    assert_eq!(h.swaps.last(), Some(&swap("c", &["a"])));
    h.swap_ok("c");
    assert!(h.granted(high));
    assert!(!h.ended(low));
}

#[test]
fn the_fence_queues_new_low_requests_for_a_model_the_elevated_waiter_cannot_run_beside() {
    let mut h = matrix(&["a", "b"], &[("s_a", "a"), ("s_b", "b")], &[]);
    h.make_ready("a");
    let running = h.submit("a", LOW);
    let high = h.submit("b", HIGH);
    let late_low = h.submit("a", LOW);
    assert!(!h.granted(late_low), "fenced: b needs a stopped");
    assert_eq!(h.queue_ids(), vec![high, late_low]);
    h.done(running);
    assert_eq!(h.swaps.last(), Some(&swap("b", &["a"])));
    h.swap_ok("b");
    assert!(h.granted(high));
}

#[test]
fn the_fence_holds_back_starts_the_elevated_waiter_would_have_to_undo_but_not_set_mates() {
    // a & b run together, c & d run together; the two pairs exclude each other.
    let mut h = matrix(
        &["a", "b", "c", "d"],
        &[("ab", "a & b"), ("cd", "c & d")],
        &[],
    );
    h.make_ready("a");
    let running = h.submit("a", LOW);
    let high = h.submit("c", HIGH);
    // b could start beside a, but c cannot run beside b: fenced.
    let low_b = h.submit("b", LOW);
    assert_eq!(h.s.model_state("b"), Some(ModelState::Stopped));
    assert_eq!(h.queue_ids(), vec![high, low_b]);
    h.done(running);
    assert_eq!(h.swaps.last(), Some(&swap("c", &["a"])));
    h.swap_ok("c");
    assert!(h.granted(high));
    // d runs beside c: a low request for it is not fenced by the waiter-free queue.
    let low_d = h.submit("d", LOW);
    assert_eq!(h.swaps.last(), Some(&swap("d", &[])));
    h.swap_ok("d");
    assert!(h.granted(low_d));
    assert_eq!(
        h.status.get(&low_b).copied(),
        Some(WaitStatus::Queued { position: 1 })
    );
}

#[test]
fn equal_priorities_never_fence_under_the_matrix() {
    let mut h = matrix(&["a", "b"], &[("s_a", "a"), ("s_b", "b")], &[]);
    h.make_ready("a");
    let running = h.submit("a", 0);
    let other = h.submit("b", 0);
    let again = h.submit("a", 0);
    assert!(
        h.granted(again),
        "same priority: the fast path as in llama-swap"
    );
    h.done(running);
    h.done(again);
    assert_eq!(h.swaps.last(), Some(&swap("b", &["a"])));
    h.swap_ok("b");
    assert!(h.granted(other));
}

#[test]
fn a_matrix_that_does_not_compile_is_refused_by_the_scheduler() {
    let mut s = settings(models(&["a"]));
    s.matrix = Some(MatrixSettings {
        sets: vec![MatrixSet::new("s", "a & nope")],
        ..MatrixSettings::default()
    });
    let err = Scheduler::new(&s).unwrap_err();
    assert!(matches!(err, SettingsError::Matrix(_)), "{err:?}");
    assert!(err.to_string().contains("\"nope\""), "{err}");
}

#[test]
fn aliases_name_models_in_sets() {
    let mut s = settings(models(&["a", "b"]));
    s.models[0].aliases = vec!["chat".into()];
    s.matrix = Some(MatrixSettings {
        sets: vec![MatrixSet::new("s", "chat & b")],
        ..MatrixSettings::default()
    });
    let mut h = Harness::new(s);
    h.make_ready("a");
    h.submit("b", 0);
    assert_eq!(h.swaps.last(), Some(&swap("b", &[])));
}

/// x fits beside y (set xy) and beside z (set xz), never beside both; y and z
/// run together (set yz). With y and z up, x evicts y, the cheaper one: a
/// conflict that only exists because of what runs, not in any set.
fn cost_driven() -> Harness {
    let mut h = matrix(
        &["x", "y", "z"],
        &[("yz", "y & z"), ("xy", "x & y"), ("xz", "x & z")],
        &[("z", 5)],
    );
    h.make_ready("y");
    h.make_ready("z");
    h
}

#[test]
fn the_fence_holds_a_model_an_elevated_waiter_must_stop_because_it_is_the_cheapest_to_evict() {
    let mut h = cost_driven();
    let running = h.submit("y", LOW);
    let high = h.submit("x", HIGH);
    assert_eq!(h.queue_ids(), vec![high], "x waits for y to finish");
    let late_low = h.submit("y", LOW);
    assert!(!h.granted(late_low), "fenced: x needs y stopped");
    assert_eq!(h.queue_ids(), vec![high, late_low]);
    h.done(running);
    assert_eq!(h.swaps.last(), Some(&swap("x", &["y"])));
    h.swap_ok("x");
    assert!(h.granted(high));
}

#[test]
fn steady_low_traffic_on_the_cheapest_eviction_does_not_starve_the_elevated_request() {
    let mut h = cost_driven();
    let mut current = h.submit("y", LOW);
    let high = h.submit("x", HIGH);
    for _ in 0..20 {
        let next = h.submit("y", LOW);
        h.done(current);
        if h.status.get(&high) == Some(&WaitStatus::Starting) {
            return;
        }
        current = next;
    }
    panic!("x never started while low traffic kept y busy");
}

#[test]
fn the_cost_driven_fence_lifts_when_the_elevated_waiter_leaves() {
    let mut h = cost_driven();
    let running = h.submit("y", LOW);
    let high = h.submit("x", HIGH);
    let late_low = h.submit("y", LOW);
    assert!(!h.granted(late_low));
    h.cancel(high);
    assert!(h.granted(late_low), "nothing waits for y to stop any more");
    h.done(running);
    h.done(late_low);
}

/// `t` runs beside `a` or beside `b` (equal costs); `a` and `b` run together.
fn either_partner() -> Harness {
    matrix(
        &["a", "b", "t"],
        &[("ab", "a & b"), ("ta", "t & a"), ("tb", "t & b")],
        &[],
    )
}

#[test]
fn of_equal_cost_evictions_the_least_recently_used_model_is_stopped() {
    let mut h = either_partner();
    h.make_ready("a");
    h.advance(std::time::Duration::from_secs(1));
    h.make_ready("b");
    h.advance(std::time::Duration::from_secs(1));
    h.submit("t", 0);
    // Enumeration order alone would keep a (set ta comes first).
    assert_eq!(h.swaps.last(), Some(&swap("t", &["a"])));
}

#[test]
fn using_a_model_again_makes_the_other_the_least_recently_used() {
    let mut h = either_partner();
    h.make_ready("a");
    h.advance(std::time::Duration::from_secs(1));
    h.make_ready("b");
    h.advance(std::time::Duration::from_secs(1));
    let again = h.submit("a", 0);
    assert!(h.granted(again));
    h.done(again);
    h.advance(std::time::Duration::from_secs(1));
    h.submit("t", 0);
    assert_eq!(h.swaps.last(), Some(&swap("t", &["b"])));
}

#[test]
fn a_cheaper_eviction_wins_over_a_less_recently_used_one() {
    let mut h = matrix(
        &["a", "b", "t"],
        &[("ab", "a & b"), ("ta", "t & a"), ("tb", "t & b")],
        &[("a", 5)],
    );
    h.make_ready("a");
    h.advance(std::time::Duration::from_secs(1));
    h.make_ready("b");
    h.submit("t", 0);
    assert_eq!(h.swaps.last(), Some(&swap("t", &["b"])));
}
