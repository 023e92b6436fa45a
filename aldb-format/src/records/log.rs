//! The record log's format: append-only segment files of checksummed entries
//! (`docs/FORMAT.md`, "Record log"), and the parser its readers and its writer share.
//!
//! Records are tiny (about 300 bytes with one attestation) and come once per slot, so each is
//! appended and synced on its own; an entry is visible to readers once its length, payload and
//! checksum are all on disk.
//!
//! Every entry carries its own checksum, so damage to one loses only that one: readers skip a
//! damaged span by scanning forward for the next offset where a complete valid entry parses,
//! count it, and go on. Only bytes after the last valid entry of the newest segment are "not
//! written yet" (a follower waits for them; a crash can leave a torn entry there), and they are
//! the only bytes the writer ever cuts when it reopens the log.

use std::ops::Range;
use std::path::{Path, PathBuf};

use aldb_verify::Hash;
use aldb_verify::record::{Attestation, MAX_RECORD_LEN, RECORD_LEN, RECORD_LEN_WITH_BANK_HASH, RootRecord};
use xxhash_rust::xxh3::xxh3_64;

use crate::error::SnapshotError;

/// Subdirectory of a snapshot directory holding the record log.
pub const RECORDS_DIR: &str = "records";
/// Entries per segment file before the writer starts a new one.
pub const SEGMENT_RECORDS: usize = 65_536;

/// First bytes of every segment file.
pub const MAGIC: &[u8; 8] = b"aldbrlg1";
/// Length of a segment's header; its first entry starts here.
pub const HEADER_LEN: usize = 16;
const ATTESTATION_LEN: usize = 32 + 64;
/// An entry's payload: the record, an attestation count, the attestations.
const MAX_PAYLOAD: usize = MAX_RECORD_LEN + 1 + 255 * ATTESTATION_LEN;
/// The longest entry: length, payload, checksum.
pub(crate) const MAX_ENTRY: usize = 4 + MAX_PAYLOAD + 8;

/// One record as logged, with its hash and attestations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedRecord {
    /// The record.
    pub record: RootRecord,
    /// Its record hash.
    pub record_hash: Hash,
    /// The producer's attestations (none when it signs nothing).
    pub attestations: Vec<Attestation>,
}

/// The file name of the segment whose first record is of `first_slot`.
pub fn segment_name(first_slot: u64) -> String {
    format!("records-{first_slot:020}.log")
}

/// The first slot of a segment file name; only the writer's exact spelling counts, so two names
/// (`records-7.log`, `records-+0007.log`) never stand for one segment.
pub fn segment_first_slot(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("records-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Segment files of `dir` (a snapshot directory's [`RECORDS_DIR`]) by first slot, oldest first;
/// none when `dir` does not exist.
pub fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, SnapshotError> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(SnapshotError::io("list", dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| SnapshotError::io("list", dir, e))?;
        if let Some(first) = entry.file_name().to_str().and_then(segment_first_slot) {
            out.push((first, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// An entry as appended to a segment: length, payload (record, attestation count, at most 255
/// attestations), checksum.
pub fn encode_entry(rec: &LoggedRecord) -> Vec<u8> {
    let n = rec.attestations.len().min(255);
    let record = rec.record.encode();
    let payload_len = record.len() + 1 + n * ATTESTATION_LEN;
    let mut out = Vec::with_capacity(4 + payload_len + 8);
    // payload_len <= MAX_PAYLOAD, far below u32::MAX.
    out.extend_from_slice(&(payload_len as u32).to_le_bytes());
    out.extend_from_slice(&record);
    out.push(n as u8);
    for a in &rec.attestations[..n] {
        out.extend_from_slice(&a.identity);
        out.extend_from_slice(&a.signature);
    }
    let sum = xxh3_64(&out[4..]);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Result of parsing an entry at the start of a buffer.
enum Parsed {
    /// A complete, valid entry and the bytes it took.
    Entry(Box<LoggedRecord>, usize),
    /// What is there agrees with an entry, but the buffer ends inside it: not written yet (or
    /// torn, or damage that a later append will show to be damage).
    Incomplete,
    /// Not a valid entry, whatever follows: decided by bytes that are present.
    Bad,
}

/// Parses the entry at the start of `buf`. The cheap checks come first, because a reader that
/// resynchronises after damage calls this at every offset: a length of the form `188 + 96·n`
/// (or `220 + 96·n`, a record with the slot's bank hash) whose payload's count byte is `n`
/// (random bytes pass both about once in 2^32 offsets), then the checksum (a false match about
/// once in 2^64), then the record itself, which must be as long as its flags say.
fn parse_entry(buf: &[u8]) -> Parsed {
    let Some(len_bytes) = buf.get(..4) else { return Parsed::Incomplete };
    let mut w = [0u8; 4];
    w.copy_from_slice(len_bytes);
    let len = u32::from_le_bytes(w) as usize;
    if !(RECORD_LEN + 1..=MAX_PAYLOAD).contains(&len) {
        return Parsed::Bad;
    }
    // 187 and 219 differ by 32, not a multiple of 96: the length alone says which record it is.
    let Some(record_len) = [RECORD_LEN, RECORD_LEN_WITH_BANK_HASH]
        .into_iter()
        .find(|&r| len > r && (len - r - 1).is_multiple_of(ATTESTATION_LEN))
    else {
        return Parsed::Bad;
    };
    let n = (len - record_len - 1) / ATTESTATION_LEN;
    match buf.get(4 + record_len) {
        Some(&count) if usize::from(count) != n => return Parsed::Bad,
        Some(_) => {}
        None => return Parsed::Incomplete,
    }
    let (Some(payload), Some(sum_bytes)) = (buf.get(4..4 + len), buf.get(4 + len..4 + len + 8)) else {
        return Parsed::Incomplete;
    };
    let mut s = [0u8; 8];
    s.copy_from_slice(sum_bytes);
    if u64::from_le_bytes(s) != xxh3_64(payload) {
        return Parsed::Bad;
    }
    let Ok(record) = RootRecord::decode(&payload[..record_len]) else { return Parsed::Bad };
    let attestations = payload[record_len + 1..]
        .chunks_exact(ATTESTATION_LEN)
        .map(|c| {
            let mut identity = [0u8; 32];
            let mut signature = [0u8; 64];
            identity.copy_from_slice(&c[..32]);
            signature.copy_from_slice(&c[32..]);
            Attestation { identity, signature }
        })
        .collect();
    Parsed::Entry(Box::new(LoggedRecord { record_hash: record.hash(), record, attestations }), 4 + len + 8)
}

/// What scanning part of a segment found; offsets are from the segment's start.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Valid entries and their offsets, in file order.
    pub(crate) entries: Vec<(usize, LoggedRecord)>,
    /// Spans holding no valid entry, each followed by a valid one, with the index in `entries`
    /// of the entry that follows it.
    pub(crate) damaged: Vec<(Range<usize>, usize)>,
    /// Just past the last valid entry (or the scan's start): what follows holds no valid entry.
    pub(crate) end: usize,
    /// Where the next scan must start: no entry can begin in `end..resume`.
    pub(crate) resume: usize,
}

/// Scans `buf`, the segment's bytes from offset `base` on. `pending` (at most `base`) is where
/// bytes holding no valid entry began, when that is before `base`.
///
/// `growing`: the segment may still be appended to (the newest one). The scan then stops at the
/// first offset where an entry has begun but not ended: everything after it lies inside that
/// entry's extent, so a follower reading the segment while it grows finds exactly the entries it
/// finds reading it whole. Otherwise (an older segment, or the writer looking for what it may
/// cut) every offset is tried.
pub(crate) fn scan(buf: &[u8], base: usize, pending: usize, growing: bool) -> Scan {
    let mut out = Scan::default();
    let mut gap = (pending < base).then_some(pending);
    let mut at = 0;
    while at < buf.len() {
        match parse_entry(&buf[at..]) {
            Parsed::Entry(rec, used) => {
                if let Some(g) = gap.take() {
                    out.damaged.push((g..base + at, out.entries.len()));
                }
                out.entries.push((base + at, *rec));
                at += used;
            }
            Parsed::Incomplete if growing => break,
            Parsed::Incomplete | Parsed::Bad => {
                gap.get_or_insert(base + at);
                at += 1;
            }
        }
    }
    let len = base + buf.len();
    out.end = gap.unwrap_or(base + at);
    // An offset more than one longest entry before the end has a complete candidate, decided for
    // good; later ones may complete as the segment grows.
    out.resume = if growing { base + at } else { out.end.max(len.saturating_sub(MAX_ENTRY)) };
    out
}

/// Whether a segment header reads as a version-1 record log segment.
pub(crate) fn header_ok(bytes: &[u8]) -> bool {
    bytes.len() >= HEADER_LEN && &bytes[..8] == MAGIC && bytes[8..12] == 1u32.to_le_bytes()
}

/// What [`parse_segment`] finds in a segment file's bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SegmentScan {
    /// Whether the 16-byte header reads as a version-1 segment. Entries are read either way: each
    /// carries its own checksum, so a damaged header loses none of them.
    pub header_ok: bool,
    /// The valid entries and the offsets they start at, in file order.
    pub entries: Vec<(usize, LoggedRecord)>,
    /// Spans holding no valid entry that a valid entry follows: damage.
    pub damaged: Vec<Range<usize>>,
    /// Just past the last valid entry (the header length when there is none). The
    /// bytes after it hold no valid entry: in the newest segment a torn or unfinished append, in
    /// an older one damage.
    pub end: usize,
}

/// Parses a whole segment file, skipping damaged spans (exposed for fuzzing; the writer and
/// [`RecordLogReader`] parse segments the same way). Never panics, whatever the bytes.
pub fn parse_segment(bytes: &[u8]) -> SegmentScan {
    let body = bytes.get(HEADER_LEN..).unwrap_or_default();
    let s = scan(body, HEADER_LEN, HEADER_LEN, false);
    SegmentScan {
        header_ok: header_ok(bytes),
        damaged: s.damaged.into_iter().map(|(r, _)| r).collect(),
        entries: s.entries,
        end: s.end.min(bytes.len().max(HEADER_LEN)),
    }
}

/// A damaged span of a segment: bytes holding no valid entry, found by a reader or the writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Damage {
    /// The segment file.
    pub segment: PathBuf,
    /// The byte offsets of the span.
    pub bytes: Range<u64>,
    /// The slot of the last intact record before the span in log order, if any: records of
    /// slots between this and [`before_slot`](Self::before_slot) may have been lost in it.
    pub after_slot: Option<u64>,
    /// The slot of the first intact record after the span, if one has been read yet.
    pub before_slot: Option<u64>,
}

impl Damage {
    /// Whether the span lies in the segment header, which holds no record.
    pub fn in_header(&self) -> bool {
        self.bytes.end <= HEADER_LEN as u64
    }

    pub(crate) fn new(segment: &Path, bytes: Range<usize>, after_slot: Option<u64>, before_slot: Option<u64>) -> Self {
        Self { segment: segment.to_path_buf(), bytes: bytes.start as u64..bytes.end as u64, after_slot, before_slot }
    }
}

/// A version-1 segment header: [`MAGIC`], the version, zeros.
pub fn segment_header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h
}
