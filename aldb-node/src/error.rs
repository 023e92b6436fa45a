//! Why the pipeline could not start or stop cleanly. Nothing at run time is an error to the
//! front end: a file or record that cannot be written is logged, counted and skipped.

use std::path::PathBuf;

/// A pipeline that could not start, or a writer that stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// The snapshot writer could not start in its directory.
    #[error("cannot start the snapshot writer in {}: {source}", dir.display())]
    SnapshotWriter {
        /// The snapshot directory.
        dir: PathBuf,
        /// Why the writer could not start.
        source: aldb_snapshot::SnapshotError,
    },
    /// The vote-evidence log could not be opened.
    #[error("cannot open the vote-evidence log in {}: {source}", dir.display())]
    EvidenceLog {
        /// The snapshot directory the log is under.
        dir: PathBuf,
        /// Why it could not be opened.
        source: aldb_format::votes::VoteLogError,
    },
    /// A thread of the pipeline could not be spawned.
    #[error("cannot start the {thread} thread: {source}")]
    Thread {
        /// Which thread (`writer`, `evidence`).
        thread: &'static str,
        /// The spawn's error.
        source: std::io::Error,
    },
    /// The record log holds what cannot be used (another cluster's records), or could not be
    /// opened, and the front end refuses to start without it.
    #[error("cannot open the record log: {0}")]
    RecordLog(#[source] aldb_snapshot::records::RecordsError),
    /// The signing key could not be read.
    #[error("cannot read the signing key: {0}")]
    Key(#[source] aldb_snapshot::records::RecordsError),
    /// The snapshot writer stopped with an error.
    #[error(transparent)]
    Writer(#[from] aldb_snapshot::SnapshotError),
}
