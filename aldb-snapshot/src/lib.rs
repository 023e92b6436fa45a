//! The aldb snapshot writer and root-record producer.
//!
//! [`SnapshotWriter`] runs beside the engine: each committed slot's [`SlotInput`] (what the
//! commit changed, plus the new account states) becomes one immutable file, written under a
//! temporary name, synced and atomically renamed. Files reference unchanged records in older
//! files instead of copying them, and a rolling refresh lets old files be retired.
//!
//! The files are read by `aldb-format`'s `SnapshotReader`, in another process and with no access
//! to the engine; the format, specified in `docs/FORMAT.md`, lives in that crate.
//!
//! [`records`] holds the signed root-record chain and the writer of its log, which Hyades serves
//! as a feed.

mod batch;
mod file_builder;
mod forks;
mod leaf_table;
mod path_index;
pub mod records;
mod serializer;
mod startup;
mod writer;

/// What can go wrong with snapshot files, written or read: one type with the readers'
/// (`aldb_format`), as the writer reads the files it references.
pub use aldb_format::{SnapshotError, WriterStop};
pub use batch::{AccountBatch, AccountEntry};
pub use serializer::{CAPTURE_OPTIONS, Published, SlotInput};
pub use startup::{
    DEFAULT_SPILL_BITS, SPILL_DIR, SpilledAccount, SpilledAccounts, StartupSpill, Winners, remove_leftover_spill,
};
pub use writer::{Refusal, SlotMark, SnapshotWriter, WriterConfig, WriterStats};
