//! The record log's writer: appends entries to the newest segment, starts new segments and
//! prunes old ones. The format and its parser are `aldb_format::records`.

use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use aldb_format::records::{
    HEADER_LEN, LoggedRecord, RECORDS_DIR, SEGMENT_RECORDS, encode_entry, list_segments, parse_segment, segment_header,
    segment_name,
};

use super::RecordsError;

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
                log::warn!(
                    "record log {}: bytes 0..{HEADER_LEN}: not a version-1 segment header; reading its entries",
                    path.display()
                );
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

        let mut file =
            OpenOptions::new().read(true).write(true).open(last).map_err(|e| RecordsError::io("open", last, e))?;
        let len = file.metadata().map_err(|e| RecordsError::io("stat", last, e))?.len();
        if len < HEADER_LEN as u64 {
            // Created but its header not fully written: it holds nothing.
            file.set_len(0).map_err(|e| RecordsError::io("truncate", last, e))?;
            file.write_all(&segment_header()).map_err(|e| RecordsError::io("write", last, e))?;
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
        file.write_all(&segment_header()).map_err(|e| RecordsError::io("write", &path, e))?;
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
                    log::warn!(
                        "record log: {} exists; appending to {}",
                        segment_name(rec.record.slot),
                        self.path.display()
                    );
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
    ///
    /// A segment's name gives its first record's slot, not its newest: with two commitment levels
    /// interleaved, a finalized record for an older slot follows the confirmed records of newer
    /// ones, so a segment can hold records above its successor's first slot. Each candidate is
    /// therefore read and deleted only if its newest intact record lies below `slot`.
    pub fn prune_before(&mut self, slot: u64) -> Result<usize, RecordsError> {
        self.prune_below(slot, u64::MAX)
    }

    /// [`prune_before`](Self::prune_before) for a log shipped to an archive: it also keeps every
    /// segment named at or above the archive's record hold (`shipped-records.slot` in the snapshot
    /// directory, [`aldb_format::shipped::read_records_shipped`]), and every segment while that
    /// file does not exist or cannot be read (a warning says why), so a shipper that falls behind
    /// finds every segment it has not archived yet.
    pub fn prune_before_held(&mut self, slot: u64) -> Result<usize, RecordsError> {
        let snapshot_dir = self.dir.parent().unwrap_or(&self.dir);
        let hold = match aldb_format::shipped::read_records_shipped(snapshot_dir) {
            Ok(hold) => hold.unwrap_or(0),
            Err(e) => {
                log::warn!("root-record retention held for the shipper: {e}");
                0
            }
        };
        self.prune_below(slot, hold)
    }

    /// Deletes every segment but the one being written whose records are all below `slot` and
    /// whose name (first slot) is below `hold`.
    fn prune_below(&mut self, slot: u64, hold: u64) -> Result<usize, RecordsError> {
        let segments = list_segments(&self.dir)?;
        let mut removed = 0;
        for (first, path) in &segments {
            if *first >= slot || *first >= hold || *path == self.path {
                continue;
            }
            let bytes = std::fs::read(path).map_err(|e| RecordsError::io("read", path, e))?;
            let newest = parse_segment(&bytes).entries.iter().map(|(_, r)| r.record.slot).max();
            if newest.is_some_and(|n| n >= slot) {
                continue;
            }
            std::fs::remove_file(path).map_err(|e| RecordsError::io("remove", path, e))?;
            removed += 1;
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

#[cfg(test)]
mod tests {
    use super::*;
    use aldb_format::records::{RecordLogReader, segment_first_slot};
    use aldb_verify::record::{Attestation, Commitment, ParentLink, RootRecord};

    fn rec(slot: u64) -> LoggedRecord {
        let record = RootRecord {
            genesis_hash: [1; 32],
            slot,
            parent: slot.checked_sub(1).map(|p| ParentLink { slot: p, record_hash: None, bank_hash: None }),
            commitment: Commitment::Confirmed,
            state_root: [slot as u8; 32],
            block: None,
            bank_hash: None,
        };
        LoggedRecord {
            record_hash: record.hash(),
            record,
            attestations: vec![Attestation { identity: [2; 32], signature: [3; 64] }],
        }
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
        assert_eq!(
            spans,
            vec![(l + e..l + 2 * e, Some(1), Some(3)), (l + 3 * e..bytes.len() as u64, Some(3), Some(5))]
        );
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
        // Both older segments hold only records below 15 (their newest are 3 and 12).
        assert_eq!(w.prune_before(15).expect("prune"), 2);
        assert_eq!(w.prune_before(15).expect("prune"), 0);
        // The segment being written is never deleted, whatever the cutoff.
        assert_eq!(w.prune_before(1000).expect("prune"), 0);
        let mut reader = RecordLogReader::new(dir.path());
        assert_eq!(slots(&reader.refresh().expect("refresh")), vec![20, 21, 22]);
    }

    /// With two levels interleaved a segment holds records newer than its successor's first
    /// slot (confirmed records logged before the finalized record that starts the next one):
    /// such a segment is kept until its newest record falls below the cutoff.
    #[test]
    fn pruning_keeps_a_segment_whose_newest_record_is_above_the_cutoff() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut w = segment(dir.path(), 10);
        for s in [10u64, 11, 40, 41] {
            w.append(&rec(s)).expect("append");
        }
        let mut w = segment(dir.path(), 12);
        for s in [12u64, 42] {
            w.append(&rec(s)).expect("append");
        }
        let mut w = segment(dir.path(), 13);
        w.append(&rec(43)).expect("append");
        let (mut w, _) = RecordLogWriter::open(dir.path()).expect("open");
        assert_eq!(w.prune_before(30).expect("prune"), 0, "records 40 and 41 are kept");
        assert_eq!(w.prune_before(42).expect("prune"), 1, "now the first segment holds only older records");
        assert_eq!(w.prune_before(43).expect("prune"), 1);
        let mut reader = RecordLogReader::new(dir.path());
        assert_eq!(slots(&reader.refresh().expect("refresh")), vec![43]);
    }

    #[test]
    fn pruning_held_for_the_shipper_keeps_what_the_archive_may_lack() {
        let dir = tempfile::tempdir().expect("tempdir");
        for first in [1u64, 10, 20, 30] {
            let mut w = segment(dir.path(), first);
            for s in first..first + 3 {
                w.append(&rec(s)).expect("append");
            }
        }
        let (mut w, _) = RecordLogWriter::open(dir.path()).expect("open");
        let names =
            || list_segments(&dir.path().join(RECORDS_DIR)).expect("list").iter().map(|(f, _)| *f).collect::<Vec<_>>();
        assert_eq!(names(), [1, 10, 20, 30]);
        // No hold file: nothing is deleted, however old.
        assert_eq!(w.prune_before_held(1000).expect("prune"), 0);
        assert_eq!(names(), [1, 10, 20, 30]);
        // A hold that cannot be read holds everything too.
        let hold_file = dir.path().join(aldb_format::shipped::RECORDS_SHIPPED_FILE);
        std::fs::write(&hold_file, "aldb-shipped-records 9 30\n").expect("write");
        assert_eq!(w.prune_before_held(1000).expect("prune"), 0);
        // The shipper lacks segment 10 and later: only 1 goes, though the cutoff allows more.
        aldb_format::shipped::write_records_shipped(dir.path(), 10).expect("hold");
        assert_eq!(w.prune_before_held(1000).expect("prune"), 1);
        assert_eq!(names(), [10, 20, 30]);
        // The cutoff still rules: 10 holds slot 12.
        aldb_format::shipped::write_records_shipped(dir.path(), 30).expect("hold");
        assert_eq!(w.prune_before_held(12).expect("prune"), 0);
        assert_eq!(w.prune_before_held(1000).expect("prune"), 2);
        assert_eq!(names(), [30]);
        // A hold past everything still never deletes the segment being written.
        aldb_format::shipped::write_records_shipped(dir.path(), u64::MAX).expect("hold");
        assert_eq!(w.prune_before_held(u64::MAX).expect("prune"), 0);
        // The hold file lies beside the log, not in it: the log reopens and reads as before.
        drop(w);
        let (_, recent) = RecordLogWriter::open(dir.path()).expect("reopen");
        assert_eq!(slots(&recent), vec![30, 31, 32]);
    }
}
