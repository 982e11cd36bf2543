//! Exact decisions of the memory policy.

use super::*;

const GIB: u64 = 1 << 30;

fn ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("m{i}")).collect()
}

fn memory(gpus: &[u64], reserve: u64, models: &[MemoryModel]) -> Memory {
    let settings = MemorySettings {
        gpus: gpus
            .iter()
            .enumerate()
            .map(|(i, &m)| Gpu {
                id: i as u32,
                memory: m * GIB,
            })
            .collect(),
        reserve: reserve * GIB,
        models: models.to_vec(),
        evict_costs: Vec::new(),
    };
    Memory::new(&ids(models.len()), &settings).unwrap()
}

fn m(gib: u64) -> MemoryModel {
    MemoryModel::new(gib * GIB)
}

fn on(model: usize, gpu: usize, gib: u64) -> Resident {
    Resident::placed(model, vec![gpu], gib * GIB)
}

#[test]
fn a_model_that_fits_beside_the_running_ones_stops_nothing() {
    let mem = memory(&[24], 1, &[m(10), m(10)]);
    let plan = mem.plan(1, &[on(0, 0, 10)]).unwrap();
    assert_eq!(plan.gpus, [0]);
    assert!(plan.evict.is_empty());
    assert!(!plan.waits);
}

#[test]
fn the_reserve_is_kept_free() {
    // 10 + 13 = 23 fits 24, but not 24 less a 2 GiB reserve.
    let mem = memory(&[24], 2, &[m(10), m(13)]);
    assert_eq!(mem.plan(1, &[on(0, 0, 10)]).unwrap().evict, [0]);
}

#[test]
fn the_tightest_gpu_is_chosen_so_large_holes_stay() {
    let mem = memory(&[24, 24], 0, &[m(16), m(6), m(20)]);
    // GPU 0 has 8 free, GPU 1 is empty: the 6 GiB model goes where 2 remain.
    let plan = mem.plan(1, &[on(0, 0, 16)]).unwrap();
    assert_eq!(plan.gpus, [0]);
    // and the 20 GiB model then still finds GPU 1 empty.
    let plan = mem.plan(2, &[on(0, 0, 16), on(1, 0, 6)]).unwrap();
    assert_eq!((plan.gpus.as_slice(), plan.evict.len()), (&[1][..], 0));
}

#[test]
fn a_model_nobody_waits_for_is_stopped_before_one_with_waiters() {
    let mem = memory(&[24], 0, &[m(12), m(12), m(12)]);
    let mut a = on(0, 0, 12);
    a.waiting = Some(-10);
    a.last_used = 1;
    let mut b = on(1, 0, 12);
    b.last_used = 9;
    assert_eq!(mem.plan(2, &[a, b]).unwrap().evict, [1]);
}

#[test]
fn lower_waiting_priority_is_stopped_first() {
    let mem = memory(&[24], 0, &[m(12), m(12), m(12)]);
    let mut a = on(0, 0, 12);
    a.waiting = Some(10);
    let mut b = on(1, 0, 12);
    b.waiting = Some(0);
    b.last_used = 5;
    assert_eq!(mem.plan(2, &[a, b]).unwrap().evict, [1]);
}

#[test]
fn the_least_recently_used_is_stopped_first() {
    let mem = memory(&[24], 0, &[m(12), m(12), m(12)]);
    let mut a = on(0, 0, 12);
    a.last_used = 7;
    let mut b = on(1, 0, 12);
    b.last_used = 3;
    assert_eq!(mem.plan(2, &[a.clone(), b.clone()]).unwrap().evict, [1]);
    b.last_used = 8;
    assert_eq!(mem.plan(2, &[a, b]).unwrap().evict, [0]);
}

#[test]
fn the_evict_cost_breaks_a_tie_of_last_use() {
    let settings = MemorySettings {
        gpus: vec![Gpu {
            id: 0,
            memory: 24 * GIB,
        }],
        reserve: 0,
        models: vec![m(12), m(12), m(12)],
        evict_costs: vec![("m0".into(), 5)],
    };
    let mem = Memory::new(&ids(3), &settings).unwrap();
    let plan = mem.plan(2, &[on(0, 0, 12), on(1, 0, 12)]).unwrap();
    assert_eq!((plan.evict.as_slice(), plan.cost), (&[1][..], 1));
}

#[test]
fn a_busy_model_is_stopped_only_when_nothing_else_frees_enough_and_then_the_plan_waits() {
    let mem = memory(&[24, 24], 0, &[m(20), m(20), m(20)]);
    let mut busy = on(0, 0, 20);
    busy.busy = true;
    // GPU 1's idle model is stopped even though it was used later.
    let mut idle = on(1, 1, 20);
    idle.last_used = 100;
    let plan = mem.plan(2, &[busy.clone(), idle.clone()]).unwrap();
    assert_eq!(
        (plan.gpus.as_slice(), plan.evict.as_slice(), plan.waits),
        (&[1][..], &[1][..], false)
    );
    idle.busy = true;
    let plan = mem.plan(2, &[busy, idle]).unwrap();
    assert!(plan.waits);
    assert_eq!(plan.evict.len(), 1);
}

#[test]
fn a_persistent_model_is_never_stopped() {
    let mut keep = m(20);
    keep.persistent = true;
    let mem = memory(&[24], 0, &[keep, m(20)]);
    assert_eq!(mem.plan(1, &[on(0, 0, 20)]), None);
}

#[test]
fn a_model_on_two_gpus_frees_both() {
    let mut big = m(40);
    big.gpus = 2;
    let mem = memory(&[24, 24], 0, &[m(10), m(10), big]);
    let plan = mem.plan(2, &[on(0, 0, 10), on(1, 1, 10)]).unwrap();
    assert_eq!(
        (plan.gpus.as_slice(), plan.evict.as_slice()),
        (&[0, 1][..], &[0, 1][..])
    );
    // Stopping the spanning model frees room on both GPUs at once.
    let plan = mem
        .plan(0, &[Resident::placed(2, vec![0, 1], 20 * GIB)])
        .unwrap();
    assert_eq!(plan.evict, [2]);
}

#[test]
fn a_model_that_is_not_needed_is_kept_after_all() {
    // Eviction order is 0 (oldest), 1, 2; stopping 0 alone frees too little, 0
    // and 1 together enough, but then 1 alone (12 GiB) would have sufficed.
    let mem = memory(&[24], 0, &[m(4), m(12), m(8), m(12)]);
    let mut r0 = on(0, 0, 4);
    r0.last_used = 1;
    let mut r1 = on(1, 0, 12);
    r1.last_used = 2;
    let mut r2 = on(2, 0, 8);
    r2.last_used = 3;
    let plan = mem.plan(3, &[r0, r1, r2]).unwrap();
    assert_eq!(plan.evict, [1]);
}

#[test]
fn a_sleeping_target_wakes_on_its_own_gpu() {
    let mem = memory(&[24, 24], 0, &[m(20), m(20)]);
    // Model 1 sleeps on GPU 1 holding 1 GiB, beside model 0 there.
    let asleep = on(1, 1, 1);
    let plan = mem.plan(1, &[on(0, 1, 20), asleep]).unwrap();
    assert_eq!(
        (plan.gpus.as_slice(), plan.evict.as_slice()),
        (&[1][..], &[0][..])
    );
}

#[test]
fn a_model_larger_than_any_gpu_is_refused_by_name() {
    let settings = MemorySettings {
        gpus: vec![Gpu {
            id: 0,
            memory: 24 * GIB,
        }],
        reserve: GIB,
        models: vec![m(5), m(24)],
        evict_costs: Vec::new(),
    };
    let err = Memory::new(&ids(2), &settings).unwrap_err();
    assert!(
        matches!(err, MemoryError::TooLarge { ref model, .. } if model == "m1"),
        "{err}"
    );
    let mut two = m(40);
    two.gpus = 3;
    let settings = MemorySettings {
        models: vec![m(5), two],
        ..settings
    };
    assert!(matches!(
        Memory::new(&ids(2), &settings).unwrap_err(),
        MemoryError::NotEnoughGpus {
            wants: 3,
            have: 1,
            ..
        }
    ));
}

#[test]
fn models_that_never_fit_together_conflict() {
    let mem = memory(&[24], 0, &[m(20), m(10), m(4)]);
    assert_eq!(mem.conflicts(0, &[0, 1, 2]), [1]);
    assert_eq!(mem.conflicts(2, &[0, 1, 2]), Vec::<usize>::new());
    let two = memory(&[24, 24], 0, &[m(20), m(10)]);
    assert!(two.conflicts(0, &[1]).is_empty());
}

#[test]
fn subsets_are_every_choice_in_order() {
    assert_eq!(subsets(3, 2), vec![vec![0, 1], vec![0, 2], vec![1, 2]]);
    assert_eq!(subsets(2, 0), vec![Vec::<usize>::new()]);
}

#[test]
fn a_model_that_will_sleep_frees_only_what_it_does_not_keep_asleep() {
    // 24 GiB; a holds 20 and keeps 4 asleep, so putting it to sleep frees 16.
    let mem = memory(&[24], 0, &[m(20), m(18), m(3)]);
    let sleeper = Resident {
        kept: 4 * GIB,
        ..on(0, 0, 20)
    };
    let plan = mem.plan(1, &[sleeper.clone(), on(2, 0, 0)]).unwrap();
    assert_eq!(plan.evict, [0]);
    // 20 + 1 held: freeing a's 16 leaves 24 - 4 - 1 = 19 for b's 18.
    let plan = mem.plan(1, &[sleeper.clone(), on(2, 0, 1)]).unwrap();
    assert_eq!(plan.evict, [0]);
    // With 3 held beside it, 24 - 4 - 3 = 17 < 18: c stops as well.
    let plan = mem.plan(1, &[sleeper, on(2, 0, 3)]).unwrap();
    assert_eq!(plan.evict, [0, 2]);
}

#[test]
fn a_measure_counts_when_larger_than_the_estimate_and_never_beyond_what_its_gpus_hold() {
    let mut mem = memory(&[24, 16], 1, &[m(10), m(10)]);
    // Smaller than configured: the estimate stays.
    assert_eq!(mem.measured(0, 8 * GIB), Some(10 * GIB));
    assert_eq!(mem.model(0).unwrap().memory, 10 * GIB);
    // Larger: counted from now on; a later measure replaces it.
    assert_eq!(mem.measured(0, 14 * GIB), Some(14 * GIB));
    assert_eq!(mem.model(0).unwrap().share(), 14 * GIB);
    assert_eq!(mem.measured(0, 12 * GIB), Some(12 * GIB));
    // More than the largest GPU offers (23 GiB): it can still start again.
    assert_eq!(mem.measured(1, 40 * GIB), Some(23 * GIB));
    assert!(mem.plan(1, &[]).is_some());
    assert_eq!(mem.configured(1), Some(10 * GIB));
    assert_eq!(mem.measured(9, GIB), None);
}
