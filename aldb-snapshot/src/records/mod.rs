//! Root records (`docs/SPEC.md` §9): the per-slot record chain a producer signs, and the
//! writer of the append-only log Hyades serves them from (`docs/FORMAT.md`, "Record log"; the
//! format and its reader are `aldb_format::records`).
//!
//! [`RecordProducer`] runs where slots are committed (the plugin's commit worker, `aldb
//! simulate`): it builds each slot's record, chains it to its parent's, signs it with a
//! [`Signer`] if it has one, and appends it durably with a [`RecordLogWriter`].

mod error;
mod producer;
mod signer;
mod writer;

pub use aldb_format::records::LoggedRecord;
pub use error::RecordsError;
pub use producer::{RecordInput, RecordProducer};
pub use signer::Signer;
pub use writer::RecordLogWriter;
