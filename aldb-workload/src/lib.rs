//! The AlDBaran workload: uniform random 32-byte pubkeys, slots of 90% updates / 5% inserts /
//! 5% deletes, each update carrying a whole SPL-token-sized account.
//!
//! Pubkeys are never stored for the whole key set (that would inflate the memory per leaf the
//! benchmark measures): key `i` is a pure function of the seed and `i`, and the live keys are the
//! index window `[lo, hi)`. Inserts take `hi`, deletes take `lo`, updates pick a uniform index in
//! the window. Everything random comes from ChaCha streams keyed by (seed, purpose, position), so
//! a run is reproducible and independent of the thread count.

use aldb_core::AccountRef;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// The SPL token program id (`TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA`): the owner of every
/// account in the workload, as token accounts dominate mainnet writes.
pub const OWNER: [u8; 32] = [
    0x06, 0xdd, 0xf6, 0xe1, 0xd7, 0x65, 0xa1, 0x93, 0xd9, 0xcb, 0xe1, 0x46, 0xce, 0xeb, 0x79, 0xac, 0x1c, 0xb4, 0x85,
    0xed, 0x5f, 0x5b, 0x37, 0x91, 0x3a, 0x8c, 0xf5, 0x85, 0x7e, 0xff, 0x00, 0xa9,
];

/// Accounts per generation block: each block has its own ChaCha stream, so blocks fill in
/// parallel and the bytes do not depend on how many threads did the filling.
const FILL_BLOCK: usize = 4096;

/// Purposes of the random streams, so no two uses of the seed share a stream.
#[derive(Clone, Copy, Debug)]
#[repr(u64)]
pub enum Stream {
    /// Lamports and data of the prefilled accounts.
    Prefill = 1,
    /// The op mix and update targets of a slot.
    Ops = 2,
    /// Lamports and data of a slot's new account states.
    New = 3,
    /// Lamports and data of the stand-in previous states the lattice hash mixes out.
    Old = 4,
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A 64-bit seed for one stream at one position (slot, block), well mixed.
pub fn stream_seed(seed: u64, stream: Stream, a: u64, b: u64) -> u64 {
    splitmix64(splitmix64(splitmix64(seed ^ stream as u64) ^ a) ^ b)
}

/// Pubkey number `i`: four splitmix64 outputs, which are uniform enough for the key paths (the
/// tree hashes pubkeys before placing them anyway) and cost a few nanoseconds.
pub fn pubkey(seed: u64, i: u64) -> [u8; 32] {
    let base = splitmix64(seed ^ 0x5eed_0000_0000_0000).wrapping_add(i.wrapping_mul(4));
    let mut out = [0u8; 32];
    for (k, chunk) in out.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&splitmix64(base.wrapping_add(k as u64)).to_le_bytes());
    }
    out
}

/// What one op of a slot does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An existing key gets a new account state.
    Update,
    /// A new key.
    Insert,
    /// An existing key is closed (lamports 0).
    Delete,
}

/// The live keys: indices `[lo, hi)`.
#[derive(Clone, Copy, Debug)]
pub struct KeyWindow {
    /// Oldest live key index.
    pub lo: u64,
    /// One past the newest live key index.
    pub hi: u64,
}

impl KeyWindow {
    /// The window after prefilling `n` keys.
    pub fn prefilled(n: u64) -> Self {
        Self { lo: 0, hi: n }
    }

    /// Number of live keys.
    pub fn len(&self) -> u64 {
        self.hi - self.lo
    }

    /// Whether no key is live.
    pub fn is_empty(&self) -> bool {
        self.hi == self.lo
    }
}

/// One slot's ops: which key index each touches and how, in order.
pub struct SlotOps {
    /// Key index each op touches.
    pub index: Vec<u64>,
    /// What each op does.
    pub kind: Vec<Kind>,
}

impl SlotOps {
    /// Draws `n` ops with the 90/5/5 mix and moves the window. An update may hit a key twice in a
    /// slot (the later state wins, as in a real slot).
    pub fn draw(seed: u64, slot: u64, n: usize, window: &mut KeyWindow) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(seed, Stream::Ops, slot, 0));
        let mut index = Vec::with_capacity(n);
        let mut kind = Vec::with_capacity(n);
        for _ in 0..n {
            let r = rng.random_range(0..100u32);
            // An empty window can only grow.
            let k = if window.is_empty() || (90..95).contains(&r) {
                Kind::Insert
            } else if r >= 95 {
                Kind::Delete
            } else {
                Kind::Update
            };
            let i = match k {
                Kind::Update => rng.random_range(window.lo..window.hi),
                Kind::Insert => {
                    window.hi += 1;
                    window.hi - 1
                }
                Kind::Delete => {
                    window.lo += 1;
                    window.lo - 1
                }
            };
            index.push(i);
            kind.push(k);
        }
        Self { index, kind }
    }
}

/// Owned account states, laid out flat so a slot's buffers are three allocations.
pub struct SlotAccounts {
    /// Pubkey of each account.
    pub pubkeys: Vec<[u8; 32]>,
    /// Lamports of each account (0 = closed).
    pub lamports: Vec<u64>,
    data: Vec<u8>,
    data_len: usize,
}

impl SlotAccounts {
    /// Accounts for `pubkeys`, with random non-zero lamports and `data_len` random data bytes from
    /// the stream (`stream`, `position`); those marked in `dead` get lamports 0 and no data (a
    /// closed account).
    pub fn generate(
        seed: u64,
        stream: Stream,
        position: u64,
        pubkeys: Vec<[u8; 32]>,
        dead: impl Fn(usize) -> bool,
        data_len: usize,
    ) -> Self {
        let n = pubkeys.len();
        let mut lamports = vec![0u64; n];
        let mut data = vec![0u8; n * data_len];
        let block_bytes = (FILL_BLOCK * data_len).max(1);
        lamports.par_chunks_mut(FILL_BLOCK).zip(data.par_chunks_mut(block_bytes)).enumerate().for_each(
            |(b, (lam, dat))| {
                let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(seed, stream, position, b as u64));
                for l in lam.iter_mut() {
                    // Non-zero, and a realistic range (token accounts hold ~2M lamports of rent).
                    *l = rng.random_range(1..=1u64 << 40);
                }
                rng.fill_bytes(dat);
            },
        );
        // `data` may be empty when data_len is 0; then the zip above covers no blocks.
        if data_len == 0 {
            let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(seed, stream, position, u64::MAX));
            lamports.iter_mut().for_each(|l| *l = rng.random_range(1..=1u64 << 40));
        }
        for (i, l) in lamports.iter_mut().enumerate() {
            if dead(i) {
                *l = 0;
            }
        }
        Self { pubkeys, lamports, data, data_len }
    }

    /// The prefill chunk of keys `[first, first + count)`, all alive.
    pub fn prefill(seed: u64, first: u64, count: usize, data_len: usize) -> Self {
        let pubkeys = (first..first + count as u64).into_par_iter().map(|i| pubkey(seed, i)).collect();
        Self::generate(seed, Stream::Prefill, first, pubkeys, |_| false, data_len)
    }

    /// A slot's new account states: deletes are closed accounts.
    pub fn slot_new(seed: u64, slot: u64, ops: &SlotOps, data_len: usize) -> Self {
        let pubkeys = ops.index.par_iter().map(|&i| pubkey(seed, i)).collect();
        Self::generate(seed, Stream::New, slot, pubkeys, |i| ops.kind[i] == Kind::Delete, data_len)
    }

    /// The states the slot's ops replace, for the lattice hash: inserts replace nothing (an
    /// absent account, lamports 0); updates and deletes replace a live account of the same
    /// size. These are stand-ins with fresh random lamports and data, not the exact previous
    /// version (tracking that would need per-key state); the hashing cost is the same, as it
    /// depends only on the account's length.
    pub fn slot_old(seed: u64, slot: u64, ops: &SlotOps, new: &Self, data_len: usize) -> Self {
        Self::generate(seed, Stream::Old, slot, new.pubkeys.clone(), |i| ops.kind[i] == Kind::Insert, data_len)
    }

    /// Number of accounts.
    pub fn len(&self) -> usize {
        self.pubkeys.len()
    }

    /// The data of account `i`: empty when it is closed.
    pub fn data(&self, i: usize) -> &[u8] {
        if self.lamports[i] == 0 { &[] } else { &self.data[i * self.data_len..(i + 1) * self.data_len] }
    }

    /// Whether there are no accounts.
    pub fn is_empty(&self) -> bool {
        self.pubkeys.is_empty()
    }

    /// Borrowed views, as the engine takes them.
    pub fn refs(&self) -> Vec<AccountRef<'_>> {
        (0..self.len())
            .map(|i| AccountRef {
                pubkey: &self.pubkeys[i],
                lamports: self.lamports[i],
                owner: &OWNER,
                executable: false,
                data: self.data(i),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_moves_and_mix_is_about_right() {
        let mut w = KeyWindow::prefilled(1000);
        let ops = SlotOps::draw(7, 0, 100_000, &mut w);
        let inserts = ops.kind.iter().filter(|k| **k == Kind::Insert).count();
        let deletes = ops.kind.iter().filter(|k| **k == Kind::Delete).count();
        assert!((4000..6000).contains(&inserts), "{inserts}");
        assert!((4000..6000).contains(&deletes), "{deletes}");
        assert_eq!(w.hi, 1000 + inserts as u64);
        assert_eq!(w.lo, deletes as u64);
    }

    #[test]
    fn generation_is_deterministic_and_deletes_are_closed() {
        let mut w = KeyWindow::prefilled(50);
        let ops = SlotOps::draw(1, 3, 10_000, &mut w);
        let a = SlotAccounts::slot_new(1, 3, &ops, 165);
        let b = SlotAccounts::slot_new(1, 3, &ops, 165);
        assert_eq!(a.lamports, b.lamports);
        assert_eq!(a.data, b.data);
        for i in 0..a.len() {
            assert_eq!(a.lamports[i] == 0, ops.kind[i] == Kind::Delete);
            assert_eq!(a.data(i).len(), if a.lamports[i] == 0 { 0 } else { 165 });
        }
        assert_ne!(pubkey(1, 0), pubkey(1, 1));
        assert_ne!(pubkey(1, 0), pubkey(2, 0));
    }
}
