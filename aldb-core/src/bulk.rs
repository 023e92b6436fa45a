//! Building a tree from an unsorted stream of accounts, as the validator sends them at startup.
//!
//! Inserting one at a time would rehash the path of every key. Instead entries are scattered to
//! their shards as they arrive; at the end each shard sorts its entries, keeps the winner of each
//! path, fills its buckets and hashes everything bottom-up, level by level, in parallel.
//!
//! At millions of accounts the build is bounded by moving memory, and above all by the first
//! touch of fresh pages (the kernel zeroes each one it faults in). So an entry is written once,
//! as the 64-byte leaf it becomes, into a per-shard array sized up front for the shard's expected
//! share (so it never reallocates); the shard's sort goes through one per-worker buffer that
//! stays resident, and its result is written back into the same array, which the shard then keeps
//! as its leaf storage. The arrays stay on 4 KiB pages: they are written in order, so huge pages
//! would save few TLB misses, and with `madvise` huge pages each fault compacts memory first
//! (measured 2.5–2.8M against 4.5–5.3M accounts/s at 2^24, BENCHMARKS.md §1).

use aldb_verify::spec::Hash;
use rayon::prelude::*;

use crate::account::{AccountRef, Update};
use crate::config::{Config, LEAVES_PER_BUCKET};
use crate::error::CoreError;
use crate::group::GroupScratch;
use crate::path::{path_cmp, shard_index};
use crate::pleiades::Pleiades;
use crate::shard::Shard;
use crate::slab::Leaf;

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

/// An entry's rank and liveness, stored only once entries stop being all live with one rank.
#[derive(Clone, Copy, Default)]
struct Meta {
    rank: (u64, u64),
    live: bool,
}

/// One shard's entries in arrival order; `metas` is parallel to `leaves` in ranked mode and
/// empty otherwise. A tombstone's leaf has a zero value.
#[derive(Default)]
struct Stage {
    leaves: Vec<Leaf>,
    metas: Vec<Meta>,
}

/// The most entries a shard's array is sized for up front (64 MiB); beyond that it grows as a
/// vector does.
const MAX_STAGE_RESERVE: usize = 1 << 20;

/// Collects entries in any order, then builds the tree in one pass.
pub struct BulkBuilder {
    tree: Pleiades,
    stages: Vec<Stage>,
    pushed: u64,
    /// While every entry so far was live and carried this one rank, neither is stored: the
    /// last pushed entry of a path wins, which a stable sort by path finds by itself.
    uniform: Option<(u64, u64)>,
    /// Entries carry a [`Meta`] each.
    ranked: bool,
    /// Hashed accounts of the last push, kept to reuse the allocation.
    hashed: Vec<Update>,
}

impl std::fmt::Debug for BulkBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkBuilder").field("pushed", &self.pushed).finish_non_exhaustive()
    }
}

impl BulkBuilder {
    /// A builder for a tree with this layout. Each shard's entry array is sized for the leaves
    /// the layout expects (see [`Config::for_leaves`]); the allocator reserves address space,
    /// and pages are backed only as entries arrive.
    pub fn new(config: Config) -> Result<Self, CoreError> {
        let tree = Pleiades::new(config)?;
        let height = u32::from(config.bucket_bits - config.shard_bits);
        let expected = 1usize
            .checked_shl(height)
            .map_or(MAX_STAGE_RESERVE, |w| w.saturating_mul(LEAVES_PER_BUCKET as usize))
            .min(MAX_STAGE_RESERVE);
        // Shard sizes of uniform keys spread by about sqrt(expected): an eighth more covers it.
        let cap = expected + expected / 8 + 256;
        let stages = (0..1usize << config.shard_bits)
            .map(|_| Stage { leaves: Vec::with_capacity(cap), metas: Vec::new() })
            .collect();
        Ok(Self { tree, stages, pushed: 0, uniform: None, ranked: false, hashed: Vec::new() })
    }

    /// Entries pushed so far (before de-duplication).
    pub fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Adds entries. Each worker owns a contiguous range of shards and picks out its own entries,
    /// so the scatter runs in parallel with no lock.
    pub fn push(&mut self, entries: &[BulkEntry]) {
        for e in entries {
            self.note(e.rank, e.value.is_some());
        }
        self.scatter(
            entries,
            |e| &e.path,
            |e| Leaf { path: e.path, value: e.value.unwrap_or_default() },
            |e| Meta { rank: e.rank, live: e.value.is_some() },
        );
    }

    /// Hashes accounts on the workers and adds them, all with the same rank.
    pub fn push_accounts(&mut self, accounts: &[AccountRef<'_>], rank: (u64, u64)) {
        let mut hashed = std::mem::take(&mut self.hashed);
        self.tree.hash_accounts_to(accounts, &mut hashed);
        let live = hashed.iter().all(|u| u.value.is_some());
        if !hashed.is_empty() {
            self.note(rank, live);
        }
        self.scatter(
            &hashed,
            |u| &u.path,
            |u| Leaf { path: u.path, value: u.value.unwrap_or_default() },
            |u| Meta { rank, live: u.value.is_some() },
        );
        self.hashed = hashed;
    }

    /// Switches to storing ranks once an entry's rank or liveness differs from all before it.
    fn note(&mut self, rank: (u64, u64), live: bool) {
        if self.ranked {
            return;
        }
        match self.uniform {
            Some(r) if r == rank && live => {}
            None if live => self.uniform = Some(rank),
            _ => {
                // Every entry so far was live with the uniform rank, so that is their meta.
                let meta = Meta { rank: self.uniform.unwrap_or_default(), live: true };
                for st in &mut self.stages {
                    st.metas = vec![meta; st.leaves.len()];
                }
                self.ranked = true;
            }
        }
    }

    fn scatter<T: Sync>(
        &mut self,
        items: &[T],
        path: impl Fn(&T) -> &Hash + Sync,
        leaf: impl Fn(&T) -> Leaf + Sync,
        meta: impl Fn(&T) -> Meta + Sync,
    ) {
        self.pushed += items.len() as u64;
        let bits = self.tree.config().shard_bits;
        let groups = self.tree.config().threads.max(1);
        let per = self.stages.len().div_ceil(groups);
        let ranked = self.ranked;
        let stages = &mut self.stages;
        self.tree.pool().install(|| {
            stages.par_chunks_mut(per).enumerate().for_each(|(g, mine)| {
                let lo = g * per;
                let hi = lo + mine.len();
                for it in items {
                    let s = shard_index(path(it), bits);
                    if (lo..hi).contains(&s) {
                        let st = &mut mine[s - lo];
                        st.leaves.push(leaf(it));
                        if ranked {
                            st.metas.push(meta(it));
                        }
                    }
                }
            });
        });
    }

    /// Resolves each path's winner, drops tombstones, and builds the tree.
    pub fn finish(self) -> Pleiades {
        let Self { mut tree, stages, ranked, .. } = self;
        let (pool, shards) = tree.pool_and_shards();
        pool.install(|| {
            shards
                .par_iter_mut()
                .zip(stages)
                .filter(|(_, st)| !st.leaves.is_empty())
                .for_each_init(BuildScratch::default, |s, (shard, st)| build_shard(shard, st, ranked, s));
        });
        tree.finish_load();
        tree
    }
}

/// Per-worker buffers of the final sort, reused from one shard to the next so they stay
/// resident.
#[derive(Default)]
struct BuildScratch {
    sorted: Vec<Leaf>,
    metas: Vec<Meta>,
    starts: Vec<u32>,
    next: Vec<u32>,
    lens: Vec<u32>,
    order: Vec<u32>,
    shard: GroupScratch,
}

/// Sorts a shard's entries into bucket order, keeps each path's winner and hands the result,
/// written back over the entries, to the shard.
fn build_shard(shard: &mut Shard, mut st: Stage, ranked: bool, s: &mut BuildScratch) {
    let width = shard.width();
    let n = st.leaves.len();
    // A counting sort by bucket (stable, so push order survives among equal paths), then each
    // bucket's handful of entries is sorted by path.
    s.starts.clear();
    s.starts.resize(width + 1, 0);
    for l in st.leaves.iter() {
        s.starts[shard.bucket_of(&l.path) + 1] += 1;
    }
    for b in 0..width {
        s.starts[b + 1] += s.starts[b];
    }
    s.next.clear();
    s.next.extend_from_slice(&s.starts[..width]);
    if s.sorted.len() < n {
        s.sorted.resize(n, Leaf::default());
    }
    if ranked && s.metas.len() < n {
        s.metas.resize(n, Meta::default());
    }
    for (i, l) in st.leaves.iter().enumerate() {
        let b = shard.bucket_of(&l.path);
        let at = s.next[b] as usize;
        s.sorted[at] = *l;
        if ranked {
            s.metas[at] = st.metas[i];
        }
        s.next[b] += 1;
    }
    s.lens.clear();
    s.lens.resize(width, 0);
    let out: &mut [Leaf] = &mut st.leaves;
    let mut w = 0usize;
    for b in 0..width {
        let (lo, hi) = (s.starts[b] as usize, s.starts[b + 1] as usize);
        let kept = if ranked {
            resolve_ranked(&s.sorted[lo..hi], &s.metas[lo..hi], &mut s.order, &mut out[w..])
        } else {
            resolve_plain(&mut s.sorted[lo..hi], &mut out[w..])
        };
        s.lens[b] = kept as u32;
        w += kept;
    }
    st.leaves.truncate(w);
    shard.adopt(st.leaves, &s.lens, &mut s.shard);
}

/// One bucket's entries, all live with one rank, in push order: writes the last of each path,
/// in path order, to `out`; returns how many.
fn resolve_plain(run: &mut [Leaf], out: &mut [Leaf]) -> usize {
    if run.len() > 1 {
        run.sort_by(|a, b| path_cmp(&a.path, &b.path));
    }
    let mut k = 0;
    for i in 0..run.len() {
        if i + 1 < run.len() && run[i + 1].path == run[i].path {
            continue;
        }
        out[k] = run[i];
        k += 1;
    }
    k
}

/// One bucket's entries in push order with their metas: writes each path's winner (highest rank,
/// then the last pushed) to `out` in path order unless it is a tombstone; returns how many.
fn resolve_ranked(run: &[Leaf], metas: &[Meta], order: &mut Vec<u32>, out: &mut [Leaf]) -> usize {
    order.clear();
    order.extend(0..run.len() as u32);
    order.sort_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        path_cmp(&run[a].path, &run[b].path).then(metas[a].rank.cmp(&metas[b].rank))
    });
    let mut k = 0;
    for (i, &at) in order.iter().enumerate() {
        let at = at as usize;
        if order.get(i + 1).is_some_and(|&next| run[next as usize].path == run[at].path) {
            continue;
        }
        if metas[at].live {
            out[k] = run[at];
            k += 1;
        }
    }
    k
}
