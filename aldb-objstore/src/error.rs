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
    /// The bucket's manifest is refused as it is read.
    #[error("the bucket's manifest is unusable: {0}")]
    ManifestRefused(#[source] ManifestError),
    /// A sealed segment the bucket's manifest names is refused.
    #[error("the bucket's manifest is unusable: sealed segment {name}: {source}")]
    SegmentRefused {
        /// The segment's object name.
        name: String,
        /// Why it is refused.
        source: ManifestError,
    },
}

/// Why a manifest head or sealed segment is refused: what it does not understand, or entries
/// that contradict each other or the objects they name. Never guessed around.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ManifestError {
    /// The bytes are not JSON of the expected shape (a field unknown, missing or mistyped).
    #[error("not a manifest{segment}: {reason}", segment = if *.segment { " segment" } else { "" })]
    Parse {
        /// A sealed segment rather than a head.
        segment: bool,
        /// The parser's message.
        reason: String,
    },
    /// Another `format` than this build reads.
    #[error("format {found:?}, expected {expected:?}")]
    Format {
        /// The object's `format`.
        found: String,
        /// The one expected.
        expected: &'static str,
    },
    /// Another `version` than this build reads.
    #[error("manifest {what}version {found}, this build reads {reads}", what = if *.segment { "segment " } else { "" })]
    Version {
        /// A sealed segment rather than a head.
        segment: bool,
        /// The object's `version`.
        found: u32,
        /// The one this build reads.
        reads: u32,
    },
    /// The object is larger than any the shipper writes: refused before it is read whole.
    #[error("{size} bytes, more than the {max} a manifest {what} may have")]
    TooLarge {
        /// `"head"` or `"segment"`.
        what: &'static str,
        /// Its size as the bucket reports it (or as far as it was read).
        size: u64,
        /// The bound.
        max: u64,
    },
    /// A sealed segment's bytes are not those the head names.
    #[error("{0}")]
    Segment(String),
    /// An entry is malformed, or entries contradict each other.
    #[error("{0}")]
    Invalid(String),
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
    /// The manifest's head is refused (damaged, oversized, or not understood): the replica keeps
    /// the manifest it last verified, if any.
    #[error("manifest head {object} is refused: {reason}")]
    Head {
        /// The head's object path.
        object: String,
        /// What is wrong with it.
        reason: ManifestError,
    },
    /// An object the manifest names is not in the bucket (deleted, or never uploaded), or is
    /// shorter than the manifest says (a ranged read past its end).
    #[error("object {object} is missing from the bucket: {reason}")]
    Missing {
        /// The object, as the manifest names it.
        object: String,
        /// What the bucket answered.
        reason: String,
    },
    /// The bucket did not answer within the bound a query may wait.
    #[error("the bucket did not answer within {secs} s ({what})")]
    Timeout {
        /// What was being fetched.
        what: String,
        /// The bound, in seconds.
        secs: u64,
    },
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
    Read(#[from] aldb_format::SnapshotError),
}
