//! Summaries of latency samples: nearest-rank percentiles.

use std::time::Duration;

/// A summary of a set of latency samples, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Summary {
    /// The number of samples.
    pub(crate) n: usize,
    /// The nearest-rank median.
    pub(crate) median_ns: u64,
    /// The nearest-rank 99th percentile.
    pub(crate) p99_ns: u64,
    /// The smallest sample.
    pub(crate) min_ns: u64,
    /// The largest sample.
    pub(crate) max_ns: u64,
}

impl Summary {
    /// Summarizes `samples` (in any order). `None` if there are none.
    pub(crate) fn of(samples: &[u64]) -> Option<Summary> {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        Some(Summary {
            n: sorted.len(),
            median_ns: nearest_rank(&sorted, 50.0)?,
            p99_ns: nearest_rank(&sorted, 99.0)?,
            min_ns: *sorted.first()?,
            max_ns: *sorted.last()?,
        })
    }

    /// This median over `floor`'s median.
    pub(crate) fn over(&self, floor: &Summary) -> f64 {
        self.median_ns as f64 / floor.median_ns.max(1) as f64
    }

    /// The median in microseconds.
    pub(crate) fn median_us(&self) -> f64 {
        self.median_ns as f64 / 1e3
    }

    /// The 99th percentile in microseconds.
    pub(crate) fn p99_us(&self) -> f64 {
        self.p99_ns as f64 / 1e3
    }
}

/// The nearest-rank `p`-th percentile (0 < p <= 100) of ascending `sorted`
/// samples: the smallest sample such that at least `p` percent of the
/// samples are less than or equal to it, i.e. the sample of 1-based rank
/// `ceil(p / 100 * n)`. `None` if there are no samples.
pub(crate) fn nearest_rank(sorted: &[u64], p: f64) -> Option<u64> {
    debug_assert!(p > 0.0 && p <= 100.0, "percentile {p} out of (0, 100]");
    debug_assert!(sorted.is_sorted(), "samples must be sorted");
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    // Integer arithmetic in hundredths of a percent: no float rounding
    // surprises at exact ranks (e.g. p50 of 10 samples is rank 5).
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "p is a fraction in 0..=1: 0 to 100 hundredths"
    )]
    let p_hundredths = (p * 100.0).round() as u128;
    let rank = (p_hundredths * n as u128).div_ceil(10_000).max(1) as usize;
    Some(sorted[rank.min(n) - 1])
}

/// A duration in nanoseconds, saturating at `u64::MAX`.
pub(crate) fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Formats microseconds with a precision that suits the magnitude.
pub(crate) fn fmt_us(us: f64) -> String {
    if us < 1.0 {
        format!("{us:.3}")
    } else if us < 100.0 {
        format!("{us:.2}")
    } else {
        format!("{us:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_one_to_hundred() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&v, 50.0), Some(50));
        assert_eq!(nearest_rank(&v, 99.0), Some(99));
        assert_eq!(nearest_rank(&v, 100.0), Some(100));
        assert_eq!(nearest_rank(&v, 1.0), Some(1));
        assert_eq!(nearest_rank(&v, 0.5), Some(1));
    }

    #[test]
    fn nearest_rank_small_sets() {
        assert_eq!(nearest_rank(&[], 50.0), None);
        assert_eq!(nearest_rank(&[7], 50.0), Some(7));
        assert_eq!(nearest_rank(&[7], 99.0), Some(7));
        // n = 10: p50 is rank 5, p99 is rank ceil(9.9) = 10.
        let v: Vec<u64> = (10..20).collect();
        assert_eq!(nearest_rank(&v, 50.0), Some(14));
        assert_eq!(nearest_rank(&v, 99.0), Some(19));
        // n = 5: p50 is rank ceil(2.5) = 3.
        assert_eq!(nearest_rank(&[1, 2, 3, 4, 5], 50.0), Some(3));
        // n = 4: p50 is rank 2 (the lower middle), not an average.
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 50.0), Some(2));
    }

    #[test]
    fn p99_of_a_thousand_skips_the_top_ten() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(nearest_rank(&v, 99.0), Some(990));
        // n = 200 (the default handover count): rank 198.
        let v: Vec<u64> = (1..=200).collect();
        assert_eq!(nearest_rank(&v, 99.0), Some(198));
    }

    #[test]
    fn summary_sorts_its_input() {
        let s = Summary::of(&[5, 1, 4, 2, 3]).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!(s.median_ns, 3);
        assert_eq!(s.p99_ns, 5);
        assert_eq!((s.min_ns, s.max_ns), (1, 5));
        assert!(Summary::of(&[]).is_none());
    }

    #[test]
    fn formats_by_magnitude() {
        assert_eq!(fmt_us(0.0456), "0.046");
        assert_eq!(fmt_us(12.345), "12.35");
        assert_eq!(fmt_us(1234.56), "1234.6");
    }
}
