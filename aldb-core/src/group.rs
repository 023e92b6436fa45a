//! A run of neighbouring shards, committed by one worker as if it were one shard.
//!
//! Shards keep workers apart, but a small commit leaves each shard only a handful of updates: at
//! 2^26 leaves and 1024 shards a bank of 20k updates gives each about 20. Applied shard by shard,
//! every shard would restart the prefetch pipelines (bucket headers and leaves one to three steps
//! of 32 updates ahead, prefix lines 8 nodes ahead), so most of its random reads would wait on
//! DRAM one after another, and would hash each of its levels in a few part-filled 16-lane batches.
//!
//! Neighbouring shards are neighbouring path ranges, so a run of them has one sorted list of
//! updates. A worker takes a run and goes through it in passes of a few hundred updates, each
//! over as many whole shards as that takes, and does each step over all of a pass: one merge
//! whose prefetches run on across shard boundaries, one batch of bucket hashes, and the prefix
//! levels of its shards rehashed level by level together. A pass is long enough to keep the
//! pipelines and the SIMD lanes full, and short enough that the leaves it merged are still in
//! cache when it hashes them (longer passes measured slower); with hundreds of updates per shard
//! a pass is one shard, exactly as before.

use aldb_verify::spec::Hash;

use crate::account::Update;
use crate::bucket::{BucketScratch, hash_buckets};
use crate::changes::{CaptureOptions, ShardCapture};
use crate::levels::{LevelScratch, LevelTree, group_key, rehash_group};
use crate::path::path_cmp;
use crate::prefetch::prefetch;
use crate::shard::{Shard, UndoSink};
use crate::slab::Leaf;

/// Updates whose leaves the merge prefetches at a time, and how many such steps ahead of the
/// leaves their bucket headers are prefetched.
const PREFETCH_STEP: usize = 32;
const HEADER_STEPS: usize = 3;
/// How far ahead of the bucket hash being stored its prefix line is prefetched.
const PREFETCH_BOTTOM: usize = 8;

/// Updates below which a run is not split further: fewer would shorten the pipelines again.
const MIN_RUN_UPDATES: usize = 2048;
/// Updates a pass gathers shards for (a pass ends at the first shard boundary past it).
const PASS_UPDATES: usize = 256;
/// Runs per worker for a large commit, so a worker slowed down by others can be relieved.
const RUNS_PER_WORKER: usize = 4;

/// Per-worker buffers, reused from one run to the next.
#[derive(Default)]
pub(crate) struct GroupScratch {
    merged: Vec<Leaf>,
    /// The run's changed buckets, as [`group_key`]s (shard within the run, bucket), sorted.
    pub(crate) dirty: Vec<u64>,
    hashes: Vec<Hash>,
    /// The pass's shards' leaf counts before the commit, and their ends in the kept updates.
    before: Vec<usize>,
    ends: Vec<usize>,
    bucket: BucketScratch,
    level: LevelScratch,
}

/// Where a run's commit records its changes: the change set's parts of the run's shards.
pub(crate) struct GroupCapture<'a> {
    pub(crate) parts: &'a mut [ShardCapture],
    pub(crate) options: CaptureOptions,
    /// The levels to record ([`CaptureOptions::level_mask`]), bit `d` for global level `d`.
    pub(crate) levels: u32,
}

/// What one shard's part of a commit did.
pub(crate) struct ShardResult {
    pub(crate) shard: usize,
    pub(crate) delta: isize,
    /// Whether the change set's part for the shard holds this commit's changes of it.
    pub(crate) captured: bool,
}

/// Splits shards `0..n` into runs of neighbours holding about equal shares of the updates;
/// `offsets[k]` is where shard `k`'s updates start (`n + 1` entries). Returns the runs' first
/// shards followed by `n`; a run may hold no update.
pub(crate) fn runs(offsets: &[usize], workers: usize) -> Vec<usize> {
    let n = offsets.len().saturating_sub(1);
    let total = offsets.last().copied().unwrap_or(0);
    let workers = workers.max(1);
    let count = (total / MIN_RUN_UPDATES).clamp(workers, workers * RUNS_PER_WORKER).min(n.max(1));
    let per = total.div_ceil(count).max(1);
    let mut bounds = vec![0usize];
    for (k, &start) in offsets.iter().enumerate().take(n).skip(1) {
        if start >= per * bounds.len() && bounds.len() < count {
            bounds.push(k);
        }
    }
    bounds.push(n);
    bounds
}

/// Applies a run's updates: `ops[starts[k]..starts[k + 1]]` are shard `k`'s (any order, later
/// ones win; `starts` is relative to `ops`). Sorts each shard's updates keeping the last of each
/// path and moves them together to the front of `ops`, in path order; merges them in, sending
/// the old state of every changed path to `undo` in path order; rehashes what changed and records
/// it in `capture`. Pushes a [`ShardResult`] for each shard that changed, `first` being the global
/// index of `shards[0]`, and returns how many updates were kept at the front of `ops`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn commit<U: UndoSink>(
    first: usize,
    shards: &mut [Shard],
    ops: &mut [Update],
    starts: &[usize],
    mut capture: Option<GroupCapture<'_>>,
    undo: &mut U,
    s: &mut GroupScratch,
    results: &mut Vec<ShardResult>,
) -> usize {
    debug_assert_eq!(starts.len(), shards.len() + 1);
    let mut kept = 0;
    let mut lo = 0;
    while lo < shards.len() {
        let mut hi = lo + 1;
        while hi < shards.len() && starts[hi] - starts[lo] < PASS_UPDATES {
            hi += 1;
        }
        let pass_capture = capture.as_mut().map(|c| GroupCapture {
            parts: &mut c.parts[lo..hi],
            options: c.options,
            levels: c.levels,
        });
        let pass = Pass { first: first + lo, starts: &starts[lo..=hi], kept };
        kept = pass.commit(&mut shards[lo..hi], ops, pass_capture, undo, s, results);
        lo = hi;
    }
    kept
}

/// Neighbouring shards of a run done in one go.
struct Pass<'a> {
    /// The global index of the first shard.
    first: usize,
    /// Where each shard's updates start in the run's updates, and the end of the last.
    starts: &'a [usize],
    /// The run's updates kept by the passes before, at the front of its updates.
    kept: usize,
}

impl Pass<'_> {
    /// [`commit`] of the pass's shards; returns the run's kept updates so far.
    fn commit<U: UndoSink>(
        self,
        shards: &mut [Shard],
        ops: &mut [Update],
        mut capture: Option<GroupCapture<'_>>,
        undo: &mut U,
        s: &mut GroupScratch,
        results: &mut Vec<ShardResult>,
    ) -> usize {
        let Pass { first, starts, kept: from } = self;
        s.ends.clear();
        s.before.clear();
        let mut kept = from;
        for (k, w) in starts.windows(2).enumerate() {
            let n = sort_keep_last(&mut ops[w[0]..w[1]]);
            // Never forward: the kept updates of the shards before take at most their room.
            ops.copy_within(w[0]..w[0] + n, kept);
            kept += n;
            s.ends.push(kept - from);
            s.before.push(shards[k].len());
        }
        merge(shards, &ops[from..kept], undo, s);
        if let Some(c) = capture.as_mut() {
            // Every shard given updates reports its part as this commit's, changed or not.
            for (k, w) in starts.windows(2).enumerate() {
                if w[1] > w[0] {
                    c.parts[k].clear();
                }
            }
        }
        let captured = capture.is_some();
        let mut k_last = usize::MAX;
        for &key in &s.dirty {
            let k = (key >> 32) as usize;
            if k != k_last {
                k_last = k;
                results.push(ShardResult {
                    shard: first + k,
                    delta: shards[k].len() as isize - s.before[k] as isize,
                    captured,
                });
            }
        }
        if !s.dirty.is_empty() {
            rehash(shards, s, capture);
        }
        kept
    }
}

/// Merges a pass's kept updates (`s.ends` marks each shard's end) into its shards, filling
/// `s.dirty`. Prefetches run ahead over the updates, whichever shard they fall in.
///
/// They are issued a step of updates at a time, each step in a loop of its own, and cover every
/// leaf of a bucket, not only its first line (the merge reads them all). Interleaved with the
/// merge work, hundreds of instructions per update, a prefetch that stalled (the core's miss
/// buffers full, or a page walk for a leaf on a 4 KiB page) held up the merge behind it; profiles
/// put most of the merge's time on the instruction after its prefetches. A short loop keeps the
/// misses overlapping, and the merge then works on lines already in cache.
fn merge<U: UndoSink>(shards: &mut [Shard], ops: &[Update], undo: &mut U, s: &mut GroupScratch) {
    s.dirty.clear();
    let n = ops.len();
    // Headers are fetched up to `HEADER_STEPS` steps ahead of the leaves, the leaves one to two
    // steps ahead of the merge; `kh`, `kl` and `k` are the shards holding the next update of each.
    let (mut heads, mut leaves) = (0usize, 0usize);
    let (mut k, mut kl, mut kh) = (0usize, 0usize, 0usize);
    let shard_at = |k: &mut usize, i: usize| {
        while s.ends[*k] <= i {
            *k += 1;
        }
    };
    let mut i = 0;
    while i < n {
        if leaves < n && i + PREFETCH_STEP >= leaves {
            let to = (leaves + HEADER_STEPS * PREFETCH_STEP).min(n);
            for (j, op) in ops.iter().enumerate().take(to).skip(heads) {
                shard_at(&mut kh, j);
                shards[kh].prefetch_header(&op.path);
            }
            heads = heads.max(to);
            let to = (leaves + PREFETCH_STEP).min(n);
            for (j, op) in ops.iter().enumerate().take(to).skip(leaves) {
                shard_at(&mut kl, j);
                shards[kl].prefetch_leaves(&op.path);
            }
            leaves = to;
        }
        shard_at(&mut k, i);
        let shard = &mut shards[k];
        let end_of_shard = s.ends[k];
        let b = shard.bucket_of(&ops[i].path);
        let mut end = i + 1;
        while end < end_of_shard && shard.bucket_of(&ops[end].path) == b {
            end += 1;
        }
        if shard.merge_bucket(b, &ops[i..end], &mut s.merged, undo) {
            s.dirty.push(group_key(k, b));
        }
        i = end;
    }
}

/// Rehashes the buckets in `s.dirty` (sorted [`group_key`]s over `shards`) and every prefix
/// above them, recording them in `capture`: all the run's bucket hashes in one batch, then the
/// shards' prefix levels together.
pub(crate) fn rehash(shards: &mut [Shard], s: &mut GroupScratch, capture: Option<GroupCapture<'_>>) {
    let key = |x: u64| ((x >> 32) as usize, (x & 0xFFFF_FFFF) as usize);
    {
        let refs: Vec<&[Leaf]> = s
            .dirty
            .iter()
            .map(|&x| {
                let (k, b) = key(x);
                shards[k].bucket_leaves(b)
            })
            .collect();
        hash_buckets(&refs, &mut s.hashes, &mut s.bucket);
    }
    for (at, (&x, h)) in s.dirty.iter().zip(&s.hashes).enumerate() {
        if let Some(&ahead) = s.dirty.get(at + PREFETCH_BOTTOM) {
            let (k, b) = key(ahead);
            prefetch(shards[k].levels().bottom_ptr(b));
        }
        let (k, b) = key(x);
        shards[k].levels_mut().set_bottom(b, *h);
    }
    match capture {
        Some(GroupCapture { parts, options, levels }) => {
            for (&x, h) in s.dirty.iter().zip(&s.hashes) {
                let (k, b) = key(x);
                shards[k].capture_bucket(b as u32, *h, &mut parts[k], options);
            }
            let mut lists: Vec<&mut Vec<(u8, u32, Hash)>> = parts.iter_mut().map(|p| &mut p.nodes).collect();
            let mut trees: Vec<&mut LevelTree> = shards.iter_mut().map(Shard::levels_mut).collect();
            rehash_group(&mut trees, &s.dirty, &mut s.level, Some((&mut lists, levels)));
        }
        None => {
            let mut trees: Vec<&mut LevelTree> = shards.iter_mut().map(Shard::levels_mut).collect();
            rehash_group(&mut trees, &s.dirty, &mut s.level, None);
        }
    }
}

/// Sorts by path (stable) and keeps the last update of each path at the front; returns how many.
fn sort_keep_last(ops: &mut [Update]) -> usize {
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
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_split_updates_evenly_over_neighbouring_shards() {
        // 64 shards of 100 updates: 6400 updates make 3 runs with 2 workers.
        let offsets: Vec<usize> = (0..=64).map(|k| k * 100).collect();
        assert_eq!(runs(&offsets, 2), vec![0, 22, 43, 64]);
        // Large commits stop at four runs per worker.
        let offsets: Vec<usize> = (0..=64).map(|k| k * 10_000).collect();
        assert_eq!(runs(&offsets, 2).len(), 9);
        // A tiny commit still gives every worker a run, and never more runs than shards.
        assert_eq!(runs(&[0, 3, 5], 2), vec![0, 1, 2]);
        assert_eq!(runs(&[0, 7], 4), vec![0, 1]);
        assert_eq!(runs(&[0, 0, 0, 0], 2), vec![0, 3]);
    }
}
