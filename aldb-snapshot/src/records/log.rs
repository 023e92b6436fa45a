//! The record log: append-only segment files of checksummed entries (`docs/FORMAT.md`).
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

use std::collections::{BTreeMap, VecDeque};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};

use aldb_verify::record::{Attestation, RootRecord, RECORD_LEN};
use aldb_verify::Hash;
use xxhash_rust::xxh3::xxh3_64;

use super::RecordsError;

/// Subdirectory of a snapshot directory holding the record log.
pub const RECORDS_DIR: &str = "records";
/// Entries per segment file before the writer starts a new one.
pub const SEGMENT_RECORDS: usize = 65_536;

const MAGIC: &[u8; 8] = b"aldbrlg1";
/// Length of a segment's header; its first entry starts here.
pub const HEADER_LEN: usize = 16;
const ATTESTATION_LEN: usize = 32 + 64;
/// An entry's payload: the record, an attestation count, the attestations.
const MAX_PAYLOAD: usize = RECORD_LEN + 1 + 255 * ATTESTATION_LEN;
/// The longest entry: length, payload, checksum.
const MAX_ENTRY: usize = 4 + MAX_PAYLOAD + 8;
/// Damage reports a [`RecordLogReader`] holds until [`take_damage`](RecordLogReader::take_damage)
/// collects them; older ones are dropped (and still counted) when nobody does.
const MAX_PENDING_DAMAGE: usize = 4096;

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

fn segment_name(first_slot: u64) -> String {
    format!("records-{first_slot:020}.log")
}

/// The first slot of a segment file name; only the writer's exact spelling counts, so two names
/// (`records-7.log`, `records-+0007.log`) never stand for one segment.
fn segment_first_slot(name: &str) -> Option<u64> {
    let digits = name.strip_prefix("records-")?.strip_suffix(".log")?;
    if digits.len() != 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Segment files of `dir`, oldest first.
fn list_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, RecordsError> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(RecordsError::io("list", dir, e)),
    };
    for entry in entries {
        let entry = entry.map_err(|e| RecordsError::io("list", dir, e))?;
        if let Some(first) = entry.file_name().to_str().and_then(segment_first_slot) {
            out.push((first, entry.path()));
        }
    }
    out.sort();
    Ok(out)
}

fn encode_entry(rec: &LoggedRecord) -> Vec<u8> {
    let n = rec.attestations.len().min(255);
    let payload_len = RECORD_LEN + 1 + n * ATTESTATION_LEN;
    let mut out = Vec::with_capacity(4 + payload_len + 8);
    // payload_len <= MAX_PAYLOAD, far below u32::MAX.
    out.extend_from_slice(&(payload_len as u32).to_le_bytes());
    out.extend_from_slice(&rec.record.encode());
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
/// whose payload's count byte is `n` (random bytes pass both about once in 2^32 offsets), then
/// the checksum (a false match about once in 2^64), then the record itself.
fn parse_entry(buf: &[u8]) -> Parsed {
    let Some(len_bytes) = buf.get(..4) else { return Parsed::Incomplete };
    let mut w = [0u8; 4];
    w.copy_from_slice(len_bytes);
    let len = u32::from_le_bytes(w) as usize;
    if !(RECORD_LEN + 1..=MAX_PAYLOAD).contains(&len) || !(len - RECORD_LEN - 1).is_multiple_of(ATTESTATION_LEN) {
        return Parsed::Bad;
    }
    let n = (len - RECORD_LEN - 1) / ATTESTATION_LEN;
    match buf.get(4 + RECORD_LEN) {
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
    let Ok(record) = RootRecord::decode(&payload[..RECORD_LEN]) else { return Parsed::Bad };
    let attestations = payload[RECORD_LEN + 1..]
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
struct Scan {
    /// Valid entries and their offsets, in file order.
    entries: Vec<(usize, LoggedRecord)>,
    /// Spans holding no valid entry, each followed by a valid one, with the index in `entries`
    /// of the entry that follows it.
    damaged: Vec<(Range<usize>, usize)>,
    /// Just past the last valid entry (or the scan's start): what follows holds no valid entry.
    end: usize,
    /// Where the next scan must start: no entry can begin in `end..resume`.
    resume: usize,
}

/// Scans `buf`, the segment's bytes from offset `base` on. `pending` (at most `base`) is where
/// bytes holding no valid entry began, when that is before `base`.
///
/// `growing`: the segment may still be appended to (the newest one). The scan then stops at the
/// first offset where an entry has begun but not ended: everything after it lies inside that
/// entry's extent, so a follower reading the segment while it grows finds exactly the entries it
/// finds reading it whole. Otherwise (an older segment, or the writer looking for what it may
/// cut) every offset is tried.
fn scan(buf: &[u8], base: usize, pending: usize, growing: bool) -> Scan {
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
fn header_ok(bytes: &[u8]) -> bool {
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

    fn new(segment: &Path, bytes: Range<usize>, after_slot: Option<u64>, before_slot: Option<u64>) -> Self {
        Self { segment: segment.to_path_buf(), bytes: bytes.start as u64..bytes.end as u64, after_slot, before_slot }
    }
}

fn sync_dir(dir: &Path) -> Result<(), RecordsError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| RecordsError::io("fsync directory", dir, e))
}

/// Appends records; one writer per directory.
#[derive(Debug)]
pub struct RecordLogWriter {
    dir: PathBuf,
    file: File,
    path: PathBuf,
    entries_in_segment: usize,
}

impl RecordLogWriter {
    /// Opens (creating if needed) the log under `snapshot_dir` and returns the writer with the
    /// intact records of the newest segments (at least the last [`SEGMENT_RECORDS`] records when
    /// there are that many, and at least one segment whose records are not older than its name),
    /// oldest first.
    ///
    /// It never deletes or rewrites an intact record: damaged spans are skipped (and logged once
    /// each, with the segment and offsets), and the only bytes it cuts are those after the last
    /// valid entry of the newest segment, which hold no valid entry (a torn append).
    pub fn open(snapshot_dir: &Path) -> Result<(Self, Vec<LoggedRecord>), RecordsError> {
        let dir = snapshot_dir.join(RECORDS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| RecordsError::io("create", &dir, e))?;
        let segments = list_segments(&dir)?;
        let Some((_, last)) = segments.last() else {
            return Ok((Self::create_segment(&dir, 0)?.ok_or_else(|| already_exists(&dir, 0))?, Vec::new()));
        };
        // Newest first. A segment whose records all lie below its name's first slot is not where
        // the writer left off (a stray copy of an older one): reading on past it keeps the
        // newest slot, which must never be signed twice, among those returned.
        let mut batches = Vec::new();
        let (mut count, mut placed) = (0, false);
        let mut last_scan = None;
        for (i, (first, path)) in segments.iter().enumerate().rev() {
            if count >= SEGMENT_RECORDS && placed {
                break;
            }
            let bytes = std::fs::read(path).map_err(|e| RecordsError::io("read", path, e))?;
            let scan = parse_segment(&bytes);
            let newest = i + 1 == segments.len();
            if bytes.len() >= HEADER_LEN && !scan.header_ok {
                log::warn!("record log {}: bytes 0..{HEADER_LEN}: not a version-1 segment header; reading its entries", path.display());
            }
            for r in &scan.damaged {
                log::warn!("record log {}: bytes {}..{} damaged, skipped", path.display(), r.start, r.end);
            }
            if !newest && scan.end < bytes.len() {
                log::warn!("record log {}: bytes {}..{} damaged, skipped", path.display(), scan.end, bytes.len());
            }
            placed |= scan.entries.iter().any(|(_, r)| r.record.slot >= *first);
            count += scan.entries.len();
            if newest {
                last_scan = Some((scan.end, scan.entries.len()));
            }
            batches.push(scan.entries.into_iter().map(|(_, r)| r).collect::<Vec<_>>());
        }
        let recent: Vec<LoggedRecord> = batches.into_iter().rev().flatten().collect();
        let (end, entries_in_segment) = last_scan.unwrap_or((HEADER_LEN, 0));

        let mut file = OpenOptions::new().read(true).write(true).open(last).map_err(|e| RecordsError::io("open", last, e))?;
        let len = file.metadata().map_err(|e| RecordsError::io("stat", last, e))?.len();
        if len < HEADER_LEN as u64 {
            // Created but its header not fully written: it holds nothing.
            file.set_len(0).map_err(|e| RecordsError::io("truncate", last, e))?;
            file.write_all(&header()).map_err(|e| RecordsError::io("write", last, e))?;
        } else if len > end as u64 {
            log::warn!(
                "record log {}: cutting bytes {end}..{len} off: no valid entry after the last one (a torn append)",
                last.display()
            );
            file.set_len(end as u64).map_err(|e| RecordsError::io("truncate", last, e))?;
        }
        file.sync_all().map_err(|e| RecordsError::io("fsync", last, e))?;
        file.seek(SeekFrom::End(0)).map_err(|e| RecordsError::io("seek", last, e))?;
        Ok((Self { dir, file, path: last.clone(), entries_in_segment }, recent))
    }

    /// Creates a new segment, or `None` when a file of that name exists (it is never truncated:
    /// it may hold records).
    fn create_segment(dir: &Path, first_slot: u64) -> Result<Option<Self>, RecordsError> {
        let path = dir.join(segment_name(first_slot));
        let mut file = match OpenOptions::new().read(true).write(true).create_new(true).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(RecordsError::io("create", &path, e)),
        };
        file.write_all(&header()).map_err(|e| RecordsError::io("write", &path, e))?;
        file.sync_all().map_err(|e| RecordsError::io("fsync", &path, e))?;
        sync_dir(dir)?;
        Ok(Some(Self { dir: dir.to_path_buf(), file, path, entries_in_segment: 0 }))
    }

    /// Appends one record and syncs it; when this returns, readers can see it and a crash keeps
    /// it.
    pub fn append(&mut self, rec: &LoggedRecord) -> Result<(), RecordsError> {
        if self.entries_in_segment >= SEGMENT_RECORDS {
            match Self::create_segment(&self.dir, rec.record.slot)? {
                Some(next) => *self = next,
                None => {
                    // Only a stray file can hold the name; appending on here loses nothing.
                    log::warn!("record log: {} exists; appending to {}", segment_name(rec.record.slot), self.path.display());
                    self.entries_in_segment = 0;
                }
            }
        }
        self.file.write_all(&encode_entry(rec)).map_err(|e| RecordsError::io("append", &self.path, e))?;
        self.file.sync_data().map_err(|e| RecordsError::io("fsync", &self.path, e))?;
        self.entries_in_segment += 1;
        Ok(())
    }

    /// Deletes whole segments holding only records below `slot` (never the one being written).
    pub fn prune_before(&mut self, slot: u64) -> Result<usize, RecordsError> {
        let segments = list_segments(&self.dir)?;
        let mut removed = 0;
        for pair in segments.windows(2) {
            // A segment's records all lie below its successor's first slot.
            if pair[1].0 <= slot && pair[0].1 != self.path {
                std::fs::remove_file(&pair[0].1).map_err(|e| RecordsError::io("remove", &pair[0].1, e))?;
                removed += 1;
            }
        }
        if removed > 0 {
            sync_dir(&self.dir)?;
        }
        Ok(removed)
    }
}

fn already_exists(dir: &Path, first_slot: u64) -> RecordsError {
    let path = dir.join(segment_name(first_slot));
    RecordsError::io("create", path, std::io::Error::from(std::io::ErrorKind::AlreadyExists))
}

fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h
}

/// A follower's position in one segment.
#[derive(Debug, Default)]
struct Position {
    /// The header has been read (and checked).
    header_read: bool,
    /// Just past the last valid entry read: bytes from here on hold no valid entry yet.
    end: usize,
    /// Where the next read starts (`end` or later).
    resume: usize,
    /// The file length at the last read.
    len: usize,
    /// The slot of the last record read from the segment.
    last_slot: Option<u64>,
    /// `end` when the bytes after it were reported as damage (the segment was no longer the
    /// newest): they are not reported again.
    tail_reported: Option<usize>,
    /// XXH3 of the bytes from `end` (at most one longest entry of them), when the segment is the
    /// newest and they hold no valid entry yet. The writer cuts such bytes off when it reopens
    /// the log and appends in their place; a changed sum says so, and they are scanned again.
    pending_sum: u64,
}

/// XXH3 of a segment's bytes from `end` up to `len`, at most one longest entry of them: enough to
/// see that an entry was written at `end`, since what was there before was decided not to be one
/// by the bytes in that window.
fn pending_sum(file: &mut File, path: &Path, end: usize, len: usize) -> Result<u64, RecordsError> {
    let want = len.saturating_sub(end).min(MAX_ENTRY);
    file.seek(SeekFrom::Start(end as u64)).map_err(|e| RecordsError::io("seek", path, e))?;
    let mut buf = Vec::with_capacity(want);
    Read::by_ref(file).take(want as u64).read_to_end(&mut buf).map_err(|e| RecordsError::io("read", path, e))?;
    Ok(xxh3_64(&buf))
}

/// Follows a record log written by another process, holding every record in memory by slot.
///
/// Damaged spans are skipped: the records after them are read, the span is counted
/// ([`bad_entries`](Self::bad_entries), [`damaged_bytes`](Self::damaged_bytes)) once, and
/// reported through [`take_damage`](Self::take_damage).
#[derive(Debug, Default)]
pub struct RecordLogReader {
    dir: PathBuf,
    /// Position per segment, by first slot.
    positions: BTreeMap<u64, Position>,
    records: BTreeMap<u64, LoggedRecord>,
    bad_entries: u64,
    damaged_bytes: u64,
    damage: VecDeque<Damage>,
    /// Reports in `damage` that may still lack their `before_slot`.
    open_damage: usize,
}

impl RecordLogReader {
    /// A reader of the log under `snapshot_dir`; call [`refresh`](Self::refresh) to load it.
    pub fn new(snapshot_dir: &Path) -> Self {
        Self { dir: snapshot_dir.join(RECORDS_DIR), ..Self::default() }
    }

    /// Reads what was appended since the last call; returns the newly seen records, in log
    /// order. Segments deleted by the writer are forgotten (their records stay until
    /// [`forget_before`](Self::forget_before)).
    pub fn refresh(&mut self) -> Result<Vec<LoggedRecord>, RecordsError> {
        let segments = list_segments(&self.dir)?;
        let mut fresh = Vec::new();
        let mut prev_slot = None;
        for (i, (first, path)) in segments.iter().enumerate() {
            let newest = i + 1 == segments.len();
            let mut pos = self.positions.remove(first).unwrap_or_default();
            let r = self.follow(path, &mut pos, newest, prev_slot, &mut fresh);
            prev_slot = pos.last_slot.or(prev_slot);
            self.positions.insert(*first, pos);
            r?;
        }
        self.positions.retain(|first, _| segments.iter().any(|(f, _)| f == first));
        Ok(fresh)
    }

    /// Reads what `path` holds past `pos`; `prev_slot` is the last record of older segments.
    fn follow(
        &mut self,
        path: &Path,
        pos: &mut Position,
        newest: bool,
        prev_slot: Option<u64>,
        fresh: &mut Vec<LoggedRecord>,
    ) -> Result<(), RecordsError> {
        let mut file = match File::open(path) {
            Ok(f) => f,
            // Pruned between listing and opening.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(RecordsError::io("open", path, e)),
        };
        let len = file.metadata().map_err(|e| RecordsError::io("stat", path, e))?.len();
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        // Unchanged, unless bytes holding no valid entry yet may have been replaced (the newest
        // segment) or are to be reported as damage (an older one).
        let settled = pos.end >= len || (!newest && pos.tail_reported == Some(pos.end));
        if pos.header_read && len == pos.len && settled {
            return Ok(());
        }
        if !pos.header_read {
            let mut head = [0u8; HEADER_LEN];
            match file.read_exact(&mut head) {
                Ok(()) => {}
                // Being created: nothing written yet.
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(RecordsError::io("read", path, e)),
            }
            if !header_ok(&head) {
                log::warn!("record log {}: bytes 0..{HEADER_LEN}: not a version-1 segment header; reading its entries", path.display());
                self.note(Damage::new(path, 0..HEADER_LEN, None, None));
            }
            *pos = Position { header_read: true, end: HEADER_LEN, resume: HEADER_LEN, ..Position::default() };
        }
        if len < pos.end {
            // Cut below what was read (not by the writer, which cuts only what holds no valid
            // entry): what is appended next starts at the new end.
            log::warn!("record log {}: shrank from {} to {len} bytes", path.display(), pos.len);
            pos.end = len.max(HEADER_LEN);
        }
        if newest && pos.end < pos.len && pending_sum(&mut file, path, pos.end, pos.len)? != pos.pending_sum {
            pos.resume = pos.end;
        }
        pos.resume = pos.resume.clamp(pos.end, len.max(pos.end));
        file.seek(SeekFrom::Start(pos.resume as u64)).map_err(|e| RecordsError::io("seek", path, e))?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf).map_err(|e| RecordsError::io("read", path, e))?;
        let s = scan(&buf, pos.resume, pos.end, newest);
        let len = pos.resume + buf.len();
        let mut last = pos.last_slot.or(prev_slot);
        let mut next_damage = s.damaged.into_iter().peekable();
        for (i, (_, rec)) in s.entries.into_iter().enumerate() {
            while let Some((span, _)) = next_damage.next_if(|(_, at)| *at == i) {
                if pos.tail_reported == Some(span.start) {
                    // Reported when the segment stopped being the newest; its end is known now,
                    // and a consumer learns it from the record that follows.
                    log::info!("record log {}: damaged bytes from {} end at {}", path.display(), span.start, span.end);
                } else {
                    log::warn!("record log {}: bytes {}..{} damaged, skipped", path.display(), span.start, span.end);
                    self.note(Damage::new(path, span, last, Some(rec.record.slot)));
                }
            }
            last = Some(rec.record.slot);
            pos.last_slot = Some(rec.record.slot);
            if self.open_damage > 0 {
                for d in self.damage.iter_mut().filter(|d| d.before_slot.is_none() && !d.in_header()) {
                    d.before_slot = last;
                }
                self.open_damage = 0;
            }
            self.records.insert(rec.record.slot, rec.clone());
            fresh.push(rec);
        }
        pos.end = s.end;
        pos.resume = s.resume;
        pos.len = len;
        if newest && pos.end < len {
            pos.pending_sum = pending_sum(&mut file, path, pos.end, len)?;
        }
        if !newest && pos.end < len && pos.tail_reported != Some(pos.end) {
            // A newer segment exists, so the writer has left this one: nothing more comes.
            log::warn!("record log {}: bytes {}..{len} damaged, skipped", path.display(), pos.end);
            self.note(Damage::new(path, pos.end..len, last, None));
            pos.tail_reported = Some(pos.end);
        }
        Ok(())
    }

    fn note(&mut self, d: Damage) {
        self.bad_entries += 1;
        if d.before_slot.is_none() && !d.in_header() {
            self.open_damage += 1;
        }
        self.damaged_bytes += d.bytes.end - d.bytes.start;
        if self.damage.len() >= MAX_PENDING_DAMAGE {
            self.damage.pop_front();
        }
        self.damage.push_back(d);
    }

    /// The damaged spans found since the last call, in the order found. A span whose
    /// `before_slot` is `None` comes after every record read so far.
    pub fn take_damage(&mut self) -> Vec<Damage> {
        self.open_damage = 0;
        self.damage.drain(..).collect()
    }

    /// The record of `slot`, if logged.
    pub fn get(&self, slot: u64) -> Option<&LoggedRecord> {
        self.records.get(&slot)
    }

    /// Records with `start <= slot <= end`, in slot order.
    pub fn range(&self, start: u64, end: u64) -> impl Iterator<Item = &LoggedRecord> {
        self.records.range(start..=end.max(start)).map(|(_, r)| r).filter(move |r| r.record.slot <= end)
    }

    /// The newest record.
    pub fn latest(&self) -> Option<&LoggedRecord> {
        self.records.values().next_back()
    }

    /// The oldest record held.
    pub fn oldest(&self) -> Option<&LoggedRecord> {
        self.records.values().next()
    }

    /// Drops records below `slot` from memory.
    pub fn forget_before(&mut self, slot: u64) {
        self.records = self.records.split_off(&slot);
    }

    /// Damaged spans found so far (each one or more entries, or a segment header), each counted
    /// once.
    pub fn bad_entries(&self) -> u64 {
        self.bad_entries
    }

    /// Bytes in the damaged spans found so far.
    pub fn damaged_bytes(&self) -> u64 {
        self.damaged_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aldb_verify::record::{Commitment, ParentLink};

    fn rec(slot: u64) -> LoggedRecord {
        let record = RootRecord {
            genesis_hash: [1; 32],
            slot,
            parent: slot.checked_sub(1).map(|p| ParentLink { slot: p, record_hash: None, bank_hash: None }),
            commitment: Commitment::Confirmed,
            state_root: [slot as u8; 32],
            block: None,
        };
        LoggedRecord { record_hash: record.hash(), record, attestations: vec![Attestation { identity: [2; 32], signature: [3; 64] }] }
    }

    fn segment(dir: &Path, first: u64) -> RecordLogWriter {
        let rdir = dir.join(RECORDS_DIR);
        std::fs::create_dir_all(&rdir).expect("mkdir");
        RecordLogWriter::create_segment(&rdir, first).expect("create").expect("a new segment")
    }

    fn slots(records: &[LoggedRecord]) -> Vec<u64> {
        records.iter().map(|r| r.record.slot).collect()
    }

    #[test]
    fn appends_are_read_back_and_a_torn_tail_is_cut_off() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut w, recent) = RecordLogWriter::open(dir.path()).expect("open");
        assert!(recent.is_empty());
        let mut reader = RecordLogReader::new(dir.path());
        for s in 1..=5 {
            w.append(&rec(s)).expect("append");
        }
        assert_eq!(reader.refresh().expect("refresh").len(), 5);
        assert_eq!(reader.get(3), Some(&rec(3)));
        drop(w);
        // A torn write: half an entry at the end.
        let seg = list_segments(&dir.path().join(RECORDS_DIR)).expect("list")[0].1.clone();
        let entry = encode_entry(&rec(6));
        let mut f = OpenOptions::new().append(true).open(&seg).expect("open");
        f.write_all(&entry[..entry.len() / 2]).expect("write");
        drop(f);
        assert!(reader.refresh().expect("refresh").is_empty(), "a torn entry is not served");
        let (mut w, recent) = RecordLogWriter::open(dir.path()).expect("reopen");
        assert_eq!(slots(&recent), vec![1, 2, 3, 4, 5]);
        w.append(&rec(6)).expect("append");
        let fresh = reader.refresh().expect("refresh");
        assert_eq!(fresh, vec![rec(6)]);
        assert_eq!(reader.range(2, 4).count(), 3);
        assert_eq!(reader.latest(), Some(&rec(6)));
        assert_eq!(reader.bad_entries(), 0, "a torn tail is not damage");
    }

    #[test]
    fn a_flipped_byte_loses_only_its_own_record() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut w, _) = RecordLogWriter::open(dir.path()).expect("open");
        for s in 1..=3 {
            w.append(&rec(s)).expect("append");
        }
        drop(w);
        let seg = list_segments(&dir.path().join(RECORDS_DIR)).expect("list")[0].1.clone();
        let clean = std::fs::read(&seg).expect("read");
        let entry_len = encode_entry(&rec(1)).len();
        for at in HEADER_LEN..clean.len() {
            let mut bytes = clean.clone();
            bytes[at] ^= 0x10;
            std::fs::write(&seg, &bytes).expect("write");
            let hit = ((at - HEADER_LEN) / entry_len) as u64 + 1;
            let mut reader = RecordLogReader::new(dir.path());
            let got = reader.refresh().expect("refresh");
            let want: Vec<u64> = (1..=3).filter(|&s| s != hit).collect();
            assert_eq!(slots(&got), want, "byte {at}");
            for r in &got {
                assert_eq!(r, &rec(r.record.slot), "byte {at}: a damaged record was served");
            }
            // Damage in the last entry is a torn append until something follows it.
            assert_eq!(reader.bad_entries(), u64::from(hit < 3), "byte {at}");
        }
    }

    #[test]
    fn damage_is_skipped_counted_once_and_reported_with_the_slots_around_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut old = segment(dir.path(), 1);
        for s in 1..=4 {
            old.append(&rec(s)).expect("append");
        }
        let mut new = segment(dir.path(), 5);
        new.append(&rec(5)).expect("append");
        // Damage the second entry of the older segment and cut its last entry in half.
        let entry_len = encode_entry(&rec(1)).len();
        let mut bytes = std::fs::read(&old.path).expect("read");
        bytes[HEADER_LEN + entry_len + 10] ^= 1;
        bytes.truncate(bytes.len() - entry_len / 2);
        std::fs::write(&old.path, &bytes).expect("write");
        let mut reader = RecordLogReader::new(dir.path());
        assert_eq!(slots(&reader.refresh().expect("refresh")), vec![1, 3, 5]);
        let damage = reader.take_damage();
        let spans: Vec<_> = damage.iter().map(|d| (d.bytes.clone(), d.after_slot, d.before_slot)).collect();
        let (e, l) = (entry_len as u64, HEADER_LEN as u64);
        assert_eq!(spans, vec![(l + e..l + 2 * e, Some(1), Some(3)), (l + 3 * e..bytes.len() as u64, Some(3), Some(5))]);
        new.append(&rec(6)).expect("append");
        assert_eq!(reader.refresh().expect("refresh"), vec![rec(6)]);
        assert_eq!(reader.bad_entries(), 2);
        assert_eq!(reader.damaged_bytes(), e + (bytes.len() as u64 - l - 3 * e));
        assert!(reader.take_damage().is_empty());
    }

    #[test]
    fn a_follower_reading_a_damaged_segment_as_it_grows_finds_what_a_whole_read_finds() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = segment(dir.path(), 0);
        for s in 0..6 {
            w.append(&rec(s)).expect("append");
        }
        let mut bytes = std::fs::read(&w.path).expect("read");
        let entry_len = encode_entry(&rec(0)).len();
        // Entry 1 gets a bad length, entry 3 zeroes in its payload.
        bytes[HEADER_LEN + entry_len] ^= 0x40;
        bytes[HEADER_LEN + 3 * entry_len + 30..HEADER_LEN + 3 * entry_len + 60].fill(0);
        let whole = parse_segment(&bytes);
        assert_eq!(whole.entries.iter().map(|(_, r)| r.record.slot).collect::<Vec<_>>(), vec![0, 2, 4, 5]);
        assert_eq!(whole.damaged.len(), 2);
        // Written a few bytes at a time, as a follower may see an append in progress.
        let path = w.path.clone();
        drop(w);
        let mut reader = RecordLogReader::new(dir.path());
        let mut got = Vec::new();
        for cut in (0..=bytes.len()).step_by(37).chain([bytes.len()]) {
            std::fs::write(&path, &bytes[..cut]).expect("write");
            got.extend(reader.refresh().expect("refresh"));
        }
        assert_eq!(got, whole.entries.into_iter().map(|(_, r)| r).collect::<Vec<_>>());
        assert_eq!(reader.bad_entries(), 2, "an unfinished entry is never counted as damage");
    }

    #[test]
    fn a_follower_sees_what_the_writer_appends_in_place_of_a_damaged_tail() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut w, _) = RecordLogWriter::open(dir.path()).expect("open");
        for s in 1..=3 {
            w.append(&rec(s)).expect("append");
        }
        drop(w);
        let seg = list_segments(&dir.path().join(RECORDS_DIR)).expect("list")[0].1.clone();
        let mut bytes = std::fs::read(&seg).expect("read");
        let len = bytes.len();
        bytes[len - 3] ^= 0x20;
        std::fs::write(&seg, &bytes).expect("write");
        let mut reader = RecordLogReader::new(dir.path());
        assert_eq!(slots(&reader.refresh().expect("refresh")), vec![1, 2]);
        assert_eq!(slots(&reader.refresh().expect("refresh")), Vec::<u64>::new());
        // The writer cuts the damaged last entry and appends the same record again: the file has
        // its old length, and a follower must still see the entry.
        let (mut w, recent) = RecordLogWriter::open(dir.path()).expect("reopen");
        assert_eq!(slots(&recent), vec![1, 2]);
        w.append(&rec(3)).expect("append");
        assert_eq!(std::fs::metadata(&seg).expect("stat").len(), len as u64);
        assert_eq!(reader.refresh().expect("refresh"), vec![rec(3)]);
        w.append(&rec(4)).expect("append");
        assert_eq!(reader.refresh().expect("refresh"), vec![rec(4)]);
        assert_eq!(reader.bad_entries(), 0);
    }

    #[test]
    fn only_the_writers_own_segment_names_count() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = segment(dir.path(), 1);
        w.append(&rec(1)).expect("append");
        let rdir = dir.path().join(RECORDS_DIR);
        for name in ["records-1.log", "records-+0000000000000000001.log", "records-00000000000000000001.log.bak"] {
            std::fs::copy(&w.path, rdir.join(name)).expect("copy");
        }
        assert_eq!(list_segments(&rdir).expect("list").len(), 1);
        assert_eq!(segment_first_slot(&segment_name(u64::MAX)), Some(u64::MAX));
    }

    #[test]
    fn pruning_deletes_only_whole_segments_older_than_the_cutoff() {
        let dir = tempfile::tempdir().expect("tempdir");
        for first in [1u64, 10, 20] {
            let mut w = segment(dir.path(), first);
            for s in first..first + 3 {
                w.append(&rec(s)).expect("append");
            }
        }
        let (mut w, recent) = RecordLogWriter::open(dir.path()).expect("open");
        assert_eq!(slots(&recent), vec![1, 2, 3, 10, 11, 12, 20, 21, 22], "fewer than a segment's worth: all are read");
        // Slot 15 is inside the second segment: only the first (slots 1..=3) may go.
        assert_eq!(w.prune_before(15).expect("prune"), 1);
        assert_eq!(w.prune_before(15).expect("prune"), 0);
        // The segment being written is never deleted, whatever the cutoff.
        assert_eq!(w.prune_before(1000).expect("prune"), 1);
        let mut reader = RecordLogReader::new(dir.path());
        assert_eq!(slots(&reader.refresh().expect("refresh")), vec![20, 21, 22]);
    }
}
