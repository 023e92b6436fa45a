//! Why a set, a transition, a root or a misbehaviour claim is refused (`docs/SPEC.md` §11).

use super::MisbehaviourKind;

/// Why bytes or members are not a validator set of §11.2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EpochSetError {
    /// Shorter than the header, or not exactly the header and the counted members.
    Length,
    /// No members.
    Empty,
    /// More than [`super::MAX_SET_MEMBERS`] members.
    TooManyMembers {
        /// The count given.
        count: u64,
    },
    /// A vote account below the one before it.
    NotSorted,
    /// A vote account twice.
    DuplicateVoteAccount,
    /// A member with no stake.
    ZeroStake,
    /// The members' stakes sum to more than the total stake.
    StakeExceedsTotal,
}

impl EpochSetError {
    /// The error's name in `tests/vectors/epochs-v1.json`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Length => "length",
            Self::Empty => "empty",
            Self::TooManyMembers { .. } => "too_many_members",
            Self::NotSorted => "not_sorted",
            Self::DuplicateVoteAccount => "duplicate_vote_account",
            Self::ZeroStake => "zero_stake",
            Self::StakeExceedsTotal => "stake_exceeds_total",
        }
    }
}

impl core::fmt::Display for EpochSetError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Length => f.write_str("the set's length is not its header and members"),
            Self::Empty => f.write_str("the set has no members"),
            Self::TooManyMembers { count } => {
                write!(f, "the set has {count} members; at most {} are followed", super::MAX_SET_MEMBERS)
            }
            Self::NotSorted => f.write_str("the set's vote accounts are not in ascending order"),
            Self::DuplicateVoteAccount => f.write_str("a vote account is listed twice"),
            Self::ZeroStake => f.write_str("a member has no stake"),
            Self::StakeExceedsTotal => f.write_str("the members' stakes exceed the set's total stake"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for EpochSetError {}

/// Why the light client refuses something, or freezes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EpochError {
    /// The epoch schedule is not one agave makes.
    Schedule,
    /// Not a validator set.
    Set(EpochSetError),
    /// A checkpoint, transition or evidence of another version than 1.
    UnsupportedVersion,
    /// A client state that breaks an invariant (sets not consecutive, a hash that is not its
    /// set's).
    State,
    /// The client found misbehaviour before and accepts nothing more.
    Frozen,
    /// A transition past the next epoch: every epoch's transition is needed, in order.
    SkippedEpoch {
        /// The newest trusted epoch.
        trusted: u64,
        /// The epoch the transition is to.
        offered: u64,
    },
    /// A transition to an epoch no held set can check.
    StaleTransition {
        /// The newest trusted epoch.
        trusted: u64,
        /// The epoch the transition is to.
        offered: u64,
    },
    /// The evidence's slot is not in the epoch whose set must vouch for it.
    SlotNotInEpoch {
        /// The slot.
        slot: u64,
        /// Its epoch.
        slot_epoch: u64,
        /// The epoch it must be in.
        expected: u64,
    },
    /// The set that would vouch is older than the trusting period.
    Expired {
        /// The set's epoch.
        epoch: u64,
        /// The set's time (unix seconds).
        time: i64,
        /// The caller's time.
        now: i64,
        /// The trusting period, seconds.
        period: u64,
    },
    /// The slot's bank binds no next set (its next-set hash is zero).
    SetNotBound {
        /// The slot.
        slot: u64,
    },
    /// The transition's set is not the one the slot binds.
    WrongSet,
    /// More than [`crate::votes::MAX_EVIDENCE_VOTES`] votes.
    TooManyVotes {
        /// The number offered.
        count: usize,
    },
    /// The counted votes hold 2/3 of the set's total stake or less.
    InsufficientStake {
        /// The stake of the counted vote accounts.
        stake: u128,
        /// The set's total stake.
        total: u128,
    },
    /// A slot of an epoch after the newest trusted one: advance first.
    EpochAhead {
        /// The slot's epoch.
        epoch: u64,
        /// The newest trusted epoch.
        trusted: u64,
    },
    /// A slot of an epoch whose set the client no longer holds (or never held).
    EpochBehind {
        /// The slot's epoch.
        epoch: u64,
        /// The oldest held epoch.
        oldest: u64,
    },
    /// The evidence conflicts with what the client verified: it is now frozen.
    Misbehaviour(MisbehaviourKind),
    /// Two evidences that do not conflict (or are of different epochs).
    NotConflicting,
    /// A misbehaviour file's set is not the one its reader trusts.
    UntrustedSet,
    /// A misbehaviour file's evidences conflict in another way than it says.
    WrongKind,
}

impl EpochError {
    /// The error's name in `tests/vectors/epochs-v1.json` (a set error's own name).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Schedule => "schedule",
            Self::Set(e) => e.name(),
            Self::UnsupportedVersion => "version",
            Self::State => "state",
            Self::Frozen => "frozen",
            Self::SkippedEpoch { .. } => "skipped_epoch",
            Self::StaleTransition { .. } => "stale_transition",
            Self::SlotNotInEpoch { .. } => "slot_not_in_epoch",
            Self::Expired { .. } => "expired",
            Self::SetNotBound { .. } => "set_not_bound",
            Self::WrongSet => "wrong_set",
            Self::TooManyVotes { .. } => "too_many_votes",
            Self::InsufficientStake { .. } => "insufficient_stake",
            Self::EpochAhead { .. } => "epoch_ahead",
            Self::EpochBehind { .. } => "epoch_behind",
            Self::Misbehaviour(_) => "misbehaviour",
            Self::NotConflicting => "not_conflicting",
            Self::UntrustedSet => "untrusted_set",
            Self::WrongKind => "wrong_kind",
        }
    }
}

impl From<EpochSetError> for EpochError {
    fn from(e: EpochSetError) -> Self {
        EpochError::Set(e)
    }
}

impl core::fmt::Display for EpochError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Schedule => f.write_str("not an epoch schedule agave makes"),
            Self::Set(e) => write!(f, "not a validator set: {e}"),
            Self::UnsupportedVersion => f.write_str("unsupported version (expected 1)"),
            Self::State => f.write_str("the client state is inconsistent"),
            Self::Frozen => f.write_str("the client is frozen: it found misbehaviour and accepts nothing more"),
            Self::SkippedEpoch { trusted, offered } => write!(
                f,
                "a transition to epoch {offered} while epoch {trusted} is the newest trusted: epoch {} comes first",
                trusted.saturating_add(1)
            ),
            Self::StaleTransition { trusted, offered } => {
                write!(f, "a transition to epoch {offered}, which no held set can check (newest trusted: {trusted})")
            }
            Self::SlotNotInEpoch { slot, slot_epoch, expected } => {
                write!(f, "slot {slot} is in epoch {slot_epoch}, not epoch {expected}")
            }
            Self::Expired { epoch, time, now, period } => write!(
                f,
                "the set of epoch {epoch} is from time {time}, more than the trusting period ({period} s) before {now}: \
                 too old to follow safely; start from a newer checkpoint"
            ),
            Self::SetNotBound { slot } => write!(f, "slot {slot}'s bank binds no next set"),
            Self::WrongSet => f.write_str("the set is not the one the slot's bank binds"),
            Self::TooManyVotes { count } => {
                write!(f, "{count} votes; evidence holds at most {}", crate::votes::MAX_EVIDENCE_VOTES)
            }
            Self::InsufficientStake { stake, total } => {
                write!(f, "votes of stake {stake} of {total} agree, not more than 2/3")
            }
            Self::EpochAhead { epoch, trusted } => {
                write!(
                    f,
                    "a slot of epoch {epoch}, past the newest trusted epoch {trusted}: follow the transitions first"
                )
            }
            Self::EpochBehind { epoch, oldest } => {
                write!(f, "a slot of epoch {epoch}, before the oldest held epoch {oldest}")
            }
            Self::Misbehaviour(kind) => write!(f, "misbehaviour ({}): the client is frozen", kind.name()),
            Self::NotConflicting => f.write_str("the two evidences do not conflict"),
            Self::UntrustedSet => f.write_str("the set is not the trusted one"),
            Self::WrongKind => f.write_str("the evidences conflict, but not as the file says"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for EpochError {}
