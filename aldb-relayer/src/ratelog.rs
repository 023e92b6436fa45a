//! Rate-limited logging: what endpoints send can be wrong tens of thousands of times a second,
//! and one line each would bury the log (and the disk). Every event is still counted in the
//! metrics; the log gets at most one line per reason per [`LOG_INTERVAL`], saying how many like it
//! were left out since the previous one.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, Instant};

/// Shortest time between two lines for one reason.
pub(crate) const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Per-reason limiter. Reasons are fixed strings, and keys are `(reason, endpoint index)`, so
/// the map holds at most reasons × endpoints entries.
#[derive(Debug)]
pub(crate) struct RateLog {
    interval: Duration,
    last: BTreeMap<(&'static str, usize), (Instant, u64)>,
}

/// How many lines were left out before this one; displays as nothing when none.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Suppressed(pub(crate) u64);

impl fmt::Display for Suppressed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => Ok(()),
            n => write!(f, " ({n} more like it since the last such line)"),
        }
    }
}

impl RateLog {
    pub(crate) fn new(interval: Duration) -> Self {
        Self { interval, last: BTreeMap::new() }
    }

    /// Whether a line for `reason` (at `endpoint`) may be written now: `Some(left out since
    /// the last one)`, or `None` when it is left out (and `suppressed` is incremented).
    pub(crate) fn allow(
        &mut self,
        reason: &'static str,
        endpoint: usize,
        suppressed: &std::sync::atomic::AtomicU64,
    ) -> Option<Suppressed> {
        let now = Instant::now();
        match self.last.get_mut(&(reason, endpoint)) {
            Some((at, skipped)) if now.duration_since(*at) < self.interval => {
                *skipped += 1;
                crate::stats::inc(suppressed, 1);
                None
            }
            Some((at, skipped)) => {
                let n = *skipped;
                *at = now;
                *skipped = 0;
                Some(Suppressed(n))
            }
            None => {
                self.last.insert((reason, endpoint), (now, 0));
                Some(Suppressed(0))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn one_line_per_reason_and_endpoint_per_interval_then_the_count_left_out() {
        let counter = AtomicU64::new(0);
        let mut log = RateLog::new(Duration::from_secs(3600));
        assert!(matches!(log.allow("a", 0, &counter), Some(Suppressed(0))));
        assert!(log.allow("a", 1, &counter).is_some(), "another endpoint has its own line");
        assert!(log.allow("b", 0, &counter).is_some(), "another reason has its own line");
        for _ in 0..1000 {
            assert!(log.allow("a", 0, &counter).is_none());
        }
        assert_eq!(counter.load(Ordering::Relaxed), 1000);
        // With no interval every line passes and carries what was left out before it.
        let mut log = RateLog { interval: Duration::ZERO, ..log };
        assert!(matches!(log.allow("a", 0, &counter), Some(Suppressed(1000))));
        assert!(matches!(log.allow("a", 0, &counter), Some(Suppressed(0))));
        assert_eq!(Suppressed(0).to_string(), "");
        assert_eq!(Suppressed(3).to_string(), " (3 more like it since the last such line)");
    }
}
