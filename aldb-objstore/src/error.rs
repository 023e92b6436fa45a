//! Errors of shipping to and reading from a bucket.

use std::path::PathBuf;

/// A bucket URL or its options could not be turned into a client.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BucketError {
    /// The URL is not `s3://BUCKET[/PREFIX]`.
    #[error("bucket URL {url:?}: {reason}")]
    Url {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The client refused its configuration.
    #[error("object store client: {0}")]
    Client(#[from] object_store::Error),
}

/// Why shipping stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShipError {
    /// A request to the bucket failed (after the configured retries).
    #[error("object store {op} {object}: {source}")]
    Store {
        /// What was being done.
        op: &'static str,
        /// The object.
        object: String,
        /// The client's error.
        source: object_store::Error,
    },
    /// A local file or directory could not be read.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The bucket's manifest exists but cannot be used: the shipper does not overwrite what it
    /// does not understand.
    #[error("the bucket's manifest is unusable: {0}")]
    Manifest(String),
}

/// Why a replica could not make a slot available or answer for it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// A request to the bucket failed.
    #[error("object store {op} {object}: {source}")]
    Store {
        /// What was being done.
        op: &'static str,
        /// The object.
        object: String,
        /// The client's error.
        source: object_store::Error,
    },
    /// The cache directory could not be used.
    #[error("cache {op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The bucket holds no manifest: nothing has been shipped there.
    #[error("the bucket holds no manifest ({object}): nothing has been shipped there yet")]
    NoManifest {
        /// The manifest's object path.
        object: String,
    },
    /// The manifest cannot be used.
    #[error("the bucket's manifest is unusable: {0}")]
    Manifest(String),
    /// The manifest names no servable slot.
    #[error("the bucket holds no servable slot yet")]
    NothingShipped,
    /// The slot is newer than anything shipped.
    #[error("slot {slot} is not in the bucket yet (newest shipped slot is {newest})")]
    NotYetShipped {
        /// The slot asked for.
        slot: u64,
        /// The newest slot the bucket serves.
        newest: u64,
    },
    /// The slot lies outside the archive, or within it without a servable file (skipped, pruned
    /// from the archive, or a file of its chain never shipped).
    #[error("slot {slot} is not held by the bucket (it serves slots {oldest} to {newest}, not every one between)")]
    NotInBucket {
        /// The slot asked for.
        slot: u64,
        /// The oldest slot the bucket serves.
        oldest: u64,
        /// The newest slot the bucket serves.
        newest: u64,
    },
    /// An object's bytes are not what the manifest names: refused, never served or cached.
    #[error("object {object} is refused: {reason}")]
    Corrupt {
        /// The object.
        object: String,
        /// What did not check.
        reason: String,
    },
    /// The files a slot needs do not fit the cache at all.
    #[error("slot {slot} needs {need} bytes of files, more than the cache's {capacity}")]
    CacheTooSmall {
        /// The slot asked for.
        slot: u64,
        /// Bytes of its chain of files.
        need: u64,
        /// The configured capacity.
        capacity: u64,
    },
    /// The verified files could not answer (the reader's own error).
    #[error(transparent)]
    Query(#[from] aldb_format::QueryError),
    /// The cached files could not be indexed.
    #[error(transparent)]
    Read(#[from] aldb_format::ReadError),
}
