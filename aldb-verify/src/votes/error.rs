//! Why a vote is not counted, a validator set not built, or a vote chain not accepted.

use crate::proof::VerifyError;

/// Why a transaction does not count as a vote for a slot (`docs/SPEC.md` §10.4). The first four
/// are about the transaction alone; the rest about it as a vote of the set for the slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VoteError {
    /// Longer than [`super::PACKET_DATA_SIZE`] bytes.
    Oversized {
        /// The length received.
        len: usize,
    },
    /// Not a well-formed legacy transaction.
    Malformed {
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// A versioned (v0 or later) message; only legacy messages are read.
    Versioned,
    /// Not exactly one instruction, to the vote program, `TowerSync` or `TowerSyncSwitch`.
    NotTowerSync,
    /// The `TowerSync` does not decode in the compact form, or names no vote account.
    MalformedVote {
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The vote account is not in the validator set.
    UnknownVoteAccount,
    /// The vote account's configured authorized voter is not a signer of the instruction.
    WrongSigner,
    /// The vote's last slot is not the slot asked about.
    WrongSlot {
        /// The slot voted for.
        slot: u64,
    },
    /// The vote's bank hash is not the one the evidence implies.
    WrongHash,
    /// The vote account's vote was already counted.
    Duplicate,
    /// A signature of the transaction does not verify (strictly, §9.3's rules).
    BadSignature,
}

impl VoteError {
    /// The error's name in `tests/vectors/votes-v1.json`.
    pub fn name(&self) -> &'static str {
        match self {
            VoteError::Oversized { .. } => "oversized",
            VoteError::Malformed { .. } => "malformed",
            VoteError::Versioned => "versioned",
            VoteError::NotTowerSync => "not_tower_sync",
            VoteError::MalformedVote { .. } => "malformed_vote",
            VoteError::UnknownVoteAccount => "unknown_vote_account",
            VoteError::WrongSigner => "wrong_signer",
            VoteError::WrongSlot { .. } => "wrong_slot",
            VoteError::WrongHash => "wrong_hash",
            VoteError::Duplicate => "duplicate",
            VoteError::BadSignature => "bad_signature",
        }
    }
}

impl core::fmt::Display for VoteError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            VoteError::Oversized { len } => {
                write!(f, "{len} bytes is longer than any transaction ({} bytes)", super::PACKET_DATA_SIZE)
            }
            VoteError::Malformed { reason } => write!(f, "not a legacy transaction: {reason}"),
            VoteError::Versioned => f.write_str("a versioned message; votes are legacy transactions"),
            VoteError::NotTowerSync => f.write_str("not a single TowerSync instruction to the vote program"),
            VoteError::MalformedVote { reason } => write!(f, "bad TowerSync: {reason}"),
            VoteError::UnknownVoteAccount => f.write_str("the vote account is not in the validator set"),
            VoteError::WrongSigner => f.write_str("the vote account's authorized voter did not sign"),
            VoteError::WrongSlot { slot } => write!(f, "a vote for slot {slot}"),
            VoteError::WrongHash => f.write_str("a vote for another bank hash"),
            VoteError::Duplicate => f.write_str("the vote account was already counted"),
            VoteError::BadSignature => f.write_str("a signature does not verify"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for VoteError {}

/// Why a validator set cannot be built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SetError {
    /// A vote account is listed twice.
    DuplicateVoteAccount {
        /// The vote account.
        vote_account: [u8; 32],
    },
    /// The stakes sum to zero: no vote could ever reach 2/3.
    ZeroTotalStake,
}

impl core::fmt::Display for SetError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            SetError::DuplicateVoteAccount { vote_account } => {
                write!(f, "vote account {} is listed twice", Base58(vote_account))
            }
            SetError::ZeroTotalStake => f.write_str("the validator set has no stake"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for SetError {}

/// A key's base58 text, written without allocating (the crate is `no_std`).
struct Base58<'a>(&'a [u8; 32]);

impl core::fmt::Display for Base58<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        use core::fmt::Write as _;
        const ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
        // Base-58 digits, least significant first: 32 bytes take at most 44.
        let mut digits = [0u8; 44];
        let mut len = 0;
        for &byte in self.0 {
            let mut carry = u32::from(byte);
            for d in &mut digits[..len] {
                carry += u32::from(*d) << 8;
                *d = (carry % 58) as u8;
                carry /= 58;
            }
            while carry > 0 && len < digits.len() {
                digits[len] = (carry % 58) as u8;
                len += 1;
                carry /= 58;
            }
        }
        // Each leading zero byte is a `1`.
        for _ in self.0.iter().take_while(|&&b| b == 0) {
            f.write_char('1')?;
        }
        for &d in digits[..len].iter().rev() {
            f.write_char(char::from(ALPHABET[usize::from(d)]))?;
        }
        Ok(())
    }
}

/// Why a root, or an account through it, is not accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VoteChainError {
    /// More than [`super::MAX_EVIDENCE_VOTES`] votes.
    TooManyVotes {
        /// The number offered.
        count: usize,
    },
    /// The counted votes hold 2/3 of the stake or less.
    InsufficientStake {
        /// The stake of the counted vote accounts.
        stake: u128,
        /// The set's total stake.
        total: u128,
    },
    /// The account proof does not verify against the accepted root.
    Proof(VerifyError),
    /// The account does not match what the proof commits to.
    AccountMismatch,
    /// The votes were cast longer ago than the client allows (`AcceptedRoot::check_age`).
    TooOld {
        /// The time the votes vouch for (Unix seconds).
        vouched: i64,
        /// The client's time.
        now: i64,
        /// The most seconds allowed between them.
        max_age: u64,
    },
    /// The counted votes that carry a timestamp hold 1/3 of the stake or less: they do not say
    /// when the slot was voted on.
    Unstamped,
}

impl VoteChainError {
    /// The error's name in `tests/vectors/votes-v1.json`.
    pub fn name(&self) -> &'static str {
        match self {
            VoteChainError::TooManyVotes { .. } => "too_many_votes",
            VoteChainError::InsufficientStake { .. } => "insufficient_stake",
            VoteChainError::Proof(_) => "proof",
            VoteChainError::AccountMismatch => "account_mismatch",
            VoteChainError::TooOld { .. } => "too_old",
            VoteChainError::Unstamped => "unstamped",
        }
    }
}

impl core::fmt::Display for VoteChainError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            VoteChainError::TooManyVotes { count } => {
                write!(f, "{count} votes; evidence holds at most {}", super::MAX_EVIDENCE_VOTES)
            }
            VoteChainError::InsufficientStake { stake, total } => {
                write!(f, "votes of stake {stake} of {total} agree, not more than 2/3")
            }
            VoteChainError::Proof(e) => write!(f, "the account proof does not verify against the voted root: {e}"),
            VoteChainError::AccountMismatch => f.write_str("the account does not match the proof"),
            VoteChainError::TooOld { vouched, now, max_age } => write!(
                f,
                "the votes were cast {} s ago (timestamp {vouched}, vouched by more than 1/3 of the stake), more \
                 than the {max_age} s allowed",
                i128::from(*now) - i128::from(*vouched)
            ),
            VoteChainError::Unstamped => f.write_str(
                "the votes do not say when they were cast: those with a timestamp hold 1/3 of the stake or less",
            ),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for VoteChainError {}
