//! `GET /api/metrics/stats`: totals over the kept history and histograms of
//! the prompt and generation speeds, in llama-swap's shape.

use serde::Serialize;

use super::Finished;

/// Fewest and most bins of a histogram.
const MIN_BINS: usize = 5;
const MAX_BINS: usize = 20;

/// Totals and speed histograms of the kept requests (of one model, or all).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct ActivityStats {
    /// Requests kept.
    pub total_requests: u64,
    /// Prompt tokens of those requests.
    pub total_input_tokens: u64,
    /// Generated tokens.
    pub total_output_tokens: u64,
    /// Prompt tokens served from a cache.
    pub total_cache_tokens: u64,
    /// Prompt speeds (tokens per second) of the requests that reported one.
    pub prompt_histogram: Option<Histogram>,
    /// Generation speeds.
    pub gen_histogram: Option<Histogram>,
}

/// The spread of one speed: equal-width bins between the lowest and highest
/// value (Sturges' count, from 5 to 20), and percentiles interpolated
/// linearly between ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Histogram {
    /// Values per bin, lowest first.
    pub bins: Vec<u64>,
    /// The lowest value.
    pub min: f64,
    /// The highest value.
    pub max: f64,
    /// The width of a bin (0 when every value is the same, in one bin).
    #[serde(rename = "binSize")]
    pub bin_size: f64,
    /// The median.
    pub p50: f64,
    /// The 95th percentile.
    pub p95: f64,
    /// The 99th percentile.
    pub p99: f64,
}

/// Adds rows up, one at a time.
#[derive(Debug, Default)]
pub(crate) struct StatsBuilder {
    stats: ActivityStats,
    prompt: Vec<f64>,
    generation: Vec<f64>,
}

impl StatsBuilder {
    /// Counts one row.
    pub(crate) fn add(&mut self, row: &Finished) {
        self.add_values(
            row.prompt_tokens.unwrap_or(0),
            row.completion_tokens.unwrap_or(0),
            row.cached_tokens.unwrap_or(0),
            row.prompt_per_second,
            row.tokens_per_second,
        );
    }

    /// Counts one row given by its values.
    pub(crate) fn add_values(
        &mut self,
        input: u64,
        output: u64,
        cached: u64,
        prompt_speed: Option<f64>,
        gen_speed: Option<f64>,
    ) {
        let s = &mut self.stats;
        s.total_requests += 1;
        s.total_input_tokens = s.total_input_tokens.saturating_add(input);
        s.total_output_tokens = s.total_output_tokens.saturating_add(output);
        s.total_cache_tokens = s.total_cache_tokens.saturating_add(cached);
        // A speed of 0 or less means none was reported.
        if let Some(v) = prompt_speed.filter(|v| *v > 0.0 && v.is_finite()) {
            self.prompt.push(v);
        }
        if let Some(v) = gen_speed.filter(|v| *v > 0.0 && v.is_finite()) {
            self.generation.push(v);
        }
    }

    /// The totals and histograms.
    pub(crate) fn finish(mut self) -> ActivityStats {
        self.stats.prompt_histogram = histogram(self.prompt);
        self.stats.gen_histogram = histogram(self.generation);
        self.stats
    }
}

fn histogram(mut values: Vec<f64>) -> Option<Histogram> {
    values.sort_by(f64::total_cmp);
    let (&min, &max) = (values.first()?, values.last()?);
    let (p50, p95, p99) = (
        percentile(&values, 50.0),
        percentile(&values, 95.0),
        percentile(&values, 99.0),
    );
    if min == max {
        return Some(Histogram {
            bins: vec![values.len() as u64],
            min,
            max,
            bin_size: 0.0,
            p50,
            p95,
            p99,
        });
    }
    // Sturges: ceil(log2(n)) + 1 bins, kept within 5 to 20.
    let sturges = values.len().next_power_of_two().trailing_zeros() as usize + 1;
    let count = sturges.clamp(MIN_BINS, MAX_BINS);
    // Bin counts are tiny; the float conversions are exact.
    #[allow(clippy::cast_precision_loss)]
    let bin_size = (max - min) / count as f64;
    let mut bins = vec![0u64; count];
    for v in &values {
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let index = (((v - min) / bin_size).floor() as usize).min(count - 1);
        bins[index] += 1;
    }
    Some(Histogram {
        bins,
        min,
        max,
        bin_size,
        p50,
        p95,
        p99,
    })
}

/// The `p`th percentile of sorted `values`, between the two nearest ranks.
fn percentile(values: &[f64], p: f64) -> f64 {
    match values {
        [] => 0.0,
        [only] => *only,
        _ => {
            #[allow(clippy::cast_precision_loss)]
            let rank = p / 100.0 * (values.len() - 1) as f64;
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let (lower, upper) = (rank.floor() as usize, rank.ceil() as usize);
            let fraction = rank - rank.floor();
            values[lower] + fraction * (values[upper] - values[lower])
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn totals_add_up_and_speeds_make_histograms() {
        let mut b = StatsBuilder::default();
        for i in 1..=10u32 {
            b.add_values(10, 20, 3, Some(f64::from(i) * 100.0), None);
        }
        b.add_values(5, 0, 0, Some(0.0), Some(-1.0));
        let stats = b.finish();
        assert_eq!(stats.total_requests, 11);
        assert_eq!(
            (
                stats.total_input_tokens,
                stats.total_output_tokens,
                stats.total_cache_tokens
            ),
            (105, 200, 30)
        );
        assert_eq!(
            stats.gen_histogram, None,
            "no generation speed was reported"
        );
        let h = stats.prompt_histogram.unwrap();
        assert_eq!((h.min, h.max), (100.0, 1000.0));
        // 10 values: ceil(log2 10) + 1 = 5 bins of 180.
        assert_eq!(h.bins, [2, 2, 2, 2, 2]);
        assert_eq!(h.bin_size, 180.0);
        assert_eq!(h.p50, 550.0);
        assert!((h.p95 - 955.0).abs() < 1e-9, "{}", h.p95);
        assert!((h.p99 - 991.0).abs() < 1e-9, "{}", h.p99);
    }

    #[test]
    fn equal_speeds_fill_one_bin_and_bins_are_at_most_twenty() {
        let mut b = StatsBuilder::default();
        for _ in 0..3 {
            b.add_values(0, 0, 0, None, Some(42.0));
        }
        let h = b.finish().gen_histogram.unwrap();
        assert_eq!(
            (h.bins.as_slice(), h.bin_size, h.p99),
            (&[3][..], 0.0, 42.0)
        );
        let mut b = StatsBuilder::default();
        for i in 1..=100_000u32 {
            b.add_values(0, 0, 0, None, Some(f64::from(i)));
        }
        let h = b.finish().gen_histogram.unwrap();
        assert_eq!(h.bins.len(), 18);
        assert_eq!(h.bins.iter().sum::<u64>(), 100_000);
        let mut b = StatsBuilder::default();
        for i in 1..=2_000_000u32 {
            b.add_values(0, 0, 0, None, Some(f64::from(i)));
        }
        assert_eq!(b.finish().gen_histogram.unwrap().bins.len(), 20);
    }

    #[test]
    fn the_shape_is_llama_swaps() {
        let json = serde_json::to_value(StatsBuilder::default().finish()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "total_requests": 0, "total_input_tokens": 0, "total_output_tokens": 0,
                "total_cache_tokens": 0, "prompt_histogram": null, "gen_histogram": null
            })
        );
    }
}
