//! Slot evidence, the one part a change of consensus replaces, and transitions
//! (`docs/SPEC.md` §11.1, §11.4).

use alloc::vec::Vec;

use sha2::{Digest, Sha256};

use super::{EpochError, EpochSet};
use crate::Hash;
use crate::votes::bank_hash::with_hard_forks;
use crate::votes::{MAX_EVIDENCE_VOTES, VoteTransaction, VoteVerifier};

/// `sha256(h || root || next_set_hash)`: the bank hash before hard-fork data with both the
/// state root and the next epoch's set hash mixed in.
pub fn mix_root_and_set(h: &Hash, root: &Hash, next_set_hash: &Hash) -> Hash {
    let mut s = Sha256::new();
    s.update(h);
    s.update(root);
    s.update(next_set_hash);
    s.finalize().into()
}

/// The bank hash a validator votes on with both aldb features active: [`mix_root_and_set`],
/// then the slot's hard-fork count (u64 little-endian) when it has one, as agave 4.2.0 mixes it.
pub fn bank_hash_with_set(h: &Hash, root: &Hash, next_set_hash: &Hash, hard_forks: Option<u64>) -> Hash {
    with_hard_forks(mix_root_and_set(h, root, next_set_hash), hard_forks)
}

/// What shows that a set vouched for one slot's bank hash: the slot's hash parts and, today,
/// the TowerSync votes for it (§10.5's `getSlotVotes` with `nextSetHash`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlotEvidence {
    /// The slot.
    pub slot: u64,
    /// The bank hash before anything aldb mixes in (agave 4.2.0's, before hard forks).
    pub h: Hash,
    /// The slot's state root.
    pub root: Hash,
    /// The slot's hard-fork count when it has hard-fork data.
    pub hard_forks: Option<u64>,
    /// The hash of the next epoch's set the bank binds; zero when it binds none.
    pub next_set_hash: Hash,
    /// Vote transactions, as on the wire.
    pub votes: Vec<Vec<u8>>,
}

/// How much of a set vouched for a bank hash, and when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vouched {
    /// The stake of the counted vote accounts.
    pub stake: u128,
    /// The set's total stake.
    pub total_stake: u128,
    /// How many vote accounts counted.
    pub voters: usize,
    /// The vouched time (§11.4): the latest timestamp that counted votes holding more than 1/3 of
    /// the total stake reached; `None` when too few votes carry one.
    pub time: Option<i64>,
}

impl SlotEvidence {
    /// The bank hash this evidence describes (§11.1).
    pub fn bank_hash(&self) -> Hash {
        bank_hash_with_set(&self.h, &self.root, &self.next_set_hash, self.hard_forks)
    }

    /// Whether the bank binds a next set.
    pub fn binds_set(&self) -> bool {
        self.next_set_hash != [0u8; 32]
    }

    /// The one rule that depends on the evidence kind: more than 2/3 of `set`'s total stake
    /// voted for this slot and bank hash, by §10.4's rules for each vote.
    pub fn vouch(&self, set: &EpochSet) -> Result<Vouched, EpochError> {
        if self.votes.len() > MAX_EVIDENCE_VOTES {
            return Err(EpochError::TooManyVotes { count: self.votes.len() });
        }
        let tally = VoteVerifier::new(set.validator_set()).tally(self.slot, &self.bank_hash(), &self.votes);
        let total = u128::from(set.total_stake());
        // stake <= total <= u64::MAX, so neither product overflows.
        if tally.stake * 3 <= total * 2 {
            return Err(EpochError::InsufficientStake { stake: tally.stake, total });
        }
        let mut stamped: Vec<(i64, u64)> = Vec::new();
        for (bytes, outcome) in self.votes.iter().zip(&tally.outcomes) {
            // Only counted votes are parsed again, for their timestamps.
            if let Ok(stake) = outcome
                && let Ok(tx) = VoteTransaction::parse(bytes)
                && let Some(ts) = tx.tower.timestamp
            {
                stamped.push((ts, *stake));
            }
        }
        let voters = tally.outcomes.iter().filter(|o| o.is_ok()).count();
        stamped.sort_unstable_by_key(|&(ts, _)| core::cmp::Reverse(ts));
        let mut acc: u128 = 0;
        let mut time = None;
        for (ts, stake) in stamped {
            acc += u128::from(stake);
            if acc * 3 > total {
                time = Some(ts);
                break;
            }
        }
        Ok(Vouched { stake: tally.stake, total_stake: total, voters, time })
    }
}

/// The proof of epoch `E + 1`'s set to whoever trusts `E`'s: the set and the evidence of a slot
/// of `E` whose bank binds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// The set of the epoch the transition is to.
    pub set: EpochSet,
    /// A slot of the epoch before, binding `set`.
    pub evidence: SlotEvidence,
}
