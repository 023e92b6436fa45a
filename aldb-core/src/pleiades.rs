//! Pleiades: the sharded tree that commits one root per slot.

use aldb_verify::spec::{EMPTY_ROOT, Hash};
use aldb_verify::{Proof, Sibling, Terminal};
use rayon::prelude::*;

use crate::account::{AccountRef, Update, hash_accounts_into};
use crate::changes::{CaptureSink, ChangeSet};
use crate::config::Config;
use crate::error::CoreError;
use crate::levels::{LevelScratch, LevelTree};
use crate::path::{path_cmp, shard_index};
use crate::shard::{NoUndo, Shard, ShardScratch, UndoSink};

mod record;

/// Accounts hashed per task: enough for full SIMD batches, small enough to balance.
const HASH_CHUNK: usize = 1024;

/// The in-memory commitment tree.
///
/// Updates for a slot are applied as one batch by [`Pleiades::commit`], which returns the new
/// root. The root is a pure function of the set of (path, value) pairs in the tree: the same set
/// gives the same root whatever the layout, thread count, batch boundaries or history.
pub struct Pleiades {
    config: Config,
    pool: rayon::ThreadPool,
    shards: Vec<Shard>,
    top: LevelTree,
    top_scratch: LevelScratch,
    /// The partitioned updates of the last commit, kept to reuse the allocation.
    scratch: Vec<Update>,
    len: usize,
}

impl std::fmt::Debug for Pleiades {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pleiades").field("config", &self.config).field("len", &self.len).finish_non_exhaustive()
    }
}

impl Pleiades {
    /// An empty tree with the given layout.
    pub fn new(config: Config) -> Result<Self, CoreError> {
        config.validate()?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(config.threads)
            .thread_name(|i| format!("pleiades-{i}"))
            .build()?;
        let height = config.bucket_bits - config.shard_bits;
        let shards = (0..1usize << config.shard_bits).map(|_| Shard::new(config.shard_bits, height)).collect();
        Ok(Self {
            config,
            pool,
            shards,
            top: LevelTree::new(0, config.shard_bits),
            top_scratch: LevelScratch::default(),
            scratch: Vec::new(),
            len: 0,
        })
    }

    /// The layout in use.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The root of the last commit (32 zero bytes for the empty tree).
    pub fn root(&self) -> Hash {
        self.top.root()
    }

    /// Number of leaves (accounts with non-zero lamports).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tree has no leaves.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn shard_of(&self, path: &Hash) -> usize {
        shard_index(path, self.config.shard_bits)
    }

    /// Hashes accounts into updates on the worker threads, in SIMD batches.
    pub fn hash_accounts(&self, accounts: &[AccountRef<'_>]) -> Vec<Update> {
        let mut out = Vec::new();
        self.hash_accounts_to(accounts, &mut out);
        out
    }

    /// Like [`Pleiades::hash_accounts`], into `out` (replaced), so a caller can reuse its memory.
    pub(crate) fn hash_accounts_to(&self, accounts: &[AccountRef<'_>], out: &mut Vec<Update>) {
        out.clear();
        out.resize(accounts.len(), Update { path: [0; 32], value: None });
        self.pool.install(|| {
            out.par_chunks_mut(HASH_CHUNK)
                .zip(accounts.par_chunks(HASH_CHUNK))
                .for_each(|(o, a)| hash_accounts_into(a, o));
        });
    }

    /// Hashes and commits one slot's accounts; a later account with the same pubkey wins.
    pub fn commit_accounts(&mut self, accounts: &[AccountRef<'_>]) -> Hash {
        let updates = self.hash_accounts(accounts);
        self.commit(updates)
    }

    /// Applies one slot's updates as a batch and returns the new root.
    ///
    /// Later updates of the same path win. The updates are split by shard, and each shard is
    /// applied and rehashed by one worker with no lock; the shard roots are then combined.
    pub fn commit(&mut self, updates: Vec<Update>) -> Hash {
        self.commit_inner(updates, None)
    }

    /// Like [`Pleiades::commit`], and also records every prefix and bucket it rewrote in
    /// `changes` (cleared first, its options and allocations kept), for the snapshot writer.
    pub fn commit_capture(&mut self, updates: Vec<Update>, changes: &mut ChangeSet) -> Hash {
        changes.reset(self.config.bucket_bits, self.config.shard_bits, self.shards.len());
        self.commit_inner(updates, Some(changes))
    }

    /// Records the whole tree in `changes` (cleared first): what a full snapshot holds.
    pub fn capture_all(&self, changes: &mut ChangeSet) {
        changes.reset(self.config.bucket_bits, self.config.shard_bits, self.shards.len());
        let options = changes.options();
        let levels = options.level_mask(self.config.bucket_bits);
        self.pool.install(|| {
            self.shards
                .par_iter()
                .zip(changes.parts_mut().par_iter_mut())
                .for_each(|(shard, part)| shard.capture_all(CaptureSink { part, options, levels }));
        });
        for (i, shard) in self.shards.iter().enumerate() {
            if shard.len() != 0 {
                changes.mark_changed(i as u32);
            }
        }
        let top = changes.top_mut();
        self.top.for_each_node(levels, |r, j, h| top.push((r, j, *h)));
    }

    fn commit_inner(&mut self, updates: Vec<Update>, changes: Option<&mut ChangeSet>) -> Hash {
        let shard_bits = self.config.shard_bits;
        let workers = self.config.threads;
        let mut parts = std::mem::take(&mut self.scratch);
        let offsets = self.pool.install(|| {
            partition(&updates, 1usize << shard_bits, |u| shard_index(&u.path, shard_bits), workers, &mut parts)
        });
        drop(updates);
        let slices = split_by_offsets(&mut parts, &offsets);
        let mut changes = changes;
        let results = self.apply_parts(slices, true, changes.as_deref_mut());
        self.scratch = parts;
        self.finish_commit(results, changes);
        self.root()
    }

    /// Folds changed shards' roots into the top of the tree.
    fn finish_commit(&mut self, results: Vec<ShardResult>, changes: Option<&mut ChangeSet>) {
        let mut dirty = Vec::with_capacity(results.len());
        for r in &results {
            self.len = self.len.saturating_add_signed(r.delta);
            self.top.set_bottom(r.shard, self.shards[r.shard].root());
            dirty.push(r.shard as u32);
        }
        match changes {
            Some(out) => {
                // Results come in shard order, as `ChangeSet::buckets` needs.
                for r in results.iter().filter(|r| r.captured) {
                    out.mark_changed(r.shard as u32);
                }
                let levels = out.options().level_mask(self.config.bucket_bits);
                self.top.rehash(&dirty, &mut self.top_scratch, Some((out.top_mut(), levels)));
            }
            None => self.top.rehash(&dirty, &mut self.top_scratch, None),
        }
    }

    /// The account value hash stored at `path`, if the account is present.
    pub fn get(&self, path: &Hash) -> Option<Hash> {
        self.shards[self.shard_of(path)].get(path)
    }

    /// An inclusion or exclusion proof for `path` against the current root.
    pub fn prove(&self, path: &Hash) -> Proof {
        if self.root() == EMPTY_ROOT {
            return Proof { siblings: Vec::new(), terminal: Terminal::Empty };
        }
        let mut steps = Vec::new();
        let s = self.top.walk(self.shard_of(path), &mut steps);
        let shard = &self.shards[s];
        shard.prefetch_bucket(path);
        let terminal = match shard.walk(path, &mut steps) {
            Some(leaf) => Terminal::Leaf { path: leaf.path, value: leaf.value },
            // A non-empty root always leads to a leaf; an empty terminal is the honest fallback.
            None => Terminal::Empty,
        };
        Proof { siblings: steps.into_iter().map(|(depth, hash)| Sibling { depth, hash }).collect(), terminal }
    }

    /// An inclusion or exclusion proof for the account `pubkey`.
    pub fn prove_pubkey(&self, pubkey: &[u8; 32]) -> Proof {
        self.prove(&aldb_verify::spec::key_path(pubkey))
    }

    /// Every (path, value) in path order.
    pub fn iter(&self) -> impl Iterator<Item = (&Hash, &Hash)> + '_ {
        self.shards.iter().flat_map(Shard::leaves)
    }

    /// Heap bytes held by the tree's own structures.
    pub fn heap_bytes(&self) -> usize {
        self.shards.iter().map(Shard::heap_bytes).sum::<usize>() + self.top.heap_bytes()
    }

    pub(crate) fn pool(&self) -> &rayon::ThreadPool {
        &self.pool
    }

    /// The worker pool and the shards, for a bulk build that fills each shard on a worker.
    pub(crate) fn pool_and_shards(&mut self) -> (&rayon::ThreadPool, &mut [Shard]) {
        (&self.pool, &mut self.shards)
    }

    /// After a bulk build filled the shards of an empty tree: folds their roots into the top.
    pub(crate) fn finish_load(&mut self) {
        debug_assert_eq!(self.len, 0);
        let results = (self.shards.iter().enumerate())
            .filter(|(_, s)| s.len() != 0)
            .map(|(shard, s)| ShardResult { shard, delta: s.len() as isize, captured: false })
            .collect();
        self.finish_commit(results, None);
    }

    /// Applies each shard's updates on the workers, one worker per shard and no lock. `sort`
    /// orders a shard's updates by path keeping the last of each path; without it they must
    /// already be sorted and unique.
    fn apply_parts(
        &mut self,
        parts: Vec<&mut [Update]>,
        sort: bool,
        capture: Option<&mut ChangeSet>,
    ) -> Vec<ShardResult> {
        let shards = &mut self.shards;
        let slots: Vec<Option<CaptureSink<'_>>> = match capture {
            Some(c) => {
                let options = c.options();
                let levels = options.level_mask(c.bucket_bits());
                c.parts_mut().iter_mut().map(|part| Some(CaptureSink { part, options, levels })).collect()
            }
            None => (0..shards.len()).map(|_| None).collect(),
        };
        self.pool.install(|| {
            shards
                .par_iter_mut()
                .zip(parts)
                .zip(slots)
                .enumerate()
                .filter(|(_, ((_, ops), _))| !ops.is_empty())
                .map_init(ShardScratch::default, |scratch, (i, ((shard, ops), c))| {
                    let ops: &[Update] = if sort { sort_keep_last(ops) } else { ops };
                    apply_to_shard(i, shard, ops, scratch, c, &mut NoUndo)
                })
                .flatten()
                .collect()
        })
    }
}

/// What one shard's part of a commit did.
struct ShardResult {
    shard: usize,
    delta: isize,
    /// Whether the change set's part for the shard holds this commit's changes of it.
    captured: bool,
}

fn apply_to_shard<U: UndoSink>(
    i: usize,
    shard: &mut Shard,
    ops: &[Update],
    scratch: &mut ShardScratch,
    mut capture: Option<CaptureSink<'_>>,
    undo: &mut U,
) -> Option<ShardResult> {
    let before = shard.len() as isize;
    if let Some(c) = capture.as_mut() {
        c.part.clear();
    }
    let captured = capture.is_some();
    let changed = shard.commit(ops, scratch, capture, undo);
    changed.then(|| ShardResult { shard: i, delta: shard.len() as isize - before, captured })
}

/// Stable counting sort of `items` into `n` groups, written into `out` (reused across commits so
/// its pages stay mapped); returns the group start offsets.
///
/// Runs on the workers: each counts a chunk, then each owns a contiguous range of groups holding
/// about an equal share of the items and copies its own items into its part of `out`, so no two
/// workers write the same memory and no lock is needed.
pub(crate) fn partition<T: Copy + Send + Sync>(
    items: &[T],
    n: usize,
    key: impl Fn(&T) -> usize + Sync,
    workers: usize,
    out: &mut Vec<T>,
) -> Vec<usize> {
    let chunk = items.len().div_ceil(workers.max(1)).max(4096);
    let counts: Vec<Vec<usize>> = items
        .par_chunks(chunk)
        .map(|c| {
            let mut h = vec![0usize; n];
            for it in c {
                h[key(it)] += 1;
            }
            h
        })
        .collect();
    let mut offsets = vec![0usize; n + 1];
    for h in &counts {
        for (k, c) in h.iter().enumerate() {
            offsets[k + 1] += c;
        }
    }
    for k in 0..n {
        offsets[k + 1] += offsets[k];
    }
    out.clear();
    let Some(&first) = items.first() else { return offsets };
    out.resize(items.len(), first);
    // Group boundaries: contiguous group ranges with about len/workers items each.
    let per = items.len().div_ceil(workers.max(1));
    let mut bounds = vec![0usize];
    for (k, &start) in offsets.iter().enumerate().take(n).skip(1) {
        if start >= per * bounds.len() && bounds.len() < workers {
            bounds.push(k);
        }
    }
    bounds.push(n);
    let mut parts: Vec<(usize, usize, &mut [T])> = Vec::with_capacity(bounds.len());
    let mut rest: &mut [T] = out;
    for w in bounds.windows(2) {
        let (lo, hi) = (w[0], w[1]);
        let (head, tail) = rest.split_at_mut(offsets[hi] - offsets[lo]);
        parts.push((lo, hi, head));
        rest = tail;
    }
    parts.into_par_iter().for_each(|(lo, hi, dst)| {
        let base = offsets[lo];
        let mut next: Vec<usize> = offsets[lo..hi].iter().map(|o| o - base).collect();
        for it in items {
            let k = key(it);
            if (lo..hi).contains(&k) {
                dst[next[k - lo]] = *it;
                next[k - lo] += 1;
            }
        }
    });
    offsets
}

fn split_by_offsets<'a, T>(mut items: &'a mut [T], offsets: &[usize]) -> Vec<&'a mut [T]> {
    let mut out = Vec::with_capacity(offsets.len().saturating_sub(1));
    for w in offsets.windows(2) {
        let (head, tail) = items.split_at_mut(w[1] - w[0]);
        out.push(head);
        items = tail;
    }
    out
}

/// Sorts by path (stable) and keeps the last update of each path.
fn sort_keep_last(ops: &mut [Update]) -> &[Update] {
    ops.sort_by(|a, b| path_cmp(&a.path, &b.path));
    let n = ops.len();
    let mut w = 0;
    for r in 0..n {
        if r + 1 < n && ops[r + 1].path == ops[r].path {
            continue;
        }
        ops[w] = ops[r];
        w += 1;
    }
    &ops[..w]
}
