//! Errors of snapshot writing.

use std::path::PathBuf;

use aldb_format::ReadError;

/// What can go wrong with snapshot files.
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
    /// A reference points into a snapshot file that is not present (pruned or never written).
    #[error("snapshot file #{seq} is missing")]
    MissingFile {
        /// The file's sequence number.
        seq: u32,
    },
    /// A record would start past the last offset a reference holds
    /// ([`aldb_format::format::MAX_RECORD_OFFSET`]); the write fails rather than write a
    /// reference that wraps. The writer cuts files into parts well before (at
    /// [`aldb_format::format::MAX_FILE_BYTES`]), so this is a last line, not a size limit.
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
    Stopped(String),
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
    /// Fork mode: writing the bank would pass the bound on unrooted banks held
    /// ([`crate::WriterConfig::max_fork_banks`], [`crate::WriterConfig::max_fork_bytes`]).
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

impl SnapshotError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { op, path: path.into(), source }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Self::Corrupt { path: path.into(), reason: reason.into() }
    }
}

/// The writer reads the files it references (to copy records forward and to resume); what goes
/// wrong there is reported as the same kinds of error.
impl From<ReadError> for SnapshotError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Io { op, path, source } => Self::Io { op, path, source },
            ReadError::Corrupt { path, reason } => Self::Corrupt { path, reason },
            ReadError::MissingFile { seq } => Self::MissingFile { seq },
            // `ReadError` is non-exhaustive: a kind added later is still a failed read.
            other => Self::Io { op: "read", path: PathBuf::new(), source: std::io::Error::other(other.to_string()) },
        }
    }
}
