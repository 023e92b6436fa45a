//! What the shipper reads from a snapshot directory: published snapshot files, slot files and
//! part files alike (never a `.tmp`, never a `*.damaged`), each verified as a reader would before
//! it is shipped, and the record-log and vote-evidence segments up to the end of their last
//! complete entry.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use aldb_format::SnapshotError;
use aldb_format::format::{FOOTER_LEN, FileKind, Header, parse_published_name};
use aldb_format::records::{RECORDS_DIR, list_segments, parse_segment};
use aldb_format::store::MappedFile;

use crate::error::ShipError;

/// A published snapshot file found in the directory.
#[derive(Clone, Debug)]
pub(crate) struct LocalSnapshot {
    pub(crate) name: String,
    pub(crate) seq: u64,
    pub(crate) slot: u64,
    /// A slot file or a part of one: its header must say the same.
    pub(crate) kind: FileKind,
    pub(crate) path: PathBuf,
}

/// The published snapshot files of `dir`, parts among them, by ascending sequence number: a
/// slot needs every file from its `oldest_seq` to its own, so parts ship in the same sequence.
pub(crate) fn list_snapshots(dir: &Path) -> Result<Vec<LocalSnapshot>, ShipError> {
    let io = |e| ShipError::Io { op: "list", path: dir.to_path_buf(), source: e };
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        // Only the writer's exact names: `.tmp` files and set-aside `.damaged` ones never parse.
        let Some((seq, slot, kind)) = parse_published_name(name) else { continue };
        out.push(LocalSnapshot { name: name.to_string(), seq: u64::from(seq), slot, kind, path: entry.path() });
    }
    out.sort_by_key(|s| s.seq);
    Ok(out)
}

/// A snapshot file that passed every check a reader makes of a file on its own.
#[derive(Clone, Copy, Debug)]
pub(crate) struct VerifiedSnapshot {
    pub(crate) oldest_seq: u64,
    pub(crate) size: u64,
    /// The footer's checksum.
    pub(crate) checksum: u128,
    /// The whole footer, to compare with an object's last bytes.
    pub(crate) footer: [u8; FOOTER_LEN],
    /// The file's header (root, parent, writer gap go into the manifest).
    pub(crate) header: Header,
}

/// Checks `s` as `SnapshotReader` checks a file it indexes (size, magics, version, reserved
/// bytes, checksum, and a header naming the file's own sequence number, slot and kind), so the
/// shipper never archives a file no reader would serve.
pub(crate) fn verify_snapshot(s: &LocalSnapshot) -> Result<VerifiedSnapshot, SnapshotError> {
    let f = MappedFile::open(&s.path, true)?;
    let h = f.header;
    if u64::from(h.seq) != s.seq || h.slot != s.slot {
        return Err(SnapshotError::corrupt(
            &s.path,
            format!(
                "its header names sequence {} slot {}, its file name sequence {} slot {}",
                h.seq, h.slot, s.seq, s.slot
            ),
        ));
    }
    // A part published under a slot file's name would be served as a slot with a zero root.
    if FileKind::of(&h) != s.kind {
        return Err(SnapshotError::corrupt(
            &s.path,
            format!("its header is a {:?} file's, its name a {:?} file's", FileKind::of(&h), s.kind),
        ));
    }
    let size = std::fs::metadata(&s.path).map_err(|e| SnapshotError::io("stat", &s.path, e))?.len();
    let body_end = size.checked_sub(FOOTER_LEN as u64).ok_or_else(|| SnapshotError::corrupt(&s.path, "too short"))?;
    let footer = read_footer(&s.path, body_end)?;
    let mut sum = [0u8; 16];
    sum.copy_from_slice(&footer[..16]);
    Ok(VerifiedSnapshot {
        oldest_seq: u64::from(h.oldest_seq),
        size,
        checksum: u128::from_le_bytes(sum),
        footer,
        header: h,
    })
}

/// The `FOOTER_LEN` bytes of `path` at `at`.
fn read_footer(path: &Path, at: u64) -> Result<[u8; FOOTER_LEN], SnapshotError> {
    let mut file = File::open(path).map_err(|e| SnapshotError::io("open", path, e))?;
    let mut footer = [0u8; FOOTER_LEN];
    std::io::Seek::seek(&mut file, std::io::SeekFrom::Start(at)).map_err(|e| SnapshotError::io("seek", path, e))?;
    file.read_exact(&mut footer).map_err(|e| SnapshotError::io("read", path, e))?;
    Ok(footer)
}

/// A log segment's shippable bytes.
#[derive(Debug)]
pub(crate) struct LocalSegment {
    /// The file name (`records-<first slot>.log`, `votes-<first slot>.log`).
    pub(crate) file_name: String,
    pub(crate) first_slot: u64,
    /// The segment's bytes up to the end of its last complete entry: a torn or unfinished append
    /// after it is never shipped, so what is shipped is a prefix of every later state of the file.
    pub(crate) bytes: Vec<u8>,
    pub(crate) last_slot: Option<u64>,
    /// A newer segment exists: this one will not grow again.
    pub(crate) sealed: bool,
    /// Vote-evidence segments: the epochs whose whole transition the bytes hold.
    pub(crate) transitions: Vec<u64>,
}

/// The segments of `dir`'s vote-evidence log, oldest first.
pub(crate) fn list_vote_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, ShipError> {
    let votes = dir.join(aldb_format::votes::VOTES_DIR);
    aldb_format::votes::list_segments(&votes).map_err(|e| match e {
        aldb_format::votes::VoteLogError::Io { op, path, source } => ShipError::Io { op, path, source },
        other => ShipError::Io { op: "list", path: votes.clone(), source: std::io::Error::other(other.to_string()) },
    })
}

/// Reads a vote-evidence segment and cuts it after its last valid entry (the writer never cuts
/// before it). `None` when it vanished (pruned).
pub(crate) fn read_vote_segment(first_slot: u64, path: &Path, sealed: bool) -> Result<Option<LocalSegment>, ShipError> {
    let mut bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ShipError::Io { op: "read", path: path.to_path_buf(), source: e }),
    };
    let extent = aldb_format::votes::segment_extent(&bytes);
    bytes.truncate(extent.end);
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
    let (last_slot, transitions) = (extent.newest_slot, extent.transitions);
    Ok(Some(LocalSegment { file_name, first_slot, bytes, last_slot, sealed, transitions }))
}

/// The segments of `dir`'s record log, oldest first.
pub(crate) fn list_record_segments(dir: &Path) -> Result<Vec<(u64, PathBuf)>, ShipError> {
    let records = dir.join(RECORDS_DIR);
    list_segments(&records).map_err(|e| match e {
        SnapshotError::Io { op, path, source } => ShipError::Io { op, path, source },
        other => ShipError::Io { op: "list", path: records.clone(), source: std::io::Error::other(other.to_string()) },
    })
}

/// Reads a segment and cuts it after its last complete entry. `None` when it vanished (pruned).
pub(crate) fn read_segment(first_slot: u64, path: &Path, sealed: bool) -> Result<Option<LocalSegment>, ShipError> {
    let mut bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ShipError::Io { op: "read", path: path.to_path_buf(), source: e }),
    };
    let scan = parse_segment(&bytes);
    bytes.truncate(scan.end);
    let last_slot = scan.entries.iter().map(|(_, r)| r.record.slot).max();
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_string();
    Ok(Some(LocalSegment { file_name, first_slot, bytes, last_slot, sealed, transitions: Vec::new() }))
}

/// The slot-status journal's shippable bytes: its header and its entries up to the end of the
/// last intact one (an append in progress or torn after it is never shipped). `None` when the
/// directory has no journal, or one whose header is not a journal's (the writer sets such a file
/// aside and starts anew).
///
/// An entry is intact when its XXH3-64 and reserved bytes check, as `StatusFollower` reads it
/// (`docs/FORMAT.md`, "Slot-status journal").
pub(crate) fn read_journal(dir: &Path) -> Result<Option<Vec<u8>>, ShipError> {
    use aldb_format::status::{STATUS_ENTRY_LEN, STATUS_FILE, STATUS_HEADER_LEN, STATUS_MAGIC};
    let path = dir.join(STATUS_FILE);
    let mut bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ShipError::Io { op: "read", path, source: e }),
    };
    if bytes.len() < STATUS_HEADER_LEN || !bytes.starts_with(STATUS_MAGIC) {
        return Ok(None);
    }
    let mut end = STATUS_HEADER_LEN;
    for (i, e) in bytes[STATUS_HEADER_LEN..].chunks_exact(STATUS_ENTRY_LEN).enumerate() {
        let mut sum = [0u8; 8];
        sum.copy_from_slice(&e[24..32]);
        if xxhash_rust::xxh3::xxh3_64(&e[..24]) == u64::from_le_bytes(sum) && e[17..20] == [0, 0, 0] {
            end = STATUS_HEADER_LEN + (i + 1) * STATUS_ENTRY_LEN;
        }
    }
    bytes.truncate(end);
    Ok(Some(bytes))
}
