//! What happens to a frozen bank after its freeze, under [`Commitment::Processed`]: the cluster
//! confirms or roots it, or its fork dies.
//!
//! [`Commitment::Processed`]: crate::Commitment::Processed

use aldb_core::Hash;
use aldb_verify::record::BlockInfo;

/// What became of a frozen bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatusKind {
    /// The bank is on the optimistically confirmed chain (the slot, or a descendant, was
    /// confirmed or rooted), with the root it had when it was frozen.
    Confirmed,
    /// The bank is rooted: its root is final.
    Finalized,
    /// The bank was taken back: it died, was replaced by a new version of its slot (a repeated
    /// `CreatedBank`), descends from one that was, or is on a fork a root left behind. Its root
    /// must no longer be served.
    Abandoned,
}

impl StatusKind {
    /// A stable snake_case name for logs and metrics labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Confirmed => "confirmed",
            Self::Finalized => "finalized",
            Self::Abandoned => "abandoned",
        }
    }
}

/// A status change of a bank that was frozen (and so came out of
/// [`Adapter::commit_ready`](crate::Adapter::commit_ready) as a [`Committed`](crate::Committed)
/// before it). It carries what a root record of the slot needs.
///
/// Per slot the order is always `Confirmed` before `Finalized`; a bank is reported `Confirmed`
/// only after its parent was (the base excepted), so the `Confirmed` changes walk the confirmed
/// chain in chain order, exactly the slots and roots [`Commitment::Confirmed`] would commit,
/// and the `Finalized` ones walk the rooted chain in the same way.
///
/// [`Commitment::Confirmed`]: crate::Commitment::Confirmed
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusChange {
    /// The bank's slot.
    pub slot: u64,
    /// What became of it.
    pub kind: StatusKind,
    /// The root the bank was frozen with.
    pub root: Hash,
    /// The bank's parent; `None` for the base (the genesis or startup state).
    pub parent: Option<u64>,
    /// The slot's block metadata, when it arrived before the change was applied.
    pub block: Option<BlockInfo>,
    /// The parent's bank hash from the slot's SlotHashes write, as in
    /// [`Committed::parent_bank_hash`](crate::Committed::parent_bank_hash).
    pub parent_bank_hash: Option<Hash>,
}
