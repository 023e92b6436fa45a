//! What a build against the patched geyser interface (`validator-patches/` 0002 and 0003, the
//! cargo feature `patched-interface`) reads from the validator: block metadata `V0_0_5`, with the
//! slot's bank hash, the `h` and aldb root it was computed from and, with the epoch-set feature,
//! the next epoch's set it binds (`docs/SPEC.md` §11.1), and vote transactions as they are on the
//! wire.

use agave_geyser_plugin_interface::geyser_plugin_interface::{ReplicaBlockInfoV5, ReplicaTransactionInfoVersions};
use aldb_format::votes::{AldbCommitment, BankEntry};
use aldb_verify::Hash;
use aldb_verify::votes::{PACKET_DATA_SIZE, explain_bank_hash};

use crate::error::CallbackError;

/// Hard-fork counts tried when a bank hash is not `sha256(h || root)` (or
/// `sha256(h || root || next_set_hash)`): a slot's count is the number of hard forks between its
/// parent and itself, one in every case seen in practice.
const MAX_HARD_FORKS: u64 = 64;

/// What V0_0_5 says of a frozen bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BankInfo {
    /// The bank as the vote-evidence log holds it (`aldb: None` when the bank committed to no
    /// root, or when its hash does not follow from `h` and the root, see `unexplained`).
    pub(crate) entry: BankEntry,
    /// The aldb root the validator mixed in, as it sent it.
    pub(crate) aldb_root: Option<Hash>,
    /// The bank hash is neither `sha256(h || root)` (§11.1's `sha256(h || root ||
    /// next_set_hash)` when the validator sent a next set) nor that with a hard-fork count up to
    /// 64 mixed in: the evidence would not check, so it is not logged as a commitment.
    pub(crate) unexplained: bool,
}

/// Decodes a V0_0_5 notification: slot, blockhash (base58 of 32 bytes), block height, and the
/// bank's hashes. The next set's encoding is not copied here (see [`next_set_encoding`]).
pub(crate) fn block_info_v5(
    b: &ReplicaBlockInfoV5<'_>,
) -> Result<(u64, [u8; 32], Option<u64>, BankInfo), CallbackError> {
    let hash = aldb_verify::hash_from_base58(b.blockhash).map_err(|source| CallbackError::Blockhash {
        slot: b.slot,
        excerpt: aldb_verify::Excerpt(b.blockhash).to_string(),
        source,
    })?;
    let aldb = b.aldb.as_ref().map(|c| (c.hash_before_root, c.state_root));
    let next_set_hash = b.aldb_next_set.as_ref().map(|n| n.hash);
    Ok((b.slot, hash, b.block_height, bank_info(b.slot, b.parent_slot, b.bank_hash, aldb, next_set_hash)))
}

/// The hash and the borrowed encoding of the set a V0_0_5 bank binds, when it binds one (a
/// nonzero hash); the caller copies the encoding only when it hands it over.
pub(crate) fn next_set_encoding<'a>(b: &ReplicaBlockInfoV5<'a>) -> Option<(Hash, &'a [u8])> {
    let n = b.aldb_next_set.as_ref()?;
    (n.hash != [0u8; 32]).then_some((n.hash, n.encoding))
}

/// What the log and the root check take from a frozen bank: its slot, parent, bank hash and, when
/// it committed to a root, `(h, root)`, with the `next_set_hash` its hash binds when the
/// validator sent one (both aldb features active, `docs/SPEC.md` §11.1).
pub(crate) fn bank_info(
    slot: u64,
    parent: u64,
    bank_hash: Hash,
    aldb: Option<(Hash, Hash)>,
    next_set_hash: Option<Hash>,
) -> BankInfo {
    let mut entry = BankEntry { slot, parent, bank_hash, aldb: None, hard_forks: None, next_set_hash: None };
    let mut unexplained = false;
    if let Some((h, root)) = aldb {
        match explain_bank_hash(&h, &root, next_set_hash.as_ref(), &bank_hash, MAX_HARD_FORKS) {
            Some(hard_forks) => {
                entry.aldb = Some(AldbCommitment { h, root });
                entry.hard_forks = hard_forks;
                entry.next_set_hash = next_set_hash;
            }
            None => unexplained = true,
        }
    }
    BankInfo { entry, aldb_root: aldb.map(|(_, root)| root), unexplained }
}

/// Why a vote transaction's wire bytes could not be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotLogged {
    /// A versioned (v0 or later) message: the vote chain reads legacy votes only.
    Versioned,
    /// Longer than a packet.
    Oversized,
}

/// The wire bytes of a vote transaction (`is_vote`), or `None` for any other transaction.
///
/// The wire form of a transaction is the bincode of its `VersionedTransaction`; for a legacy
/// message that is a short_vec of signatures, then the message: header, short_vec of keys,
/// recent blockhash, short_vec of instructions (program index, short_vec of account indexes,
/// short_vec of data). It is written here field by field, which needs no serializer crate beside
/// the ABI-pinned ones; the evidence thread checks every signature over the result, which
/// catches any difference from what was signed.
pub(crate) fn vote_wire_bytes(info: &ReplicaTransactionInfoVersions<'_>) -> Option<Result<Vec<u8>, NotLogged>> {
    let (is_vote, owned, tx) = match info {
        ReplicaTransactionInfoVersions::V0_0_1(t) => (t.is_vote, Some(t.transaction.to_versioned_transaction()), None),
        ReplicaTransactionInfoVersions::V0_0_2(t) => (t.is_vote, Some(t.transaction.to_versioned_transaction()), None),
        ReplicaTransactionInfoVersions::V0_0_3(t) => (t.is_vote, None, Some(t.transaction)),
    };
    if !is_vote {
        return None;
    }
    let tx = match (&owned, tx) {
        (Some(t), _) => t,
        (None, Some(t)) => t,
        (None, None) => return None,
    };
    let m = &tx.message;
    if m.address_table_lookups().is_some() {
        return Some(Err(NotLogged::Versioned));
    }
    let mut out = Vec::with_capacity(320);
    short_vec(&mut out, tx.signatures.len());
    for s in &tx.signatures {
        out.extend_from_slice(s.as_ref());
    }
    let h = m.header();
    out.extend_from_slice(&[
        h.num_required_signatures,
        h.num_readonly_signed_accounts,
        h.num_readonly_unsigned_accounts,
    ]);
    short_vec(&mut out, m.static_account_keys().len());
    for k in m.static_account_keys() {
        out.extend_from_slice(k.as_ref());
    }
    out.extend_from_slice(m.recent_blockhash().as_ref());
    short_vec(&mut out, m.instructions().len());
    for ix in m.instructions() {
        out.push(ix.program_id_index);
        short_vec(&mut out, ix.accounts.len());
        out.extend_from_slice(&ix.accounts);
        short_vec(&mut out, ix.data.len());
        out.extend_from_slice(&ix.data);
    }
    if out.len() > PACKET_DATA_SIZE {
        return Some(Err(NotLogged::Oversized));
    }
    Some(Ok(out))
}

/// Appends `n` as a short_vec length (7 bits a byte, low first); lengths above 65535 cannot
/// occur in a transaction that fits a packet, and the caller bounds the result.
fn short_vec(out: &mut Vec<u8>, n: usize) {
    let mut v = n;
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_vec_lengths_are_solanas() {
        for (n, want) in [(0usize, vec![0u8]), (0x7f, vec![0x7f]), (0x80, vec![0x80, 0x01]), (0x3fff, vec![0xff, 0x7f])]
        {
            let mut out = Vec::new();
            short_vec(&mut out, n);
            assert_eq!(out, want, "{n}");
        }
    }

    #[test]
    fn banks_are_logged_with_their_next_set_only_when_it_explains_their_hash() {
        use aldb_verify::votes::{bank_hash, bank_hash_binding};
        let (h, root, next) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        let plain = bank_info(5, 4, bank_hash(&h, &root, Some(3)), Some((h, root)), None);
        assert_eq!((plain.entry.hard_forks, plain.entry.next_set_hash, plain.unexplained), (Some(3), None, false));
        let bound = bank_info(5, 4, bank_hash_binding(&h, &root, Some(&next), None), Some((h, root)), Some(next));
        assert_eq!((bound.entry.next_set_hash, bound.unexplained), (Some(next), false));
        assert!(bound.entry.aldb.is_some());
        // A bank hash that does not bind the set the validator sent is not logged as evidence.
        let wrong = bank_info(5, 4, bank_hash(&h, &root, None), Some((h, root)), Some(next));
        assert!(wrong.unexplained && wrong.entry.aldb.is_none() && wrong.entry.next_set_hash.is_none());
        let far = bank_info(5, 4, bank_hash(&h, &root, Some(MAX_HARD_FORKS + 1)), Some((h, root)), None);
        assert!(far.unexplained);
    }
}
