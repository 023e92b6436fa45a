//! Shared by the tests: random accounts, a model state per bank, and its naive root.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use aldb_bank::Account;
use aldb_naive::NaiveState;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

/// An account's fields, owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acct {
    pub lamports: u64,
    pub owner: [u8; 32],
    pub executable: bool,
    pub data: Vec<u8>,
}

pub type State = BTreeMap<[u8; 32], Acct>;

pub fn naive_root(state: &State) -> [u8; 32] {
    let mut n = NaiveState::default();
    for (k, a) in state {
        n.apply_account(k, a.lamports, &a.owner, a.executable, &a.data);
    }
    n.root()
}

pub fn refs(writes: &[([u8; 32], Acct)]) -> Vec<Account<'_>> {
    writes
        .iter()
        .map(|(k, a)| Account {
            pubkey: k,
            lamports: a.lamports,
            owner: &a.owner,
            executable: a.executable,
            data: &a.data,
        })
        .collect()
}

/// One bank's writes: new accounts, changes to existing ones, and deletions (zero lamports).
pub fn writes(rng: &mut ChaCha8Rng, state: &State, n: usize) -> Vec<([u8; 32], Acct)> {
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

pub fn apply(state: &mut State, writes: &[([u8; 32], Acct)]) {
    for (k, a) in writes {
        if a.lamports == 0 {
            state.remove(k);
        } else {
            state.insert(*k, a.clone());
        }
    }
}
