//! The compressed subtree inside one bucket: its hash, batched across buckets, and proofs.
//!
//! A bucket's sorted leaves determine its subtree completely: the branch between neighbours `i`
//! and `i+1` sits at their first differing bit `c_i`, and the subtree is the Cartesian tree of
//! those depths (shallowest on top). Merging every neighbour pair whose `c_i` is deeper than both
//! adjacent depths is always safe (both sides are finished subtrees), so a bucket of `m` leaves
//! collapses in a few rounds, and each round hashes the ready pairs of *all* dirty buckets
//! together in SIMD batches.

use aldb_verify::spec::{EMPTY_ROOT, Hash, bit, branch_hash, first_difference, leaf_hash};

use crate::multihash::{DOMAINS, hash_blocks};
use crate::slab::Leaf;

#[derive(Clone, Copy)]
struct Span {
    start: usize,
    len: usize,
}

/// Reused buffers for [`hash_buckets`].
#[derive(Default)]
pub(crate) struct BucketScratch {
    items: Vec<Hash>,
    crits: Vec<u8>,
    spans: Vec<Span>,
    jobs: Vec<(u32, u8)>,
    out: Vec<Hash>,
}

/// The first differing bit of two distinct paths. Paths in a bucket are unique by construction.
fn crit(a: &Leaf, b: &Leaf) -> u8 {
    debug_assert!(a.path < b.path, "bucket leaves must be sorted and unique");
    first_difference(&a.path, &b.path).unwrap_or(u8::MAX)
}

/// Hashes of many buckets at once: `out[k]` is the subtree hash of `buckets[k]`.
pub(crate) fn hash_buckets(buckets: &[&[Leaf]], out: &mut Vec<Hash>, s: &mut BucketScratch) {
    let d = &*DOMAINS;
    s.items.clear();
    s.crits.clear();
    s.spans.clear();
    for b in buckets {
        // Crits share the items' indexing: crits[start + i] lies between items i and i+1.
        s.spans.push(Span { start: s.items.len(), len: b.len() });
        for (i, leaf) in b.iter().enumerate() {
            s.items.push(EMPTY_ROOT);
            s.crits.push(if i + 1 < b.len() { crit(leaf, &b[i + 1]) } else { 0 });
        }
    }
    {
        let leaves: Vec<&Leaf> = buckets.iter().flat_map(|b| b.iter()).collect();
        let items = &mut s.items;
        hash_blocks(leaves.len(), |i| (&d.leaf_cv, &leaves[i].as_bytes()[..]), |i, h| items[i] = h);
    }
    loop {
        s.jobs.clear();
        for sp in &s.spans {
            if sp.len < 2 {
                continue;
            }
            let c = &s.crits[sp.start..sp.start + sp.len - 1];
            for i in 0..c.len() {
                let left_ok = i == 0 || c[i] > c[i - 1];
                let right_ok = i + 1 == c.len() || c[i] > c[i + 1];
                if left_ok && right_ok {
                    s.jobs.push(((sp.start + i) as u32, c[i]));
                }
            }
        }
        if s.jobs.is_empty() {
            break;
        }
        s.out.clear();
        s.out.resize(s.jobs.len(), EMPTY_ROOT);
        {
            let (items, jobs, res) = (&s.items, &s.jobs, &mut s.out);
            hash_blocks(
                jobs.len(),
                |k| {
                    let (at, depth) = jobs[k];
                    let at = at as usize;
                    (&d.branch_cv[usize::from(depth)], items[at..at + 2].as_flattened())
                },
                |k, h| res[k] = h,
            );
        }
        // Collapse each merged pair in place; jobs are in item order, so results are consumed
        // in the same order as the compaction pass meets them.
        let mut next_job = 0;
        for sp in s.spans.iter_mut() {
            if sp.len < 2 {
                continue;
            }
            let (mut r, mut w) = (0usize, 0usize);
            while r < sp.len {
                let at = sp.start + r;
                let merged = next_job < s.jobs.len() && s.jobs[next_job].0 as usize == at;
                if merged {
                    s.items[sp.start + w] = s.out[next_job];
                    next_job += 1;
                    s.crits[sp.start + w] = s.crits[at + 1];
                    r += 2;
                } else {
                    s.items[sp.start + w] = s.items[at];
                    s.crits[sp.start + w] = s.crits[at];
                    r += 1;
                }
                w += 1;
            }
            sp.len = w;
        }
    }
    out.clear();
    out.extend(s.spans.iter().map(|sp| if sp.len == 0 { EMPTY_ROOT } else { s.items[sp.start] }));
}

/// Subtree hash of sorted, unique leaves, one hash at a time (for proofs).
pub(crate) fn subtree_hash(leaves: &[Leaf]) -> Hash {
    match leaves {
        [] => EMPTY_ROOT,
        [one] => leaf_hash(&one.path, &one.value),
        _ => {
            let (c, split) = split(leaves);
            branch_hash(c, &subtree_hash(&leaves[..split]), &subtree_hash(&leaves[split..]))
        }
    }
}

/// The top branch of at least two sorted leaves: its depth and the index of the first right leaf.
fn split(leaves: &[Leaf]) -> (u8, usize) {
    let c = crit(&leaves[0], &leaves[leaves.len() - 1]);
    let at = leaves.partition_point(|l| bit(&l.path, usize::from(c)) == 0);
    (c, at)
}

/// Walks the bucket's subtree along `path`, pushing `(depth, sibling)` at each branch, and
/// returns the leaf the walk ends at. `leaves` must be non-empty.
pub(crate) fn walk<'a>(mut leaves: &'a [Leaf], path: &Hash, siblings: &mut Vec<(u8, Hash)>) -> Option<&'a Leaf> {
    while leaves.len() > 1 {
        let (c, at) = split(leaves);
        let (mine, other) = if bit(path, usize::from(c)) == 0 {
            (&leaves[..at], &leaves[at..])
        } else {
            (&leaves[at..], &leaves[..at])
        };
        siblings.push((c, subtree_hash(other)));
        leaves = mine;
    }
    leaves.first()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted_leaves(n: usize, seed: u8) -> Vec<Leaf> {
        let mut v: Vec<Leaf> = (0..n)
            .map(|i| {
                let path = aldb_verify::spec::key_path(&[
                    seed,
                    i as u8,
                    (i >> 8) as u8,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                    0,
                ]);
                Leaf { path, value: [i as u8; 32] }
            })
            .collect();
        v.sort_by_key(|a| a.path);
        v
    }

    #[test]
    fn batched_rounds_match_recursive_hash() {
        let buckets: Vec<Vec<Leaf>> = (0..40).map(|n| sorted_leaves(n, n as u8)).collect();
        let refs: Vec<&[Leaf]> = buckets.iter().map(|b| &b[..]).collect();
        let mut out = Vec::new();
        hash_buckets(&refs, &mut out, &mut BucketScratch::default());
        for (b, h) in buckets.iter().zip(&out) {
            assert_eq!(*h, subtree_hash(b), "bucket of {}", b.len());
        }
    }
}
