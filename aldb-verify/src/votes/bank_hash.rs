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

/// The bank hash of a bank whose hash binds `next_set_hash` as well when it is given
/// (`docs/SPEC.md` §11.1, `sha256(h || root || next_set_hash)` before hard-fork data), and
/// §10.1's [`bank_hash`] when it is `None`.
pub fn bank_hash_binding(h: &Hash, root: &Hash, next_set_hash: Option<&Hash>, hard_forks: Option<u64>) -> Hash {
    match next_set_hash {
        Some(next) => crate::epochs::bank_hash_with_set(h, root, next, hard_forks),
        None => bank_hash(h, root, hard_forks),
    }
}

/// The hard-fork count that explains `bank` as the hash of `h`, `root` and, when given,
/// `next_set_hash` ([`bank_hash_binding`]): `Some(None)` when no count is mixed in, `Some(Some(n))`
/// for the count `n` (1 to `max_hard_forks`), `None` when nothing up to `max_hard_forks` explains
/// it. A validator's front end checks what it is told with this before it logs the bank as
/// evidence a client will recompute.
pub fn explain_bank_hash(
    h: &Hash,
    root: &Hash,
    next_set_hash: Option<&Hash>,
    bank: &Hash,
    max_hard_forks: u64,
) -> Option<Option<u64>> {
    if bank_hash_binding(h, root, next_set_hash, None) == *bank {
        return Some(None);
    }
    (1..=max_hard_forks).find(|&n| bank_hash_binding(h, root, next_set_hash, Some(n)) == *bank).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bank_hash_is_explained_with_and_without_the_next_set() {
        let (h, root, next) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        assert_eq!(explain_bank_hash(&h, &root, None, &mix_root(&h, &root), 64), Some(None));
        let with_set = crate::epochs::mix_root_and_set(&h, &root, &next);
        assert_eq!(explain_bank_hash(&h, &root, Some(&next), &with_set, 64), Some(None));
        // §10.1's hash does not explain a bank that binds a set, nor the other way round.
        assert_eq!(explain_bank_hash(&h, &root, None, &with_set, 64), None);
        assert_eq!(explain_bank_hash(&h, &root, Some(&next), &mix_root(&h, &root), 64), None);
        let forked = bank_hash_binding(&h, &root, Some(&next), Some(3));
        assert_eq!(explain_bank_hash(&h, &root, Some(&next), &forked, 64), Some(Some(3)));
        assert_eq!(explain_bank_hash(&h, &root, Some(&next), &forked, 2), None);
        assert_eq!(explain_bank_hash(&h, &root, Some(&next), &h, 64), None);
    }
}
