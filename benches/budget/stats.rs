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

/// A `confidence` interval of the median of `values`, from their order
/// statistics (no assumption on their distribution): the `k`-th smallest and
/// the `k`-th largest, `k` the largest with P(Binomial(n, ½) < k) ≤ (1 −
/// confidence) / 2. `None` when there are too few values for one.
pub(crate) fn median_interval(values: &[f64], confidence: f64) -> Option<(f64, f64)> {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let tail = (1.0 - confidence) / 2.0;
    // P(B < k) for k = 1, 2, …: the sum of C(n, i) / 2^n for i < k.
    let mut below = 0.0;
    let mut choose = 1.0; // C(n, i)
    let half_n = 0.5f64.powi(i32::try_from(n).ok()?);
    let mut k = 0;
    for i in 0..n {
        below += choose * half_n;
        if below > tail {
            break;
        }
        k = i + 1;
        choose = choose * (n - i) as f64 / (i + 1) as f64;
    }
    if k == 0 || k > n - k + 1 {
        return None;
    }
    Some((sorted[k - 1], sorted[n - k]))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_median_interval_takes_the_order_statistics_of_the_binomial_tails() {
        use super::median_interval;
        let values: Vec<f64> = (1..=24).map(f64::from).collect();
        // n = 24: P(B ≤ 6) = 0.011, P(B ≤ 7) = 0.032, so the 7th from each end.
        assert_eq!(median_interval(&values, 0.95), Some((7.0, 18.0)));
        // n = 10: P(B ≤ 1) = 0.011, P(B ≤ 2) = 0.055: the 2nd from each end.
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(median_interval(&ten, 0.95), Some((2.0, 9.0)));
        // Five values cannot give 95%: P(B = 0) = 0.031 > 0.025.
        assert_eq!(median_interval(&[1.0, 2.0, 3.0, 4.0, 5.0], 0.95), None);
    }
}
