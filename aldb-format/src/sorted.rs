//! The compressed subtree over a sorted run of leaves, for readers that hold leaves outside the
//! engine (snapshot files): its hash and the proof steps of a walk through it.

use aldb_verify::Sibling;
use aldb_verify::spec::{EMPTY_ROOT, Hash, bit, branch_hash, first_difference, leaf_hash};

/// Hash of the subtree over `(path, value)` leaves sorted by path with unique paths.
pub fn subtree_hash(leaves: &[(Hash, Hash)]) -> Hash {
    match leaves {
        [] => EMPTY_ROOT,
        [(p, v)] => leaf_hash(p, v),
        _ => {
            let (c, at) = split(leaves);
            branch_hash(c, &subtree_hash(&leaves[..at]), &subtree_hash(&leaves[at..]))
        }
    }
}

fn split(leaves: &[(Hash, Hash)]) -> (u8, usize) {
    // Sorted unique paths: the first and last differ, at the subtree's top branch.
    let c = first_difference(&leaves[0].0, &leaves[leaves.len() - 1].0).unwrap_or(u8::MAX);
    (c, leaves.partition_point(|(p, _)| bit(p, usize::from(c)) == 0))
}

/// Walks the subtree along `path`, appending a sibling for every branch, and returns the leaf
/// the walk ends at (`None` for no leaves). Leaves must be sorted by path and unique.
pub fn walk_sorted(mut leaves: &[(Hash, Hash)], path: &Hash, siblings: &mut Vec<Sibling>) -> Option<(Hash, Hash)> {
    while leaves.len() > 1 {
        let (c, at) = split(leaves);
        let (mine, other) = if bit(path, usize::from(c)) == 0 {
            (&leaves[..at], &leaves[at..])
        } else {
            (&leaves[at..], &leaves[..at])
        };
        siblings.push(Sibling { depth: c, hash: subtree_hash(other) });
        leaves = mine;
    }
    leaves.first().copied()
}
