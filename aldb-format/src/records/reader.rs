//! The follower of a record log written by another process.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::xxh3_64;

use super::log::{Damage, HEADER_LEN, LoggedRecord, MAX_ENTRY, RECORDS_DIR, header_ok, list_segments, scan};
use crate::error::SnapshotError;

/// Damage reports a [`RecordLogReader`] holds until [`take_damage`](RecordLogReader::take_damage)
/// collects them; older ones are dropped (and still counted) when nobody does.
const MAX_PENDING_DAMAGE: usize = 4096;

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
fn pending_sum(file: &mut File, path: &Path, end: usize, len: usize) -> Result<u64, SnapshotError> {
    let want = len.saturating_sub(end).min(MAX_ENTRY);
    file.seek(SeekFrom::Start(end as u64)).map_err(|e| SnapshotError::io("seek", path, e))?;
    let mut buf = Vec::with_capacity(want);
    Read::by_ref(file).take(want as u64).read_to_end(&mut buf).map_err(|e| SnapshotError::io("read", path, e))?;
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
    pub fn refresh(&mut self) -> Result<Vec<LoggedRecord>, SnapshotError> {
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

    /// Forgets what was read of the segment starting at `first_slot`: the next
    /// [`refresh`](Self::refresh) reads it again from its start and returns its records again, as
    /// new. For a segment whose file was replaced by other bytes (a replica's copy of a damaged
    /// object, replaced by an intact one): a follower reads only what is appended.
    pub fn reread(&mut self, first_slot: u64) {
        self.positions.remove(&first_slot);
    }

    /// Reads what `path` holds past `pos`; `prev_slot` is the last record of older segments.
    fn follow(
        &mut self,
        path: &Path,
        pos: &mut Position,
        newest: bool,
        prev_slot: Option<u64>,
        fresh: &mut Vec<LoggedRecord>,
    ) -> Result<(), SnapshotError> {
        let mut file = match File::open(path) {
            Ok(f) => f,
            // Pruned between listing and opening.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(SnapshotError::io("open", path, e)),
        };
        let len = file.metadata().map_err(|e| SnapshotError::io("stat", path, e))?.len();
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
                Err(e) => return Err(SnapshotError::io("read", path, e)),
            }
            if !header_ok(&head) {
                log::warn!(
                    "record log {}: bytes 0..{HEADER_LEN}: not a version-1 segment header; reading its entries",
                    path.display()
                );
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
        file.seek(SeekFrom::Start(pos.resume as u64)).map_err(|e| SnapshotError::io("seek", path, e))?;
        let mut buf = Vec::new();
        file.read_to_end(&mut buf).map_err(|e| SnapshotError::io("read", path, e))?;
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
