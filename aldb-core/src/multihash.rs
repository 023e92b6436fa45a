//! Many independent BLAKE2s hashes at once.
//!
//! Every node the tree rehashes is a one-block (64-byte) message, and a commit has thousands of
//! them per level. Those go through [`hash_blocks`], the 16-lane one-block kernel; account value
//! preimages are longer and go through `blake2s_simd`'s general multi-hash ([`hash_each`]).

use std::sync::LazyLock;

use aldb_verify::spec::{self, Hash};
use blake2s_simd::many::{hash_many, HashManyJob};
use blake2s_simd::Params;

use crate::blake2s_x16::{chaining_value, hash_single_blocks};

/// Prebuilt parameter blocks, so hot loops never rebuild them.
pub(crate) struct Domains {
    /// Account value parameters.
    pub(crate) account: Params,
    /// Chaining value of the key path domain, for the one-block kernel.
    pub(crate) path_cv: [u32; 8],
    /// Chaining value of the leaf domain.
    pub(crate) leaf_cv: [u32; 8],
    /// Chaining values of branches at every depth 0..=255.
    pub(crate) branch_cv: Vec<[u32; 8]>,
}

pub(crate) static DOMAINS: LazyLock<Domains> = LazyLock::new(|| Domains {
    account: spec::params(&spec::PERSONAL_ACCOUNT),
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

/// Jobs are created in bounded groups so the job array stays in cache and never reallocates.
const GROUP: usize = 64;

/// Hashes each input (of any length) with its own parameters, writing `out[i] = H(params(i), inputs(i))`.
///
/// `job(i)` returns the parameter block and the message of item `i`.
pub(crate) fn hash_each<'a, F>(count: usize, mut job: F, mut out: impl FnMut(usize, Hash))
where
    F: FnMut(usize) -> (&'a Params, &'a [u8]),
{
    let mut jobs: Vec<HashManyJob<'a>> = Vec::with_capacity(GROUP.min(count));
    let mut start = 0;
    while start < count {
        let end = (start + GROUP).min(count);
        jobs.clear();
        for i in start..end {
            let (p, input) = job(i);
            jobs.push(HashManyJob::new(p, input));
        }
        hash_many(jobs.iter_mut());
        for (k, j) in jobs.iter().enumerate() {
            out(start + k, *j.to_hash().as_array());
        }
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_matches_scalar() {
        let keys: Vec<[u8; 32]> = (0..200u8).map(|i| [i; 32]).collect();
        let d = &*DOMAINS;
        let mut out = vec![[0u8; 32]; keys.len()];
        let path_params = spec::params(&spec::PERSONAL_PATH);
        hash_each(keys.len(), |i| (&path_params, &keys[i][..]), |i, h| out[i] = h);
        for (k, p) in keys.iter().zip(&out) {
            assert_eq!(spec::key_path(k), *p);
        }
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
