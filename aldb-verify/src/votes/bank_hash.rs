//! The bank-hash rule of the aldb consensus patch (`docs/SPEC.md` §10.1).

use sha2::{Digest, Sha256};

use crate::Hash;

/// `sha256(h || root)`: agave 4.2.0's bank hash before hard-fork data, `h`, with the slot's aldb
/// state root mixed in.
pub fn mix_root(h: &Hash, root: &Hash) -> Hash {
    let mut s = Sha256::new();
    s.update(h);
    s.update(root);
    s.finalize().into()
}

/// The bank hash a validator with the feature active votes on: [`mix_root`], then, when the slot
/// carries hard-fork data (the count of hard forks between its parent and itself), that count as
/// a little-endian u64 mixed in after, as agave 4.2.0 does.
pub fn bank_hash(h: &Hash, root: &Hash, hard_forks: Option<u64>) -> Hash {
    with_hard_forks(mix_root(h, root), hard_forks)
}

/// `mixed` with the slot's hard-fork count (a little-endian u64) mixed in after when it has one,
/// as agave 4.2.0 does: the last step of the bank hash with the root (§10.1) and with the next
/// epoch's set as well (§11).
pub(crate) fn with_hard_forks(mixed: Hash, hard_forks: Option<u64>) -> Hash {
    match hard_forks {
        None => mixed,
        Some(n) => {
            let mut s = Sha256::new();
            s.update(mixed);
            s.update(n.to_le_bytes());
            s.finalize().into()
        }
    }
}
