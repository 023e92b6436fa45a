//! Applies decided jobs to the Pleiades tree, in order, off the callback path.

use std::collections::BTreeMap;

use aldb_core::{
    BulkBuilder, BulkEntry, CaptureOptions, ChangeSet, ForkEngine, ForkError, ForkLimits, Hash, Pleiades, Update,
};
use aldb_verify::record::BlockInfo;

use crate::control::Job;
use crate::error::Irregularity;
use crate::stats::Counters;
use crate::status::{StatusChange, StatusKind};

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
    /// Under `Commitment::Processed`, the bank's parent (frozen before it, perhaps on another
    /// fork than the previous freeze).
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
    /// The tree entries the commit rewrote (the whole tree for a startup state; under
    /// `Commitment::Processed`, relative to the parent's state), when
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

/// The tree the engine commits to: a plain one, or under `Commitment::Processed` (once the base
/// is built) a fork engine holding every frozen bank.
enum Tree {
    Plain(Pleiades),
    Forks(ForkEngine),
}

pub(crate) struct Engine {
    tree: Tree,
    config: aldb_core::Config,
    capture: Option<CaptureOptions>,
    /// Change sets a consumer is done with, refilled by later commits (see
    /// [`Adapter::recycle_changes`](crate::Adapter::recycle_changes)).
    spares: Vec<ChangeSet>,
    /// `Some` under `Commitment::Processed`: the bounds of the fork engine the base becomes.
    forks: Option<ForkLimits>,
    /// The parent bank hash of each frozen bank the fork engine holds, for its status changes.
    bank_hashes: BTreeMap<u64, Option<Hash>>,
}

/// What applying one job gave.
pub(crate) enum Applied<Rec> {
    /// A commit or a freeze (boxed: the other variants are a few bytes).
    Committed(Box<Committed<Rec>>),
    /// The fork engine refused to freeze this slot.
    Refused(u64),
    /// Bookkeeping only (a status change, a root, a drop): its changes went to the output.
    Nothing,
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
        forks: Option<ForkLimits>,
    ) -> Result<Self, aldb_core::CoreError> {
        Ok(Self {
            tree: Tree::Plain(Pleiades::new(config)?),
            config,
            capture,
            spares: Vec::new(),
            forks,
            bank_hashes: BTreeMap::new(),
        })
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

    /// The tree at the last commit, or at the fork engine's head.
    pub(crate) fn tree(&self) -> &Pleiades {
        match &self.tree {
            Tree::Plain(t) => t,
            Tree::Forks(f) => f.tree(),
        }
    }

    fn plain(&mut self) -> Option<&mut Pleiades> {
        match &mut self.tree {
            Tree::Plain(t) => Some(t),
            Tree::Forks(_) => None,
        }
    }

    /// Applies one job. Status changes it causes (under `Commitment::Processed`) are appended to
    /// `out`, in order.
    pub(crate) fn apply<Rec>(
        &mut self,
        job: Job<Rec>,
        counters: &Counters,
        out: &mut Vec<StatusChange>,
    ) -> Applied<Rec> {
        match job {
            Job::Startup { slot, builder, entries, records } => {
                Applied::Committed(Box::new(self.startup(slot, builder, entries, records, counters, out)))
            }
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
                if let Tree::Forks(_) = self.tree {
                    return match self.freeze(slot, parent, updates, counters, out) {
                        Some((root, changes)) => {
                            self.bank_hashes.insert(slot, parent_bank_hash);
                            Applied::Committed(Box::new(Committed {
                                slot,
                                parent,
                                root,
                                kind,
                                updates: n,
                                records,
                                changes,
                                block,
                                parent_bank_hash,
                            }))
                        }
                        None => Applied::Refused(slot),
                    };
                }
                if kind == CommitKind::Genesis && self.forks.is_some() {
                    return Applied::Committed(Box::new(self.genesis_forks(slot, updates, records, counters, out)));
                }
                let (root, changes) = self.commit(updates);
                Applied::Committed(Box::new(Committed {
                    slot,
                    parent,
                    root,
                    kind,
                    updates: n,
                    records,
                    changes,
                    block,
                    parent_bank_hash,
                }))
            }
            Job::Confirm { slot, block } => {
                self.confirm(slot, block, counters, out);
                Applied::Nothing
            }
            Job::Root { slot, blocks } => {
                self.root(slot, &blocks, counters, out);
                Applied::Nothing
            }
            Job::Drop { slot } => {
                self.drop_bank(slot, counters, out);
                Applied::Nothing
            }
        }
    }

    /// A plain commit onto the tree (under `Commitment::Processed`, only ever the fallback
    /// genesis commit before the fork engine exists).
    fn commit(&mut self, updates: Vec<Update>) -> (Hash, Option<ChangeSet>) {
        let capture = self.capture;
        let mut spare = capture.map(|o| self.change_set(o));
        let tree = match &mut self.tree {
            Tree::Plain(t) => t,
            Tree::Forks(f) => {
                // Unreachable by construction (the control only queues plain commits before the
                // base exists); reported as the head's root, never applied out of order.
                return (f.tree().root(), spare);
            }
        };
        match spare.as_mut() {
            Some(c) => (tree.commit_capture(updates, c), spare),
            None => (tree.commit(updates), None),
        }
    }

    /// Freezes a bank into the fork engine; `None` when it refuses (counted).
    fn freeze(
        &mut self,
        slot: u64,
        parent: Option<u64>,
        updates: Vec<Update>,
        counters: &Counters,
        out: &mut Vec<StatusChange>,
    ) -> Option<(Hash, Option<ChangeSet>)> {
        let Tree::Forks(f) = &self.tree else { return None };
        if f.bank_root(slot).is_some() && slot != f.base() {
            // A new version of a frozen slot: the control drops the old one first, so this is
            // only a guard; the old version is reported all the same.
            self.drop_bank(slot, counters, out);
        }
        let Some(parent) = parent else {
            counters.irregular(Irregularity::EngineRefused);
            Counters::add(&counters.freezes_refused, 1);
            return None;
        };
        let capture = self.capture;
        let mut spare = capture.map(|o| self.change_set(o));
        let Tree::Forks(f) = &mut self.tree else { return None };
        let result = match spare.as_mut() {
            Some(c) => f.freeze_capture(slot, parent, updates, c),
            None => f.freeze(slot, parent, updates),
        };
        match result {
            Ok(root) => Some((root, spare)),
            Err(e) => {
                Counters::add(&counters.freezes_refused, 1);
                if !matches!(
                    e,
                    ForkError::TooManyBanks { .. } | ForkError::TooManyBytes { .. } | ForkError::UnknownParent { .. }
                ) {
                    counters.irregular(Irregularity::EngineRefused);
                }
                if let Some(c) = spare {
                    self.recycle(c);
                }
                None
            }
        }
    }

    /// Reports a frozen bank confirmed, with the root it was frozen with.
    fn confirm(&mut self, slot: u64, block: Option<BlockInfo>, counters: &Counters, out: &mut Vec<StatusChange>) {
        let Tree::Forks(f) = &self.tree else { return };
        let Some(root) = f.bank_root(slot) else { return };
        let parent = if slot == f.base() { None } else { f.parent_of(slot) };
        let parent_bank_hash = self.bank_hashes.get(&slot).copied().flatten();
        out.push(StatusChange { slot, kind: StatusKind::Confirmed, root, parent, block, parent_bank_hash });
        Counters::add(&counters.banks_confirmed, 1);
        counters.last_confirmed.raise(slot);
    }

    /// Every held bank's root and parent, before a call that may drop some.
    fn held(&self) -> BTreeMap<u64, (Hash, Option<u64>)> {
        let Tree::Forks(f) = &self.tree else { return BTreeMap::new() };
        f.banks().filter_map(|s| Some((s, (f.bank_root(s)?, f.parent_of(s))))).collect()
    }

    fn report(
        &mut self,
        slots: &[u64],
        kind: StatusKind,
        held: &BTreeMap<u64, (Hash, Option<u64>)>,
        blocks: &BTreeMap<u64, BlockInfo>,
        out: &mut Vec<StatusChange>,
    ) {
        for &slot in slots {
            let Some(&(root, parent)) = held.get(&slot) else { continue };
            let parent_bank_hash = self.bank_hashes.remove(&slot).flatten();
            let block = blocks.get(&slot).copied();
            out.push(StatusChange { slot, kind, root, parent, block, parent_bank_hash });
        }
    }

    /// Roots the fork engine at `slot`: its chain is finalized, the other forks abandoned.
    fn root(&mut self, slot: u64, blocks: &BTreeMap<u64, BlockInfo>, counters: &Counters, out: &mut Vec<StatusChange>) {
        let held = self.held();
        let Tree::Forks(f) = &mut self.tree else { return };
        match f.root(slot) {
            Ok(r) => {
                self.report(&r.rooted, StatusKind::Finalized, &held, blocks, out);
                self.report(&r.abandoned, StatusKind::Abandoned, &held, blocks, out);
                Counters::add(&counters.banks_finalized, r.rooted.len() as u64);
                Counters::add(&counters.banks_abandoned, r.abandoned.len() as u64);
                if let Some(&top) = r.rooted.last() {
                    counters.last_finalized.raise(top);
                }
            }
            // The control roots only frozen banks, so this means the bank was refused: nothing
            // of it was served.
            Err(_) => counters.irregular(Irregularity::EngineRefused),
        }
    }

    /// Drops a frozen bank and its descendants from the fork engine, reporting them abandoned.
    fn drop_bank(&mut self, slot: u64, counters: &Counters, out: &mut Vec<StatusChange>) {
        let held = self.held();
        let Tree::Forks(f) = &mut self.tree else { return };
        match f.dead(slot) {
            Ok(gone) => {
                self.report(&gone, StatusKind::Abandoned, &held, &BTreeMap::new(), out);
                Counters::add(&counters.banks_abandoned, gone.len() as u64);
            }
            Err(_) => counters.irregular(Irregularity::EngineRefused),
        }
    }

    /// The base (genesis or startup state) becomes the fork engine's rooted slot: confirmed and
    /// final at once.
    fn become_forks(&mut self, slot: u64, tree: Pleiades, counters: &Counters, out: &mut Vec<StatusChange>) -> Hash {
        let limits = self.forks.unwrap_or_default();
        let engine = ForkEngine::new(tree, slot, limits);
        let _ = counters.forks.set(engine.stats());
        let root = engine.base_root();
        self.tree = Tree::Forks(engine);
        for kind in [StatusKind::Confirmed, StatusKind::Finalized] {
            out.push(StatusChange { slot, kind, root, parent: None, block: None, parent_bank_hash: None });
        }
        Counters::add(&counters.banks_confirmed, 1);
        Counters::add(&counters.banks_finalized, 1);
        counters.last_confirmed.raise(slot);
        counters.last_finalized.raise(slot);
        root
    }

    /// Genesis under `Commitment::Processed`: slot 0's accounts are built into a fresh tree (one
    /// per path, so the bulk build gives the root a commit on the empty tree gives), which
    /// becomes the fork engine's base.
    fn genesis_forks<Rec>(
        &mut self,
        slot: u64,
        updates: Vec<Update>,
        records: Vec<Rec>,
        counters: &Counters,
        out: &mut Vec<StatusChange>,
    ) -> Committed<Rec> {
        let n = updates.len();
        let built = BulkBuilder::new(self.config).map(|mut b| {
            let entries: Vec<BulkEntry> =
                updates.iter().map(|u| BulkEntry { path: u.path, value: u.value, rank: (0, 0) }).collect();
            b.push(&entries);
            b.finish()
        });
        let (root, changes) = match built {
            Ok(tree) => {
                let changes = self.capture.map(|options| {
                    let mut c = self.change_set(options);
                    tree.capture_all(&mut c);
                    c
                });
                (self.become_forks(slot, tree, counters, out), changes)
            }
            Err(_) => {
                // No second worker pool: commit genesis into the plain tree; with no fork engine
                // every later freeze is refused and counted.
                counters.irregular(Irregularity::EngineFallback);
                self.commit(updates)
            }
        };
        Committed {
            slot,
            parent: None,
            root,
            kind: CommitKind::Genesis,
            updates: n,
            records,
            changes,
            block: None,
            parent_bank_hash: None,
        }
    }

    /// Builds the startup state: `builder` holds the entries streamed in as they arrived (if
    /// any were), `entries` the rest; `records`, when kept, are parallel to `entries`.
    fn startup<Rec>(
        &mut self,
        slot: u64,
        builder: Option<Box<BulkBuilder>>,
        entries: Vec<Vec<BulkEntry>>,
        records: Vec<Vec<Rec>>,
        counters: &Counters,
        out: &mut Vec<StatusChange>,
    ) -> Committed<Rec> {
        // Records are only worth resolving when the policy keeps something (a streamed startup
        // keeps none: its accounts went to the spill).
        let keeps = std::mem::size_of::<Rec>() != 0 && records.iter().any(|r| !r.is_empty());
        let won = keeps.then(|| winners(&entries));
        let kept = won.as_ref().map(|w| take(records, w)).unwrap_or_default();
        let builder = match builder {
            Some(b) => Ok(*b),
            None => BulkBuilder::new(self.config),
        };
        let built = match builder {
            Ok(mut b) => {
                for part in entries {
                    b.push(&part);
                }
                Some(b.finish())
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
                if let Some(t) = self.plain() {
                    t.commit(updates);
                }
                None
            }
        };
        let changes = self.capture.map(|options| {
            let mut c = self.change_set(options);
            match &built {
                Some(t) => t.capture_all(&mut c),
                None => self.tree().capture_all(&mut c),
            }
            c
        });
        let (root, len) = match built {
            Some(t) if self.forks.is_some() => {
                let len = t.len();
                (self.become_forks(slot, t, counters, out), len)
            }
            Some(t) => {
                let r = (t.root(), t.len());
                self.tree = Tree::Plain(t);
                r
            }
            None => (self.tree().root(), self.tree().len()),
        };
        Committed {
            slot,
            parent: None,
            root,
            kind: CommitKind::Startup,
            updates: len,
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
        let mut engine = Engine::new(aldb_core::Config::for_leaves(4096, 1), Some(options), None).unwrap();
        let updates: Vec<Update> = (0..4096u32)
            .map(|i| {
                let mut path = [0u8; 32];
                path[..4].copy_from_slice(&i.wrapping_mul(2_654_435_761).to_be_bytes());
                Update { path, value: Some([1; 32]) }
            })
            .collect();
        engine.plain().unwrap().commit(updates);
        let mut whole = ChangeSet::new(options);
        engine.tree().capture_all(&mut whole);
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
