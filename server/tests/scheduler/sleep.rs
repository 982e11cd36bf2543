//! Sleep instead of stop in the scheduler: a swap puts a model with a sleep
//! mode to sleep (`Effect::StartSwap` says it may sleep), the model shows as
//! sleeping, gives its memory back (groups let anything run beside it; the
//! memory router counts only its sleep `memory`), and its next request wakes it
//! with a start. TTL, unload and an exit end a sleeping model for good.

use std::time::Duration;

use llama_swap_server::testing::policy::memory::{Gpu, GpuPool, MemoryModel};
use llama_swap_server::testing::scheduler::{
    Effect, GpuUsage, ModelSettings, ModelState, SchedulerSettings, StopModel,
};

use crate::support::{Harness, names};

const GIB: u64 = 1 << 30;

fn sleepy(id: &str) -> ModelSettings {
    ModelSettings {
        sleep: Some(0),
        ..ModelSettings::new(id)
    }
}

/// The `evict` list of the last swap started for `model`.
fn evicted_by(h: &Harness, model: &str) -> Vec<StopModel> {
    h.log
        .iter()
        .rev()
        .find_map(|e| match e {
            Effect::StartSwap { model: m, evict } if m == model => Some(evict.clone()),
            _ => None,
        })
        .expect("a swap was started")
}

/// One model at a time (the default group); `a` sleeps, `b` and `c` stop.
fn one_at_a_time() -> Harness {
    Harness::new(SchedulerSettings::new(vec![
        sleepy("a"),
        ModelSettings::new("b"),
        ModelSettings::new("c"),
    ]))
}

#[test]
fn a_swap_puts_a_model_with_a_sleep_mode_to_sleep_and_its_next_request_wakes_it() {
    let mut h = one_at_a_time();
    h.make_ready("a");
    h.make_ready("b");
    let evict = evicted_by(&h, "b");
    assert_eq!(evict.len(), 1);
    assert!(evict[0].model == "a" && evict[0].may_sleep, "{evict:?}");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Sleeping));
    let running: Vec<(String, ModelState)> =
        h.s.running()
            .into_iter()
            .map(|m| (m.model, m.state))
            .collect();
    assert_eq!(
        running,
        [
            ("a".to_owned(), ModelState::Sleeping),
            ("b".to_owned(), ModelState::Ready)
        ]
    );
    // Waking is a start; b (no sleep mode) stops.
    let id = h.submit("a", 0);
    assert_eq!(h.s.model_state("a"), Some(ModelState::Starting));
    assert_eq!(h.swaps.last(), Some(&("a".to_owned(), names(&["b"]))));
    assert!(!evicted_by(&h, "a")[0].may_sleep);
    h.swap_ok("a");
    assert!(h.granted(id));
    assert_eq!(h.s.model_state("a"), Some(ModelState::Ready));
    assert_eq!(h.s.model_state("b"), Some(ModelState::Stopped));
}

#[test]
fn a_sleeping_model_is_not_stopped_again_when_another_model_starts() {
    let mut h = one_at_a_time();
    h.make_ready("a");
    h.make_ready("b");
    // c conflicts with a too, but a has given its memory back already.
    h.make_ready("c");
    assert_eq!(h.swaps.last(), Some(&("c".to_owned(), names(&["b"]))));
    assert_eq!(h.s.model_state("a"), Some(ModelState::Sleeping));
}

#[test]
fn ttl_stops_a_sleeping_model_for_good_counted_from_its_last_use() {
    let mut h = Harness::new(SchedulerSettings::new(vec![
        ModelSettings {
            ttl: Some(Duration::from_secs(60)),
            ..sleepy("a")
        },
        ModelSettings::new("b"),
    ]));
    h.make_ready("a");
    h.advance(Duration::from_secs(30));
    h.make_ready("b");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Sleeping));
    assert_eq!(
        h.s.next_wake(),
        Some(llama_swap_server::testing::scheduler::Tick::ZERO + Duration::from_secs(60))
    );
    h.advance(Duration::from_secs(30));
    h.tick();
    let (id, batches) = h.stops.last().cloned().expect("a stop");
    assert_eq!(batches.len(), 1);
    assert_eq!(batches[0][0].model, "a");
    assert!(!batches[0][0].may_sleep, "a TTL stops for good");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopping));
    h.stop_done(id);
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
    assert_eq!(h.s.model_state("b"), Some(ModelState::Ready));
}

#[test]
fn unload_stops_a_sleeping_model() {
    let mut h = one_at_a_time();
    h.make_ready("a");
    h.make_ready("b");
    let stop = h.unload(Some(&["a"])).unwrap().expect("something to stop");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopping));
    h.stop_done(stop);
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
    assert_eq!(h.s.model_state("b"), Some(ModelState::Ready));
}

#[test]
fn a_sleeping_model_whose_process_exits_is_stopped() {
    let mut h = one_at_a_time();
    h.make_ready("a");
    h.make_ready("b");
    h.exited("a");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
    assert_eq!(h.s.running().len(), 1);
}

#[test]
fn a_model_stopped_instead_of_put_to_sleep_shows_as_stopped_once_the_swap_ends() {
    let mut h = one_at_a_time();
    h.make_ready("a");
    h.submit("b", 0);
    assert!(evicted_by(&h, "b")[0].may_sleep);
    // The launcher's release said it stopped a (its sleep call failed).
    h.s.stopped_not_slept("a");
    h.swap_ok("b");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
    assert_eq!(h.s.running().len(), 1);
}

#[test]
fn a_model_that_fell_asleep_and_exited_before_the_swap_ended_shows_as_stopped() {
    let mut h = one_at_a_time();
    h.make_ready("a");
    h.submit("b", 0);
    // a slept, then its process died while b was still starting.
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopping));
    h.exited("a");
    h.swap_ok("b");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
    assert_eq!(h.s.model_state("b"), Some(ModelState::Ready));
}

/// One 24 GiB GPU, 1 GiB reserved: `a` needs 20 GiB and keeps 2 GiB asleep,
/// `b` needs 20 GiB, `small` 2 GiB, `tiny` 1 GiB.
fn one_gpu() -> Harness {
    let sized = |id: &str, memory: u64, sleep: Option<u64>| ModelSettings {
        memory: Some(MemoryModel::new(memory)),
        sleep,
        ..ModelSettings::new(id)
    };
    let mut settings = SchedulerSettings::new(vec![
        sized("a", 20 * GIB, Some(2 * GIB)),
        sized("b", 20 * GIB, None),
        sized("small", 2 * GIB, None),
        sized("tiny", GIB, None),
    ]);
    settings.memory = Some(GpuPool {
        gpus: vec![Gpu {
            id: 0,
            memory: 24 * GIB,
        }],
        reserve: GIB,
        evict_costs: Vec::new(),
    });
    Harness::new(settings)
}

#[test]
fn under_the_memory_router_a_sleeping_model_counts_only_what_it_keeps_asleep() {
    let mut h = one_gpu();
    h.make_ready("a");
    h.advance(Duration::from_secs(1));
    h.make_ready("b");
    assert!(evicted_by(&h, "b")[0].may_sleep);
    assert_eq!(h.s.model_state("a"), Some(ModelState::Sleeping));
    let a = h.s.running().into_iter().find(|m| m.model == "a").unwrap();
    assert_eq!((a.gpus.as_slice(), a.memory), (&[0][..], 2 * GIB));
    assert_eq!(
        h.s.gpu_usage(),
        [GpuUsage {
            id: 0,
            memory: 24 * GIB,
            reserve: GIB,
            used: 22 * GIB,
            free: GIB,
        }]
    );
    // 1 GiB fits beside them.
    h.advance(Duration::from_secs(1));
    h.make_ready("tiny");
    assert_eq!(h.swaps.last(), Some(&("tiny".to_owned(), Vec::new())));
    // 2 GiB does not: the sleeping a (least recently used) stops for good.
    h.advance(Duration::from_secs(1));
    h.make_ready("small");
    let evict = evicted_by(&h, "small");
    assert_eq!(evict.len(), 1);
    assert!(evict[0].model == "a" && !evict[0].may_sleep, "{evict:?}");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
}

/// One 24 GiB GPU, 1 GiB reserved, `a` (20 GiB, 2 GiB asleep) and `others`.
fn one_gpu_with(others: &[(&str, u64)]) -> Harness {
    let mut models = vec![ModelSettings {
        memory: Some(MemoryModel::new(20 * GIB)),
        sleep: Some(2 * GIB),
        ..ModelSettings::new("a")
    }];
    models.extend(others.iter().map(|&(id, gib)| ModelSettings {
        memory: Some(MemoryModel::new(gib * GIB)),
        ..ModelSettings::new(id)
    }));
    let mut settings = SchedulerSettings::new(models);
    settings.memory = Some(GpuPool {
        gpus: vec![Gpu {
            id: 0,
            memory: 24 * GIB,
        }],
        reserve: GIB,
        evict_costs: Vec::new(),
    });
    Harness::new(settings)
}

#[test]
fn a_model_whose_sleep_memory_leaves_too_little_room_is_stopped_not_put_to_sleep() {
    let mut h = one_gpu_with(&[("big", 22)]);
    h.make_ready("a");
    // 2 GiB kept asleep + 22 > 23: only stopping a makes room.
    let id = h.submit("big", 0);
    let evict = evicted_by(&h, "big");
    assert!(evict[0].model == "a" && !evict[0].may_sleep, "{evict:?}");
    h.swap_ok("big");
    assert!(h.granted(id));
    assert_eq!(h.s.model_state("a"), Some(ModelState::Stopped));
}

#[test]
fn a_waking_model_counts_its_whole_memory_so_nothing_starts_into_it() {
    let mut h = one_gpu_with(&[("b", 20), ("c", 10)]);
    h.make_ready("a");
    h.advance(Duration::from_secs(1));
    h.make_ready("b");
    assert_eq!(h.s.model_state("a"), Some(ModelState::Sleeping));
    let stop = h.unload(Some(&["b"])).unwrap().expect("b stops");
    h.stop_done(stop);
    // a wakes where it sleeps (2 GiB held, 18 more needed: it fits).
    h.submit("a", 0);
    assert_eq!(h.s.model_state("a"), Some(ModelState::Starting));
    // c (10 GiB) does not fit beside a waking a (20): it waits for a.
    let c = h.submit("c", 0);
    assert_eq!(h.swaps_of("c"), 0, "c started into a's memory");
    assert!(!h.granted(c));
}
