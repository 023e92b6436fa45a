//! The validator set of an epoch, its encoding and its hash (`docs/SPEC.md` §11.2).

use alloc::vec::Vec;

use sha2::{Digest, Sha256};

use super::EpochSetError;
use crate::Hash;
use crate::votes::{Validator, ValidatorSet};

/// The prefix hashed before a set's encoding: `"aldb-epoch-set-v1"`.
pub const SET_DOMAIN: &[u8; 17] = b"aldb-epoch-set-v1";

/// The most members a followed set may have: a bound on a client's work.
pub const MAX_SET_MEMBERS: usize = 65_536;

/// Bytes before the members: epoch, total stake, member count.
pub const SET_HEADER_LEN: usize = 20;

/// Bytes per member: vote account, authorized voter, stake.
pub const SET_MEMBER_LEN: usize = 72;

/// The validator set agave fixes for an epoch (`EpochStakes`): the staked vote accounts with an
/// authorized voter for the epoch, sorted by vote account, and the total stake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochSet {
    epoch: u64,
    total_stake: u64,
    voters: ValidatorSet,
    hash: Hash,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

fn key_at(b: &[u8], at: usize) -> [u8; 32] {
    let mut k = [0u8; 32];
    k.copy_from_slice(&b[at..at + 32]);
    k
}

/// `sha256("aldb-epoch-set-v1" || encoding)`, the hash of §11.2, of any bytes.
pub fn set_hash(encoding: &[u8]) -> Hash {
    let mut h = Sha256::new();
    h.update(SET_DOMAIN);
    h.update(encoding);
    h.finalize().into()
}

/// What a node binds for an epoch's set (§11.1, §11.3): the members sorted by vote account, the
/// encoding of §11.2 and its hash. Unlike [`EpochSet::new`] it refuses nothing: a node binds
/// whatever set its bank holds, deterministically, and a set a client cannot follow (empty, or
/// beyond [`MAX_SET_MEMBERS`]) is refused by the client's decoder, never by consensus.
/// The count field is the member count truncated to 32 bits, which only a set a decoder refuses
/// reaches.
pub fn set_commitment(epoch: u64, total_stake: u64, members: &mut [Validator]) -> (Hash, Vec<u8>) {
    members.sort_unstable_by(|a, b| {
        (a.vote_account, a.authorized_voter, a.stake).cmp(&(b.vote_account, b.authorized_voter, b.stake))
    });
    let encoding = encode_sorted(epoch, total_stake, members);
    (set_hash(&encoding), encoding)
}

fn encode_sorted(epoch: u64, total_stake: u64, members: &[Validator]) -> Vec<u8> {
    let mut out = Vec::with_capacity(SET_HEADER_LEN + SET_MEMBER_LEN * members.len());
    out.extend_from_slice(&epoch.to_le_bytes());
    out.extend_from_slice(&total_stake.to_le_bytes());
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for m in members {
        out.extend_from_slice(&m.vote_account);
        out.extend_from_slice(&m.authorized_voter);
        out.extend_from_slice(&m.stake.to_le_bytes());
    }
    out
}

impl EpochSet {
    /// A set from members in any order: sorted, then held to the encoding's rules.
    pub fn new(epoch: u64, total_stake: u64, members: &[Validator]) -> Result<Self, EpochSetError> {
        let mut sorted = members.to_vec();
        sorted.sort_unstable_by(|a, b| {
            (a.vote_account, a.authorized_voter, a.stake).cmp(&(b.vote_account, b.authorized_voter, b.stake))
        });
        Self::from_sorted(epoch, total_stake, sorted)
    }

    fn from_sorted(epoch: u64, total_stake: u64, members: Vec<Validator>) -> Result<Self, EpochSetError> {
        if members.is_empty() {
            return Err(EpochSetError::Empty);
        }
        if members.len() > MAX_SET_MEMBERS {
            return Err(EpochSetError::TooManyMembers { count: members.len() as u64 });
        }
        let mut sum: u128 = 0;
        for (i, m) in members.iter().enumerate() {
            if let Some(prev) = i.checked_sub(1).map(|p| &members[p]) {
                if m.vote_account == prev.vote_account {
                    return Err(EpochSetError::DuplicateVoteAccount);
                }
                if m.vote_account < prev.vote_account {
                    return Err(EpochSetError::NotSorted);
                }
            }
            if m.stake == 0 {
                return Err(EpochSetError::ZeroStake);
            }
            sum += u128::from(m.stake);
        }
        if sum > u128::from(total_stake) {
            return Err(EpochSetError::StakeExceedsTotal);
        }
        // Distinct accounts with stake: the §10.4 set cannot refuse them.
        let voters = ValidatorSet::new(&members).map_err(|_| EpochSetError::DuplicateVoteAccount)?;
        let mut set = EpochSet { epoch, total_stake, voters, hash: [0; 32] };
        set.hash = set_hash(&set.encode());
        Ok(set)
    }

    /// Decodes the encoding of §11.2, its rules in the spec's order.
    pub fn decode(bytes: &[u8]) -> Result<Self, EpochSetError> {
        if bytes.len() < SET_HEADER_LEN {
            return Err(EpochSetError::Length);
        }
        let epoch = u64_at(bytes, 0);
        let total_stake = u64_at(bytes, 8);
        let n = u32::from_le_bytes([bytes[16], bytes[17], bytes[18], bytes[19]]) as usize;
        if n == 0 {
            return Err(EpochSetError::Empty);
        }
        if n > MAX_SET_MEMBERS {
            return Err(EpochSetError::TooManyMembers { count: n as u64 });
        }
        if bytes.len() != SET_HEADER_LEN + SET_MEMBER_LEN * n {
            return Err(EpochSetError::Length);
        }
        let members = bytes[SET_HEADER_LEN..]
            .chunks_exact(SET_MEMBER_LEN)
            .map(|m| Validator { vote_account: key_at(m, 0), authorized_voter: key_at(m, 32), stake: u64_at(m, 64) })
            .collect();
        Self::from_sorted(epoch, total_stake, members)
    }

    /// The encoding of §11.2.
    pub fn encode(&self) -> Vec<u8> {
        encode_sorted(self.epoch, self.total_stake, self.voters.members())
    }

    /// `sha256("aldb-epoch-set-v1" || encoding)`.
    pub fn hash(&self) -> Hash {
        self.hash
    }

    /// The epoch the set is for.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The total stake the 2/3 rule is measured against (at least the members' sum).
    pub fn total_stake(&self) -> u64 {
        self.total_stake
    }

    /// The members, sorted by vote account.
    pub fn members(&self) -> &[Validator] {
        self.voters.members()
    }

    /// The members as a §10.4 set (its total is their sum; §11 measures against
    /// [`Self::total_stake`]).
    pub fn validator_set(&self) -> &ValidatorSet {
        &self.voters
    }
}
