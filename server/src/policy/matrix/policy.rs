//! The matrix as the scheduler's [`EvictionPolicy`].

use super::Matrix;
use crate::policy::EvictionPolicy;

impl EvictionPolicy for Matrix {
    /// The running models outside the cheapest combination holding `target`
    /// (of equal costs, the one stopping the least recently used);
    /// nothing when `target` itself is among `running`.
    fn evict(
        &self,
        target: usize,
        running: &[usize],
        last_used: &dyn Fn(usize) -> u64,
    ) -> Vec<usize> {
        if target >= self.models.len() {
            return Vec::new();
        }
        let known: Vec<usize> = running
            .iter()
            .copied()
            .filter(|&m| m < self.models.len())
            .collect();
        self.solve_by_use(target, &known, last_used).evict
    }

    /// The models no combination of any set holds together with `target` (all
    /// of them for a model in no set, which runs alone).
    fn conflicts(&self, target: usize, models: &[usize]) -> Vec<usize> {
        if target >= self.models.len() {
            return Vec::new();
        }
        models
            .iter()
            .copied()
            .filter(|&m| m != target && m < self.models.len())
            .filter(|&m| !self.fits_together(&[target, m]))
            .collect()
    }

    fn conflicts_with(&self, target: usize, other: usize) -> bool {
        target != other
            && target < self.models.len()
            && other < self.models.len()
            && !self.fits_together(&[target, other])
    }

    fn explain(
        &self,
        target: usize,
        running: &[usize],
        last_used: &dyn Fn(usize) -> u64,
    ) -> Option<String> {
        if target >= self.models.len() {
            return None;
        }
        let known: Vec<usize> = running
            .iter()
            .copied()
            .filter(|&m| m < self.models.len())
            .collect();
        let solution = self.solve_by_use(target, &known, last_used);
        Some(match solution.set.map(|s| &self.sets[s]) {
            Some(set) => format!(
                "matrix set {} ({}), evict cost {}",
                set.name, set.expr, solution.cost
            ),
            None if known.contains(&target) => "matrix: already running".to_owned(),
            None => format!(
                "matrix: in no set, runs alone, evict cost {}",
                solution.cost
            ),
        })
    }
}
