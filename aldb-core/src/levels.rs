//! A complete binary tree of subtree hashes over fixed prefixes.
//!
//! Keys are uniform hashes, so the top of the commitment tree is almost complete. Storing the
//! hash of *every* prefix of a given length (zero for an empty prefix) turns it into an implicit
//! array where a node's address is a function of the key: the children of node `i` are `2i` and
//! `2i+1`, side by side in one cache line, which is also exactly the 64-byte branch preimage.
//!
//! A stored prefix need not be a branch of the compressed tree. Combining two children follows
//! the commitment's rules: both non-empty gives a branch at this depth, one empty passes the
//! other through unchanged (the single-child chain collapses), both empty stays empty. So the
//! root is the same as if the compressed tree had been built directly.

use aldb_verify::spec::{EMPTY_ROOT, Hash};

use crate::changes::NodeSink;
use crate::huge::HugeArray;
use crate::multihash::{DOMAINS, hash_blocks};
use crate::prefetch::prefetch;

/// Two sibling hashes in one cache line: the 64-byte preimage of their parent.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Pair([Hash; 2]);

/// How many nodes ahead of the one being rehashed its parent's line is prefetched.
const PREFETCH_AHEAD: usize = 8;

/// Hashes of all prefixes between `base_depth` and `base_depth + height` bits under one node.
pub(crate) struct LevelTree {
    base_depth: u8,
    height: u8,
    /// Heap order, two nodes per cache line: node `k` is `pairs[k / 2].0[k % 2]`, node 1 is the
    /// node at `base_depth` (node 0 is unused), and the children of `i` are the whole pair `i`.
    pairs: HugeArray<Pair>,
}

/// Reused buffers for rehashing.
#[derive(Default)]
pub(crate) struct LevelScratch {
    next: Vec<u64>,
    jobs: Vec<u64>,
    out: Vec<Hash>,
}

/// A node of one tree of a group: the tree's index in the high 32 bits, the node's position
/// within its level (or its heap index, in a job list) in the low 32.
#[inline]
pub(crate) fn group_key(tree: usize, j: usize) -> u64 {
    ((tree as u64) << 32) | j as u64
}

#[inline]
fn tree_of(key: u64) -> usize {
    (key >> 32) as usize
}

#[inline]
fn slot_of(key: u64) -> usize {
    (key & 0xFFFF_FFFF) as usize
}

/// Where [`rehash_group`] records each tree's recomputed nodes, `(r, j, hash)` in the tree's own
/// list, and which levels to record (as in a [`NodeSink`]).
pub(crate) type GroupNodeSink<'a, 'b> = (&'a mut [&'b mut Vec<(u8, u32, Hash)>], u32);

/// Recomputes every ancestor of the bottom slots in `dirty` across several trees of the same
/// depth and height (neighbouring shards), level by level: each level's branches of all the
/// trees go through the kernel together, and the prefetch of the next nodes' lines runs on
/// across tree boundaries. `dirty` holds [`group_key`]s of bottom slots, sorted and unique.
///
/// A small commit leaves each shard only a few dirty buckets; hashed tree by tree, each of its
/// levels would be a part-filled SIMD batch, and every tree would restart the prefetch.
///
/// When `capture` is given, tree `t`'s recomputed nodes at the levels in its mask are appended
/// to its `t`-th list, as [`LevelTree::rehash`] records them.
pub(crate) fn rehash_group(
    trees: &mut [&mut LevelTree],
    dirty: &[u64],
    s: &mut LevelScratch,
    capture: Option<GroupNodeSink<'_, '_>>,
) {
    s.next.clear();
    s.next.extend_from_slice(dirty);
    rehash_next(trees, s, capture);
}

/// [`rehash_group`] of the bottom slots already in `s.next`.
fn rehash_next(trees: &mut [&mut LevelTree], s: &mut LevelScratch, mut capture: Option<GroupNodeSink<'_, '_>>) {
    let Some(first) = trees.first() else { return };
    let (base_depth, height) = (first.base_depth, first.height);
    debug_assert!(trees.iter().all(|t| (t.base_depth, t.height) == (base_depth, height)));
    let d = &*DOMAINS;
    for r in (0..height).rev() {
        // Parents of this level's dirty nodes: the list stays sorted, so dedup is adjacent.
        for x in s.next.iter_mut() {
            *x = (*x & !0xFFFF_FFFF) | (*x & 0xFFFF_FFFF) >> 1;
        }
        s.next.dedup();
        let level_base = 1usize << r;
        let cv = &d.branch_cv[usize::from(base_depth + r)];
        s.jobs.clear();
        for (k, &x) in s.next.iter().enumerate() {
            // The parent's line is written below; fetch it ahead (deep levels are DRAM misses).
            if let Some(&ahead) = s.next.get(k + PREFETCH_AHEAD) {
                prefetch(&trees[tree_of(ahead)].pairs[(level_base + slot_of(ahead)) >> 1]);
            }
            let tree = &mut *trees[tree_of(x)];
            let i = level_base + slot_of(x);
            let [l, rr] = tree.pairs[i].0;
            match (l == EMPTY_ROOT, rr == EMPTY_ROOT) {
                (false, false) => s.jobs.push(group_key(tree_of(x), i)),
                (true, _) => tree.set(i, rr),
                (false, true) => tree.set(i, l),
            }
        }
        s.out.clear();
        s.out.resize(s.jobs.len(), EMPTY_ROOT);
        {
            let (all, jobs, out) = (&*trees, &s.jobs, &mut s.out);
            hash_blocks(
                jobs.len(),
                |k| (cv, all[tree_of(jobs[k])].pairs[slot_of(jobs[k])].0.as_flattened()),
                |k, h| out[k] = h,
            );
        }
        for (&job, h) in s.jobs.iter().zip(&s.out) {
            trees[tree_of(job)].set(slot_of(job), *h);
        }
        if let Some((lists, _)) = capture.as_mut().filter(|(_, mask)| mask >> (base_depth + r) & 1 == 1) {
            for &x in &s.next {
                let (t, j) = (tree_of(x), slot_of(x));
                lists[t].push((r, j as u32, trees[t].get(level_base + j)));
            }
        }
    }
}

impl LevelTree {
    pub(crate) fn new(base_depth: u8, height: u8) -> Self {
        // SAFETY: a Pair is 64 plain bytes, so all-zero is valid; and EMPTY_ROOT is 32 zero
        // bytes, so a zeroed pair is two empty subtrees.
        let pairs = unsafe { HugeArray::zeroed(1usize << height) };
        Self { base_depth, height, pairs }
    }

    #[inline]
    fn get(&self, k: usize) -> Hash {
        self.pairs[k >> 1].0[k & 1]
    }

    #[inline]
    fn set(&mut self, k: usize, h: Hash) {
        self.pairs[k >> 1].0[k & 1] = h;
    }

    /// Number of bottom slots (`2^height`).
    pub(crate) fn width(&self) -> usize {
        1usize << self.height
    }

    pub(crate) fn root(&self) -> Hash {
        self.get(1)
    }

    pub(crate) fn bottom(&self, j: usize) -> Hash {
        self.get(self.width() + j)
    }

    pub(crate) fn set_bottom(&mut self, j: usize, h: Hash) {
        self.set(self.width() + j, h);
    }

    /// Address of a bottom slot, for prefetching.
    pub(crate) fn bottom_ptr(&self, j: usize) -> *const u8 {
        (&self.pairs[(self.width() + j) >> 1] as *const Pair).cast()
    }

    /// Recomputes every ancestor of the bottom slots in `dirty` (sorted, unique), level by level
    /// so each level's branches are hashed together in SIMD batches.
    /// When `capture` is given, every recomputed node at a level its options keep is appended to
    /// it as `(r, j, hash)`: level `r` below the top (0 is the top node), position `j` within it.
    pub(crate) fn rehash(&mut self, dirty: &[u32], s: &mut LevelScratch, capture: Option<NodeSink<'_>>) {
        s.next.clear();
        s.next.extend(dirty.iter().map(|&j| u64::from(j)));
        match capture {
            Some((nodes, mask)) => rehash_next(&mut [self], s, Some((&mut [nodes], mask))),
            None => rehash_next(&mut [self], s, None),
        }
    }

    /// Every non-empty node above the bottom at a level in `levels` (bit `d` for global level
    /// `d`), as `(r, j, hash)` like [`LevelTree::rehash`]'s capture.
    pub(crate) fn for_each_node(&self, levels: u32, mut f: impl FnMut(u8, u32, &Hash)) {
        for r in (0..self.height).filter(|&r| levels >> (self.base_depth + r) & 1 == 1) {
            let base = 1usize << r;
            for j in 0..base {
                let h = self.get(base + j);
                if h != EMPTY_ROOT {
                    f(r, j as u32, &h);
                }
            }
        }
    }

    /// Walks from the top towards bottom slot `j`, following the commitment's rules: records
    /// `(depth, sibling)` at every real branch and follows a lone non-empty child where the
    /// key's side is empty. Returns the bottom slot reached (which may differ from `j`).
    pub(crate) fn walk(&self, j: usize, siblings: &mut Vec<(u8, Hash)>) -> usize {
        let mut i = 1usize;
        for r in 0..self.height {
            let want = (j >> (self.height - 1 - r)) & 1;
            let [l, rr] = self.pairs[i].0;
            let go = match (l == EMPTY_ROOT, rr == EMPTY_ROOT) {
                (false, false) => {
                    siblings.push((self.base_depth + r, if want == 0 { rr } else { l }));
                    want
                }
                (true, _) => 1,
                (false, true) => 0,
            };
            i = 2 * i + go;
        }
        i - self.width()
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.pairs.bytes()
    }
}
