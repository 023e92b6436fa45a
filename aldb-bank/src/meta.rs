//! What the validator knows of a frozen bank besides its accounts.

/// A frozen bank's identity in the chain, given right after its hash is computed
/// ([`crate::BankRoots::bank_hash`]). The sink puts it in the bank's root records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BankMeta {
    /// The bank hash, the aldb root mixed in.
    pub bank_hash: [u8; 32],
    /// `h`: the bank hash as agave computes it before the aldb root is mixed in, so that
    /// `bank_hash = sha256(h || root)` can be checked.
    pub h: [u8; 32],
    /// The bank's last blockhash.
    pub blockhash: [u8; 32],
    /// The bank's block height.
    pub block_height: u64,
    /// The parent bank's hash.
    pub parent_bank_hash: [u8; 32],
}

impl BankMeta {
    /// What the validator said of the bank, as the node pipeline's records take it.
    pub(crate) fn frozen(self) -> aldb_node::Frozen {
        aldb_node::Frozen {
            bank_hash: self.bank_hash,
            aldb_root: None,
            block: Some(aldb_verify::BlockInfo { blockhash: self.blockhash, block_height: self.block_height }),
            parent_bank_hash: Some(self.parent_bank_hash),
        }
    }
}
