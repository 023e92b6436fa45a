//! The fork engine's memory bound and its metrics.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How much the unrooted banks may hold. A freeze that could pass either bound is refused with a
/// [`crate::ForkError`] before it touches the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForkLimits {
    /// Most unrooted banks held at once.
    pub max_banks: usize,
    /// Most bytes of updates and undo records the unrooted banks hold at once.
    pub max_bytes: usize,
}

impl ForkLimits {
    /// Explicit bounds.
    pub fn new(max_banks: usize, max_bytes: usize) -> Self {
        Self { max_banks, max_bytes }
    }
}

impl Default for ForkLimits {
    /// 1,024 banks (about seven minutes of 400 ms slots without a root) and 4 GiB: a slot of 30k
    /// writes holds about 4 MB, so the bytes bind first only for much larger slots.
    fn default() -> Self {
        Self { max_banks: 1024, max_bytes: 4 << 30 }
    }
}

/// Live metrics of a fork engine, shared with whoever exports them ([`crate::ForkEngine::stats`]);
/// every field is read and written without a lock.
#[derive(Debug, Default)]
pub struct ForkStats {
    banks_held: AtomicU64,
    held_bytes: AtomicU64,
    undo_bytes: AtomicU64,
    freezes: AtomicU64,
    switches: AtomicU64,
    slots_rolled_back: AtomicU64,
    slots_reapplied: AtomicU64,
    banks_rooted: AtomicU64,
    banks_dead: AtomicU64,
    banks_abandoned: AtomicU64,
    refused: AtomicU64,
}

/// One reading of [`ForkStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ForkCounters {
    /// Gauge: unrooted banks held.
    pub banks_held: u64,
    /// Gauge: bytes the unrooted banks hold (updates and undo records, allocated).
    pub held_bytes: u64,
    /// Gauge: the part of `held_bytes` that is undo records.
    pub undo_bytes: u64,
    /// Banks frozen.
    pub freezes: u64,
    /// Times the head moved to another fork (a rollback, a re-apply, or both).
    pub switches: u64,
    /// Banks whose undo record was applied by a switch.
    pub slots_rolled_back: u64,
    /// Banks whose updates were applied again by a switch.
    pub slots_reapplied: u64,
    /// Banks released because they became rooted.
    pub banks_rooted: u64,
    /// Banks dropped as dead or replaced (a repeated `CreatedBank`), with their descendants.
    pub banks_dead: u64,
    /// Banks dropped by a root because they do not descend from it.
    pub banks_abandoned: u64,
    /// Freezes refused over [`ForkLimits`].
    pub refused: u64,
}

impl ForkStats {
    /// The current values.
    pub fn snapshot(&self) -> ForkCounters {
        ForkCounters {
            banks_held: self.banks_held.load(Relaxed),
            held_bytes: self.held_bytes.load(Relaxed),
            undo_bytes: self.undo_bytes.load(Relaxed),
            freezes: self.freezes.load(Relaxed),
            switches: self.switches.load(Relaxed),
            slots_rolled_back: self.slots_rolled_back.load(Relaxed),
            slots_reapplied: self.slots_reapplied.load(Relaxed),
            banks_rooted: self.banks_rooted.load(Relaxed),
            banks_dead: self.banks_dead.load(Relaxed),
            banks_abandoned: self.banks_abandoned.load(Relaxed),
            refused: self.refused.load(Relaxed),
        }
    }

    pub(crate) fn set_held(&self, banks: usize, bytes: usize, undo: usize) {
        self.banks_held.store(banks as u64, Relaxed);
        self.held_bytes.store(bytes as u64, Relaxed);
        self.undo_bytes.store(undo as u64, Relaxed);
    }

    pub(crate) fn frozen(&self) {
        self.freezes.fetch_add(1, Relaxed);
    }

    pub(crate) fn switched(&self, rolled_back: usize, reapplied: usize) {
        self.switches.fetch_add(1, Relaxed);
        self.slots_rolled_back.fetch_add(rolled_back as u64, Relaxed);
        self.slots_reapplied.fetch_add(reapplied as u64, Relaxed);
    }

    pub(crate) fn dropped(&self, rooted: usize, dead: usize, abandoned: usize) {
        self.banks_rooted.fetch_add(rooted as u64, Relaxed);
        self.banks_dead.fetch_add(dead as u64, Relaxed);
        self.banks_abandoned.fetch_add(abandoned as u64, Relaxed);
    }

    pub(crate) fn refused(&self) {
        self.refused.fetch_add(1, Relaxed);
    }
}
