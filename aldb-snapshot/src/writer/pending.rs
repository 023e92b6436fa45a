//! Slots merged into one input: the slots between two published ones (`every > 1`), and what a
//! failing writer holds until it can write again.

use std::collections::{BTreeMap, HashMap};

use aldb_core::{CaptureOptions, ChangeSet};
use aldb_verify::spec::Hash;

use crate::batch::AccountBatch;
use crate::serializer::SlotInput;

/// Slots merged while waiting for the next published one (`every > 1`).
#[derive(Default)]
pub(super) struct Pending {
    pub(super) count: u64,
    full: bool,
    slot: u64,
    parent: Option<u64>,
    root: Hash,
    bucket_bits: u8,
    options: CaptureOptions,
    nodes: HashMap<(u8, u64), Hash>,
    /// By bucket index (ordered, as a change set lists its buckets): hash and leaf paths.
    buckets: BTreeMap<u64, (Hash, Vec<Hash>)>,
    accounts: Vec<AccountBatch>,
}

impl Pending {
    pub(super) fn add(&mut self, input: SlotInput) {
        if input.full {
            self.nodes.clear();
            self.buckets.clear();
            self.accounts.clear();
            self.full = true;
        }
        self.count += 1;
        self.slot = input.slot;
        self.parent = input.parent;
        self.root = input.root;
        self.bucket_bits = input.changes.bucket_bits();
        self.options = input.changes.options();
        for n in input.changes.nodes() {
            self.nodes.insert((n.level, n.index), n.hash);
        }
        for b in input.changes.buckets() {
            self.buckets.insert(b.index, (b.hash, b.paths.to_vec()));
        }
        self.accounts.push(input.accounts);
    }

    /// Bytes of account data held.
    pub(super) fn account_bytes(&self) -> usize {
        self.accounts.iter().map(AccountBatch::heap_bytes).sum()
    }

    /// Keeps only the newest version of each account, in one batch: what a failing writer does
    /// before giving up on memory, since most slots rewrite the same hot accounts.
    pub(super) fn compact(&mut self) {
        let mut newest: HashMap<Hash, (usize, usize)> = HashMap::new();
        for (bi, b) in self.accounts.iter().enumerate() {
            for (i, e) in b.entries().iter().enumerate() {
                newest.insert(e.path, (bi, i));
            }
        }
        let mut out = AccountBatch::default();
        // A spilled full state stays on disk; only the accounts merged on top are compacted.
        if let Some(spill) = self.accounts.iter_mut().find_map(AccountBatch::take_spill) {
            out = AccountBatch::from_spill(spill);
        }
        for (bi, b) in self.accounts.iter().enumerate() {
            for (i, e) in b.entries().iter().enumerate() {
                if newest.get(&e.path) == Some(&(bi, i))
                    && let Some(a) = b.get(i)
                {
                    out.push(e.path, &a);
                }
            }
        }
        self.accounts = vec![out];
    }

    pub(super) fn take(&mut self) -> SlotInput {
        // The serializer only reads leaf paths, so merged leaf values are not kept.
        let mut changes = ChangeSet::by_hand(self.bucket_bits, self.options.without_leaf_values());
        for ((level, index), hash) in self.nodes.drain() {
            changes.push_node(level, index, hash);
        }
        for (index, (hash, paths)) in std::mem::take(&mut self.buckets) {
            changes.push_bucket(index, hash, &paths, &[]);
        }
        let mut accounts = AccountBatch::default();
        if let Some(spill) = self.accounts.iter_mut().find_map(AccountBatch::take_spill) {
            accounts = AccountBatch::from_spill(spill);
        }
        for batch in self.accounts.drain(..) {
            for i in 0..batch.len() {
                if let (Some(a), Some(e)) = (batch.get(i), batch.entries().get(i)) {
                    accounts.push(e.path, &a);
                }
            }
        }
        let full = std::mem::take(&mut self.full);
        self.count = 0;
        SlotInput { slot: self.slot, parent: self.parent, root: self.root, changes, accounts, full }
    }
}
