//! Many independent BLAKE2s hashes at once.
//!
//! Every node the tree rehashes is a one-block (64-byte) message, and a commit has thousands of
//! them per level. Hashing them side by side in SIMD lanes (8-way with AVX2) instead of one at a
//! time is what makes each hash cheap; `blake2s_simd` picks the widest kernel the CPU has at run
//! time and falls back to portable code.

use std::sync::LazyLock;

use aldb_verify::spec::{self, Hash};
use blake2s_simd::many::{hash_many, HashManyJob};
use blake2s_simd::Params;

/// Prebuilt parameter blocks, so hot loops never rebuild them.
pub(crate) struct Domains {
    /// Key path parameters.
    pub(crate) path: Params,
    /// Account value parameters.
    pub(crate) account: Params,
    /// Leaf parameters.
    pub(crate) leaf: Params,
    /// Branch parameters for every depth 0..=255.
    pub(crate) branch: Vec<Params>,
}

pub(crate) static DOMAINS: LazyLock<Domains> = LazyLock::new(|| Domains {
    path: spec::params(&spec::PERSONAL_PATH),
    account: spec::params(&spec::PERSONAL_ACCOUNT),
    leaf: spec::params(&spec::PERSONAL_LEAF),
    branch: (0..=255u8).map(spec::branch_params).collect(),
});

/// Jobs are created in bounded groups so the job array stays in cache and never reallocates.
const GROUP: usize = 64;

/// Hashes each input with its own parameters, writing `out[i] = H(params(i), inputs(i))`.
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
        hash_each(keys.len(), |i| (&d.path, &keys[i][..]), |i, h| out[i] = h);
        for (k, p) in keys.iter().zip(&out) {
            assert_eq!(spec::key_path(k), *p);
        }
    }
}
