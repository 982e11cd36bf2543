//! Solving one query: the combinations of each set projected onto the models that
//! matter to it.
//!
//! A query only cares about a handful of models (the target and the running ones),
//! so each sub-expression is evaluated to the list of distinct *projections* of its
//! combinations onto those models, in the order the expression enumerates them
//! (`|` children in turn; for `&`, earlier children vary slowest). A projection that
//! is contained in one listed before it is dropped: anything built from it is
//! contained in something built, earlier, from the other, and a superset keeps at
//! least as many running models at no more cost. So the first cheapest candidate of
//! the full enumeration always survives, and survives first, which is what makes the
//! answer (tie-breaks included) exactly the brute-force one.

use std::rc::Rc;

use super::{Bits, Matrix, Node};

/// The index-level answer of [`Matrix::solve`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Solution {
    /// Model indices to stop, ascending (so sorted by ID).
    pub(crate) evict: Vec<usize>,
    /// Index (in solve order) of the set that won, if any.
    pub(crate) set: Option<usize>,
    pub(crate) cost: u64,
}

/// Per-query state: which models matter, and each node's projections once computed.
struct Query<'m> {
    matrix: &'m Matrix,
    /// Local bit of each model that matters (by model index).
    bit_of: Vec<Option<usize>>,
    /// The models that matter, over model indices (to skip unrelated sub-expressions).
    relevant: Bits,
    width: usize,
    memo: Vec<Option<Rc<Vec<Bits>>>>,
}

impl<'m> Query<'m> {
    /// A query over `models` (model indices; the first is bit 0, and so on; repeats
    /// are ignored).
    fn new(matrix: &'m Matrix, models: &[usize]) -> (Self, Vec<usize>) {
        let mut bit_of = vec![None; matrix.models.len()];
        let mut relevant = Bits::empty(matrix.models.len());
        let mut distinct = Vec::with_capacity(models.len());
        for &m in models {
            if bit_of[m].is_none() {
                bit_of[m] = Some(distinct.len());
                relevant.insert(m);
                distinct.push(m);
            }
        }
        let query = Self {
            matrix,
            bit_of,
            relevant,
            width: distinct.len(),
            memo: vec![None; matrix.nodes.len()],
        };
        (query, distinct)
    }

    fn eval(&mut self, node: usize) -> Rc<Vec<Bits>> {
        if let Some(done) = &self.memo[node] {
            return Rc::clone(done);
        }
        let states = if self.matrix.support[node].intersects(&self.relevant) {
            match &self.matrix.nodes[node] {
                Node::Leaf(m) => {
                    let mut bits = Bits::empty(self.width);
                    if let Some(bit) = self.bit_of[*m] {
                        bits.insert(bit);
                    }
                    vec![bits]
                }
                Node::Or(children) => {
                    let mut states = Vec::new();
                    for &child in children {
                        for state in self.eval(child).iter() {
                            add(&mut states, state.clone());
                        }
                    }
                    states
                }
                Node::And(children) => {
                    let mut states = vec![Bits::empty(self.width)];
                    for &child in children {
                        let right = self.eval(child);
                        let mut combined = Vec::with_capacity(states.len());
                        for left in &states {
                            for r in right.iter() {
                                add(&mut combined, left.union(r));
                            }
                        }
                        states = combined;
                    }
                    states
                }
            }
        } else {
            // Nothing here matters to the query: every combination projects to nothing.
            vec![Bits::empty(self.width)]
        };
        let states = Rc::new(states);
        self.memo[node] = Some(Rc::clone(&states));
        states
    }
}

/// Appends `candidate` unless a projection listed before it already contains it.
fn add(states: &mut Vec<Bits>, candidate: Bits) {
    if !states.iter().any(|s| candidate.is_subset(s)) {
        states.push(candidate);
    }
}

impl Matrix {
    /// To run model `target` with `running` up (model indices, any order, repeats
    /// and `target` itself allowed): which to stop, from which set, at what cost.
    pub(crate) fn solve(&self, target: usize, running: &[usize]) -> Solution {
        self.solve_by_use(target, running, &|_| 0)
    }

    /// As [`solve`](Self::solve), with combinations of equal cost told apart by
    /// use: the one whose most recently used evicted model was used least
    /// recently wins (`last_used` of a model index: larger is more recent), so
    /// the least recently used model is stopped first (llama-swap #1118).
    /// Still equal, the first in enumeration order wins.
    pub(crate) fn solve_by_use(
        &self,
        target: usize,
        running: &[usize],
        last_used: &dyn Fn(usize) -> u64,
    ) -> Solution {
        if running.contains(&target) {
            return Solution {
                evict: Vec::new(),
                set: None,
                cost: 0,
            };
        }
        let mut models = Vec::with_capacity(running.len() + 1);
        models.push(target);
        models.extend_from_slice(running);
        let (mut query, distinct) = Query::new(self, &models);
        // distinct[0] is the target (bit 0); the rest are the running models.
        let running = &distinct[1..];
        // (cost, the newest use among the evicted: none is best), set, state.
        let mut best: Option<((u64, Option<u64>), usize, Bits)> = None;
        'sets: for (s, set) in self.sets.iter().enumerate() {
            if !self.support[set.root].contains(target) {
                continue;
            }
            for state in query.eval(set.root).iter() {
                if !state.contains(0) {
                    continue;
                }
                let evicted = || {
                    running
                        .iter()
                        .enumerate()
                        .filter(|&(i, _)| !state.contains(i + 1))
                        .map(|(_, &m)| m)
                };
                let cost: u64 = evicted().map(|m| self.costs[m]).sum();
                let key = (cost, evicted().map(last_used).max());
                if best.as_ref().is_none_or(|(b, _, _)| key < *b) {
                    best = Some((key, s, state.clone()));
                    if key == (0, None) {
                        break 'sets;
                    }
                }
            }
        }
        let (cost, set, evict) = match best {
            Some(((cost, _), s, state)) => {
                let evict = running
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| !state.contains(i + 1))
                    .map(|(_, &m)| m)
                    .collect();
                (cost, Some(s), evict)
            }
            None => {
                let evict: Vec<usize> = running.to_vec();
                (evict.iter().map(|&m| self.costs[m]).sum(), None, evict)
            }
        };
        let mut evict = evict;
        evict.sort_unstable();
        Solution { evict, set, cost }
    }

    /// Whether one combination holds every model of `models` (model indices).
    pub(crate) fn fits_together(&self, models: &[usize]) -> bool {
        if models.is_empty() {
            return true;
        }
        let (mut query, distinct) = Query::new(self, models);
        let all = Bits::full(distinct.len());
        let mut needed = Bits::empty(self.models.len());
        for &m in &distinct {
            needed.insert(m);
        }
        self.sets.iter().any(|set| {
            needed.is_subset(&self.support[set.root])
                && query.eval(set.root).iter().any(|s| all.is_subset(s))
        })
    }
}

#[cfg(test)]
impl Matrix {
    /// The projections of set `set` onto `relevant`, in enumeration order, each as
    /// sorted model IDs (what a query over exactly those models sees).
    pub(crate) fn projections(&self, set: &str, relevant: &[&str]) -> Vec<Vec<String>> {
        let indices: Vec<usize> = relevant.iter().filter_map(|r| self.index_of(r)).collect();
        let (mut query, distinct) = Query::new(self, &indices);
        let Some(root) = self.sets.iter().find(|s| s.name == set).map(|s| s.root) else {
            return Vec::new();
        };
        query
            .eval(root)
            .iter()
            .map(|state| {
                let mut names: Vec<String> = distinct
                    .iter()
                    .enumerate()
                    .filter(|&(bit, _)| state.contains(bit))
                    .map(|(_, &m)| self.models[m].clone())
                    .collect();
                names.sort();
                names
            })
            .collect()
    }
}
