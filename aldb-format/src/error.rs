//! Errors of reading and writing aldb files, and of queries.

use std::path::PathBuf;
use std::sync::Arc;

use crate::format::HeaderError;

/// What can go wrong with snapshot files: reading them (the readers here, the record log's
/// reader) and writing them (`aldb-snapshot`'s writer, which reads the files it references
/// through the same store, so a failed read there is the same error).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
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
    /// A file's header is refused ([`Header::decode`](crate::format::Header::decode)).
    #[error("corrupt snapshot {path}: {source}")]
    Header {
        /// The file.
        path: PathBuf,
        /// What is wrong with the header.
        source: HeaderError,
    },
    /// A reference points into a snapshot file that is not present (pruned or never written).
    #[error("snapshot file #{seq} is missing")]
    MissingFile {
        /// The file's sequence number.
        seq: u32,
    },
    /// A record would start past the last offset a reference holds
    /// ([`MAX_RECORD_OFFSET`](crate::format::MAX_RECORD_OFFSET)); the write fails rather than
    /// write a reference that wraps. The writer cuts files into parts well before (at
    /// [`MAX_FILE_BYTES`](crate::format::MAX_FILE_BYTES)), so this is a last line, not a size
    /// limit.
    #[error("snapshot file #{seq} would exceed {max} bytes, the most references can address")]
    FileTooLarge {
        /// The file's sequence number.
        seq: u32,
        /// The limit in bytes.
        max: u64,
    },
    /// Every sequence number a file name can carry has been used: the writer refuses to wrap
    /// around onto numbers of live files.
    #[error("snapshot sequence numbers in {dir} are exhausted; move the directory aside and start afresh")]
    SequenceExhausted {
        /// The snapshot directory.
        dir: PathBuf,
    },
    /// The writer was given inconsistent input.
    #[error("invalid writer input: {0}")]
    Input(String),
    /// The writer thread has stopped (after an earlier error, or shutdown).
    #[error("snapshot writer stopped: {0}")]
    Stopped(#[source] WriterStop),
    /// Fork mode: a bank's parent has no written bank the writer holds (never submitted, refused,
    /// failed, dropped, or below the finalized base), so the bank's changes cannot be placed.
    #[error("slot {slot} not written: its parent {} has no written bank", parent.map_or("(unknown)".to_string(), |p| p.to_string()))]
    ParentNotWritten {
        /// The refused slot.
        slot: u64,
        /// Its parent, as submitted.
        parent: Option<u64>,
    },
    /// Fork mode: the finalized base bank cannot be written again or dropped.
    #[error("slot {slot} is the finalized base bank")]
    FinalBank {
        /// The slot.
        slot: u64,
    },
    /// Fork mode: writing the bank would pass the bound on unrooted banks held (the writer's
    /// `max_fork_banks` and `max_fork_bytes`).
    #[error("slot {slot} not written: {banks} unrooted banks holding {bytes} bytes of table lists reach the bound")]
    TooManyBanks {
        /// The refused slot.
        slot: u64,
        /// Banks held.
        banks: usize,
        /// Bytes their lists hold.
        bytes: usize,
    },
}

/// Why a snapshot writer refuses work ([`SnapshotError::Stopped`]).
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WriterStop {
    /// The writer was shut down.
    #[error("shut down")]
    ShutDown,
    /// The writer thread has exited.
    #[error("writer thread exited")]
    ThreadExited,
    /// The writer thread panicked while holding its state.
    #[error("writer panicked")]
    Panicked,
    /// Writing failed, and the writer holds the slots since until a retry succeeds. The error is
    /// shared: every caller until then is told the same one.
    #[error("{0}")]
    Failed(#[source] Arc<SnapshotError>),
    /// A failing writer held more account data than its bound allows and stopped until restart.
    #[error(
        "snapshot writer stopped until restart: {held} bytes of account data held since slot {} could not be \
         written (max_recovery_bytes {max_recovery_bytes})",
        gap_after.map_or("start".to_string(), |s| s.to_string())
    )]
    OverBound {
        /// Account bytes held.
        held: usize,
        /// The newest slot published before the failure.
        gap_after: Option<u64>,
        /// The writer's `max_recovery_bytes`.
        max_recovery_bytes: usize,
    },
    /// Stopped, with no reason recorded.
    #[error("")]
    Unknown,
}

impl SnapshotError {
    /// An [`SnapshotError::Io`] error: `op` on `path` failed with `source`.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { op, path: path.into(), source }
    }

    /// A [`SnapshotError::Corrupt`] error: `path` is damaged as `reason` says.
    pub fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Corrupt { path: path.into(), reason: reason.into() }
    }

    /// Whether the error says a file is damaged or missing (an operator should act), rather than
    /// that reading or writing failed.
    pub fn is_damage(&self) -> bool {
        matches!(self, Self::Corrupt { .. } | Self::Header { .. } | Self::MissingFile { .. })
    }
}

/// Why a query could not be answered.
#[derive(Debug, thiserror::Error)]
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
    /// The slot's files were read, and a file its records reach is damaged or missing
    /// ([`SnapshotError::is_damage`]): an operator should act, as for [`QueryError::Corrupt`].
    #[error("slot {slot} cannot be served: {source}")]
    Damaged {
        /// The slot asked for.
        slot: u64,
        /// What the read found.
        source: SnapshotError,
    },
    /// Reading the slot's files failed (an I/O error, not damage).
    #[error("snapshot storage error: {source}")]
    Unreadable {
        /// The slot asked for.
        slot: u64,
        /// The failed read.
        source: SnapshotError,
    },
}

impl QueryError {
    /// A failed read of `slot`'s files: [`QueryError::Damaged`] when a file is damaged or
    /// missing, else [`QueryError::Unreadable`].
    pub fn read(slot: u64, source: SnapshotError) -> Self {
        if source.is_damage() { Self::Damaged { slot, source } } else { Self::Unreadable { slot, source } }
    }
}

/// Answers compare field by field; a read error, which has no equality of its own (an I/O error
/// has none), compares by what it says.
impl PartialEq for QueryError {
    fn eq(&self, other: &Self) -> bool {
        use QueryError::*;
        match (self, other) {
            (NothingPublished, NothingPublished) => true,
            (NotYetCommitted { slot: a, newest: x }, NotYetCommitted { slot: b, newest: y }) => (a, x) == (b, y),
            (Pruned { slot: a, oldest: x }, Pruned { slot: b, oldest: y }) => (a, x) == (b, y),
            (NoSnapshot { slot: a }, NoSnapshot { slot: b }) => a == b,
            (Corrupt { slot: a, reason: x }, Corrupt { slot: b, reason: y }) => (a, x) == (b, y),
            (NotWritten { slot: a, after: x, until: u }, NotWritten { slot: b, after: y, until: v }) => {
                (a, x, u) == (b, y, v)
            }
            (Storage(a), Storage(b)) => a == b,
            (Damaged { slot: a, source: x }, Damaged { slot: b, source: y })
            | (Unreadable { slot: a, source: x }, Unreadable { slot: b, source: y }) => {
                a == b && x.to_string() == y.to_string()
            }
            _ => false,
        }
    }
}

impl Eq for QueryError {}
