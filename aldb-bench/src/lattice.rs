//! The Solana accounts lattice hash (SIMD-0215) over the same update stream: what agave does per
//! written account at the end of a slot.
//!
//! Per account, agave's accounts-db computes `LtHash::with(blake3(lamports || data || executable
//! || owner || pubkey))` (a 2048-byte XOF output; a zero-lamport account is the identity), and the
//! bank mixes the previous state's hash out of its accumulator and the new state's hash in.

use aldb_core::AccountRef;
use rayon::prelude::*;
use solana_lattice_hash::lt_hash::LtHash;

/// Accounts per rayon task: large enough that the per-task accumulator (2 KiB) and its final
/// combine cost nothing next to the hashing.
const CHUNK: usize = 2048;

/// Agave hashes accounts up to this many data bytes from one stack buffer, in one `update`.
const META_SIZE: usize = 8 + 1 + 32 + 32;
const DATA_SIZE: usize = 200;

/// One account's lattice hash, byte-for-byte as agave's `AccountsDb::lt_hash_account`.
pub(crate) fn lt_hash_account(a: &AccountRef<'_>) -> LtHash {
    if a.lamports == 0 {
        return LtHash::identity();
    }
    let mut hasher = blake3::Hasher::new();
    if a.data.len() <= DATA_SIZE {
        let mut buf = [0u8; META_SIZE + DATA_SIZE];
        let mut n = 0;
        for part in [&a.lamports.to_le_bytes()[..], a.data, &[u8::from(a.executable)], a.owner, a.pubkey] {
            buf[n..n + part.len()].copy_from_slice(part);
            n += part.len();
        }
        hasher.update(&buf[..n]);
    } else {
        hasher.update(&a.lamports.to_le_bytes());
        hasher.update(a.data);
        hasher.update(&[u8::from(a.executable)]);
        hasher.update(a.owner);
        hasher.update(a.pubkey);
    }
    LtHash::with(&hasher)
}

/// A running accounts lattice hash, updated one slot at a time on its own worker pool.
pub(crate) struct Lattice {
    pool: rayon::ThreadPool,
    acc: LtHash,
}

impl Lattice {
    pub(crate) fn new(threads: usize) -> anyhow::Result<Self> {
        let pool =
            rayon::ThreadPoolBuilder::new().num_threads(threads).thread_name(|i| format!("lattice-{i}")).build()?;
        Ok(Self { pool, acc: LtHash::identity() })
    }

    /// Mixes out each `old[i]` and mixes in each `new[i]`. Chunks accumulate separately on the
    /// workers and are combined at the end (mixing is addition, so order does not matter).
    pub(crate) fn apply(&mut self, old: &[AccountRef<'_>], new: &[AccountRef<'_>]) {
        let delta = self.pool.install(|| {
            old.par_chunks(CHUNK)
                .zip(new.par_chunks(CHUNK))
                .map(|(o, n)| {
                    let mut acc = LtHash::identity();
                    for (o, n) in o.iter().zip(n) {
                        acc.mix_out(&lt_hash_account(o));
                        acc.mix_in(&lt_hash_account(n));
                    }
                    acc
                })
                .reduce(LtHash::identity, |mut a, b| {
                    a.mix_in(&b);
                    a
                })
        });
        self.acc.mix_in(&delta);
    }

    /// The accumulator's 32-byte checksum, printed so runs can be compared.
    pub(crate) fn checksum(&self) -> [u8; 32] {
        self.acc.checksum().0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(a: &AccountRef<'_>) -> LtHash {
        let mut h = blake3::Hasher::new();
        h.update(&a.lamports.to_le_bytes());
        h.update(a.data);
        h.update(&[u8::from(a.executable)]);
        h.update(a.owner);
        h.update(a.pubkey);
        LtHash::with(&h)
    }

    #[test]
    fn buffered_matches_streamed_and_mixing_cancels() -> anyhow::Result<()> {
        let (key, owner) = ([3u8; 32], [4u8; 32]);
        for len in [0usize, 165, 200, 201, 1000] {
            let data = vec![9u8; len];
            let a = AccountRef { pubkey: &key, lamports: 77, owner: &owner, executable: len == 201, data: &data };
            assert_eq!(lt_hash_account(&a), reference(&a));
        }
        let data = [1u8; 165];
        let a = AccountRef { pubkey: &key, lamports: 5, owner: &owner, executable: false, data: &data };
        let dead = AccountRef { lamports: 0, data: &[], ..a };
        let mut l = Lattice::new(2)?;
        l.apply(&[dead], &[a]);
        l.apply(&[a], &[dead]);
        assert_eq!(l.checksum(), LtHash::identity().checksum().0);
        Ok(())
    }
}
