//! Errors of reading aldb files.

use std::path::PathBuf;

/// What can go wrong reading snapshot files or the record log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
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
    /// A file is not a valid snapshot (bad magic, version, checksum, or a reference out of range).
    #[error("corrupt snapshot {path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A reference points into a snapshot file that is not present (pruned or never written).
    #[error("snapshot file #{seq} is missing")]
    MissingFile {
        /// The file's sequence number.
        seq: u32,
    },
}

impl ReadError {
    /// An [`ReadError::Io`] error: `op` on `path` failed with `source`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { op, path: path.into(), source }
    }

    /// A [`ReadError::Corrupt`] error: `path` is damaged as `reason` says.
    pub fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Corrupt { path: path.into(), reason: reason.into() }
    }
}

/// Why a query could not be answered.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueryError {
    /// Nothing has been published yet.
    #[error("no snapshot has been published yet")]
    NothingPublished,
    /// The slot is newer than the newest published snapshot.
    #[error("slot {slot} is not committed yet (newest published slot is {newest})")]
    NotYetCommitted {
        /// The slot asked for.
        slot: u64,
        /// The newest published slot.
        newest: u64,
    },
    /// The slot is older than what is kept.
    #[error("slot {slot} has been pruned (oldest kept slot is {oldest})")]
    Pruned {
        /// The slot asked for.
        slot: u64,
        /// The oldest slot still served.
        oldest: u64,
    },
    /// The slot lies in the kept range but has no snapshot (skipped, dead or not snapshotted).
    #[error("slot {slot} has no snapshot (skipped, or not on the committed chain)")]
    NoSnapshot {
        /// The slot asked for.
        slot: u64,
    },
    /// The slot was committed, but a file it needs is damaged (fails its checksum, its header
    /// disagrees with its name, or it changed while mapped): an operator should act.
    #[error("slot {slot} cannot be served: {reason}")]
    Corrupt {
        /// The slot asked for.
        slot: u64,
        /// Which file and what is wrong with it.
        reason: String,
    },
    /// The slot was committed but never written: the snapshot writer was failing (a full disk,
    /// an I/O error) and wrote the slots after `after` up to `until` as one file at `until`.
    #[error("slot {slot} was not written: the snapshot writer failed after slot {after_text} and recovered at slot {until}", after_text = after.map_or("(start)".to_string(), |a| a.to_string()))]
    NotWritten {
        /// The slot asked for.
        slot: u64,
        /// The newest slot written before the failure.
        after: Option<u64>,
        /// The first slot written after it.
        until: u64,
    },
    /// The slot was committed, but a file it needs is missing (deleted from the directory, or
    /// an object missing from a replica's bucket): an operator should restore it.
    #[error("slot {slot} cannot be served: {file} is missing")]
    MissingFile {
        /// The slot asked for.
        slot: u64,
        /// The missing file or object, as named where it should be.
        file: String,
    },
    /// The files are unreadable or inconsistent.
    #[error("snapshot storage error: {0}")]
    Storage(String),
}
