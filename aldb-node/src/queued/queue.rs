//! The queue between the front end (the in-process module's replay thread, under the module's
//! lock) and the pipeline's thread. Pushing never waits: a bank that finds the queue full is merged into its parent's
//! queued bank when that is the newest one queued, else it is not written (see [`Pushed`]).
//! Status messages are a few dozen bytes, ordered with the banks, and always taken while the
//! writer thread runs.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use aldb_core::ChangeSet;
use aldb_snapshot::SlotInput;
use aldb_verify::spec::Hash;

use crate::bank_hashes::Frozen;
use crate::records::BankRecord;
use crate::snapshots::{HeldWake, Hold};
use crate::stats::NodeStats;

/// What goes to the writer thread, in order.
pub(crate) enum Item {
    /// A whole state (a base the module built): a full snapshot file, and the base's records.
    Base(SlotInput),
    /// A frozen bank, relative to its parent.
    Bank(SlotInput),
    /// What the validator said of a frozen bank: its hash and block.
    Meta(u64, Frozen),
    /// Banks newly confirmed, oldest first.
    Confirmed(Vec<BankRecord>),
    /// A new root, the banks it finalized (its unrooted ancestors and itself, oldest first) and
    /// the banks it abandoned (not descending from it).
    Finalized(u64, Vec<BankRecord>, Vec<u64>),
    /// A bank dropped, and the banks dropped with it (itself and its descendants).
    Dead(u64, Vec<u64>),
    /// Answered once everything before it is written.
    Flush(std::sync::mpsc::Sender<()>),
}

/// Status messages at most waiting: only a writer thread stuck for minutes reaches it.
const MAX_MESSAGES: usize = 1 << 16;

/// What became of a pushed bank.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Pushed {
    Queued,
    /// Merged into its parent's queued bank.
    Merged,
    /// Not queued: the queue was full and the newest queued bank is not its parent, or the
    /// bytes bound would pass.
    Lost,
}

#[derive(Default)]
struct Inner {
    items: VecDeque<Item>,
    banks: usize,
    messages: usize,
    bytes: usize,
    closed: bool,
    /// The bank the writer thread holds for a retry ([`Hold::hold`]).
    held: Option<u64>,
    /// Whether something pushed since the hold makes writing the held bank pointless.
    held_doomed: bool,
}

/// Whether `item`, queued after bank `held` failed, makes its file pointless.
fn dooms(item: &Item, held: u64) -> bool {
    match item {
        Item::Base(_) => true,
        Item::Bank(b) => b.slot == held,
        Item::Dead(_, dropped) | Item::Finalized(_, _, dropped) => dropped.contains(&held),
        Item::Meta(..) | Item::Confirmed(_) | Item::Flush(_) => false,
    }
}

/// The bounded queue; see the [module documentation](self).
pub(crate) struct Queue {
    inner: Mutex<Inner>,
    ready: Condvar,
    max_banks: usize,
    max_bytes: usize,
    stats: Arc<NodeStats>,
}

/// Bytes of change set and account data an input holds.
pub(crate) fn size(input: &SlotInput) -> usize {
    input.changes.heap_bytes() + input.accounts.heap_bytes()
}

impl Queue {
    pub(crate) fn new(max_banks: usize, max_bytes: usize, stats: Arc<NodeStats>) -> Self {
        Self { inner: Mutex::default(), ready: Condvar::new(), max_banks: max_banks.max(1), max_bytes, stats }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic elsewhere never leaves the queue half-changed: every change is one push or pop.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn gauges(&self, q: &Inner) {
        self.stats.queued.store((q.banks + q.messages) as u64, Ordering::Relaxed);
        self.stats.queued_bytes.store(q.bytes as u64, Ordering::Relaxed);
    }

    /// Queues a full state. Always taken while the writer thread runs: it is what every later
    /// bank is written against, and it comes once per start.
    pub(crate) fn push_base(&self, input: SlotInput) -> bool {
        let mut q = self.lock();
        if q.closed {
            return false;
        }
        q.held_doomed |= q.held.is_some();
        q.bytes += size(&input);
        q.banks += 1;
        q.items.push_back(Item::Base(input));
        self.gauges(&q);
        drop(q);
        self.ready.notify_one();
        true
    }

    /// Queues a frozen bank, or merges it into its parent's, or gives it up; never waits.
    pub(crate) fn push_bank(&self, input: SlotInput) -> Pushed {
        let mut q = self.lock();
        if q.closed {
            return Pushed::Lost;
        }
        // A bank frozen again replaces the held version, whatever becomes of the new one.
        q.held_doomed |= q.held == Some(input.slot);
        let n = size(&input);
        let fits_bytes = q.bytes.saturating_add(n) <= self.max_bytes;
        if q.banks < self.max_banks && fits_bytes {
            q.bytes += n;
            q.banks += 1;
            q.items.push_back(Item::Bank(input));
            self.gauges(&q);
            drop(q);
            self.ready.notify_one();
            return Pushed::Queued;
        }
        if !fits_bytes {
            return Pushed::Lost;
        }
        // Only the newest queued bank can take it: banks queued after an older one may be its
        // descendants, written against its own state.
        let newest = q.items.iter_mut().rev().find(|i| matches!(i, Item::Bank(_) | Item::Base(_)));
        let (before, after) = match newest {
            Some(Item::Bank(parent)) if Some(parent.slot) == input.parent => {
                let before = size(parent);
                merge(parent, input);
                (before, size(parent))
            }
            _ => return Pushed::Lost,
        };
        q.bytes = q.bytes.saturating_sub(before) + after;
        self.gauges(&q);
        drop(q);
        // A writer thread holding a bank may be waiting to hear of a new version of it.
        self.ready.notify_one();
        Pushed::Merged
    }

    /// Queues a status message; `false` when it was dropped (the writer thread stopped, or
    /// stopped taking them).
    pub(crate) fn push(&self, item: Item) -> bool {
        let mut q = self.lock();
        if let Some(held) = q.held {
            q.held_doomed |= dooms(&item, held);
        }
        if q.closed || q.messages >= MAX_MESSAGES {
            drop(q);
            NodeStats::add(&self.stats.messages_dropped, 1);
            return false;
        }
        q.messages += 1;
        q.items.push_back(item);
        self.gauges(&q);
        drop(q);
        self.ready.notify_one();
        true
    }

    /// The next item, waiting for one; `None` once closed and drained.
    pub(crate) fn pop(&self) -> Option<Item> {
        let mut q = self.lock();
        loop {
            if let Some(item) = q.items.pop_front() {
                match &item {
                    Item::Base(b) | Item::Bank(b) => {
                        q.banks -= 1;
                        q.bytes = q.bytes.saturating_sub(size(b));
                    }
                    _ => q.messages -= 1,
                }
                self.gauges(&q);
                return Some(item);
            }
            if q.closed {
                return None;
            }
            q = self.ready.wait(q).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// No more items are taken; those queued are still popped.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.ready.notify_all();
    }

    /// Drops everything queued (the writer thread is gone).
    pub(crate) fn discard(&self) {
        let mut q = self.lock();
        q.closed = true;
        let dropped = q.items.len() as u64;
        *q = Inner { closed: true, ..Inner::default() };
        self.gauges(&q);
        drop(q);
        NodeStats::add(&self.stats.messages_dropped, dropped);
    }
}

impl Hold for Queue {
    /// The pipeline's thread holds bank `slot` to write it again: from now on [`Hold::wait_held`]
    /// tells when something queued (already, or pushed later) makes that pointless.
    fn hold(&self, slot: u64) {
        let mut q = self.lock();
        q.held = Some(slot);
        q.held_doomed = q.items.iter().any(|i| dooms(i, slot));
    }

    /// The held bank was written or given up.
    fn release(&self) {
        let mut q = self.lock();
        q.held = None;
        q.held_doomed = false;
    }

    /// Waits up to `timeout` while a bank is held, waking early when the held bank is doomed, the
    /// queue closes or status messages crowd it. Pushes go on meanwhile; nothing is popped.
    fn wait_held(&self, timeout: Duration) -> HeldWake {
        let deadline = Instant::now() + timeout;
        let mut q = self.lock();
        loop {
            if q.held_doomed {
                return HeldWake::Doomed;
            }
            if q.closed {
                return HeldWake::Closed;
            }
            if q.messages >= MAX_MESSAGES / 2 {
                return HeldWake::Crowded;
            }
            let now = Instant::now();
            if now >= deadline {
                return HeldWake::Retry;
            }
            q = self.ready.wait_timeout(q, deadline - now).unwrap_or_else(PoisonError::into_inner).0;
        }
    }
}

/// Folds `child` (a bank frozen on `parent`) into `parent`: one input for the child's slot,
/// written against the parent's own parent. A node or bucket either changed takes the child's
/// value when it changed it, the parent's otherwise, which is its value in the child's state;
/// accounts are appended, and the writer keeps the last entry of each path.
fn merge(parent: &mut SlotInput, child: SlotInput) {
    let options = child.changes.options().without_leaf_values();
    let mut nodes: BTreeMap<(u8, u64), Hash> = BTreeMap::new();
    let mut buckets: BTreeMap<u64, (Hash, Vec<Hash>)> = BTreeMap::new();
    for c in [&parent.changes, &child.changes] {
        for n in c.nodes() {
            nodes.insert((n.level, n.index), n.hash);
        }
        for b in c.buckets() {
            buckets.insert(b.index, (b.hash, b.paths.to_vec()));
        }
    }
    let mut changes = ChangeSet::by_hand(child.changes.bucket_bits(), options);
    for ((level, index), hash) in nodes {
        changes.push_node(level, index, hash);
    }
    for (index, (hash, paths)) in buckets {
        changes.push_bucket(index, hash, &paths, &[]);
    }
    for i in 0..child.accounts.len() {
        if let (Some(a), Some(e)) = (child.accounts.get(i), child.accounts.entries().get(i)) {
            parent.accounts.push(e.path, &a);
        }
    }
    parent.changes = changes;
    parent.slot = child.slot;
    parent.root = child.root;
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
