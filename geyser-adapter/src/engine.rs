//! Applies decided jobs to the Pleiades tree, in order, off the callback path.

use aldb_core::{BulkBuilder, BulkEntry, CaptureOptions, ChangeSet, Hash, Pleiades, Update};
use aldb_verify::record::BlockInfo;

use crate::control::Job;
use crate::error::Irregularity;
use crate::stats::Counters;

/// How a committed slot's state came about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CommitKind {
    /// Slot 0 of a genesis start: the genesis accounts on an empty tree.
    Genesis,
    /// The startup state built from the snapshot's accounts, at the highest slot among them.
    Startup,
    /// A slot's winning updates on top of its parent's state.
    Slot,
}

/// One committed slot: what the plugin hands to the snapshot writer, the root feed and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed<Rec = ()> {
    /// The slot.
    pub slot: u64,
    /// The previously committed slot, which is the slot's parent; `None` for the first commit.
    pub parent: Option<u64>,
    /// The state root of the full account state at `slot`.
    pub root: Hash,
    /// How the state came about.
    pub kind: CommitKind,
    /// Accounts written (for a slot: distinct accounts the bank wrote, deletions included; for
    /// the startup state: accounts in it).
    pub updates: usize,
    /// The retained record of each winning write, one per account in no particular order. For
    /// the startup state, only the accounts present in it; empty when the policy keeps nothing.
    pub records: Vec<Rec>,
    /// The tree entries the commit rewrote (the whole tree for a startup state), when
    /// [`AdapterConfig::capture_changes`](crate::AdapterConfig::capture_changes) is set: what the
    /// snapshot writer persists.
    pub changes: Option<ChangeSet>,
    /// The slot's blockhash and block height, when its block metadata arrived before the commit
    /// was applied. Never for the startup state, nor for slots replayed from the local ledger
    /// at startup (agave sends block metadata only from live replay).
    pub block: Option<BlockInfo>,
    /// The bank hash of `parent`, as the slot's own SlotHashes write carries it: set when that
    /// write arrived and names `parent`.
    pub parent_bank_hash: Option<Hash>,
}

pub(crate) struct Engine {
    tree: Pleiades,
    config: aldb_core::Config,
    capture: Option<CaptureOptions>,
    /// Change sets a consumer is done with, refilled by later commits (see
    /// [`Adapter::recycle_changes`](crate::Adapter::recycle_changes)).
    spares: Vec<ChangeSet>,
}

/// Spare change sets kept at most: enough for a writer's queue to hand them round.
const MAX_SPARES: usize = 8;
/// A spare change set holding more than this is dropped, not kept: the startup state's capture
/// of the whole tree would otherwise stay allocated for the rest of the run. A slot's capture at
/// validator rates is a small fraction of it.
const MAX_SPARE_BYTES: usize = 64 << 20;

impl Engine {
    pub(crate) fn new(
        config: aldb_core::Config,
        capture: Option<CaptureOptions>,
    ) -> Result<Self, aldb_core::CoreError> {
        Ok(Self { tree: Pleiades::new(config)?, config, capture, spares: Vec::new() })
    }

    /// Keeps a used change set to capture into again, if it records what this engine captures.
    pub(crate) fn recycle(&mut self, changes: ChangeSet) {
        self.recycle_within(changes, MAX_SPARE_BYTES);
    }

    fn recycle_within(&mut self, changes: ChangeSet, max_bytes: usize) {
        let fits = changes.heap_bytes() <= max_bytes;
        if fits && Some(changes.options()) == self.capture && self.spares.len() < MAX_SPARES {
            self.spares.push(changes);
        }
    }

    /// A change set to capture into: a recycled one (its allocations reused) or a new one.
    fn change_set(&mut self, options: CaptureOptions) -> ChangeSet {
        self.spares.pop().unwrap_or_else(|| ChangeSet::new(options))
    }

    pub(crate) fn tree(&self) -> &Pleiades {
        &self.tree
    }

    pub(crate) fn apply<Rec>(&mut self, job: Job<Rec>, counters: &Counters) -> Committed<Rec> {
        match job {
            Job::Startup { slot, entries, records } => self.startup(slot, entries, records, counters),
            Job::Slot { slot, parent, kind, buffers, parent_bank_hash, block } => {
                let n: usize = buffers.iter().map(|m| m.len()).sum();
                let mut updates = Vec::with_capacity(n);
                let mut records = Vec::with_capacity(n);
                for map in buffers {
                    for (path, b) in map {
                        updates.push(Update { path, value: b.value });
                        records.push(b.record);
                    }
                }
                let (root, changes) = match self.capture {
                    Some(options) => {
                        let mut c = self.change_set(options);
                        (self.tree.commit_capture(updates, &mut c), Some(c))
                    }
                    None => (self.tree.commit(updates), None),
                };
                Committed { slot, parent, root, kind, updates: n, records, changes, block, parent_bank_hash }
            }
        }
    }

    fn startup<Rec>(
        &mut self,
        slot: u64,
        entries: Vec<Vec<BulkEntry>>,
        records: Vec<Vec<Rec>>,
        counters: &Counters,
    ) -> Committed<Rec> {
        // Records are only worth resolving when the policy keeps something.
        let keeps = std::mem::size_of::<Rec>() != 0;
        let won = keeps.then(|| winners(&entries));
        let kept = won.as_ref().map(|w| take(records, w)).unwrap_or_default();
        match BulkBuilder::new(self.config) {
            Ok(mut b) => {
                for part in entries {
                    b.push(&part);
                }
                self.tree = b.finish();
            }
            Err(_) => {
                // No second worker pool: resolve the winners here and commit them as one batch
                // into the (still empty) tree instead. Slower, same root.
                counters.irregular(Irregularity::EngineFallback);
                let won = won.unwrap_or_else(|| winners(&entries));
                let updates = won
                    .iter()
                    .filter_map(|&(p, i)| entries.get(p)?.get(i))
                    .map(|e| Update { path: e.path, value: e.value })
                    .collect();
                self.tree.commit(updates);
            }
        }
        let changes = self.capture.map(|options| {
            let mut c = self.change_set(options);
            self.tree.capture_all(&mut c);
            c
        });
        Committed {
            slot,
            parent: None,
            root: self.tree.root(),
            kind: CommitKind::Startup,
            updates: self.tree.len(),
            records: kept,
            changes,
            block: None,
            parent_bank_hash: None,
        }
    }
}

/// `(part, index)` of the entry that wins each path (highest rank, then the later pushed), for
/// paths whose winner is not a tombstone. A path's entries all sit in one part (one stripe).
fn winners(parts: &[Vec<BulkEntry>]) -> Vec<(usize, usize)> {
    let get = |&(p, i): &(usize, usize)| parts.get(p).and_then(|v| v.get(i));
    let mut idx: Vec<(usize, usize)> =
        parts.iter().enumerate().flat_map(|(p, v)| (0..v.len()).map(move |i| (p, i))).collect();
    idx.sort_by(|a, b| match (get(a), get(b)) {
        (Some(x), Some(y)) => x.path.cmp(&y.path).then(x.rank.cmp(&y.rank)).then(a.cmp(b)),
        _ => a.cmp(b),
    });
    let mut out = Vec::new();
    for (k, cur) in idx.iter().enumerate() {
        let Some(e) = get(cur) else { continue };
        let last = idx.get(k + 1).and_then(get).is_none_or(|next| next.path != e.path);
        if last && e.value.is_some() {
            out.push(*cur);
        }
    }
    out
}

/// Moves the chosen records out.
fn take<Rec>(records: Vec<Vec<Rec>>, chosen: &[(usize, usize)]) -> Vec<Rec> {
    let mut slots: Vec<Vec<Option<Rec>>> = records.into_iter().map(|v| v.into_iter().map(Some).collect()).collect();
    chosen.iter().filter_map(|&(p, i)| slots.get_mut(p)?.get_mut(i)?.take()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Spares are kept only when they record what the engine captures, up to a count and a size:
    /// a set grown by a whole-tree capture is dropped rather than held.
    #[test]
    fn only_fitting_change_sets_are_kept() {
        let options = CaptureOptions::ALL.with_level_step(2);
        let mut engine = Engine::new(aldb_core::Config::for_leaves(4096, 1), Some(options)).unwrap();
        let updates: Vec<Update> = (0..4096u32)
            .map(|i| {
                let mut path = [0u8; 32];
                path[..4].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
                Update { path, value: Some([1; 32]) }
            })
            .collect();
        engine.tree.commit(updates);
        let mut whole = ChangeSet::new(options);
        engine.tree.capture_all(&mut whole);
        // Clones hold exactly what they use, so every clone below weighs the same.
        let bytes = whole.clone().heap_bytes();
        assert!(bytes > 4096 * 32, "a whole-tree capture holds every path: {bytes} bytes");
        engine.recycle_within(whole.clone(), bytes - 1);
        assert!(engine.spares.is_empty(), "too large");
        engine.recycle_within(ChangeSet::new(CaptureOptions::ALL), usize::MAX);
        assert!(engine.spares.is_empty(), "other options");
        for _ in 0..MAX_SPARES + 2 {
            engine.recycle_within(whole.clone(), bytes);
        }
        assert_eq!(engine.spares.len(), MAX_SPARES);
    }

    fn e(key: u8, rank: (u64, u64), value: Option<u8>) -> BulkEntry {
        BulkEntry { path: [key; 32], value: value.map(|v| [v; 32]), rank }
    }

    #[test]
    fn winners_take_highest_rank_then_latest_and_skip_tombstones() {
        let parts = vec![
            vec![e(1, (5, 1), Some(1)), e(2, (3, 0), Some(2)), e(1, (5, 2), Some(3)), e(1, (4, 9), Some(4))],
            vec![e(3, (1, 1), Some(5)), e(3, (2, 0), None), e(4, (1, 1), Some(6)), e(4, (1, 1), Some(7))],
        ];
        let mut w = winners(&parts);
        w.sort();
        assert_eq!(w, vec![(0, 1), (0, 2), (1, 3)]);
        let recs = take(vec![vec!['a', 'b', 'c', 'd'], vec!['e', 'f', 'g', 'h']], &w);
        assert_eq!(recs, vec!['b', 'c', 'h']);
    }
}
