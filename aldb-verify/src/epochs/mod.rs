//! The epoch chain (`docs/SPEC.md` §11): follow the cluster's validator set from one trusted set
//! through any number of epochs, on votes alone.
//!
//! A chain with the aldb epoch-set feature mixes the hash of the **next** epoch's validator set
//! into every bank hash, beside the state root: `sha256(h || root || next_set_hash)`
//! ([`bank_hash_with_set`]). So a bank hash that more than 2/3 of epoch `E`'s stake voted for
//! proves both the slot's root and the set of `E + 1` ([`EpochSet`], [`Transition`]). A
//! [`LightClient`] starts from a [`Checkpoint`], advances one epoch at a time, accepts a root at
//! slot `S` only on the votes of `S`'s epoch set, refuses to use a set older than its trusting
//! period, and freezes on [`Misbehaviour`] (two conflicting bank hashes or next sets, each with
//! more than 2/3), keeping the evidence for a person to hand on.
//!
//! What shows that a set vouched for a bank hash is one small part ([`SlotEvidence::vouch`]):
//! TowerSync votes today (§10), a certificate under a later consensus. Everything else is
//! independent of it.
//!
//! Everything here is bounded and total: any input is accepted or refused with an
//! [`EpochError`] naming the rule, never a panic.

mod client;
mod error;
mod evidence;
#[cfg(feature = "json")]
mod json;
mod schedule;
mod set;

pub use client::{
    Advanced, Checkpoint, ClientState, EpochRoot, HeldEpoch, LightClient, Misbehaviour, MisbehaviourKind,
    verify_misbehaviour,
};
pub use error::{EpochError, EpochSetError};
pub use evidence::{SlotEvidence, Transition, Vouched, bank_hash_with_set, mix_root_and_set};
#[cfg(feature = "json")]
pub use json::EpochJsonError;
pub use schedule::{EpochSchedule, MINIMUM_SLOTS_PER_EPOCH};
pub use set::{EpochSet, MAX_SET_MEMBERS, SET_DOMAIN, SET_HEADER_LEN, SET_MEMBER_LEN, set_commitment, set_hash};

/// The version of every JSON object of §11 (checkpoint, transition, slot evidence,
/// misbehaviour file).
pub const EPOCHS_VERSION: u64 = 1;
