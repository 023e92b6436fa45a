//! The sink's counters.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the sink did and what it could not do. None of it ever changes a root.
#[derive(Debug, Default)]
pub struct SinkStats {
    /// Frozen banks handed to the writer thread (full bases included).
    pub banks_queued: AtomicU64,
    /// Banks that found the queue full and were merged into their parent's queued bank: one
    /// file for both, the parent's slot is not served (as the writer merges slots it cannot
    /// write one by one).
    pub banks_merged: AtomicU64,
    /// Banks not written: the queue was full and could not take them merged, or their parent was
    /// not written. Their forks are not served until the next full state.
    pub banks_lost: AtomicU64,
    /// Status and metadata messages dropped because the writer thread stopped taking them.
    pub messages_dropped: AtomicU64,
    /// Banks and messages waiting for the writer thread (gauge).
    pub queued: AtomicU64,
    /// Bytes of change sets and account data waiting (gauge).
    pub queued_bytes: AtomicU64,
    /// Banks the snapshot writer did not write: their write failed for good (the directory gone
    /// or not a directory, an input the writer cannot place, a failure too large to hold for a
    /// retry, or statuses crowding the queue behind it), or their parent was not written. Their
    /// roots stand; their files are not served.
    pub banks_refused: AtomicU64,
    /// Tries to write a held bank again after its write failed for a reason that can pass (a full
    /// disk, an I/O error, too many open files), each counted once.
    pub write_retries: AtomicU64,
    /// Held banks written by a retry: each ends a failure streak.
    pub write_recoveries: AtomicU64,
    /// Held banks given up without being written because their file would never be served: their
    /// fork died or was passed by a root, a new version of the slot came, or a new base.
    pub retries_abandoned: AtomicU64,
    /// 1 while the writer thread holds a failed bank to write it again (gauge).
    pub write_failing: AtomicU64,
    /// When the current failure streak began, in milliseconds since the Unix epoch; 0 while
    /// writes succeed. See [`SinkStats::failure_streak`].
    pub failing_since_ms: AtomicU64,
    /// Submissions or marks the snapshot writer refused (it stopped for good).
    pub writer_errors: AtomicU64,
    /// Root records logged.
    pub records_produced: AtomicU64,
    /// Root records that could not be made or logged.
    pub record_errors: AtomicU64,
    /// 1 while the writer thread runs.
    pub running: AtomicU64,
}

impl SinkStats {
    pub(crate) fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// A counter's value.
    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }

    /// How long the current failure streak has lasted (the time since the first failed write of
    /// the bank now held), `None` while writes succeed.
    pub fn failure_streak(&self) -> Option<Duration> {
        let since = self.failing_since_ms.load(Ordering::Relaxed);
        (since != 0).then(|| Duration::from_millis(unix_ms().saturating_sub(since)))
    }

    /// A failure streak begins now.
    pub(crate) fn start_streak(&self) {
        self.write_failing.store(1, Ordering::Relaxed);
        self.failing_since_ms.store(unix_ms().max(1), Ordering::Relaxed);
    }

    /// The held bank was written or given up.
    pub(crate) fn end_streak(&self) {
        self.write_failing.store(0, Ordering::Relaxed);
        self.failing_since_ms.store(0, Ordering::Relaxed);
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
