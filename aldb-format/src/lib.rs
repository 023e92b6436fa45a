//! The aldb file formats: the contract between the process that writes (the validator's
//! snapshot writer and record producer) and every process that reads (Hyades, the `aldb` tool,
//! relayers).
//!
//! - [`format`]: the snapshot file layout, version [`FORMAT_VERSION`] (`docs/FORMAT.md` is its
//!   prose version): header, records, references, names, checksum.
//! - [`SnapshotReader`] reads a snapshot directory, in another process and with no access to the
//!   engine, and answers "what was account X at slot S" with a proof against S's root.
//! - [`SlotIndex`]: which file serves a slot, or why none does, for every reader of published
//!   slots.
//! - [`store`]: the memory-mapped files and bounds-checked record access both the reader and
//!   the writer (which copies records forward) go through; a file truncated while mapped is an
//!   error, not a crash.
//! - [`records`]: the root-record log's segment format and [`records::RecordLogReader`], which
//!   follows the log as the writer appends to it.
//! - [`votes`]: the vote-evidence log (a slot's `h`, root and bank hash, and the vote
//!   transactions of the blocks after it) and [`votes::VoteLogReader`], which Hyades follows.
//! - [`durable`]: small files (client state, cursors, holds) replaced crash-safely.
//! - [`sorted`]: the compressed subtree over a bucket's sorted leaves, the last steps of a proof.
//!
//! The writers live in `aldb-snapshot`; nothing here depends on the engine.

pub mod durable;
mod error;
pub mod format;
mod mapping_guard;
mod reader;
pub mod records;
pub mod shipped;
mod slots;
pub mod sorted;
pub mod status;
pub mod store;
pub mod votes;

pub use error::{QueryError, SnapshotError, WriterStop};
pub use format::FORMAT_VERSION;
pub use reader::{Account, AccountProof, SlotInfo, SnapshotReader};
pub use slots::SlotIndex;
