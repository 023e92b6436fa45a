//! The record log: append-only segment files of checksummed entries (`docs/FORMAT.md`).
//!
//! Records are tiny (about 300 bytes with one attestation) and come once per slot, so each is
//! appended and synced on its own; an entry is visible to readers once its length, payload and
//! checksum are all on disk. A crash can leave only a torn last entry, which the writer cuts off
//! when it reopens and readers treat as not yet written.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
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
const HEADER_LEN: usize = 16;
const ATTESTATION_LEN: usize = 32 + 64;
/// An entry's payload: the record, an attestation count, the attestations.
const MAX_PAYLOAD: usize = RECORD_LEN + 1 + 255 * ATTESTATION_LEN;

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

fn segment_first_slot(name: &str) -> Option<u64> {
    name.strip_prefix("records-")?.strip_suffix(".log")?.parse().ok()
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

/// Result of parsing entries from a buffer.
enum Parsed {
    /// A complete, valid entry and the bytes it took.
    Entry(Box<LoggedRecord>, usize),
    /// The buffer ends inside an entry: not written yet (or torn).
    Incomplete,
    /// A complete entry that is not valid.
    Bad(String),
}

fn parse_entry(buf: &[u8]) -> Parsed {
    let Some(len_bytes) = buf.get(..4) else { return Parsed::Incomplete };
    let mut w = [0u8; 4];
    w.copy_from_slice(len_bytes);
    let len = u32::from_le_bytes(w) as usize;
    if !(RECORD_LEN + 1..=MAX_PAYLOAD).contains(&len) {
        return Parsed::Bad(format!("entry length {len} out of range"));
    }
    let Some(payload) = buf.get(4..4 + len) else { return Parsed::Incomplete };
    let Some(sum_bytes) = buf.get(4 + len..4 + len + 8) else { return Parsed::Incomplete };
    let mut s = [0u8; 8];
    s.copy_from_slice(sum_bytes);
    if u64::from_le_bytes(s) != xxh3_64(payload) {
        return Parsed::Bad("entry checksum mismatch".into());
    }
    let record = match RootRecord::decode(&payload[..RECORD_LEN]) {
        Ok(r) => r,
        Err(e) => return Parsed::Bad(format!("entry record: {e}")),
    };
    let n = usize::from(payload[RECORD_LEN]);
    if len != RECORD_LEN + 1 + n * ATTESTATION_LEN {
        return Parsed::Bad(format!("entry length {len} does not fit {n} attestations"));
    }
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

/// Reads a segment from `offset` (at least the header length): the entries, and the offset just
/// past the last complete valid one. A bad entry ends the segment and is reported.
fn read_segment(path: &Path, offset: usize) -> Result<(Vec<LoggedRecord>, usize, Option<String>), RecordsError> {
    let mut file = File::open(path).map_err(|e| RecordsError::io("open", path, e))?;
    let mut header = [0u8; HEADER_LEN];
    match file.read_exact(&mut header) {
        Ok(()) => {}
        // Being created: nothing written yet.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok((Vec::new(), HEADER_LEN, None)),
        Err(e) => return Err(RecordsError::io("read", path, e)),
    }
    if &header[..8] != MAGIC || header[8..12] != 1u32.to_le_bytes() {
        return Err(RecordsError::corrupt(path, "not a version-1 record log segment"));
    }
    // Only what was appended since `offset`: a follower polls often, and a full segment is
    // tens of megabytes.
    let start = offset.max(HEADER_LEN);
    file.seek(SeekFrom::Start(start as u64)).map_err(|e| RecordsError::io("seek", path, e))?;
    let mut buf = Vec::new();
    file.read_to_end(&mut buf).map_err(|e| RecordsError::io("read", path, e))?;
    let mut at = 0;
    let mut out = Vec::new();
    let mut bad = None;
    while at < buf.len() {
        match parse_entry(&buf[at..]) {
            Parsed::Entry(rec, used) => {
                out.push(*rec);
                at += used;
            }
            Parsed::Incomplete => break,
            Parsed::Bad(reason) => {
                bad = Some(reason);
                break;
            }
        }
    }
    Ok((out, start + at, bad))
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
    /// Opens (creating if needed) the log under `snapshot_dir`, cuts a torn last entry off, and
    /// returns the writer with the records of the newest segments (at least the last
    /// [`SEGMENT_RECORDS`] records when there are that many), oldest first.
    pub fn open(snapshot_dir: &Path) -> Result<(Self, Vec<LoggedRecord>), RecordsError> {
        let dir = snapshot_dir.join(RECORDS_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| RecordsError::io("create", &dir, e))?;
        let segments = list_segments(&dir)?;
        let mut recent = Vec::new();
        if segments.len() >= 2 {
            let (prev, _, _) = read_segment(&segments[segments.len() - 2].1, HEADER_LEN)?;
            recent = prev;
        }
        let Some((_, last)) = segments.last() else {
            let w = Self::create_segment(&dir, 0)?;
            return Ok((w, recent));
        };
        let (entries, end, bad) = read_segment(last, HEADER_LEN)?;
        if let Some(reason) = bad {
            log::warn!("record log {}: cutting off from offset {end}: {reason}", last.display());
        }
        let mut file = OpenOptions::new().read(true).write(true).open(last).map_err(|e| RecordsError::io("open", last, e))?;
        let len = file.metadata().map_err(|e| RecordsError::io("stat", last, e))?.len();
        if len < HEADER_LEN as u64 {
            file.set_len(0).map_err(|e| RecordsError::io("truncate", last, e))?;
            file.write_all(&header()).map_err(|e| RecordsError::io("write", last, e))?;
        } else if len != end as u64 {
            file.set_len(end as u64).map_err(|e| RecordsError::io("truncate", last, e))?;
        }
        file.sync_all().map_err(|e| RecordsError::io("fsync", last, e))?;
        file.seek(SeekFrom::End(0)).map_err(|e| RecordsError::io("seek", last, e))?;
        let entries_in_segment = entries.len();
        recent.extend(entries);
        Ok((Self { dir, file, path: last.clone(), entries_in_segment }, recent))
    }

    fn create_segment(dir: &Path, first_slot: u64) -> Result<Self, RecordsError> {
        let path = dir.join(segment_name(first_slot));
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| RecordsError::io("create", &path, e))?;
        file.write_all(&header()).map_err(|e| RecordsError::io("write", &path, e))?;
        file.sync_all().map_err(|e| RecordsError::io("fsync", &path, e))?;
        sync_dir(dir)?;
        Ok(Self { dir: dir.to_path_buf(), file, path, entries_in_segment: 0 })
    }

    /// Appends one record and syncs it; when this returns, readers can see it and a crash keeps
    /// it.
    pub fn append(&mut self, rec: &LoggedRecord) -> Result<(), RecordsError> {
        if self.entries_in_segment >= SEGMENT_RECORDS {
            *self = Self::create_segment(&self.dir, rec.record.slot)?;
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

fn header() -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(MAGIC);
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h
}

/// Follows a record log written by another process, holding every record in memory by slot.
#[derive(Debug, Default)]
pub struct RecordLogReader {
    dir: PathBuf,
    /// Read position per segment, by first slot.
    offsets: BTreeMap<u64, usize>,
    records: BTreeMap<u64, LoggedRecord>,
    bad_entries: u64,
    /// Segments whose rest was skipped after a damaged entry: never re-read, so the damage is
    /// counted once.
    skipped: std::collections::BTreeSet<u64>,
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
        let count = segments.len();
        for (i, (first, path)) in segments.iter().enumerate() {
            if self.skipped.contains(first) {
                continue;
            }
            let offset = self.offsets.get(first).copied().unwrap_or(HEADER_LEN);
            let (entries, end, bad) = match read_segment(path, offset) {
                Ok(r) => r,
                // Pruned between listing and opening.
                Err(RecordsError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(e),
            };
            if let Some(reason) = bad {
                // A bad entry at the end of the newest segment may be a write in progress; one
                // followed by a newer segment is damage, skipped so the feed goes on.
                if i + 1 < count {
                    self.bad_entries += 1;
                    self.skipped.insert(*first);
                    log::warn!("record log {}: skipping the rest of the segment: {reason}", path.display());
                }
            }
            self.offsets.insert(*first, end);
            for rec in entries {
                self.records.insert(rec.record.slot, rec.clone());
                fresh.push(rec);
            }
        }
        self.offsets.retain(|first, _| segments.iter().any(|(f, _)| f == first));
        self.skipped.retain(|first| segments.iter().any(|(f, _)| f == first));
        Ok(fresh)
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

    /// Damaged entries skipped so far.
    pub fn bad_entries(&self) -> u64 {
        self.bad_entries
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
        assert_eq!(recent.iter().map(|r| r.record.slot).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);
        w.append(&rec(6)).expect("append");
        let fresh = reader.refresh().expect("refresh");
        assert_eq!(fresh, vec![rec(6)]);
        assert_eq!(reader.range(2, 4).count(), 3);
        assert_eq!(reader.latest(), Some(&rec(6)));
    }

    #[test]
    fn a_flipped_byte_is_never_served() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (mut w, _) = RecordLogWriter::open(dir.path()).expect("open");
        for s in 1..=3 {
            w.append(&rec(s)).expect("append");
        }
        let seg = list_segments(&dir.path().join(RECORDS_DIR)).expect("list")[0].1.clone();
        let clean = std::fs::read(&seg).expect("read");
        for at in HEADER_LEN..clean.len() {
            let mut bytes = clean.clone();
            bytes[at] ^= 0x10;
            std::fs::write(&seg, &bytes).expect("write");
            let mut reader = RecordLogReader::new(dir.path());
            let got = reader.refresh().expect("refresh");
            for r in &got {
                assert_eq!(r, &rec(r.record.slot), "byte {at}: a damaged record was served");
            }
        }
    }

    #[test]
    fn damage_before_a_newer_segment_is_skipped_and_counted_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rdir = dir.path().join(RECORDS_DIR);
        std::fs::create_dir_all(&rdir).expect("mkdir");
        let mut old = RecordLogWriter::create_segment(&rdir, 1).expect("segment");
        for s in 1..=3 {
            old.append(&rec(s)).expect("append");
        }
        let mut new = RecordLogWriter::create_segment(&rdir, 4).expect("segment");
        new.append(&rec(4)).expect("append");
        // Damage the second entry of the older segment.
        let entry_len = encode_entry(&rec(1)).len();
        let mut bytes = std::fs::read(&old.path).expect("read");
        bytes[HEADER_LEN + entry_len + 10] ^= 1;
        std::fs::write(&old.path, &bytes).expect("write");
        let mut reader = RecordLogReader::new(dir.path());
        let got: Vec<u64> = reader.refresh().expect("refresh").iter().map(|r| r.record.slot).collect();
        assert_eq!(got, vec![1, 4]);
        new.append(&rec(5)).expect("append");
        assert_eq!(reader.refresh().expect("refresh"), vec![rec(5)]);
        assert_eq!(reader.bad_entries(), 1);
    }

    #[test]
    fn pruning_deletes_only_whole_segments_older_than_the_cutoff() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rdir = dir.path().join(RECORDS_DIR);
        std::fs::create_dir_all(&rdir).expect("mkdir");
        for first in [1u64, 10, 20] {
            let mut w = RecordLogWriter::create_segment(&rdir, first).expect("segment");
            for s in first..first + 3 {
                w.append(&rec(s)).expect("append");
            }
        }
        let (mut w, recent) = RecordLogWriter::open(dir.path()).expect("open");
        assert_eq!(recent.first().map(|r| r.record.slot), Some(10), "the two newest segments are loaded");
        // Slot 15 is inside the second segment: only the first (slots 1..=3) may go.
        assert_eq!(w.prune_before(15).expect("prune"), 1);
        assert_eq!(w.prune_before(15).expect("prune"), 0);
        // The segment being written is never deleted, whatever the cutoff.
        assert_eq!(w.prune_before(1000).expect("prune"), 1);
        let mut reader = RecordLogReader::new(dir.path());
        let slots: Vec<u64> = reader.refresh().expect("refresh").iter().map(|r| r.record.slot).collect();
        assert_eq!(slots, vec![20, 21, 22]);
    }
}
