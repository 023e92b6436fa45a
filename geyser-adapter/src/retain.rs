//! What the adapter keeps of each account besides its hashes.
//!
//! The engine needs only `(path, value hash)`. A snapshot writer may need more: the winning
//! update of each account per committed slot, or the full account. The policy decides at
//! callback time what to copy out of the borrowed data; the adapter keeps the record next to
//! the buffered hash, drops it with its slot or when a newer write of the account wins, and
//! hands the winners over with [`Committed`](crate::Committed).

use aldb_core::Update;

use crate::types::AccountUpdate;

/// A policy for what to keep of each account update.
pub trait Retain: Send + Sync {
    /// What is kept per update. `()` costs nothing.
    type Record: Send + 'static;

    /// Copies what is needed out of an update, during the callback.
    fn retain(&self, update: &AccountUpdate<'_>, hashed: &Update) -> Self::Record;
}

/// Keep nothing but the hashes the engine needs (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoRecords;

impl Retain for NoRecords {
    type Record = ();

    fn retain(&self, _: &AccountUpdate<'_>, _: &Update) {}
}

/// Keep each winning `(path, value hash)`: what a snapshot delta of a slot holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeepUpdates;

impl Retain for KeepUpdates {
    type Record = Update;

    fn retain(&self, _: &AccountUpdate<'_>, hashed: &Update) -> Update {
        *hashed
    }
}

/// Keep the full account, data included: what serving accounts beside proofs needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KeepAccounts;

/// An owned copy of an account update and its hashes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccountRecord {
    /// The slot that wrote it (the storage slot for startup accounts).
    pub slot: u64,
    /// The account address.
    pub pubkey: [u8; 32],
    /// Balance; zero means deleted.
    pub lamports: u64,
    /// Owning program.
    pub owner: [u8; 32],
    /// Whether the account holds a loaded program.
    pub executable: bool,
    /// Account data.
    pub data: Vec<u8>,
    /// The write version that won.
    pub write_version: u64,
    /// The key path and value hash the engine committed.
    pub hashed: Update,
}

impl Retain for KeepAccounts {
    type Record = AccountRecord;

    fn retain(&self, u: &AccountUpdate<'_>, hashed: &Update) -> AccountRecord {
        AccountRecord {
            slot: u.slot,
            pubkey: u.pubkey,
            lamports: u.lamports,
            owner: u.owner,
            executable: u.executable,
            data: u.data.to_vec(),
            write_version: u.write_version,
            hashed: *hashed,
        }
    }
}
