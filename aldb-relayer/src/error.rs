//! The relayer's errors.

use std::path::PathBuf;

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Not JSON5, an unknown field, or a field of the wrong type.
    #[error("{message}")]
    Parse {
        /// The parser's message.
        message: String,
    },
    /// A field has a value the relayer cannot use.
    #[error("`{field}`: {reason}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

/// Why the output or cursor file cannot be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
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
    /// Another process (a second relayer) holds the output file.
    #[error("{path} is in use by another relayer: two relayers must not share an output file")]
    InUse {
        /// The output file.
        path: PathBuf,
    },
    /// The file does not hold what the relayer writes there.
    #[error("{path}: {reason}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The cursor and the output disagree in a way a crash cannot explain.
    #[error("cursor {cursor} and output {output} disagree: {reason}")]
    Inconsistent {
        /// The cursor file.
        cursor: PathBuf,
        /// The output file.
        output: PathBuf,
        /// What disagrees.
        reason: String,
    },
    /// The chain accepted a root for a slot the output already holds with another root: a
    /// safety fault (the attesting identities signed two records for one slot across runs).
    #[error("slot {slot}: the output holds root {written} but the chain accepted root {accepted}")]
    Conflict {
        /// The slot.
        slot: u64,
        /// The root in the output, base58.
        written: String,
        /// The root accepted now, base58.
        accepted: String,
    },
}

impl StoreError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { op, path: path.into(), source }
    }
}

/// Why the relayer stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RelayError {
    /// The output or cursor file failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The metrics listener could not be bound.
    #[error("cannot listen for metrics on {addr}: {source}")]
    Metrics {
        /// The address.
        addr: std::net::SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The `/roots` listener could not be bound.
    #[error("cannot listen for /roots on {addr}: {source}")]
    Roots {
        /// The address.
        addr: std::net::SocketAddr,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The votes mode's state or checkpoint file cannot be read or written.
    #[error("{}: {reason}", path.display())]
    State {
        /// The file.
        path: std::path::PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The trusted set is older than the trusting period: nothing can be accepted safely.
    #[error("trusting period lapsed: {0}")]
    Expired(String),
    /// An internal task ended unexpectedly.
    #[error("relayer task failed: {0}")]
    Task(String),
}
