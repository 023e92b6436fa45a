//! Root records (`docs/SPEC.md` §9): the per-slot record chain a producer signs, and the
//! append-only log Hyades serves them from (`docs/FORMAT.md`, "Record log").
//!
//! [`RecordProducer`] runs where slots are committed (the plugin's commit worker, `aldb
//! simulate`): it builds each slot's record, chains it to its parent's, signs it with a
//! [`Signer`] if it has one, and appends it durably. [`RecordLogReader`] follows the log from
//! another process.

mod error;
mod log;
mod producer;
mod signer;

pub use error::RecordsError;
pub use log::{
    parse_segment, Damage, LoggedRecord, RecordLogReader, RecordLogWriter, SegmentScan, HEADER_LEN, RECORDS_DIR,
    SEGMENT_RECORDS,
};
pub use producer::{RecordInput, RecordProducer};
pub use signer::Signer;
