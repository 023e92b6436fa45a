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

use aldb_verify::spec::{Hash, EMPTY_ROOT};

use crate::multihash::{hash_blocks, DOMAINS};

/// Hashes of all prefixes between `base_depth` and `base_depth + height` bits under one node.
pub(crate) struct LevelTree {
    base_depth: u8,
    height: u8,
    /// Heap order: `nodes[1]` is the node at `base_depth`; `nodes[0]` is unused.
    nodes: Vec<Hash>,
}

/// Reused buffers for rehashing.
#[derive(Default)]
pub(crate) struct LevelScratch {
    next: Vec<u32>,
    jobs: Vec<u32>,
    out: Vec<Hash>,
}

impl LevelTree {
    pub(crate) fn new(base_depth: u8, height: u8) -> Self {
        Self { base_depth, height, nodes: vec![EMPTY_ROOT; 2usize << height] }
    }

    /// Number of bottom slots (`2^height`).
    pub(crate) fn width(&self) -> usize {
        1usize << self.height
    }

    pub(crate) fn root(&self) -> Hash {
        self.nodes[1]
    }

    pub(crate) fn bottom(&self, j: usize) -> Hash {
        self.nodes[self.width() + j]
    }

    pub(crate) fn set_bottom(&mut self, j: usize, h: Hash) {
        let w = self.width();
        self.nodes[w + j] = h;
    }

    /// Address of a bottom slot, for prefetching.
    pub(crate) fn bottom_ptr(&self, j: usize) -> *const Hash {
        &self.nodes[self.width() + j]
    }

    /// Recomputes every ancestor of the bottom slots in `dirty` (sorted, unique), level by level
    /// so each level's branches are hashed together in SIMD batches.
    /// When `capture` is given, every recomputed node is appended to it as `(r, j, hash)`: level
    /// `r` below the top (0 is the top node), position `j` within that level.
    pub(crate) fn rehash(&mut self, dirty: &[u32], s: &mut LevelScratch, mut capture: Option<&mut Vec<(u8, u32, Hash)>>) {
        let d = &*DOMAINS;
        s.next.clear();
        s.next.extend_from_slice(dirty);
        for r in (0..self.height).rev() {
            // Parents of this level's dirty nodes: the list stays sorted, so dedup is adjacent.
            for x in s.next.iter_mut() {
                *x >>= 1;
            }
            s.next.dedup();
            let level_base = 1usize << r;
            let cv = &d.branch_cv[usize::from(self.base_depth + r)];
            s.jobs.clear();
            for &j in &s.next {
                let i = level_base + j as usize;
                let (l, rr) = (self.nodes[2 * i], self.nodes[2 * i + 1]);
                match (l == EMPTY_ROOT, rr == EMPTY_ROOT) {
                    (false, false) => s.jobs.push(i as u32),
                    (true, _) => self.nodes[i] = rr,
                    (false, true) => self.nodes[i] = l,
                }
            }
            s.out.clear();
            s.out.resize(s.jobs.len(), EMPTY_ROOT);
            let nodes = &self.nodes;
            let jobs = &s.jobs;
            let out = &mut s.out;
            hash_blocks(
                jobs.len(),
                |k| {
                    let i = jobs[k] as usize;
                    (cv, nodes[2 * i..2 * i + 2].as_flattened())
                },
                |k, h| out[k] = h,
            );
            for (k, &i) in s.jobs.iter().enumerate() {
                self.nodes[i as usize] = s.out[k];
            }
            if let Some(c) = capture.as_deref_mut() {
                c.extend(s.next.iter().map(|&j| (r, j, self.nodes[level_base + j as usize])));
            }
        }
    }

    /// Every non-empty node above the bottom, as `(r, j, hash)` like [`LevelTree::rehash`]'s capture.
    pub(crate) fn for_each_node(&self, mut f: impl FnMut(u8, u32, &Hash)) {
        for r in 0..self.height {
            let base = 1usize << r;
            for j in 0..base {
                let h = &self.nodes[base + j];
                if *h != EMPTY_ROOT {
                    f(r, j as u32, h);
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
            let (l, rr) = (self.nodes[2 * i], self.nodes[2 * i + 1]);
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
        self.nodes.capacity() * size_of::<Hash>()
    }
}
