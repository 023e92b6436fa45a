//! One shard: every key whose path starts with the shard's prefix, owned by one worker at a time.
//!
//! A shard is the unit of ownership. A commit hands each shard its slice of the slot's updates
//! and a worker applies them with no lock: nothing else can reach the shard meanwhile (a worker
//! takes a run of neighbouring shards at a time, see `group.rs`). Inside, the shard's prefix range
//! is cut into `2^height` buckets by the next path bits, and a [`LevelTree`] holds the hash of
//! every prefix down to the buckets.

use aldb_verify::spec::Hash;

use crate::account::Update;
use crate::bucket;
use crate::changes::{CaptureOptions, CaptureSink, ShardCapture};
use crate::group::{GroupScratch, rehash};
use crate::huge::HugePiece;
use crate::levels::{LevelTree, group_key};
use crate::path::{path_cmp, prefix64};
use crate::prefetch::prefetch;
use crate::slab::{BucketRef, Leaf, LeafSlab};

pub(crate) struct Shard {
    base_depth: u8,
    levels: LevelTree,
    /// Bucket headers: this shard's piece of one array shared by all shards, so they sit on huge
    /// pages although a shard's own 2^15 headers fill only an eighth of one (a commit reads the
    /// header of every update's bucket, at random).
    buckets: HugePiece<BucketRef>,
    slab: LeafSlab,
    len: usize,
}

impl Shard {
    /// An empty shard; `buckets` must hold `2^height` empty headers.
    pub(crate) fn new(base_depth: u8, height: u8, buckets: HugePiece<BucketRef>) -> Self {
        debug_assert!(buckets.len() == 1usize << height && buckets.iter().all(|b| b.len == 0));
        Self { base_depth, levels: LevelTree::new(base_depth, height), buckets, slab: LeafSlab::default(), len: 0 }
    }

    /// Bucket index of a path inside this shard: the `height` bits after the shard prefix.
    #[inline]
    pub(crate) fn bucket_of(&self, path: &Hash) -> usize {
        let width = self.buckets.len();
        if width == 1 {
            return 0;
        }
        let prefix = prefix64(path);
        let height = width.trailing_zeros();
        ((prefix << self.base_depth) >> (64 - height)) as usize
    }

    /// Number of buckets.
    pub(crate) fn width(&self) -> usize {
        self.buckets.len()
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Fills the empty shard from a bulk build and hashes all of it: `base` holds the buckets'
    /// leaves one bucket after the other, each sorted by path with unique paths, and `lens[b]` is
    /// bucket `b`'s length. The leaves stay where they are: `base` becomes the slab's base.
    pub(crate) fn adopt(&mut self, base: Vec<Leaf>, lens: &[u32], s: &mut GroupScratch) {
        debug_assert!(self.len == 0 && lens.len() == self.buckets.len());
        debug_assert_eq!(lens.iter().map(|&l| l as usize).sum::<usize>(), base.len());
        self.slab.adopt(base);
        s.dirty.clear();
        let mut start = 0usize;
        for (b, &len) in lens.iter().enumerate() {
            if len != 0 {
                self.buckets[b] = self.slab.base_ref(start, len);
                s.dirty.push(group_key(0, b));
                start += len as usize;
            }
        }
        self.len = start;
        if !s.dirty.is_empty() {
            rehash(std::slice::from_mut(self), s, None);
        }
    }

    pub(crate) fn root(&self) -> Hash {
        self.levels.root()
    }

    /// Hints the CPU to fetch the bucket header `path` falls in.
    #[inline]
    pub(crate) fn prefetch_header(&self, path: &Hash) {
        prefetch(&self.buckets[self.bucket_of(path)]);
    }

    /// Hints the CPU to fetch the leaves of the bucket `path` falls in (a leaf is a cache line);
    /// its header should have been fetched a little earlier, as reading it here waits for it.
    #[inline]
    pub(crate) fn prefetch_leaves(&self, path: &Hash) {
        for leaf in self.slab.get(self.buckets[self.bucket_of(path)]) {
            prefetch(leaf);
        }
    }

    /// Merges sorted unique `ops`, all in bucket `b`, into the bucket (through `merged`, a
    /// reused buffer), sending the old state of every path whose value changed to `undo`.
    /// Returns whether the bucket changed; its hash and the prefixes above it are then stale.
    #[inline]
    pub(crate) fn merge_bucket<U: UndoSink>(
        &mut self,
        b: usize,
        ops: &[Update],
        merged: &mut Vec<Leaf>,
        undo: &mut U,
    ) -> bool {
        let old = self.buckets[b];
        if !merge(self.slab.get(old), ops, merged, undo) {
            return false;
        }
        self.buckets[b] = self.slab.store(old, merged);
        self.len = self.len + merged.len() - old.len as usize;
        true
    }

    /// The sorted leaves of bucket `b`.
    pub(crate) fn bucket_leaves(&self, b: usize) -> &[Leaf] {
        self.slab.get(self.buckets[b])
    }

    /// The prefix hashes above the buckets.
    pub(crate) fn levels(&self) -> &LevelTree {
        &self.levels
    }

    /// The prefix hashes above the buckets, to rehash them.
    pub(crate) fn levels_mut(&mut self) -> &mut LevelTree {
        &mut self.levels
    }

    /// Records bucket `b` and its new `hash` as changed in `c`.
    pub(crate) fn capture_bucket(&self, b: u32, hash: Hash, c: &mut ShardCapture, options: CaptureOptions) {
        let leaves = self.slab.get(self.buckets[b as usize]);
        c.buckets.push((b, hash, c.paths.len() as u32, leaves.len() as u32));
        c.paths.extend(leaves.iter().map(|l| l.path));
        if options.leaf_values {
            c.values.extend(leaves.iter().map(|l| l.value));
        }
    }

    /// Records the whole shard (every non-empty prefix and bucket) as changed.
    pub(crate) fn capture_all(&self, sink: CaptureSink<'_>) {
        let CaptureSink { part: c, options, levels } = sink;
        c.clear();
        self.levels.for_each_node(levels, |r, j, h| c.nodes.push((r, j, *h)));
        for (b, r) in self.buckets.iter().enumerate() {
            if r.len != 0 {
                self.capture_bucket(b as u32, self.levels.bottom(b), c, options);
            }
        }
    }

    /// The value hash stored for `path`, if present.
    pub(crate) fn get(&self, path: &Hash) -> Option<Hash> {
        let leaves = self.slab.get(self.buckets[self.bucket_of(path)]);
        leaves.binary_search_by(|l| l.path.cmp(path)).ok().map(|i| leaves[i].value)
    }

    /// Proof steps inside this shard for `path`; the shard must be non-empty.
    pub(crate) fn walk(&self, path: &Hash, siblings: &mut Vec<(u8, Hash)>) -> Option<Leaf> {
        let b = self.levels.walk(self.bucket_of(path), siblings);
        bucket::walk(self.slab.get(self.buckets[b]), path, siblings).copied()
    }

    /// Every leaf of the shard in path order.
    pub(crate) fn leaves(&self) -> impl Iterator<Item = (&Hash, &Hash)> + '_ {
        self.buckets.iter().flat_map(|&b| self.slab.get(b).iter().map(|l| (&l.path, &l.value)))
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.levels.heap_bytes() + self.buckets.len() * size_of::<BucketRef>() + self.slab.heap_bytes()
    }

    /// Address of a path's bucket slot in the level tree, for prefetching ahead of a walk.
    pub(crate) fn prefetch_bucket(&self, path: &Hash) {
        prefetch(self.levels.bottom_ptr(self.bucket_of(path)));
    }
}

/// Receives the state a path had before a commit changed it: `None` when it was absent.
pub(crate) trait UndoSink {
    /// Called once per changed path, in path order.
    fn record(&mut self, path: &Hash, old: Option<Hash>);
}

/// Records nothing: the plain commit.
pub(crate) struct NoUndo;

impl UndoSink for NoUndo {
    #[inline(always)]
    fn record(&mut self, _: &Hash, _: Option<Hash>) {}
}

/// Writes old states into a slice the caller sized to the shard's ops (a commit changes at most
/// one path per op), counting them in `len`.
pub(crate) struct UndoSlice<'a> {
    pub(crate) buf: &'a mut [Update],
    pub(crate) len: usize,
}

impl UndoSink for UndoSlice<'_> {
    #[inline]
    fn record(&mut self, path: &Hash, old: Option<Hash>) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = Update { path: *path, value: old };
            self.len += 1;
        }
    }
}

/// Merges sorted unique `ops` into sorted `old`, writing the bucket's new leaves into `out` and
/// the old state of each changed path into `undo`.
/// Returns false when nothing changed (deletes of absent keys, rewrites of the same value).
fn merge<U: UndoSink>(old: &[Leaf], ops: &[Update], out: &mut Vec<Leaf>, undo: &mut U) -> bool {
    out.clear();
    let mut changed = false;
    let (mut i, mut j) = (0, 0);
    while j < ops.len() {
        let op = &ops[j];
        if i < old.len() && path_cmp(&old[i].path, &op.path) == std::cmp::Ordering::Less {
            out.push(old[i]);
            i += 1;
            continue;
        }
        let exists = i < old.len() && old[i].path == op.path;
        match op.value {
            Some(value) => {
                if !exists {
                    undo.record(&op.path, None);
                    changed = true;
                } else if old[i].value != value {
                    undo.record(&op.path, Some(old[i].value));
                    changed = true;
                }
                out.push(Leaf { path: op.path, value });
            }
            None if exists => {
                undo.record(&op.path, Some(old[i].value));
                changed = true;
            }
            None => {}
        }
        if exists {
            i += 1;
        }
        j += 1;
    }
    out.extend_from_slice(&old[i..]);
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_inserts_updates_and_deletes() {
        let l = |p: u8, v: u8| Leaf { path: [p; 32], value: [v; 32] };
        let old = vec![l(1, 1), l(3, 3), l(5, 5)];
        let ops = vec![
            Update { path: [0; 32], value: None },
            Update { path: [2; 32], value: Some([2; 32]) },
            Update { path: [3; 32], value: None },
            Update { path: [5; 32], value: Some([9; 32]) },
        ];
        let mut out = Vec::new();
        let mut buf = [Update { path: [0; 32], value: None }; 4];
        let mut undo = UndoSlice { buf: &mut buf, len: 0 };
        assert!(merge(&old, &ops, &mut out, &mut undo));
        assert_eq!(out, vec![l(1, 1), l(2, 2), l(5, 9)]);
        // The delete of an absent path changed nothing, so it has no undo entry.
        let n = undo.len;
        assert_eq!(
            buf[..n],
            [
                Update { path: [2; 32], value: None },
                Update { path: [3; 32], value: Some([3; 32]) },
                Update { path: [5; 32], value: Some([5; 32]) },
            ]
        );
        assert!(!merge(&old, &[Update { path: [3; 32], value: Some([3; 32]) }], &mut out, &mut NoUndo));
        assert!(!merge(&old, &[Update { path: [4; 32], value: None }], &mut out, &mut NoUndo));
    }
}
