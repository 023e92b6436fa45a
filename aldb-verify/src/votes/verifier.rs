//! The validator set and the 2/3 stake rule (`docs/SPEC.md` §10.4).

use alloc::vec::Vec;

use super::{MAX_EVIDENCE_VOTES, SetError, VoteChainError, VoteError, VoteTransaction, bank_hash};
use crate::Hash;

/// One member of a validator set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validator {
    /// The vote account, named by a vote instruction's first account.
    pub vote_account: [u8; 32],
    /// The key that must sign that vote account's votes.
    pub authorized_voter: [u8; 32],
    /// The stake delegated to the vote account.
    pub stake: u64,
}

/// The validators a client trusts, with their stakes, ordered by vote account.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatorSet {
    members: Vec<Validator>,
    total: u128,
}

impl ValidatorSet {
    /// A set of distinct vote accounts with a nonzero total stake.
    pub fn new(members: &[Validator]) -> Result<Self, SetError> {
        let mut members = members.to_vec();
        members.sort_unstable_by_key(|m| m.vote_account);
        if let Some(w) = members.windows(2).find(|w| w[0].vote_account == w[1].vote_account) {
            return Err(SetError::DuplicateVoteAccount { vote_account: w[0].vote_account });
        }
        // u128: even 2^64 members of u64::MAX stake cannot overflow it.
        let total = members.iter().map(|m| u128::from(m.stake)).sum();
        if total == 0 {
            return Err(SetError::ZeroTotalStake);
        }
        Ok(ValidatorSet { members, total })
    }

    /// The sum of the members' stakes.
    pub fn total_stake(&self) -> u128 {
        self.total
    }

    /// The members, ordered by vote account.
    pub fn members(&self) -> &[Validator] {
        &self.members
    }

    fn index_of(&self, vote_account: &[u8; 32]) -> Option<usize> {
        self.members.binary_search_by(|m| m.vote_account.cmp(vote_account)).ok()
    }
}

/// What each offered vote came to, and the stake that agreed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tally {
    /// Per vote, in order: the stake it added, or why it added none.
    pub outcomes: Vec<Result<u64, VoteError>>,
    /// The stake of the distinct vote accounts counted.
    pub stake: u128,
    /// The set's total stake.
    pub total_stake: u128,
}

impl Tally {
    /// Whether the counted stake is more than 2/3 of the total.
    pub fn is_supermajority(&self) -> bool {
        // A set holds fewer than 2^58 members (each takes 72 bytes of memory), so the total is
        // below 2^122 and neither product saturates; saturating keeps it panic-free regardless.
        self.stake.saturating_mul(3) > self.total_stake.saturating_mul(2)
    }
}

/// A root the validators voted for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcceptedRoot {
    /// The slot.
    pub slot: u64,
    /// The bank hash the votes carry.
    pub bank_hash: Hash,
    /// The state root inside it.
    pub root: Hash,
    /// The stake of the vote accounts that voted for it.
    pub stake: u128,
    /// The set's total stake.
    pub total_stake: u128,
    /// How many vote accounts voted for it.
    pub voters: usize,
    /// The newest time (Unix seconds, the voters' clocks) that counted votes of vote accounts
    /// holding more than 1/3 of the set's total stake carry or exceed in their timestamps: at
    /// least one validator outside any faulty third vouches the slot was voted on no earlier.
    /// `None` when the stamped votes hold 1/3 of the stake or less.
    pub vouched_time: Option<i64>,
}

impl AcceptedRoot {
    /// Refuses a root whose votes were cast more than `max_age` seconds before `now` (Unix
    /// seconds, the client's clock), by [`vouched_time`](Self::vouched_time), or whose votes do
    /// not say when they were cast. A server can always answer an old slot's valid evidence:
    /// this is how a client asking for the newest bounds how old an answer may be.
    pub fn check_age(&self, now: i64, max_age: u64) -> Result<(), VoteChainError> {
        let Some(vouched) = self.vouched_time else { return Err(VoteChainError::Unstamped) };
        let age = i128::from(now) - i128::from(vouched);
        if age > i128::from(max_age) {
            return Err(VoteChainError::TooOld { vouched, now, max_age });
        }
        Ok(())
    }
}

/// The newest time `t` such that the votes stamped `t` or later hold more than 1/3 of `total`:
/// `stamped` is each counted vote's timestamp and stake.
fn vouched_time(mut stamped: Vec<(i64, u64)>, total: u128) -> Option<i64> {
    stamped.sort_unstable_by_key(|s| core::cmp::Reverse(s.0));
    let mut stake: u128 = 0;
    for (t, s) in stamped {
        stake += u128::from(s);
        if stake.saturating_mul(3) > total {
            return Some(t);
        }
    }
    None
}

/// Counts votes of a [`ValidatorSet`] for a slot and bank hash.
#[derive(Clone, Copy, Debug)]
pub struct VoteVerifier<'s> {
    set: &'s ValidatorSet,
}

impl<'s> VoteVerifier<'s> {
    /// A verifier over `set`.
    pub fn new(set: &'s ValidatorSet) -> Self {
        VoteVerifier { set }
    }

    /// Checks each vote against slot `slot` and `bank_hash` in the order of §10.4: decoding, the
    /// vote account's membership, its authorized voter among the signers, the slot, the hash,
    /// whether the account was counted already, and last, the signatures, so that only votes
    /// that would count cost a signature check.
    pub fn tally<V: AsRef<[u8]>>(&self, slot: u64, bank_hash: &Hash, votes: &[V]) -> Tally {
        let mut counted = alloc::vec![false; self.set.members.len()];
        let mut stake: u128 = 0;
        let mut outcomes = Vec::with_capacity(votes.len());
        for v in votes {
            let outcome = self.check(slot, bank_hash, v.as_ref(), &counted);
            if let Ok((i, s)) = outcome {
                counted[i] = true;
                stake += u128::from(s);
            }
            outcomes.push(outcome.map(|(_, s)| s));
        }
        Tally { outcomes, stake, total_stake: self.set.total }
    }

    fn check(&self, slot: u64, bank_hash: &Hash, bytes: &[u8], counted: &[bool]) -> Result<(usize, u64), VoteError> {
        let tx = VoteTransaction::parse(bytes)?;
        let i = self.set.index_of(&tx.vote_account).ok_or(VoteError::UnknownVoteAccount)?;
        let member = &self.set.members[i];
        if tx.instruction_signers.binary_search(&member.authorized_voter).is_err() {
            return Err(VoteError::WrongSigner);
        }
        if tx.tower.slot() != slot {
            return Err(VoteError::WrongSlot { slot: tx.tower.slot() });
        }
        if tx.tower.hash != *bank_hash {
            return Err(VoteError::WrongHash);
        }
        if counted[i] {
            return Err(VoteError::Duplicate);
        }
        tx.verify_signatures()?;
        Ok((i, member.stake))
    }

    /// Accepts `root` for `slot` when votes of more than 2/3 of the set's stake carry
    /// `bank_hash(h, root, hard_forks)`.
    pub fn verify_root<V: AsRef<[u8]>>(
        &self,
        slot: u64,
        h: &Hash,
        root: &Hash,
        hard_forks: Option<u64>,
        votes: &[V],
    ) -> Result<AcceptedRoot, VoteChainError> {
        self.verify_bank_hash(slot, &bank_hash(h, root, hard_forks), root, votes)
    }

    /// Accepts `root` for `slot` when votes of more than 2/3 of the set's stake carry `expected`,
    /// a bank hash the caller computed from `root` (§10.1's, or §11.1's with the next set).
    pub fn verify_bank_hash<V: AsRef<[u8]>>(
        &self,
        slot: u64,
        expected: &Hash,
        root: &Hash,
        votes: &[V],
    ) -> Result<AcceptedRoot, VoteChainError> {
        if votes.len() > MAX_EVIDENCE_VOTES {
            return Err(VoteChainError::TooManyVotes { count: votes.len() });
        }
        let expected = *expected;
        let tally = self.tally(slot, &expected, votes);
        if !tally.is_supermajority() {
            return Err(VoteChainError::InsufficientStake { stake: tally.stake, total: tally.total_stake });
        }
        // Counted votes decoded once already; decoding them again is cheaper than any signature.
        let stamped = votes
            .iter()
            .zip(&tally.outcomes)
            .filter_map(|(v, o)| {
                let stake = *o.as_ref().ok()?;
                Some((VoteTransaction::parse(v.as_ref()).ok()?.tower.timestamp?, stake))
            })
            .collect();
        Ok(AcceptedRoot {
            slot,
            bank_hash: expected,
            root: *root,
            stake: tally.stake,
            total_stake: tally.total_stake,
            voters: tally.outcomes.iter().filter(|o| o.is_ok()).count(),
            vouched_time: vouched_time(stamped, tally.total_stake),
        })
    }
}
