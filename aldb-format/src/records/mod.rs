//! The root-record log (`docs/FORMAT.md`, "Record log"; records are `docs/SPEC.md` §9): its
//! segment format, the parser its readers and writer share, and [`RecordLogReader`], which
//! follows the log from another process. The writer is `aldb-snapshot`'s `RecordLogWriter`.

mod log;
mod reader;

pub use log::{
    Damage, HEADER_LEN, LoggedRecord, MAGIC, RECORDS_DIR, SEGMENT_RECORDS, SegmentScan, encode_entry, list_segments,
    parse_segment, segment_first_slot, segment_header, segment_name,
};
pub use reader::RecordLogReader;
