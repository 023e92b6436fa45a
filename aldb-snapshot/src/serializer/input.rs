//! What the writer is given for a slot, and what it reports once the slot is published.

use aldb_core::{CaptureOptions, ChangeSet};
use aldb_verify::spec::Hash;

use crate::batch::AccountBatch;

/// What the writer reads of a change set: the levels it stores (even levels, without the one
/// just above the buckets: see [`aldb_format::format::node_stored`]) and the buckets' leaf paths. A
/// commit captured with these options records well under half the bytes of a full capture; any
/// capture that includes them is accepted.
pub const CAPTURE_OPTIONS: CaptureOptions =
    CaptureOptions::ALL.with_level_step(2).without_leaf_values().without_levels_above_buckets(1);

/// One slot's input to the writer.
#[derive(Debug)]
pub struct SlotInput {
    /// The committed slot.
    pub slot: u64,
    /// Its parent slot, if known.
    pub parent: Option<u64>,
    /// The root the engine committed for it.
    pub root: Hash,
    /// What the commit changed ([`aldb_core::Pleiades::commit_capture`]), or everything
    /// ([`aldb_core::Pleiades::capture_all`]) when `full`.
    pub changes: ChangeSet,
    /// The new state of every account whose leaf changed (all accounts when `full`).
    pub accounts: AccountBatch,
    /// Whether this is the whole state: the first input after a start must be.
    pub full: bool,
}

/// A slot that was just published: its file, and the part files before it when what it wrote
/// outgrew one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Published {
    /// The sequence number of the slot's file.
    pub seq: u32,
    /// The sequence number of its first part (`seq` when the slot fits in one file): files
    /// `first_seq..seq` are its parts.
    pub first_seq: u32,
    /// The slot it holds.
    pub slot: u64,
    /// The slot's root.
    pub root: Hash,
    /// Oldest file any of its records may point into.
    pub oldest_seq: u32,
    /// Bytes of its files (parts included).
    pub bytes: u64,
    /// Bytes of account records in it.
    pub account_bytes: u64,
    /// Bytes of refresh copies in it (records rewritten only to retire old files).
    pub refresh_bytes: u64,
}
