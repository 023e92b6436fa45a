//! Random writes. Each draw consumes the generator in a fixed order: tests pin digests of the
//! files written from them, so changing a draw changes those digests.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::{Acct, State, Write};

/// How [`history_writes`] draws: each test keeps its own mix, so the files it writes (and the digests
/// pinned on them) stay as they were.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    /// Draws (out of 100) at or above this delete the account (zero lamports).
    pub delete_from: u32,
    /// Data is shorter than this.
    pub max_data: usize,
}

/// `n` writes: 30% new keys (added to `keys`), deletions from [`Mix::delete_from`] on, the rest
/// updates of known keys. Owners are random.
pub fn history_writes(rng: &mut ChaCha8Rng, keys: &mut Vec<[u8; 32]>, n: usize, mix: Mix) -> Vec<Write> {
    (0..n)
        .map(|_| {
            let roll = rng.random_range(0..100);
            let pk = if keys.is_empty() || roll < 30 {
                let k: [u8; 32] = rng.random();
                keys.push(k);
                k
            } else {
                keys[rng.random_range(0..keys.len())]
            };
            let lamports = if roll >= mix.delete_from { 0 } else { rng.random_range(1..1_000_000) };
            let len = rng.random_range(0..mix.max_data);
            let acct = Acct {
                lamports,
                owner: rng.random(),
                executable: rng.random_bool(0.1),
                data: (0..len).map(|_| rng.random()).collect(),
            };
            (pk, acct)
        })
        .collect()
}

/// One bank's `n` writes over `state`: 60% to live accounts, the rest to new keys; one in five a
/// deletion; data under 64 bytes; three owners, so owners repeat as on a real chain.
pub fn bank_writes(rng: &mut ChaCha8Rng, state: &State, n: usize) -> Vec<Write> {
    let keys: Vec<[u8; 32]> = state.keys().copied().collect();
    (0..n)
        .map(|_| {
            let key = if !keys.is_empty() && rng.random_bool(0.6) {
                keys[rng.random_range(0..keys.len())]
            } else {
                rng.random()
            };
            let lamports = if rng.random_bool(0.2) { 0 } else { rng.random_range(1..1_000_000) };
            let len = rng.random_range(0..64);
            let data = (0..len).map(|_| rng.random()).collect();
            (key, Acct { lamports, owner: [rng.random_range(0..3u8); 32], executable: rng.random_bool(0.1), data })
        })
        .collect()
}
