//! Snapshot files through the reader and record-log segments through the follower, with the
//! repairs that let mutated inputs past their checksums to the parsers behind them.
//!
//! `record_log` and `snapshot_file` are fuzz target bodies: they must not panic on any input.
//! The fuzz targets call them, and aldb-format's `fuzz_regressions` test replays the
//! checked-in inputs through them.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use aldb_format::SnapshotReader;
use aldb_format::format::{
    self, END_MAGIC, FOOTER_LEN, FileKind, HEADER_LEN, Header, MAGIC, file_name, published_name,
};
use aldb_format::records::{LoggedRecord, RECORDS_DIR, RecordLogReader, parse_segment};

/// A directory private to this process, removed at exit: on tmpfs when there is one, so the
/// targets that go through files do not wear the disk.
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        let builder = tempfile::Builder::new().prefix("aldb-fuzz-").tempdir_in(if shm.is_dir() {
            shm.to_path_buf()
        } else {
            std::env::temp_dir()
        });
        builder.expect("scratch directory")
    })
    .path()
}

/// A subdirectory of [`scratch_dir`], emptied.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = scratch_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch subdirectory");
    dir
}

/// Header length of a record-log segment (`docs/FORMAT.md`).
pub const LOG_HEADER_LEN: usize = 16;

/// Rewrites the checksum of every complete entry of a record-log segment (header included in
/// `seg`) so it matches the entry's payload; stops at the first entry that does not fit.
pub fn fix_log_checksums(seg: &mut [u8]) {
    let mut at = LOG_HEADER_LEN;
    while let Some(len_bytes) = seg.get(at..at + 4) {
        let len = u32::from_le_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
        let Some(end) = at.checked_add(4 + len + 8).filter(|&e| e <= seg.len()) else { return };
        let sum = xxhash_rust::xxh3::xxh3_64(&seg[at + 4..at + 4 + len]);
        seg[at + 4 + len..end].copy_from_slice(&sum.to_le_bytes());
        at = end;
    }
}

/// Splits fuzz input into snapshot files: each starts at an occurrence of the file magic (at
/// most `max` files; bytes before the first magic form a file of their own).
pub fn split_files(data: &[u8], max: usize) -> Vec<&[u8]> {
    let mut starts = vec![0];
    let mut i = 1;
    while starts.len() < max && i + MAGIC.len() <= data.len() {
        if data[i..i + MAGIC.len()] == MAGIC {
            starts.push(i);
            i += MAGIC.len();
        } else {
            i += 1;
        }
    }
    starts.push(data.len());
    starts.windows(2).map(|w| &data[w[0]..w[1]]).filter(|f| !f.is_empty()).collect()
}

/// Makes one snapshot file pass the reader's whole-file checks: the version, the body length,
/// the end magic and the footer checksum are set to what the rest of the bytes need, so only
/// the header fields and the records remain as the fuzzer left them. Returns the file's
/// published name (from its header: a `.part` name for a part, so the reader takes it as one)
/// and bytes, or `None` if it is shorter than a header.
pub fn repair_snapshot(file: &[u8]) -> Option<(String, Vec<u8>)> {
    if file.len() < HEADER_LEN {
        return None;
    }
    let mut b = file.to_vec();
    if b.len() < HEADER_LEN + FOOTER_LEN {
        b.resize(HEADER_LEN + FOOTER_LEN, 0);
    }
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&format::FORMAT_VERSION.to_le_bytes());
    let body_len = (b.len() - HEADER_LEN - FOOTER_LEN) as u64;
    b[88..96].copy_from_slice(&body_len.to_le_bytes());
    let end = b.len() - FOOTER_LEN;
    let sum = format::file_checksum(&b[..HEADER_LEN], &b[HEADER_LEN..end]);
    b[end..end + 16].copy_from_slice(&sum.to_le_bytes());
    b[end + 24..].copy_from_slice(&END_MAGIC);
    let header = Header::decode(&b).ok()?;
    Some((published_name(header.seq, header.slot, FileKind::of(&header)), b))
}

const FIRST: &str = "records-00000000000000000000.log";
const NEXT: &str = "records-18446744073709551615.log";

fn write_segment(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::write(dir.join(RECORDS_DIR).join(name), bytes).expect("write segment");
}

fn check_logged(records: &[LoggedRecord]) {
    for r in records {
        assert_eq!(r.record_hash, r.record.hash(), "a logged record's hash is recomputed from it");
        assert!(r.attestations.len() <= 255);
    }
}

/// A record-log segment through `parse_segment` and through `RecordLogReader` (the follower
/// Hyades runs). The input is tried as written and with every entry's checksum recomputed.
///
/// - `parse_segment`: entries and damaged spans lie in the bytes, in order, without overlap,
///   and each entry holds the exact encoding of its record;
/// - the reader: every record carries its own hash; damage is counted once (refreshing again
///   counts nothing new, and no more bytes are counted damaged than the segment has); reading
///   the segment while it grows (a prefix, then the rest) gives the same records as reading it
///   whole.
pub fn record_log(data: &[u8]) {
    let cut = data.last().map_or(0, |&b| data.len() * usize::from(b) / 255);
    read_segment(data, cut);
    let mut fixed = data.to_vec();
    fix_log_checksums(&mut fixed);
    if fixed != data {
        read_segment(&fixed, cut);
    }
}

fn read_segment(segment: &[u8], cut: usize) {
    let scan = parse_segment(segment);
    let mut at = LOG_HEADER_LEN;
    let mut spans = scan.damaged.iter().peekable();
    for (offset, rec) in &scan.entries {
        while let Some(span) = spans.next_if(|s| s.start < *offset) {
            assert!(
                at <= span.start && span.start < span.end && span.end <= *offset,
                "damaged span {span:?} misplaced"
            );
            at = span.end;
        }
        assert!(*offset >= at, "entry at {offset} overlaps what came before (up to {at})");
        // 187 bytes, or 219 with SLOT_BANK_HASH: the entry's length says which.
        let (record_at, record_len) = (offset + 4, rec.record.encoded_len());
        assert_eq!(segment.get(record_at..record_at + record_len), Some(&rec.record.encode()[..]));
        check_logged(std::slice::from_ref(rec));
        at = record_at + record_len + 1 + 96 * rec.attestations.len() + 8;
    }
    assert!(spans.next().is_none(), "a damaged span after the last entry");
    assert!(scan.end >= at && scan.end <= segment.len().max(LOG_HEADER_LEN));

    let dir = fresh_dir("whole");
    std::fs::create_dir_all(dir.join(RECORDS_DIR)).expect("records dir");
    write_segment(&dir, FIRST, segment);
    let mut reader = RecordLogReader::new(&dir);
    let whole = reader.refresh();
    if let Ok(records) = &whole {
        check_logged(records);
    }
    // A newer segment after it: whatever of the first is left unread is now damage.
    write_segment(&dir, NEXT, b"aldbrlg1\x01\0\0\0\0\0\0\0");
    if let Ok(more) = reader.refresh() {
        check_logged(&more);
    }
    let (bad, bytes) = (reader.bad_entries(), reader.damaged_bytes());
    let _ = reader.refresh();
    assert_eq!((reader.bad_entries(), reader.damaged_bytes()), (bad, bytes), "damage counted again");
    assert!(bytes <= segment.len() as u64, "{bytes} bytes counted damaged in a segment of {}", segment.len());
    assert!(reader.take_damage().len() as u64 <= bad);
    if let Some(latest) = reader.latest() {
        assert!(reader.get(latest.record.slot).is_some());
    }

    let dir = fresh_dir("growing");
    std::fs::create_dir_all(dir.join(RECORDS_DIR)).expect("records dir");
    write_segment(&dir, FIRST, &segment[..cut]);
    let mut reader = RecordLogReader::new(&dir);
    let first = reader.refresh();
    write_segment(&dir, FIRST, segment);
    let second = reader.refresh();
    if let (Ok(whole), Ok(mut first), Ok(second)) = (whole, first, second) {
        check_logged(&first);
        check_logged(&second);
        first.extend(second);
        assert_eq!(first, whole, "a segment read while growing gives other records than read whole");
    }
}

/// Files per `snapshot_file` input: enough for a full snapshot and deltas on it.
const MAX_FILES: usize = 4;
const PUBKEYS: [[u8; 32]; 4] = [[0; 32], [0xff; 32], [0x55; 32], [0xa3; 32]];

/// Snapshot files through `SnapshotReader::open` and `prove`. The input is one or more files, each
/// starting at the file magic; they are tried as written under fixed names, then repaired
/// ([`repair_snapshot`]) and named after their headers, so the header fields, the cross-file
/// references and the record walk are reached.
pub fn snapshot_file(data: &[u8]) {
    let files = split_files(data, MAX_FILES);
    let dir = fresh_dir("raw");
    for (i, f) in files.iter().enumerate() {
        let n = i as u32 + 1;
        std::fs::write(dir.join(file_name(n, u64::from(n))), f).expect("write snapshot file");
    }
    serve(&dir);
    let dir = fresh_dir("repaired");
    for f in &files {
        if let Some((name, bytes)) = repair_snapshot(f) {
            std::fs::write(dir.join(name), bytes).expect("write snapshot file");
        }
    }
    serve(&dir);
}

fn serve(dir: &Path) {
    let Ok(hyades) = SnapshotReader::open(dir) else { return };
    let _ = hyades.refresh();
    let slots = hyades.slots(0, u64::MAX);
    assert_eq!(slots.first().copied(), hyades.oldest());
    assert_eq!(slots.last().copied(), hyades.latest());
    for info in slots.iter().take(MAX_FILES) {
        assert_eq!(hyades.slot(Some(info.slot)).ok(), Some(*info));
        for pubkey in &PUBKEYS {
            if let Ok(p) = hyades.prove(pubkey, Some(info.slot)) {
                assert_eq!((p.slot, p.root), (info.slot, info.root));
                // What a damaged file gave may fail to verify, but must not panic the verifier.
                let _ = p.proof.verify(&p.root, pubkey);
            }
        }
    }
    let _ = hyades.prove(&PUBKEYS[0], None);
}
