//! aldb snapshots and Hyades.
//!
//! [`SnapshotWriter`] runs beside the engine: each committed slot's [`SlotInput`] (what the
//! commit changed, plus the new account states) becomes one immutable file, written under a
//! temporary name, synced and atomically renamed. Files reference unchanged records in older
//! files instead of copying them, and a rolling refresh lets old files be retired.
//!
//! [`Hyades`] reads a snapshot directory — in another process, with no access to the engine —
//! and answers "what was account X at slot S", with a proof against S's root. The format is
//! specified in `docs/FORMAT.md`.
//!
//! [`records`] holds the signed root-record chain and its log, which Hyades serves as a feed.

mod batch;
mod error;
mod file_builder;
mod mapping_guard;
mod path_index;
pub mod format;
mod reader;
pub mod records;
mod serializer;
mod store;
mod writer;

pub use batch::{AccountBatch, AccountEntry};
pub use format::FORMAT_VERSION;
pub use error::{QueryError, SnapshotError};
pub use reader::{Account, AccountProof, Hyades, SlotInfo};
pub use serializer::{Published, SlotInput, CAPTURE_OPTIONS};
pub use writer::{SnapshotWriter, WriterConfig, WriterStats};
