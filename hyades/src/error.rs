//! Errors of starting the service.

use std::net::SocketAddr;
use std::path::PathBuf;

use aldb_format::SnapshotError;

/// Why the service could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The snapshot directory does not exist (or is not a directory).
    #[error("snapshot directory {0} does not exist or is not a directory")]
    NoDirectory(PathBuf),
    /// The snapshot directory could not be read.
    #[error("cannot open the snapshot directory: {0}")]
    Open(#[source] SnapshotError),
    /// The bucket of a replica could not be opened or read.
    #[error("cannot serve the bucket: {0}")]
    Store(String),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The metrics registry could not be set up.
    #[error("cannot set up metrics: {0}")]
    Metrics(String),
    /// A start-up task failed.
    #[error("start-up task failed: {0}")]
    Task(String),
}
