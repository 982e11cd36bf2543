//! Property tests: plans against a brute-force oracle over every eviction set.

use proptest::prelude::*;

use super::*;

const UNIT: u64 = 1 << 30;

#[derive(Debug, Clone)]
struct Case {
    gpus: Vec<u64>,
    reserve: u64,
    models: Vec<MemoryModel>,
    /// Start order (model indices), applied when the plan needs no busy model.
    starts: Vec<usize>,
    /// Per model: busy, waiting, last used.
    marks: Vec<(bool, Option<i32>, u64)>,
    target: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (1usize..=3, 0u64..=2).prop_flat_map(|(ngpus, reserve)| {
        let models =
            prop::collection::vec((1u64..=20, 1..=ngpus, prop::bool::weighted(0.15)), 1..=6);
        (
            prop::collection::vec(20u64..=48, ngpus),
            Just(reserve),
            models,
        )
            .prop_flat_map(|(gpus, reserve, models)| {
                let n = models.len();
                let marks = prop::collection::vec(
                    (
                        prop::bool::weighted(0.3),
                        prop::option::of(-2i32..=2),
                        0u64..=20,
                    ),
                    n,
                );
                (
                    Just(gpus),
                    Just(reserve),
                    Just(models),
                    prop::collection::vec(0..n, 0..12),
                    marks,
                    0..n,
                )
            })
            .prop_map(|(gpus, reserve, models, starts, marks, target)| {
                // Shrink models until each fits its GPUs alone.
                let mut sorted = gpus.clone();
                sorted.sort_unstable_by(|a, b| b.cmp(a));
                let models = models
                    .into_iter()
                    .map(|(mem, n, persistent)| {
                        let room = sorted[n - 1].saturating_sub(reserve) * n as u64;
                        MemoryModel {
                            memory: mem.min(room).max(1) * UNIT,
                            gpus: n,
                            persistent,
                        }
                    })
                    .collect();
                Case {
                    gpus,
                    reserve,
                    models,
                    starts,
                    marks,
                    target,
                }
            })
    })
}

fn build(case: &Case) -> (Memory, Vec<Resident>) {
    let ids: Vec<String> = (0..case.models.len()).map(|i| format!("m{i}")).collect();
    let settings = MemorySettings {
        gpus: case
            .gpus
            .iter()
            .enumerate()
            .map(|(i, &g)| Gpu {
                id: i as u32,
                memory: g * UNIT,
            })
            .collect(),
        reserve: case.reserve * UNIT,
        models: case.models.clone(),
        evict_costs: Vec::new(),
    };
    let memory = Memory::new(&ids, &settings).unwrap();
    let mut residents: Vec<Resident> = Vec::new();
    for &s in &case.starts {
        if residents.iter().any(|r| r.model == s) {
            continue;
        }
        if let Some(plan) = memory.plan(s, &residents) {
            residents.retain(|r| !plan.evict.contains(&r.model));
            residents.push(Resident::placed(s, plan.gpus, case.models[s].share()));
        }
    }
    for r in &mut residents {
        let (busy, waiting, last_used) = case.marks[r.model];
        r.busy = busy;
        r.waiting = waiting;
        r.last_used = last_used;
    }
    (memory, residents)
}

/// Memory used per GPU by `residents` without `evict`, plus `target` on `gpus`.
fn used_after(memory: &Memory, residents: &[Resident], target: usize, plan: &Plan) -> Vec<u64> {
    let mut used = vec![0; memory.gpus().len()];
    for r in residents {
        if r.model == target || plan.evict.contains(&r.model) {
            continue;
        }
        for &g in &r.gpus {
            used[g] += r.held;
        }
    }
    for &g in &plan.gpus {
        used[g] += memory.model(target).unwrap().share();
    }
    used
}

fn fits(memory: &Memory, residents: &[Resident], target: usize, plan: &Plan) -> bool {
    used_after(memory, residents, target, plan)
        .iter()
        .enumerate()
        .all(|(g, &u)| u <= memory.usable(g))
}

/// Whether some eviction set of stoppable models (busy ones only if
/// `busy_allowed`) lets `target` fit on some choice of GPUs.
fn oracle(memory: &Memory, residents: &[Resident], target: usize, busy_allowed: bool) -> bool {
    let model = *memory.model(target).unwrap();
    let own: Option<Vec<usize>> = residents
        .iter()
        .find(|r| r.model == target)
        .map(|r| r.gpus.clone());
    let stoppable: Vec<&Resident> = residents
        .iter()
        .filter(|r| {
            r.model != target
                && !memory.model(r.model).unwrap().persistent
                && (busy_allowed || !r.busy)
        })
        .collect();
    let choices = match own {
        Some(g) => vec![g],
        None => subsets(memory.gpus().len(), model.gpus),
    };
    (0u32..(1 << stoppable.len())).any(|mask| {
        let evict: Vec<usize> = stoppable
            .iter()
            .enumerate()
            .filter(|(i, _)| mask & (1 << i) != 0)
            .map(|(_, r)| r.model)
            .collect();
        choices.iter().any(|gpus| {
            let plan = Plan {
                gpus: gpus.clone(),
                evict: evict.clone(),
                waits: false,
                cost: 0,
            };
            fits(memory, residents, target, &plan)
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn placement_never_exceeds_a_gpus_memory_less_its_reserve(case in case()) {
        let (memory, residents) = build(&case);
        // The states built by applying plans respect it too.
        let mut used = vec![0; memory.gpus().len()];
        for r in &residents {
            for &g in &r.gpus { used[g] += r.held; }
        }
        for (g, &u) in used.iter().enumerate() {
            prop_assert!(u <= memory.usable(g));
        }
        if let Some(plan) = memory.plan(case.target, &residents) {
            prop_assert!(fits(&memory, &residents, case.target, &plan));
            prop_assert_eq!(plan.gpus.len(), case.models[case.target].gpus);
        }
    }

    #[test]
    fn a_plan_exists_exactly_when_some_eviction_makes_room(case in case()) {
        let (memory, residents) = build(&case);
        let plan = memory.plan(case.target, &residents);
        prop_assert_eq!(plan.is_some(), oracle(&memory, &residents, case.target, true));
    }

    #[test]
    fn a_busy_model_is_never_stopped_when_room_can_be_made_without_it(case in case()) {
        let (memory, residents) = build(&case);
        if let Some(plan) = memory.plan(case.target, &residents) {
            let busy_in = residents.iter().any(|r| r.busy && plan.evict.contains(&r.model));
            prop_assert_eq!(busy_in, plan.waits);
            if plan.waits {
                prop_assert!(!oracle(&memory, &residents, case.target, false));
            }
        }
    }

    #[test]
    fn persistent_models_and_the_target_are_never_stopped(case in case()) {
        let (memory, residents) = build(&case);
        if let Some(plan) = memory.plan(case.target, &residents) {
            prop_assert!(!plan.evict.contains(&case.target));
            for &e in &plan.evict {
                prop_assert!(!case.models[e].persistent);
                prop_assert!(residents.iter().any(|r| r.model == e));
            }
        }
    }

    #[test]
    fn no_model_is_stopped_that_was_not_needed(case in case()) {
        let (memory, residents) = build(&case);
        if let Some(plan) = memory.plan(case.target, &residents) {
            for &e in &plan.evict {
                let fewer = Plan {
                    evict: plan.evict.iter().copied().filter(|&x| x != e).collect(),
                    ..plan.clone()
                };
                prop_assert!(!fits(&memory, &residents, case.target, &fewer), "{e} was not needed");
            }
        }
    }

    #[test]
    fn a_model_that_fits_as_is_stops_nothing(case in case()) {
        let (memory, residents) = build(&case);
        let free_fit = {
            let plan = memory.plan(case.target, &residents);
            plan.map(|p| p.evict.is_empty())
        };
        let needs_none = oracle_without_eviction(&memory, &residents, case.target);
        if needs_none {
            prop_assert_eq!(free_fit, Some(true));
        }
    }
}

fn oracle_without_eviction(memory: &Memory, residents: &[Resident], target: usize) -> bool {
    let model = *memory.model(target).unwrap();
    let choices = match residents.iter().find(|r| r.model == target) {
        Some(r) => vec![r.gpus.clone()],
        None => subsets(memory.gpus().len(), model.gpus),
    };
    choices.iter().any(|gpus| {
        let plan = Plan {
            gpus: gpus.clone(),
            evict: Vec::new(),
            waits: false,
            cost: 0,
        };
        fits(memory, residents, target, &plan)
    })
}
