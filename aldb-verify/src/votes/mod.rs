//! The vote chain (`docs/SPEC.md` §10): accept a state root because the cluster's validators
//! voted on a bank hash that commits to it, then an account because it is proven against that
//! root.
//!
//! A chain that carries the aldb consensus patch computes every bank hash as
//! `sha256(h || root)` ([`bank_hash`]). Its validators vote on bank hashes with the vote
//! program's `TowerSync` instruction, in legacy transactions signed by each vote account's
//! authorized voter. A client that holds the validator set and its stakes ([`ValidatorSet`])
//! decodes those transactions ([`VoteTransaction::parse`]), checks their signatures, and accepts
//! the root of slot `S` once vote accounts holding more than 2/3 of the set's stake voted for
//! `S` with the hash `sha256(h || root)` ([`VoteVerifier`], [`verify_account_by_votes`]).
//!
//! Everything here is bounded and total: any byte string is either decoded or rejected with a
//! [`VoteError`], never a panic.

pub(crate) mod bank_hash;
mod error;
mod evidence;
#[cfg(feature = "json")]
pub(crate) mod json;
mod reader;
mod tower;
mod transaction;
mod verifier;

pub use bank_hash::{bank_hash, bank_hash_binding, explain_bank_hash, mix_root};
pub use error::{SetError, VoteChainError, VoteError};
pub use evidence::{EvidenceAccount, VerifiedAccount, VoteEvidence, verify_account_at, verify_account_by_votes};
#[cfg(feature = "json")]
pub use json::{EvidenceJsonError, validator_set_from_json_value};
pub use tower::{Lockout, TowerSync};
pub use transaction::VoteTransaction;
pub use verifier::{AcceptedRoot, Tally, Validator, ValidatorSet, VoteVerifier};

/// The largest transaction Solana carries (`PACKET_DATA_SIZE`); a longer one is no vote.
pub const PACKET_DATA_SIZE: usize = 1232;

/// The vote program's id, `Vote111111111111111111111111111111111111111`.
pub const VOTE_PROGRAM_ID: [u8; 32] = [
    7, 97, 72, 29, 53, 116, 116, 187, 124, 77, 118, 36, 235, 211, 189, 179, 216, 53, 94, 115, 209, 16, 67, 252, 13,
    163, 83, 128, 0, 0, 0, 0,
];

/// The most lockouts a `TowerSync` may hold (the vote program's `MAX_LOCKOUT_HISTORY`).
pub const MAX_LOCKOUTS: usize = 31;

/// `VoteInstruction::TowerSync`'s bincode tag (the enum's 15th variant).
pub const TAG_TOWER_SYNC: u32 = 14;

/// `VoteInstruction::TowerSyncSwitch`'s bincode tag.
pub const TAG_TOWER_SYNC_SWITCH: u32 = 15;

/// The most vote transactions one piece of evidence may carry: a bound on the work a hostile
/// server can ask of a client, far above any real validator set's single votes.
pub const MAX_EVIDENCE_VOTES: usize = 4096;
