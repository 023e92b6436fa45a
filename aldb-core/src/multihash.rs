//! Many independent BLAKE2s hashes at once.
//!
//! Every node the tree rehashes is a one-block (64-byte) message, and a commit has thousands of
//! them per level. Those go through [`hash_blocks`], the 16-lane one-block kernel; account value
//! preimages are longer (header then data) and go through [`hash_messages`], the multi-block
//! variant of the same kernel, which takes the header and the data as separate slices.

use std::sync::LazyLock;

use aldb_verify::spec::{self, Hash};

pub(crate) use crate::blake2s::Parts;
use crate::blake2s::{chaining_value, hash_multi_blocks, hash_single_blocks};

/// Prebuilt starting chaining values of every domain, so hot loops never rebuild them.
pub(crate) struct Domains {
    /// Chaining value of the account value domain, for the multi-block kernel.
    pub(crate) account_cv: [u32; 8],
    /// Chaining value of the key path domain, for the one-block kernel.
    pub(crate) path_cv: [u32; 8],
    /// Chaining value of the leaf domain.
    pub(crate) leaf_cv: [u32; 8],
    /// Chaining values of branches at every depth 0..=255.
    pub(crate) branch_cv: Vec<[u32; 8]>,
}

pub(crate) static DOMAINS: LazyLock<Domains> = LazyLock::new(|| Domains {
    account_cv: chaining_value(&spec::PERSONAL_ACCOUNT, &[0; 8]),
    path_cv: chaining_value(&spec::PERSONAL_PATH, &[0; 8]),
    leaf_cv: chaining_value(&spec::PERSONAL_LEAF, &[0; 8]),
    branch_cv: (0..=255u8).map(|d| chaining_value(&spec::PERSONAL_NODE, &[d, 0, 0, 0, 0, 0, 0, 0])).collect(),
});

/// Hashes messages of at most 64 bytes (one compression each), 16 at a time where the CPU can.
/// `job(i)` gives the domain's chaining value and the message of item `i`.
#[inline]
pub(crate) fn hash_blocks<'a>(
    count: usize,
    job: impl FnMut(usize) -> (&'a [u32; 8], &'a [u8]),
    out: impl FnMut(usize, Hash),
) {
    hash_single_blocks(count, job, out);
}

/// Hashes messages of any length, each given as two parts hashed as `head || tail`, 16 at a time
/// where the CPU can. `job(i)` gives the domain's chaining value and the message of item `i`;
/// `out` receives every index once, grouped by message block count rather than in index order.
#[inline]
pub(crate) fn hash_messages<'a>(
    count: usize,
    job: impl FnMut(usize) -> (&'a [u32; 8], Parts<'a>),
    out: impl FnMut(usize, Hash),
) {
    hash_multi_blocks(count, job, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_matches_scalar() {
        let keys: Vec<[u8; 32]> = (0..200u8).map(|i| [i; 32]).collect();
        let d = &*DOMAINS;
        let out: Vec<Hash> = keys.iter().map(spec::key_path).collect();
        let mut fast = vec![[0u8; 32]; keys.len()];
        hash_blocks(keys.len(), |i| (&d.path_cv, &keys[i][..]), |i, h| fast[i] = h);
        assert_eq!(fast, out);
        let pairs: Vec<[u8; 64]> = (0..100u8).map(|i| [i; 64]).collect();
        let mut got = vec![[0u8; 32]; pairs.len()];
        hash_blocks(pairs.len(), |i| (&d.branch_cv[i], &pairs[i][..]), |i, h| got[i] = h);
        for (i, p) in pairs.iter().enumerate() {
            assert_eq!(got[i], spec::branch_hash(i as u8, &p[..32].try_into().unwrap(), &p[32..].try_into().unwrap()));
        }
    }
}
