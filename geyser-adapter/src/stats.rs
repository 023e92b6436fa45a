//! Counters for metrics, updated with relaxed atomics so no callback waits on them.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};

use aldb_core::{ForkCounters, ForkStats};

use crate::error::{DropReason, IgnoreReason, Irregularity};

/// A snapshot of the adapter's counters and gauges.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Account updates offered, startup ones included.
    pub updates_received: u64,
    /// Startup account updates accepted.
    pub startup_updates: u64,
    /// Slot statuses offered (`Completed` and `FirstShredReceived` included).
    pub statuses_received: u64,
    /// Slots applied to the engine, the startup or genesis base included.
    pub slots_committed: u64,
    /// Block metadata reports offered.
    pub blocks_received: u64,
    /// Slots (not the genesis or startup base) committed without block metadata: expected for
    /// slots replayed from the local ledger at startup, otherwise a sign the metadata came late.
    pub slots_without_block: u64,
    /// Slots dropped because they died.
    pub slots_dropped_dead: u64,
    /// Slots dropped because they left the committed chain.
    pub slots_dropped_abandoned: u64,
    /// Slots dropped over the pending bound.
    pub slots_dropped_overflow: u64,
    /// Slots that restarted (a repeated `CreatedBank`).
    pub slots_restarted: u64,
    /// Buffered account updates thrown away with dropped or restarted slots.
    pub updates_discarded: u64,
    /// Ignored events, indexed like [`IgnoreReason::ALL`]; see [`Stats::ignored`].
    pub ignored: [u64; IgnoreReason::ALL.len()],
    /// Irregular events, indexed like [`Irregularity::ALL`]; see [`Stats::irregular`].
    pub irregular: [u64; Irregularity::ALL.len()],
    /// The last slot the engine committed.
    pub last_committed_slot: Option<u64>,
    /// The committed base: the last slot decided for commit, perhaps still queued.
    pub base_slot: Option<u64>,
    /// The highest slot reported `Processed`: with `last_committed_slot`, the commit lag.
    pub highest_processed_slot: Option<u64>,
    /// Slots tracked above the base and not dropped.
    pub pending_slots: u64,
    /// Decided commits not yet applied by [`Adapter::commit_ready`](crate::Adapter::commit_ready).
    /// Under `Commitment::Processed` this counts every engine job: freezes, roots, drops and
    /// status changes waiting to be applied.
    pub queued_commits: u64,
    /// Slots dropped because the fork engine refused their freeze (`Commitment::Processed`).
    pub slots_dropped_refused: u64,
    /// Freezes the fork engine refused: over its bound, or on a refused parent.
    pub freezes_refused: u64,
    /// Frozen banks reported [`StatusKind::Confirmed`](crate::StatusKind::Confirmed).
    pub banks_confirmed: u64,
    /// Frozen banks reported [`StatusKind::Finalized`](crate::StatusKind::Finalized).
    pub banks_finalized: u64,
    /// Frozen banks reported [`StatusKind::Abandoned`](crate::StatusKind::Abandoned).
    pub banks_abandoned: u64,
    /// Status changes waiting for [`Adapter::take_status_changes`](crate::Adapter::take_status_changes).
    pub queued_status_changes: u64,
    /// Status changes dropped because nobody took them and the queue was full.
    pub status_changes_dropped: u64,
    /// The highest slot reported confirmed.
    pub last_confirmed_slot: Option<u64>,
    /// The highest slot reported finalized.
    pub last_finalized_slot: Option<u64>,
    /// The fork engine's gauges and counters (banks held, bytes held, switches, slots rolled
    /// back and re-applied, ...); all zero until it exists (`Commitment::Processed`, once the
    /// base is built).
    pub forks: ForkCounters,
}

impl Stats {
    /// How many events were ignored for `reason`.
    pub fn ignored(&self, reason: IgnoreReason) -> u64 {
        self.ignored.get(reason.index()).copied().unwrap_or(0)
    }

    /// How many irregular events of `kind` were handled.
    pub fn irregular(&self, kind: Irregularity) -> u64 {
        self.irregular.get(kind.index()).copied().unwrap_or(0)
    }

    /// Slots the highest confirmed one is behind the highest processed one: how long roots wait
    /// for their confirmed records under `Commitment::Processed`.
    pub fn status_lag(&self) -> Option<u64> {
        Some(self.highest_processed_slot?.saturating_sub(self.last_confirmed_slot?))
    }

    /// Slots the engine is behind the highest processed slot.
    pub fn lag(&self) -> Option<u64> {
        Some(self.highest_processed_slot?.saturating_sub(self.last_committed_slot?))
    }
}

/// `Option<u64>` in an atomic: zero is `None`, otherwise the value plus one.
#[derive(Debug, Default)]
pub(crate) struct AtomicSlot(AtomicU64);

impl AtomicSlot {
    pub(crate) fn get(&self) -> Option<u64> {
        self.0.load(Relaxed).checked_sub(1)
    }

    pub(crate) fn set(&self, v: Option<u64>) {
        self.0.store(v.map_or(0, |s| s.saturating_add(1)), Relaxed);
    }

    pub(crate) fn raise(&self, v: u64) {
        self.0.fetch_max(v.saturating_add(1), Relaxed);
    }
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) updates_received: AtomicU64,
    pub(crate) startup_updates: AtomicU64,
    pub(crate) statuses_received: AtomicU64,
    pub(crate) slots_committed: AtomicU64,
    pub(crate) blocks_received: AtomicU64,
    pub(crate) slots_without_block: AtomicU64,
    pub(crate) dropped_dead: AtomicU64,
    pub(crate) dropped_abandoned: AtomicU64,
    pub(crate) dropped_overflow: AtomicU64,
    pub(crate) restarted: AtomicU64,
    pub(crate) updates_discarded: AtomicU64,
    ignored: [AtomicU64; IgnoreReason::ALL.len()],
    irregular: [AtomicU64; Irregularity::ALL.len()],
    pub(crate) last_committed: AtomicSlot,
    pub(crate) base: AtomicSlot,
    pub(crate) highest_processed: AtomicSlot,
    pub(crate) pending_slots: AtomicU64,
    pub(crate) queued_commits: AtomicU64,
    pub(crate) freezes_refused: AtomicU64,
    pub(crate) dropped_refused: AtomicU64,
    pub(crate) banks_confirmed: AtomicU64,
    pub(crate) banks_finalized: AtomicU64,
    pub(crate) banks_abandoned: AtomicU64,
    pub(crate) queued_status_changes: AtomicU64,
    pub(crate) status_changes_dropped: AtomicU64,
    pub(crate) last_confirmed: AtomicSlot,
    pub(crate) last_finalized: AtomicSlot,
    /// Set once, when the fork engine is built.
    pub(crate) forks: OnceLock<Arc<ForkStats>>,
}

impl Counters {
    pub(crate) fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Relaxed);
    }

    pub(crate) fn ignore(&self, reason: IgnoreReason) {
        if let Some(c) = self.ignored.get(reason.index()) {
            c.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn irregular(&self, kind: Irregularity) {
        if let Some(c) = self.irregular.get(kind.index()) {
            c.fetch_add(1, Relaxed);
        }
    }

    pub(crate) fn dropped(&self, reason: DropReason, n: u64) {
        let c = match reason {
            DropReason::Dead => &self.dropped_dead,
            DropReason::Abandoned => &self.dropped_abandoned,
            DropReason::Overflow => &self.dropped_overflow,
            DropReason::Refused => &self.dropped_refused,
        };
        Self::add(c, n);
    }

    pub(crate) fn snapshot(&self) -> Stats {
        Stats {
            updates_received: self.updates_received.load(Relaxed),
            startup_updates: self.startup_updates.load(Relaxed),
            statuses_received: self.statuses_received.load(Relaxed),
            slots_committed: self.slots_committed.load(Relaxed),
            blocks_received: self.blocks_received.load(Relaxed),
            slots_without_block: self.slots_without_block.load(Relaxed),
            slots_dropped_dead: self.dropped_dead.load(Relaxed),
            slots_dropped_abandoned: self.dropped_abandoned.load(Relaxed),
            slots_dropped_overflow: self.dropped_overflow.load(Relaxed),
            slots_restarted: self.restarted.load(Relaxed),
            updates_discarded: self.updates_discarded.load(Relaxed),
            ignored: std::array::from_fn(|i| self.ignored.get(i).map_or(0, |c| c.load(Relaxed))),
            irregular: std::array::from_fn(|i| self.irregular.get(i).map_or(0, |c| c.load(Relaxed))),
            last_committed_slot: self.last_committed.get(),
            base_slot: self.base.get(),
            highest_processed_slot: self.highest_processed.get(),
            pending_slots: self.pending_slots.load(Relaxed),
            queued_commits: self.queued_commits.load(Relaxed),
            slots_dropped_refused: self.dropped_refused.load(Relaxed),
            freezes_refused: self.freezes_refused.load(Relaxed),
            banks_confirmed: self.banks_confirmed.load(Relaxed),
            banks_finalized: self.banks_finalized.load(Relaxed),
            banks_abandoned: self.banks_abandoned.load(Relaxed),
            queued_status_changes: self.queued_status_changes.load(Relaxed),
            status_changes_dropped: self.status_changes_dropped.load(Relaxed),
            last_confirmed_slot: self.last_confirmed.get(),
            last_finalized_slot: self.last_finalized.get(),
            forks: self.forks.get().map(|f| f.snapshot()).unwrap_or_default(),
        }
    }
}
