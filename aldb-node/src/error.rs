//! Why the pipeline could not start or stop cleanly. Nothing at run time is an error to the
//! front end: a file or record that cannot be written is logged, counted and skipped.

/// A pipeline that could not start, or a writer that stopped with an error.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// A part of the pipeline could not start (its directory, its record log, its thread).
    #[error("{0}")]
    Start(String),
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
