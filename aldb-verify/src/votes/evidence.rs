//! Vote evidence for a slot and an account proven through it (`docs/SPEC.md` §10.5).

use alloc::vec::Vec;

use super::{AcceptedRoot, ValidatorSet, VoteChainError, VoteVerifier};
use crate::spec::account_value;
use crate::{Claim, Hash, Proof};

/// An account's fields, as the evidence carries them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvidenceAccount {
    /// Lamports (never zero for an account in the tree).
    pub lamports: u64,
    /// The owning program.
    pub owner: [u8; 32],
    /// Whether the account is executable.
    pub executable: bool,
    /// The account data.
    pub data: Vec<u8>,
}

/// Everything a client needs to accept an account at a slot on the validators' votes alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VoteEvidence {
    /// The slot.
    pub slot: u64,
    /// The slot's bank hash before the root was mixed in (agave 4.2.0's, before hard forks).
    pub h: Hash,
    /// The slot's aldb state root.
    pub root: Hash,
    /// The slot's hard-fork count when it has hard-fork data.
    pub hard_forks: Option<u64>,
    /// The next epoch's set hash the bank hash binds (§11.1; 32 zero bytes when it binds none),
    /// on a chain with the epoch-set feature; `None` where the bank hash is §10.1's.
    pub next_set_hash: Option<Hash>,
    /// Vote transactions, as on the wire.
    pub votes: Vec<Vec<u8>>,
    /// The account's public key.
    pub pubkey: [u8; 32],
    /// The account, or `None` when the proof shows it absent.
    pub account: Option<EvidenceAccount>,
    /// The account's proof against `root`.
    pub proof: Proof,
}

impl VoteEvidence {
    /// The bank hash the votes must carry: §10.1's from `h`, the root and the hard forks, or
    /// §11.1's with the next set's hash when the evidence names one.
    pub fn bank_hash(&self) -> Hash {
        match &self.next_set_hash {
            Some(next) => crate::epochs::bank_hash_with_set(&self.h, &self.root, next, self.hard_forks),
            None => super::bank_hash(&self.h, &self.root, self.hard_forks),
        }
    }
}

/// An account accepted through the vote chain.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifiedAccount {
    /// The root and the votes behind it.
    pub accepted: AcceptedRoot,
    /// The account's public key.
    pub pubkey: [u8; 32],
    /// The account, `None` if proven absent.
    pub account: Option<EvidenceAccount>,
}

/// Accepts `evidence.root` by the votes of `set` (more than 2/3 of its stake for
/// `bank_hash(h, root, hard_forks)` at `evidence.slot`), then the account by its proof against
/// that root: a present account must hash to the value the proof commits to, an absent one must
/// be proven absent.
pub fn verify_account_by_votes(evidence: &VoteEvidence, set: &ValidatorSet) -> Result<VerifiedAccount, VoteChainError> {
    let accepted = VoteVerifier::new(set).verify_bank_hash(
        evidence.slot,
        &evidence.bank_hash(),
        &evidence.root,
        &evidence.votes,
    )?;
    verify_account_at(evidence, &accepted.root)?;
    Ok(VerifiedAccount { accepted, pubkey: evidence.pubkey, account: evidence.account.clone() })
}

/// Checks the evidence's account and proof against a root accepted some other way (an epoch
/// chain's client, `crate::epochs`): the proof must hold against `root` and commit to exactly
/// the account the evidence carries (or to its absence).
pub fn verify_account_at(evidence: &VoteEvidence, root: &Hash) -> Result<(), VoteChainError> {
    let claim = evidence.proof.verify(root, &evidence.pubkey).map_err(VoteChainError::Proof)?;
    match (&evidence.account, claim) {
        (Some(a), Claim::Present { value }) if account_value(a.lamports, &a.owner, a.executable, &a.data) == value => {
            Ok(())
        }
        (None, Claim::Absent) => Ok(()),
        _ => Err(VoteChainError::AccountMismatch),
    }
}
