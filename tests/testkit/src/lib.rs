//! The account model that tests of the engine's users (the snapshot writer, the bank module)
//! check against: accounts as owned values, the live state a run of writes leaves, and its root
//! computed by the naive commitment, never by the engine under test. [`random`] draws the writes.
//!
//! A dev-dependency only. It sits apart from `aldb-naive`, which shares no code with the engine
//! by design and so cannot hand out the engine's [`AccountRef`]s.

pub mod random;

use std::collections::BTreeMap;

use aldb_core::AccountRef;
use aldb_naive::NaiveState;

/// An account's fields, owned. Zero lamports is a deletion, as the validator reports one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acct {
    /// Lamports; 0 deletes the account.
    pub lamports: u64,
    /// The owning program.
    pub owner: [u8; 32],
    /// Whether the account is a loaded program.
    pub executable: bool,
    /// The account's data.
    pub data: Vec<u8>,
}

/// One write: the account's pubkey and what it becomes.
pub type Write = ([u8; 32], Acct);

/// The live accounts after some writes, by pubkey.
pub type State = BTreeMap<[u8; 32], Acct>;

/// Applies `writes` in order: zero lamports removes the account, anything else sets it.
pub fn apply(state: &mut State, writes: &[Write]) {
    for (pk, a) in writes {
        if a.lamports == 0 {
            state.remove(pk);
        } else {
            state.insert(*pk, a.clone());
        }
    }
}

/// The root of `state` by the naive model.
pub fn naive_root(state: &State) -> [u8; 32] {
    let mut n = NaiveState::default();
    for (pk, a) in state {
        n.apply_account(pk, a.lamports, &a.owner, a.executable, &a.data);
    }
    n.root()
}

/// One account as the engine takes it.
pub fn account_ref<'a>(pk: &'a [u8; 32], a: &'a Acct) -> AccountRef<'a> {
    AccountRef { pubkey: pk, lamports: a.lamports, owner: &a.owner, executable: a.executable, data: &a.data }
}

/// Writes as the engine takes them.
pub fn refs(writes: &[Write]) -> Vec<AccountRef<'_>> {
    writes.iter().map(|(pk, a)| account_ref(pk, a)).collect()
}

/// Every live account of `state` as a write, for building a base from it.
pub fn as_writes(state: &State) -> Vec<Write> {
    state.iter().map(|(pk, a)| (*pk, a.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acct(lamports: u64) -> Acct {
        Acct { lamports, owner: [7; 32], executable: false, data: vec![1, 2, 3] }
    }

    #[test]
    fn zero_lamports_deletes_and_the_root_follows_the_live_accounts() {
        let mut state = State::new();
        apply(&mut state, &[([1; 32], acct(5)), ([2; 32], acct(6))]);
        let two = naive_root(&state);
        apply(&mut state, &[([3; 32], acct(7)), ([3; 32], acct(0))]);
        assert_eq!(state.len(), 2, "created and deleted in one run leaves nothing");
        assert_eq!(naive_root(&state), two);
        apply(&mut state, &[([2; 32], acct(0))]);
        assert_eq!(state.keys().collect::<Vec<_>>(), [&[1; 32]]);
        assert_ne!(naive_root(&state), two);
        apply(&mut state, &[([1; 32], acct(0))]);
        assert_eq!(naive_root(&state), [0; 32], "the empty state's root");
    }
}
