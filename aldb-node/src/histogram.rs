//! Histograms of durations with fixed buckets and atomic counts: recording one is a search over
//! a few bounds and three relaxed adds, cheap enough for the pipeline's thread and the replay
//! thread alike.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use aldb_metrics::Families;

/// Upper bounds (seconds) of the latency histograms' buckets: commits, submissions, and the
/// delay from `Processed` to commit.
pub const LATENCY_BOUNDS: [f64; 14] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0];

/// A Prometheus histogram of durations over fixed bounds (seconds).
#[derive(Debug)]
pub struct Histogram {
    bounds: &'static [f64],
    /// Observations at or below each bound (not cumulative; summed when rendered).
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_nanos: AtomicU64,
}

impl Histogram {
    /// An empty histogram over `bounds` (ascending, in seconds).
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            buckets: bounds.iter().map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_nanos: AtomicU64::new(0),
        }
    }

    /// Records one duration.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Some(b) = self.bounds.iter().position(|&b| secs <= b).and_then(|i| self.buckets.get(i)) {
            b.fetch_add(1, Relaxed);
        }
        self.count.fetch_add(1, Relaxed);
        self.sum_nanos.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Relaxed);
    }

    /// Writes the histogram as the family `name`.
    pub fn write(&self, f: &mut Families, name: &str, help: &str) {
        let buckets = self.bounds.iter().copied().zip(cumulative(&self.buckets));
        let sum = self.sum_nanos.load(Relaxed) as f64 / 1e9;
        f.histogram(name, help, buckets, self.count.load(Relaxed), sum);
    }
}

/// Running totals of per-bucket counts: the cumulative counts the exposition format wants.
pub fn cumulative(buckets: &[AtomicU64]) -> impl Iterator<Item = u64> + '_ {
    buckets.iter().scan(0u64, |total, b| {
        *total += b.load(Relaxed);
        Some(*total)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_is_cumulative() {
        let h = Histogram::new(&LATENCY_BOUNDS);
        h.observe(Duration::from_micros(500));
        h.observe(Duration::from_millis(20));
        h.observe(Duration::from_secs(100));
        let mut f = Families::default();
        h.write(&mut f, "x", "help");
        let s = f.encode();
        assert!(s.contains("x_bucket{le=\"0.001\"} 1\n"), "{s}");
        assert!(s.contains("x_bucket{le=\"0.025\"} 2\n"), "{s}");
        assert!(s.contains("x_bucket{le=\"60\"} 2\n"), "{s}");
        assert!(s.contains("x_bucket{le=\"+Inf\"} 3\n"), "{s}");
        assert!(s.contains("x_count 3\n"), "{s}");
    }
}
