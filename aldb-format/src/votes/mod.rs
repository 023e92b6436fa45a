//! The vote-evidence log (`docs/FORMAT.md`, "Vote-evidence log"): what a light client needs to
//! accept a slot's root on the validators' votes (`docs/SPEC.md` §10.5), kept beside the
//! snapshots by a plugin built against the patched geyser interface.
//!
//! Per frozen bank the writer appends a [`BankEntry`] (slot, parent, bank hash, and the `h` and
//! aldb root it was computed from, with its hard-fork count), and per block the vote transactions
//! the block carries ([`VotesEntry`], their exact wire bytes; a block's votes may span several
//! entries, appended as they arrive). The log is a directory `votes/` of append-only segment
//! files of checksummed entries, like the record log: a reader skips a damaged entry and waits
//! for a torn or unfinished tail, the writer cuts a torn tail when it reopens the log, and old
//! segments are deleted whole when pruned to the snapshot directory's `keep_slots`.
//!
//! [`VoteLog`] writes it (one `fdatasync` per append call); [`VoteLogReader`] follows it and
//! answers [`VoteLogReader::slot_votes_for`]: the bank of slot `S` and the vote transactions
//! whose last voted slot is `S` from the blocks of the slots after `S` within a bounded window,
//! at most one per vote account ([`VoteSelection`]). The selection is done here, by decoding each
//! vote with [`aldb_verify::votes::VoteTransaction::parse`], so every server answers alike;
//! whether a vote counts (its stake, its signatures) is the client's check (`docs/SPEC.md`
//! §10.4), never the server's.

mod entry;
mod reader;
mod writer;

pub use entry::{
    AldbCommitment, BankEntry, KeptEvidence, MAX_PAYLOAD, MAX_SET_PAYLOAD, SetEntry, VoteLogEntry, VotesEntry,
    encode_entry, set_hash,
};
pub use reader::{EpochTransition, SlotVotes, TRANSITION_TRIES, VoteLogReader, VoteSelection};
pub use writer::{Carry, VoteLog, VoteLogOptions};

use std::path::{Path, PathBuf};

/// Subdirectory of a snapshot directory holding the vote-evidence log.
pub const VOTES_DIR: &str = "votes";
/// First bytes of every segment file.
pub const VOTES_MAGIC: &[u8; 8] = b"aldbvot1";
/// The segment format version in its header.
pub const VOTES_VERSION: u32 = 1;
/// Length of a segment's header (magic, version, four zero bytes); its first entry starts here.
pub const VOTES_HEADER_LEN: usize = 16;
/// Slots after `S` whose blocks are searched for votes on `S` by default (`S+1..=S+32`; a
/// skipped slot has no block, so fewer blocks): a vote lands within a few slots of the slot it
/// votes on, and 32 slots is the depth at which a tower roots it.
pub const DEFAULT_WINDOW: u64 = 32;
/// The widest window, in slots, a reader searches, whatever it is asked.
pub const MAX_WINDOW: u64 = 512;

/// Errors of the vote-evidence log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VoteLogError {
    /// An I/O operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An entry to append breaks the format's bounds (a vote transaction longer than 1232 bytes).
    #[error("cannot log: {0}")]
    Input(String),
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> VoteLogError + 'a {
    move |source| VoteLogError::Io { op, path: path.to_path_buf(), source }
}

/// The file name of the segment whose first entry is of `first_slot`.
pub fn segment_name(first_slot: u64) -> String {
    format!("votes-{first_slot:020}.log")
}

/// The first slot of a segment file name; only the writer's exact spelling counts.
pub fn segment_first_slot(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("votes-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// What a copy of a segment (a shipper's) may take of its bytes, and what it says of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentExtent {
    /// Just past its last valid entry: the writer never cuts bytes before it, so these bytes are
    /// a prefix of every later state of the file.
    pub end: usize,
    /// The newest slot a valid entry names; `None` without one.
    pub newest_slot: Option<u64>,
    /// The epochs whose whole transition these bytes hold, ascending: a set's entry, and kept
    /// evidence of a slot whose bank binds that set (what the writer carries and keeps together,
    /// `docs/FORMAT.md`). A copy of this segment alone proves them to whoever trusts the set of
    /// the epoch before; an archive's index of where old transitions lie.
    pub transitions: Vec<u64>,
}

/// The extent of a segment whose bytes are `bytes`, read as a reader reads a closed segment
/// (damaged spans skipped, so a valid entry after damage counts).
pub fn segment_extent(bytes: &[u8]) -> SegmentExtent {
    let body = bytes.get(VOTES_HEADER_LEN..).unwrap_or_default();
    let s = entry::scan(body, VOTES_HEADER_LEN, false);
    let sets: std::collections::BTreeMap<aldb_verify::Hash, u64> = s
        .entries
        .iter()
        .filter_map(|(_, e)| match e {
            VoteLogEntry::Set(set) => Some((set.hash, set.epoch())),
            _ => None,
        })
        .collect();
    let transitions: std::collections::BTreeSet<u64> = s
        .entries
        .iter()
        .filter_map(|(_, e)| match e {
            VoteLogEntry::Kept(k) if k.bank.aldb.is_some() => k.bank.next_set_hash.and_then(|h| sets.get(&h).copied()),
            _ => None,
        })
        .collect();
    SegmentExtent {
        end: s.end.min(bytes.len()),
        newest_slot: s.entries.iter().map(|(_, e)| e.slot()).max(),
        transitions: transitions.into_iter().collect(),
    }
}

/// Segment files of a vote log directory (`votes/`) by first slot, oldest first; none when it is
/// missing.
pub fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, VoteLogError> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io("list", dir)(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io("list", dir))?;
        if let Some(first) = entry.file_name().to_str().and_then(segment_first_slot) {
            out.push((first, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// A version-1 segment header.
fn segment_header() -> [u8; VOTES_HEADER_LEN] {
    let mut h = [0u8; VOTES_HEADER_LEN];
    h[..8].copy_from_slice(VOTES_MAGIC);
    h[8..12].copy_from_slice(&VOTES_VERSION.to_le_bytes());
    h
}

/// Whether `bytes` start with a version-1 segment header.
fn header_ok(bytes: &[u8]) -> bool {
    bytes.len() >= VOTES_HEADER_LEN && bytes[..VOTES_HEADER_LEN] == segment_header()
}

#[cfg(test)]
mod tests;
