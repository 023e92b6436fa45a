//! Errors of the record log, the producer and keypair files.

use std::path::PathBuf;

/// What can go wrong producing, storing or reading root records.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordsError {
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
    /// A log segment is damaged somewhere other than a torn tail. The log's readers and writer
    /// no longer fail with this (they skip damaged spans and report them); kept so code matching
    /// on it still builds.
    #[error("corrupt record log {path}: {reason}")]
    Corrupt {
        /// The segment.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A keypair file is unreadable or not a Solana keypair.
    #[error("keypair {path}: {reason}")]
    Keypair {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading the log's files failed other than by I/O.
    #[error(transparent)]
    Read(aldb_format::SnapshotError),
    /// The log was written for another cluster.
    #[error("record log holds records of genesis {found}, but this producer is for genesis {expected}")]
    OtherCluster {
        /// The configured genesis hash, base58.
        expected: String,
        /// The genesis hash found in the log, base58.
        found: String,
    },
}

/// The writer lists and reads segments with the format crate's functions.
impl From<aldb_format::SnapshotError> for RecordsError {
    fn from(e: aldb_format::SnapshotError) -> Self {
        match e {
            aldb_format::SnapshotError::Io { op, path, source } => Self::Io { op, path, source },
            other => Self::Read(other),
        }
    }
}

impl RecordsError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { op, path: path.into(), source }
    }
}
