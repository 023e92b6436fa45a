//! Building a tree from an unsorted stream of accounts, as the validator sends them at startup.
//!
//! Inserting one at a time would rehash the path of every key. Instead entries are scattered to
//! their shards as they arrive; at the end each shard sorts its entries, keeps the winner of each
//! path, fills its buckets and hashes everything bottom-up, level by level, in parallel.

use aldb_verify::spec::Hash;
use rayon::prelude::*;

use crate::account::{AccountRef, Update};
use crate::config::Config;
use crate::error::CoreError;
use crate::pleiades::{path_cmp, shard_index, Pleiades};

/// One account state offered to the builder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BulkEntry {
    /// Key path.
    pub path: Hash,
    /// Account value hash, or `None` for a tombstone (zero lamports).
    pub value: Option<Hash>,
    /// Which entry wins for a path: the highest rank, and among equal ranks the last pushed.
    /// The plugin uses `(slot, write_version)`.
    pub rank: (u64, u64),
}

/// Collects entries in any order, then builds the tree in one pass.
pub struct BulkBuilder {
    tree: Pleiades,
    parts: Vec<Vec<BulkEntry>>,
    pushed: u64,
}

impl std::fmt::Debug for BulkBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkBuilder").field("pushed", &self.pushed).finish_non_exhaustive()
    }
}

impl BulkBuilder {
    /// A builder for a tree with this layout.
    pub fn new(config: Config) -> Result<Self, CoreError> {
        let tree = Pleiades::new(config)?;
        let parts = (0..1usize << config.shard_bits).map(|_| Vec::new()).collect();
        Ok(Self { tree, parts, pushed: 0 })
    }

    /// Entries pushed so far (before de-duplication).
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Adds entries. Each worker owns a contiguous range of shards and picks out its own entries,
    /// so the scatter runs in parallel with no lock.
    pub fn push(&mut self, entries: &[BulkEntry]) {
        self.pushed += entries.len() as u64;
        let bits = self.tree.config().shard_bits;
        let groups = self.tree.config().threads.max(1);
        let per = self.parts.len().div_ceil(groups);
        let parts = &mut self.parts;
        self.tree.pool().install(|| {
            parts.par_chunks_mut(per).enumerate().for_each(|(g, mine)| {
                let lo = g * per;
                let hi = lo + mine.len();
                for e in entries {
                    let s = shard_index(&e.path, bits);
                    if (lo..hi).contains(&s) {
                        mine[s - lo].push(*e);
                    }
                }
            });
        });
    }

    /// Hashes accounts on the workers and adds them, all with the same rank.
    pub fn push_accounts(&mut self, accounts: &[AccountRef<'_>], rank: (u64, u64)) {
        let entries: Vec<BulkEntry> = self
            .tree
            .hash_accounts(accounts)
            .into_iter()
            .map(|u| BulkEntry { path: u.path, value: u.value, rank })
            .collect();
        self.push(&entries);
    }

    /// Resolves each path's winner, drops tombstones, and builds the tree.
    pub fn finish(self) -> Pleiades {
        let Self { mut tree, parts, .. } = self;
        let sorted: Vec<Vec<Update>> = tree.pool().install(|| {
            parts
                .into_par_iter()
                .map(|mut p| {
                    p.sort_by(|a, b| path_cmp(&a.path, &b.path).then(a.rank.cmp(&b.rank)));
                    let n = p.len();
                    let mut out = Vec::with_capacity(n);
                    for i in 0..n {
                        if i + 1 < n && p[i + 1].path == p[i].path {
                            continue;
                        }
                        if let Some(value) = p[i].value {
                            out.push(Update { path: p[i].path, value: Some(value) });
                        }
                    }
                    out
                })
                .collect()
        });
        tree.load_sorted(sorted);
        tree
    }
}
