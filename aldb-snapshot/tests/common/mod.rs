//! Set-up shared by the writer's history tests: accounts drawn at random as slots create, change
//! and delete them, the model state they build, and its root computed the naive way.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use aldb_core::AccountRef;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// An account's fields, owned.
#[derive(Clone, Debug, PartialEq)]
pub struct Acct {
    pub lamports: u64,
    pub owner: [u8; 32],
    pub executable: bool,
    pub data: Vec<u8>,
}

/// The live accounts of a slot, by pubkey.
pub type State = BTreeMap<[u8; 32], Acct>;

/// How [`draw`] draws: each test keeps its own mix, so the files it writes (and the digests
/// pinned on them) stay as they were.
#[derive(Clone, Copy, Debug)]
pub struct Mix {
    /// Draws (out of 100) at or above this delete the account (zero lamports).
    pub delete_from: u32,
    /// Data is shorter than this.
    pub max_data: usize,
}

/// `n` accounts: 30% new keys (added to `keys`), deletions from [`Mix::delete_from`] on, the rest
/// updates of known keys.
pub fn draw(rng: &mut ChaCha8Rng, keys: &mut Vec<[u8; 32]>, n: usize, mix: Mix) -> Vec<([u8; 32], Acct)> {
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

/// One account as the engine takes it.
pub fn account_ref<'a>(pk: &'a [u8; 32], a: &'a Acct) -> AccountRef<'a> {
    AccountRef { pubkey: pk, lamports: a.lamports, owner: &a.owner, executable: a.executable, data: &a.data }
}

/// Drawn accounts as the engine takes them.
pub fn refs(accts: &[([u8; 32], Acct)]) -> Vec<AccountRef<'_>> {
    accts.iter().map(|(pk, a)| account_ref(pk, a)).collect()
}

/// The root of `state` by the naive model.
pub fn naive_root(state: &State) -> [u8; 32] {
    let mut n = aldb_naive::NaiveState::default();
    for (pk, a) in state {
        n.apply_account(pk, a.lamports, &a.owner, a.executable, &a.data);
    }
    n.root()
}
