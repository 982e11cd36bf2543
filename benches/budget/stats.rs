//! Order statistics. Every published figure is a median over repeated runs; latency
//! percentiles inside one run use the nearest-rank definition.

/// The `q`-quantile (0..=1) of `values` by nearest rank; `None` when empty.
pub(crate) fn quantile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The median of `values` (mean of the two middle ones for an even count).
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let mid = sorted.len() / 2;
    Some(if sorted.len().is_multiple_of(2) {
        (sorted[mid - 1] + sorted[mid]) / 2.0
    } else {
        sorted[mid]
    })
}

/// The arithmetic mean; `None` when empty.
pub(crate) fn mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        None
    } else {
        Some(values.iter().sum::<f64>() / values.len() as f64)
    }
}

/// The median of the `Some` values of per-run figures.
pub(crate) fn median_of(runs: &[Option<f64>]) -> Option<f64> {
    let present: Vec<f64> = runs.iter().flatten().copied().collect();
    median(&present)
}
