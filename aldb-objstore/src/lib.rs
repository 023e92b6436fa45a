//! History on object storage (`docs/OBJECT-STORE.md`).
//!
//! - [`Shipper`] copies a snapshot directory's published files, its record log and its
//!   vote-evidence log to an S3-compatible bucket, in publish order and idempotently, and writes a [`Manifest`] last,
//!   naming only objects whose upload completed. The bucket keeps its own archive, independent of
//!   the directory's `keep_slots`.
//! - [`ObjectStoreSource`] is what a reader (Hyades) serves from: it reads the manifest, fetches
//!   the files a slot needs into a bounded local cache directory, verifies each completely before
//!   it enters the cache, and keeps that directory in exactly the layout of a snapshot
//!   directory, so `aldb_format::SnapshotReader` reads it unchanged; a [`LogMirror`] there holds
//!   the copy of the logs the ordinary followers read.
//! - [`open_bucket`] builds the client from an `s3://BUCKET/PREFIX` URL.

mod archive;
mod bucket;
mod cache;
mod error;
mod local;
mod logs;
pub mod manifest;
pub mod metrics;
mod mirror;
mod shipper;

pub use archive::{ArchivedVotes, DEFAULT_VOTE_ARCHIVE_BYTES, VoteArchive};
pub use bucket::{BucketOptions, open_bucket, parse_url};
pub use cache::{CacheConfig, Lease, ObjectStoreSource};
pub use error::{BucketError, ManifestError, ShipError, SourceError};
pub use manifest::Manifest;
pub use mirror::{DEFAULT_SCRUB_BYTES_PER_SEC, DEFAULT_VOTE_KEEP_SLOTS, LogMirror, LogSync};
pub use shipper::{ShipConfig, ShipReport, Shipper};
