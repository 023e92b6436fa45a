//! The pipeline's counters: one set for both front ends, each of which exposes the ones it has
//! always exposed under its own names ([`crate::families`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::evidence::EvidenceCounters;
use crate::histogram::{Histogram, LATENCY_BOUNDS};

/// What the pipeline did and what it could not do. None of it ever changes a root.
#[derive(Debug)]
pub struct NodeStats {
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
    /// writes succeed. See [`NodeStats::failure_streak`].
    pub failing_since_ms: AtomicU64,
    /// Submissions or marks the snapshot writer refused (it stopped for good).
    pub writer_errors: AtomicU64,
    /// Committed slots handed to the snapshot writer.
    pub snapshot_submitted: AtomicU64,
    /// Committed slots not written because the writer had stopped or the input was unusable.
    pub snapshot_skipped: AtomicU64,
    /// Time handing each committed slot to the writer (includes waiting on a full queue).
    pub submit_latency: Histogram,
    /// Whether root records are being produced (configured, and the record log open).
    pub records_enabled: AtomicBool,
    /// Root records logged.
    pub records_produced: AtomicU64,
    /// Of those, records carrying an attestation.
    pub records_signed: AtomicU64,
    /// Records asked for at or below the newest logged slot of their level (replayed after a
    /// restart): no second record is made for them.
    pub records_skipped: AtomicU64,
    /// Root records that could not be made or logged.
    pub record_errors: AtomicU64,
    /// Panics caught on the pipeline's thread (which then stops).
    pub panics: AtomicU64,
    /// 1 while the pipeline's thread runs.
    pub running: AtomicU64,
    /// The vote-evidence log and the root cross-check.
    pub evidence: Arc<EvidenceCounters>,
}

impl Default for NodeStats {
    fn default() -> Self {
        Self {
            banks_queued: AtomicU64::new(0),
            banks_merged: AtomicU64::new(0),
            banks_lost: AtomicU64::new(0),
            messages_dropped: AtomicU64::new(0),
            queued: AtomicU64::new(0),
            queued_bytes: AtomicU64::new(0),
            banks_refused: AtomicU64::new(0),
            write_retries: AtomicU64::new(0),
            write_recoveries: AtomicU64::new(0),
            retries_abandoned: AtomicU64::new(0),
            write_failing: AtomicU64::new(0),
            failing_since_ms: AtomicU64::new(0),
            writer_errors: AtomicU64::new(0),
            snapshot_submitted: AtomicU64::new(0),
            snapshot_skipped: AtomicU64::new(0),
            submit_latency: Histogram::new(&LATENCY_BOUNDS),
            records_enabled: AtomicBool::new(false),
            records_produced: AtomicU64::new(0),
            records_signed: AtomicU64::new(0),
            records_skipped: AtomicU64::new(0),
            record_errors: AtomicU64::new(0),
            panics: AtomicU64::new(0),
            running: AtomicU64::new(0),
            evidence: Arc::default(),
        }
    }
}

impl NodeStats {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
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
fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
