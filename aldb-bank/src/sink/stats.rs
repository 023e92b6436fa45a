//! The sink's counters.

use std::sync::atomic::{AtomicU64, Ordering};

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
    /// Banks the snapshot writer did not write: their write failed (a full disk, a missing
    /// directory), or their parent's did. Their roots stand; their files are not served.
    pub banks_refused: AtomicU64,
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
}
