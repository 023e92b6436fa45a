//! Pleiades: the sharded tree that commits one root per slot.

use aldb_verify::spec::{EMPTY_ROOT, Hash};
use aldb_verify::{Proof, Sibling, Terminal};
use rayon::prelude::*;

use crate::account::{AccountRef, Update, hash_accounts_into};
use crate::changes::{CaptureSink, ChangeSet, ShardCapture};
use crate::config::Config;
use crate::error::CoreError;
use crate::group::{self, GroupCapture, GroupScratch, ShardResult};
use crate::huge::HugeArray;
use crate::levels::{LevelScratch, LevelTree};
use crate::path::shard_index;
use crate::shard::{NoUndo, Shard, UndoSlice};
use crate::slab::BucketRef;

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
    /// The undo entries of the last recorded commit, kept likewise.
    undo_scratch: Vec<Update>,
    /// One set of buffers per run of shards, kept so a commit does not fault in fresh ones.
    run_scratch: Vec<GroupScratch>,
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
        let mut builder =
            rayon::ThreadPoolBuilder::new().num_threads(config.threads).thread_name(|i| format!("pleiades-{i}"));
        let cpus = if config.pin_workers { crate::affinity::allowed_cpus() } else { Vec::new() };
        if !cpus.is_empty() {
            // A refused pin leaves that worker unpinned: placement is a speed matter only.
            builder = builder.start_handler(move |i| {
                crate::affinity::pin_current(cpus[i % cpus.len()]);
            });
        }
        let pool = builder.build()?;
        let height = config.bucket_bits - config.shard_bits;
        let width = 1usize << height;
        // SAFETY: an all-zero BucketRef is an empty bucket.
        let headers = unsafe { HugeArray::<BucketRef>::zeroed(width << config.shard_bits) };
        let shards = headers.split(width).into_iter().map(|b| Shard::new(config.shard_bits, height, b)).collect();
        Ok(Self {
            config,
            pool,
            shards,
            top: LevelTree::new(0, config.shard_bits),
            top_scratch: LevelScratch::default(),
            scratch: Vec::new(),
            undo_scratch: Vec::new(),
            run_scratch: Vec::new(),
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
        let mut changes = changes;
        let done = self.apply_runs(&mut parts, &offsets, None, changes.as_deref_mut());
        self.scratch = parts;
        self.finish_commit(done.into_iter().flat_map(|d| d.results).collect(), changes);
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

    /// Applies each shard's updates (`parts[offsets[k]..offsets[k + 1]]` for shard `k`, any
    /// order, later ones win) on the workers, each taking a run of neighbouring shards with no
    /// lock (see `group.rs`). With `undo` (as long as `parts`), each run writes the old state of
    /// the paths it changed into its own stretch of it.
    fn apply_runs(
        &mut self,
        parts: &mut [Update],
        offsets: &[usize],
        undo: Option<&mut [Update]>,
        capture: Option<&mut ChangeSet>,
    ) -> Vec<RunDone> {
        let bounds = group::runs(offsets, self.config.threads);
        let runs = bounds.len() - 1;
        if self.run_scratch.len() < runs {
            self.run_scratch.resize_with(runs, GroupScratch::default);
        }
        let (options, levels, mut caps) = match capture {
            Some(c) => {
                let options = c.options();
                let levels = options.level_mask(c.bucket_bits());
                (options, levels, Some(c.parts_mut()))
            }
            None => (Default::default(), 0, None),
        };
        // Cut the shards, the updates, the undo buffer and the change set's parts at the runs'
        // bounds, so each task owns its pieces.
        let mut tasks = Vec::with_capacity(runs);
        let mut shards: &mut [Shard] = &mut self.shards;
        let mut ops: &mut [Update] = parts;
        let mut undo = undo;
        let mut scratch = self.run_scratch.iter_mut();
        for w in bounds.windows(2) {
            let (lo, hi) = (w[0], w[1]);
            let len = offsets[hi] - offsets[lo];
            let (run_shards, rest) = std::mem::take(&mut shards).split_at_mut(hi - lo);
            shards = rest;
            let (run_ops, rest) = std::mem::take(&mut ops).split_at_mut(len);
            ops = rest;
            let run_undo = undo.take().map(|u| {
                let (mine, rest) = u.split_at_mut(len);
                undo = Some(rest);
                mine
            });
            let run_caps = caps.take().map(|c: &mut [ShardCapture]| {
                let (mine, rest) = c.split_at_mut(hi - lo);
                caps = Some(rest);
                GroupCapture { parts: mine, options, levels }
            });
            let Some(s) = scratch.next() else { break };
            if len == 0 {
                continue;
            }
            let starts: Vec<usize> = offsets[lo..=hi].iter().map(|o| o - offsets[lo]).collect();
            tasks.push(Run {
                first: lo,
                at: offsets[lo],
                shards: run_shards,
                ops: run_ops,
                starts,
                undo: run_undo,
                capture: run_caps,
                scratch: s,
            });
        }
        self.pool.install(|| tasks.into_par_iter().map(Run::commit).collect())
    }
}

/// One run of neighbouring shards and what a commit gives it.
struct Run<'a> {
    first: usize,
    /// Where the run's updates start in the commit's partitioned updates.
    at: usize,
    shards: &'a mut [Shard],
    ops: &'a mut [Update],
    starts: Vec<usize>,
    undo: Option<&'a mut [Update]>,
    capture: Option<GroupCapture<'a>>,
    scratch: &'a mut GroupScratch,
}

/// What one run's commit did.
struct RunDone {
    at: usize,
    /// The run's updates as applied, sorted and unique, are `parts[at..at + kept]`.
    kept: usize,
    /// The run's undo entries are `undo[at..at + undone]`.
    undone: usize,
    results: Vec<ShardResult>,
}

impl Run<'_> {
    fn commit(self) -> RunDone {
        let Run { first, at, shards, ops, starts, undo, capture, scratch } = self;
        let mut results = Vec::new();
        let (kept, undone) = match undo {
            Some(buf) => {
                let mut sink = UndoSlice { buf, len: 0 };
                let kept = group::commit(first, shards, ops, &starts, capture, &mut sink, scratch, &mut results);
                (kept, sink.len)
            }
            None => (group::commit(first, shards, ops, &starts, capture, &mut NoUndo, scratch, &mut results), 0),
        };
        RunDone { at, kept, undone, results }
    }
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
