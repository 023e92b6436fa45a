//! The writer's settings and its counters.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use aldb_format::format::MAX_FILE_BYTES;

/// Writer settings.
#[derive(Clone, Debug)]
pub struct WriterConfig {
    /// Directory of snapshot files (created if missing).
    pub dir: PathBuf,
    /// Publish a snapshot every this many submitted slots (1 = every slot); the slots between
    /// are merged into the next one and are not served.
    pub every: u64,
    /// Keep the newest `keep_slots` slots provable; older files are deleted once unreachable.
    pub keep_slots: u64,
    /// Slots over which the whole key space is rewritten once, so old files can be retired.
    pub refresh_slots: u64,
    /// Slots that may wait in the queue before the committer blocks.
    pub queue_bound: usize,
    /// Write files past the page cache (`O_DIRECT`) when the filesystem supports it; files are
    /// written once and read later, so caching them on the way out only costs copies.
    pub direct_io: bool,
    /// After a write error, the writer holds the slots that follow (merged, one version per
    /// account) until it can write again; past this many bytes of held account data it gives up
    /// until restarted. See [`SnapshotWriter`](crate::SnapshotWriter) on failures.
    pub max_recovery_bytes: usize,
    /// Fork mode: every frozen bank is submitted, forks included, and each file is written
    /// against its [`SlotInput::parent`](crate::SlotInput::parent)'s written state (see [`SnapshotWriter`](crate::SnapshotWriter) on forks).
    /// Needs `every = 1`. Off: each file is based on the previous one, a single chain.
    pub forks: bool,
    /// Fork mode: most unrooted banks held (with their table lists) before a bank is refused
    /// with [`SnapshotError::TooManyBanks`](crate::SnapshotError::TooManyBanks).
    pub max_fork_banks: usize,
    /// Fork mode: most bytes of table lists held before a bank is refused.
    pub max_fork_bytes: usize,
    /// Retention waits for the archive: no file at or above the sequence number the shipper
    /// recorded in the directory's `shipped.seq` is deleted, and none at all before it exists
    /// (`aldb_format::shipped`). For a directory whose history an archiver copies to a bucket:
    /// without it, a shipper that falls behind finds files pruned under it and the archive keeps
    /// holes. The directory then grows while the shipper is down. Off by default.
    pub hold_for_shipper: bool,
    /// Fork mode: a refused bank's input is handed back in its [`Refusal`](crate::Refusal) instead of being
    /// emptied for reuse, so a caller that tries a failed write again keeps the input it
    /// submitted rather than a copy of it. The caller must then take the refusals
    /// ([`SnapshotWriter::take_refused`](crate::SnapshotWriter::take_refused)) as they come: up to 1,024 are kept, inputs included.
    /// Off by default.
    pub return_refused: bool,
    /// The most bytes one snapshot file holds: a slot that writes more (a full state of more
    /// than about a hundred million accounts) is cut into part files (`docs/FORMAT.md`,
    /// "Parts"). Always [`MAX_FILE_BYTES`], the most a reference addresses; lowered only by
    /// tests, to cut small states into many parts. Values below 256 bytes count as 256.
    #[doc(hidden)]
    pub part_bytes: u64,
}

impl WriterConfig {
    /// Defaults for a directory: every slot, keep 1000 slots, refresh over 512 slots, queue of 4,
    /// direct I/O where supported, up to 1 GiB of account data held while failing.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            every: 1,
            keep_slots: 1000,
            refresh_slots: 512,
            queue_bound: 4,
            direct_io: true,
            max_recovery_bytes: 1 << 30,
            forks: false,
            max_fork_banks: 1024,
            max_fork_bytes: 1 << 30,
            hold_for_shipper: false,
            return_refused: false,
            part_bytes: MAX_FILE_BYTES,
        }
    }
}

/// Counters of the writer, for metrics.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Slots submitted.
    pub submitted: AtomicU64,
    /// Slots taken from the queue (published or merged into a later snapshot).
    pub processed: AtomicU64,
    /// Snapshot files published.
    pub published: AtomicU64,
    /// Newest published slot.
    pub last_slot: AtomicU64,
    /// Bytes of published files.
    pub bytes: AtomicU64,
    /// Of those, bytes of account records.
    pub account_bytes: AtomicU64,
    /// Of those, bytes rewritten by the refresh cycle.
    pub refresh_bytes: AtomicU64,
    /// Submissions that found the queue full and waited.
    pub full_waits: AtomicU64,
    /// Nanoseconds committers spent waiting on a full queue.
    pub wait_nanos: AtomicU64,
    /// Nanoseconds the writer spent writing and syncing.
    pub write_nanos: AtomicU64,
    /// Files deleted by pruning.
    pub pruned_files: AtomicU64,
    /// Failed writes (each retry that fails counts again).
    pub errors: AtomicU64,
    /// 1 while the writer is failing (holding slots until it can write again), else 0.
    pub failing: AtomicU64,
    /// Times the writer wrote again after failing.
    pub recoveries: AtomicU64,
    /// Committed slots never written because the writer was failing: merged into the first file
    /// after the failure, which is marked with the gap (`docs/FORMAT.md`), and not served.
    pub gap_slots: AtomicU64,
    /// 1 once the writer has stopped for good (see [`SnapshotWriter`](crate::SnapshotWriter)), else 0.
    pub stopped: AtomicU64,
    /// Status marks submitted ([`SnapshotWriter::mark`](crate::SnapshotWriter::mark)); they go through the queue with the
    /// slots and count in `submitted` and `processed` too.
    pub marks: AtomicU64,
    /// Fork mode: written banks held, the finalized base included (gauge).
    pub fork_banks: AtomicU64,
    /// Fork mode: bytes of undo and redo lists the unrooted banks hold (gauge).
    pub fork_held_bytes: AtomicU64,
    /// Fork mode: banks refused (parent not written, over the bound, or their write failed);
    /// [`SnapshotWriter::take_refused`](crate::SnapshotWriter::take_refused) says which and why.
    pub fork_refused: AtomicU64,
    /// Fork mode: times the tables moved to another fork before a write or a mark.
    pub fork_switches: AtomicU64,
    /// Fork mode: banks whose undo list a move applied.
    pub fork_rolled_back: AtomicU64,
    /// Fork mode: banks whose redo list a move applied.
    pub fork_reapplied: AtomicU64,
    /// Fork mode: banks dropped (abandoned, dead, replaced, or off the finalized chain).
    pub fork_dropped: AtomicU64,
    /// Failed appends to the slot-status journal (or compactions of it).
    pub journal_errors: AtomicU64,
    /// Bytes of the writer's in-memory tables: where every node's and bucket's current record
    /// is, and every leaf's account record (gauge, set after each published write). They grow
    /// with the tree, about 17 bytes per leaf at two leaves per bucket; the writer's other
    /// memory is per-slot buffers.
    pub table_bytes: AtomicU64,
}

impl WriterStats {
    /// Slots submitted but not yet processed.
    pub fn queue_depth(&self) -> u64 {
        self.submitted.load(Ordering::Relaxed).saturating_sub(self.processed.load(Ordering::Relaxed))
    }
}
