//! Property tests: the solver against a brute-force oracle that expands every
//! combination of every set.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::{Matrix, MatrixSet, MatrixSettings};

const MODELS: usize = 5;

fn model(i: usize) -> String {
    format!("m{i}")
}

/// A generated expression; `Ref(r)` names the set of rank `r`.
#[derive(Debug, Clone)]
enum Gen {
    Model(usize),
    Ref(usize),
    And(Vec<Gen>),
    Or(Vec<Gen>),
}

impl Gen {
    fn render(&self) -> String {
        match self {
            Gen::Model(m) => model(*m),
            Gen::Ref(r) => format!("+s{r}"),
            Gen::And(children) => Self::join(children, " & "),
            Gen::Or(children) => Self::join(children, " | "),
        }
    }

    fn join(children: &[Gen], op: &str) -> String {
        let parts: Vec<String> = children
            .iter()
            .map(|c| format!("({})", c.render()))
            .collect();
        parts.join(op)
    }

    /// Every combination, in enumeration order (`|` in turn; `&` lexicographic).
    fn expand(&self, sets: &[Gen]) -> Vec<BTreeSet<usize>> {
        match self {
            Gen::Model(m) => vec![BTreeSet::from([*m])],
            Gen::Ref(r) => sets[*r].expand(sets),
            Gen::Or(children) => children.iter().flat_map(|c| c.expand(sets)).collect(),
            Gen::And(children) => {
                let mut acc = vec![BTreeSet::new()];
                for child in children {
                    let right = child.expand(sets);
                    acc = acc
                        .iter()
                        .flat_map(|l| right.iter().map(move |r| l.union(r).copied().collect()))
                        .collect();
                }
                acc
            }
        }
    }

    fn refs(&self, out: &mut Vec<usize>) {
        match self {
            Gen::Model(_) => {}
            Gen::Ref(r) => {
                if !out.contains(r) {
                    out.push(*r);
                }
            }
            Gen::And(children) | Gen::Or(children) => children.iter().for_each(|c| c.refs(out)),
        }
    }
}

/// An expression for the set of rank `rank`, which may reference lower ranks only
/// (so no loops), at most two levels deep and with at most three children a node.
fn expr(rank: usize) -> impl Strategy<Value = Gen> {
    let leaf = if rank == 0 {
        (0..MODELS).prop_map(Gen::Model).boxed()
    } else {
        prop_oneof![4 => (0..MODELS).prop_map(Gen::Model), 1 => (0..rank).prop_map(Gen::Ref)]
            .boxed()
    };
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 2..=3).prop_map(Gen::And),
            prop::collection::vec(inner, 2..=3).prop_map(Gen::Or),
        ]
    })
}

#[derive(Debug, Clone)]
struct Case {
    /// By rank.
    sets: Vec<Gen>,
    /// Definition order: a permutation of ranks.
    order: Vec<usize>,
    costs: Vec<u32>,
    target: usize,
    running: Vec<usize>,
}

fn case() -> impl Strategy<Value = Case> {
    (1_usize..=4)
        .prop_flat_map(|n| {
            let sets: Vec<_> = (0..n).map(expr).collect();
            (
                sets,
                Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
                prop::collection::vec(1_u32..=4, MODELS),
                0..MODELS,
                prop::collection::btree_set(0..MODELS, 0..=MODELS),
            )
        })
        .prop_map(|(sets, order, costs, target, running)| Case {
            sets,
            order,
            costs,
            target,
            running: running.into_iter().collect(),
        })
}

impl Case {
    fn compile(&self) -> Matrix {
        let models: Vec<String> = (0..MODELS).map(model).collect();
        let settings = MatrixSettings {
            vars: Vec::new(),
            evict_costs: (0..MODELS).map(|m| (model(m), self.costs[m])).collect(),
            sets: self
                .order
                .iter()
                .map(|&r| MatrixSet::new(format!("s{r}"), self.sets[r].render()))
                .collect(),
        };
        let known = models.clone();
        Matrix::new(&models, &settings, move |n| {
            known.iter().find(|m| *m == n).cloned()
        })
        .unwrap()
    }

    /// Ranks in solve order: definition order, each set's references (in order of
    /// first mention) before it.
    fn solve_order(&self) -> Vec<usize> {
        fn visit(r: usize, sets: &[Gen], done: &mut Vec<usize>) {
            if done.contains(&r) {
                return;
            }
            let mut refs = Vec::new();
            sets[r].refs(&mut refs);
            for d in refs {
                visit(d, sets, done);
            }
            done.push(r);
        }
        let mut done = Vec::new();
        for &r in &self.order {
            visit(r, &self.sets, &mut done);
        }
        done
    }

    fn cost_outside(&self, combination: &BTreeSet<usize>) -> u64 {
        self.running
            .iter()
            .filter(|m| !combination.contains(m))
            .map(|&m| u64::from(self.costs[m]))
            .sum()
    }

    /// The brute-force answer: (evicted models, winning set's rank, cost).
    fn oracle(&self) -> (Vec<usize>, Option<usize>, u64) {
        if self.running.contains(&self.target) {
            return (Vec::new(), None, 0);
        }
        let mut best: Option<(u64, usize, BTreeSet<usize>)> = None;
        for r in self.solve_order() {
            for combination in self.sets[r].expand(&self.sets) {
                if !combination.contains(&self.target) {
                    continue;
                }
                let cost = self.cost_outside(&combination);
                if best.as_ref().is_none_or(|(b, _, _)| cost < *b) {
                    best = Some((cost, r, combination));
                }
            }
        }
        match best {
            Some((cost, r, combination)) => {
                let evict = self
                    .running
                    .iter()
                    .copied()
                    .filter(|m| !combination.contains(m))
                    .collect();
                (evict, Some(r), cost)
            }
            None => (
                self.running.clone(),
                None,
                self.cost_outside(&BTreeSet::new()),
            ),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn never_evicts_a_model_of_the_chosen_combination_and_pays_the_minimum(case in case()) {
        let matrix = case.compile();
        let running: Vec<String> = case.running.iter().map(|&m| model(m)).collect();
        let choice = matrix.choose(&model(case.target), &running);

        let evicted: BTreeSet<usize> = choice
            .evict
            .iter()
            .map(|e| e[1..].parse::<usize>().unwrap())
            .collect();
        prop_assert!(evicted.iter().all(|e| case.running.contains(e)));
        let kept: BTreeSet<usize> = case
            .running
            .iter()
            .copied()
            .filter(|m| !evicted.contains(m))
            .chain([case.target])
            .collect();
        if let Some(set) = choice.set {
            // Everything kept fits in one combination of the chosen set.
            let rank: usize = set[1..].parse().unwrap();
            let fits = case.sets[rank]
                .expand(&case.sets)
                .iter()
                .any(|c| kept.is_subset(c));
            prop_assert!(fits, "kept {kept:?} fits no combination of {set}");
        }

        let (oracle_evict, oracle_set, oracle_cost) = case.oracle();
        prop_assert_eq!(choice.cost, oracle_cost);
        prop_assert_eq!(evicted.into_iter().collect::<Vec<_>>(), oracle_evict);
        prop_assert_eq!(choice.set.map(|s| s[1..].parse::<usize>().unwrap()), oracle_set);
        prop_assert_eq!(
            choice.cost,
            choice.evict.iter().map(|e| matrix.cost_of(e).unwrap()).sum::<u64>()
        );
    }

    #[test]
    fn models_coexist_exactly_when_one_combination_holds_them_all(
        case in case(),
        wanted in prop::collection::btree_set(0..MODELS, 0..=3),
    ) {
        let matrix = case.compile();
        let names: Vec<String> = wanted.iter().map(|&m| model(m)).collect();
        let expected = wanted.is_empty()
            || case.sets.iter().any(|s| s.expand(&case.sets).iter().any(|c| wanted.is_subset(c)));
        prop_assert_eq!(matrix.can_coexist(&names), expected);
    }
}
