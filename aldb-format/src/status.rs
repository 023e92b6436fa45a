//! The slot-status journal (`docs/FORMAT.md`, "Slot-status journal"): which slots have a
//! published bank file, and which of those consensus later confirmed, finalized or abandoned.
//!
//! With forks, a published file is not yet a fact about the chain: its bank may be abandoned, and
//! a reader must not prove against a root the chain dropped. The snapshot writer therefore
//! appends one fixed-size, checksummed entry per event to `slot-status.log` in the snapshot
//! directory, in the order it learns them, and `fdatasync`s before it goes on. It appends a
//! slot's `Processed` entry only after the slot's file is published, so the journal never names a
//! file a reader cannot open yet.
//!
//! This module is the one owner of the journal's bytes: [`StatusJournal`] writes it,
//! [`StatusJournal::read`] reads it whole, and [`StatusFollower`] follows it as it grows (Hyades
//! polls it). Entries are fixed-size, so damage costs only the entries it touches: a reader skips
//! an entry whose checksum fails, and bytes after the last valid entry are an append in progress
//! or a torn one, which a follower waits for and the writer cuts when it reopens the journal.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::xxh3_64;

/// The journal's file name in the snapshot directory (never a snapshot file name).
pub const STATUS_FILE: &str = "slot-status.log";
/// First bytes of the journal.
pub const STATUS_MAGIC: &[u8; 8] = b"aldbsst1";
/// The journal format version in its header.
pub const STATUS_VERSION: u32 = 1;
/// Length of the header: magic, version, four zero bytes.
pub const STATUS_HEADER_LEN: usize = 16;
/// Length of one entry.
pub const STATUS_ENTRY_LEN: usize = 32;
/// Suffix under which a writer sets aside a journal whose header it cannot read.
const SET_ASIDE_SUFFIX: &str = ".damaged";

/// What is known of a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SlotStatusKind {
    /// A bank file of the slot was published (its root is the `processed` root).
    Processed,
    /// The cluster confirmed the slot.
    Confirmed,
    /// The slot is rooted: final.
    Finalized,
    /// The slot's bank was dropped (dead, or on a fork that lost): never prove against it.
    Abandoned,
}

impl SlotStatusKind {
    /// The code stored in an entry.
    pub fn code(self) -> u8 {
        match self {
            Self::Processed => 1,
            Self::Confirmed => 2,
            Self::Finalized => 3,
            Self::Abandoned => 4,
        }
    }

    /// The kind of a stored code; `None` for codes this version does not know.
    pub fn from_code(code: u8) -> Option<Self> {
        match code {
            1 => Some(Self::Processed),
            2 => Some(Self::Confirmed),
            3 => Some(Self::Finalized),
            4 => Some(Self::Abandoned),
            _ => None,
        }
    }

    /// The name used in logs and by services (`processed`, `confirmed`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Processed => "processed",
            Self::Confirmed => "confirmed",
            Self::Finalized => "finalized",
            Self::Abandoned => "abandoned",
        }
    }
}

/// One journal entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatusEntry {
    /// The slot.
    pub slot: u64,
    /// What happened to it.
    pub kind: SlotStatusKind,
    /// Its parent slot, where known (always for `Processed`).
    pub parent: Option<u64>,
    /// For `Processed`: the sequence number of the published file.
    pub seq: Option<u32>,
}

impl StatusEntry {
    /// The entry's bytes: slot, parent (`u64::MAX` if unknown), status code, three zero bytes,
    /// file sequence number (0 if none), XXH3-64 of the first 24 bytes; all little-endian.
    pub fn encode(&self) -> [u8; STATUS_ENTRY_LEN] {
        let mut b = [0u8; STATUS_ENTRY_LEN];
        b[0..8].copy_from_slice(&self.slot.to_le_bytes());
        b[8..16].copy_from_slice(&self.parent.unwrap_or(u64::MAX).to_le_bytes());
        b[16] = self.kind.code();
        b[20..24].copy_from_slice(&self.seq.unwrap_or(0).to_le_bytes());
        let sum = xxh3_64(&b[..24]);
        b[24..32].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes one entry; `Err(())` when its checksum or reserved bytes are wrong, `Ok(None)` for
    /// an intact entry of a kind this version does not know (skipped, not damage).
    fn decode(b: &[u8]) -> Result<Option<Self>, ()> {
        let word = |r: std::ops::Range<usize>| b.get(r).and_then(|s| s.try_into().ok()).map(u64::from_le_bytes);
        let (Some(slot), Some(parent), Some(sum)) = (word(0..8), word(8..16), word(24..32)) else { return Err(()) };
        if b.len() != STATUS_ENTRY_LEN || xxh3_64(&b[..24]) != sum || b[17..20] != [0, 0, 0] {
            return Err(());
        }
        let seq = u32::from_le_bytes([b[20], b[21], b[22], b[23]]);
        Ok(SlotStatusKind::from_code(b[16]).map(|kind| Self {
            slot,
            kind,
            parent: (parent != u64::MAX).then_some(parent),
            seq: (seq != 0).then_some(seq),
        }))
    }
}

/// Errors of the journal.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StatusError {
    /// An I/O operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The file's header is not a journal of this version.
    #[error("{path} is not a slot-status journal of version {STATUS_VERSION}: {reason}")]
    Header {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> StatusError + 'a {
    move |source| StatusError::Io { op, path: path.to_path_buf(), source }
}

/// The status of one slot, after every entry read so far.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotStatus {
    /// The newest status (a `Confirmed` never takes back a `Finalized`).
    pub kind: SlotStatusKind,
    /// The slot's parent, from its `Processed` entry or a mark that named it.
    pub parent: Option<u64>,
    /// The sequence number of the slot's newest published file, from its `Processed` entry.
    pub seq: Option<u32>,
}

/// The statuses of the slots a journal names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotStatuses {
    slots: BTreeMap<u64, SlotStatus>,
    damaged: u64,
}

impl SlotStatuses {
    /// The status of `slot`, `None` if the journal never named it (or compaction dropped it).
    pub fn status(&self, slot: u64) -> Option<SlotStatusKind> {
        self.slots.get(&slot).map(|s| s.kind)
    }

    /// Everything known of `slot`.
    pub fn get(&self, slot: u64) -> Option<&SlotStatus> {
        self.slots.get(&slot)
    }

    /// Every slot named, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &SlotStatus)> + '_ {
        self.slots.iter().map(|(s, st)| (*s, st))
    }

    /// Slots named.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether no slot is named.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The newest finalized slot.
    pub fn newest_finalized(&self) -> Option<u64> {
        self.slots.iter().rev().find(|(_, s)| s.kind == SlotStatusKind::Finalized).map(|(slot, _)| *slot)
    }

    /// Damaged entries skipped (each lost one event of one slot).
    pub fn damaged_entries(&self) -> u64 {
        self.damaged
    }

    /// Applies one entry, as readers do in journal order. A slot processed again (its bank
    /// replaced after being dropped) starts over as `Processed`; a `Confirmed` after the slot
    /// was finalized changes nothing (geyser may report the two in either order).
    pub fn apply(&mut self, e: &StatusEntry) {
        let s = self.slots.entry(e.slot).or_insert(SlotStatus { kind: e.kind, parent: None, seq: None });
        if !(e.kind == SlotStatusKind::Confirmed && s.kind == SlotStatusKind::Finalized) {
            s.kind = e.kind;
        }
        if e.parent.is_some() {
            s.parent = e.parent;
        }
        if e.kind == SlotStatusKind::Processed {
            s.seq = e.seq;
        }
    }
}

/// What [`parse`] found in the bytes after the header.
struct Parsed {
    entries: Vec<StatusEntry>,
    /// Bytes up to the end of the last valid entry: what follows is not written yet, or torn.
    valid_len: usize,
    /// Damaged entries with a valid one after them.
    damaged: u64,
}

/// Parses entries from `bytes` (which start at an entry boundary).
fn parse(bytes: &[u8]) -> Parsed {
    let mut entries = Vec::new();
    let (mut valid_len, mut damaged, mut pending_bad) = (0, 0, 0);
    for (i, chunk) in bytes.chunks_exact(STATUS_ENTRY_LEN).enumerate() {
        match StatusEntry::decode(chunk) {
            Ok(e) => {
                // Bad entries followed by a good one are damage, not a torn tail.
                damaged += pending_bad;
                pending_bad = 0;
                entries.extend(e);
                valid_len = (i + 1) * STATUS_ENTRY_LEN;
            }
            Err(()) => pending_bad += 1,
        }
    }
    Parsed { entries, valid_len, damaged }
}

fn check_header(path: &Path, h: &[u8]) -> Result<(), StatusError> {
    let bad = |reason: &str| Err(StatusError::Header { path: path.to_path_buf(), reason: reason.into() });
    if h.len() < STATUS_HEADER_LEN {
        return bad("shorter than its header");
    }
    if &h[..8] != STATUS_MAGIC {
        return bad("wrong magic");
    }
    if h[8..12] != STATUS_VERSION.to_le_bytes() || h[12..16] != [0; 4] {
        return bad("unknown version");
    }
    Ok(())
}

fn header() -> [u8; STATUS_HEADER_LEN] {
    let mut h = [0u8; STATUS_HEADER_LEN];
    h[..8].copy_from_slice(STATUS_MAGIC);
    h[8..12].copy_from_slice(&STATUS_VERSION.to_le_bytes());
    h
}

fn sync_dir(dir: &Path) -> Result<(), StatusError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(io("sync", dir))
}

/// The journal's writer: the snapshot writer's thread owns one.
#[derive(Debug)]
pub struct StatusJournal {
    dir: PathBuf,
    path: PathBuf,
    file: File,
    /// Entries in the file (damaged ones included).
    entries: u64,
}

impl StatusJournal {
    /// Opens the journal in `dir`, creating it if missing. Bytes after the last valid entry (a
    /// torn append) are cut; a file whose header is not a journal of this version is set aside
    /// as `slot-status.log.damaged` and a new journal is started.
    pub fn open(dir: &Path) -> Result<Self, StatusError> {
        let path = dir.join(STATUS_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(b) => Some(b),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(io("read", &path)(e)),
        };
        let bytes = match bytes {
            Some(b) if check_header(&path, &b).is_ok() => b,
            Some(b) => {
                let aside = dir.join(format!("{STATUS_FILE}{SET_ASIDE_SUFFIX}"));
                log::warn!(
                    "{}: not a slot-status journal ({} bytes); set aside as {}",
                    path.display(),
                    b.len(),
                    aside.display()
                );
                std::fs::rename(&path, &aside).map_err(io("set aside", &path))?;
                Self::create(dir, &path, &[])?;
                header().to_vec()
            }
            None => {
                Self::create(dir, &path, &[])?;
                header().to_vec()
            }
        };
        let parsed = parse(&bytes[STATUS_HEADER_LEN..]);
        let end = (STATUS_HEADER_LEN + parsed.valid_len) as u64;
        if parsed.damaged > 0 {
            log::warn!("{}: {} damaged entries skipped", path.display(), parsed.damaged);
        }
        let file = OpenOptions::new().read(true).write(true).open(&path).map_err(io("open", &path))?;
        if (bytes.len() as u64) > end {
            log::warn!("{}: cutting {} bytes after the last valid entry", path.display(), bytes.len() as u64 - end);
            file.set_len(end).map_err(io("truncate", &path))?;
            file.sync_data().map_err(io("sync", &path))?;
        }
        let mut j =
            Self { dir: dir.to_path_buf(), path, file, entries: parsed.valid_len as u64 / STATUS_ENTRY_LEN as u64 };
        j.file.seek(SeekFrom::Start(end)).map_err(io("seek", &j.path))?;
        Ok(j)
    }

    /// Writes a journal holding `entries` under a temporary name and renames it into place.
    fn create(dir: &Path, path: &Path, entries: &[StatusEntry]) -> Result<(), StatusError> {
        let tmp = dir.join(format!(".{STATUS_FILE}.tmp"));
        let mut buf = Vec::with_capacity(STATUS_HEADER_LEN + entries.len() * STATUS_ENTRY_LEN);
        buf.extend_from_slice(&header());
        for e in entries {
            buf.extend_from_slice(&e.encode());
        }
        let mut f = File::create(&tmp).map_err(io("create", &tmp))?;
        f.write_all(&buf).map_err(io("write", &tmp))?;
        f.sync_all().map_err(io("sync", &tmp))?;
        std::fs::rename(&tmp, path).map_err(io("rename", &tmp))?;
        sync_dir(dir)
    }

    /// Appends entries in order and makes them durable (one `fdatasync`) before returning.
    pub fn append(&mut self, entries: &[StatusEntry]) -> Result<(), StatusError> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(entries.len() * STATUS_ENTRY_LEN);
        for e in entries {
            buf.extend_from_slice(&e.encode());
        }
        self.file.write_all(&buf).map_err(io("append", &self.path))?;
        self.file.sync_data().map_err(io("sync", &self.path))?;
        self.entries += entries.len() as u64;
        Ok(())
    }

    /// Entries in the file.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Rewrites the journal without the entries of slots below `keep_from`, replacing the file by
    /// an atomic rename (a follower notices the new file and reads it from its start). Returns
    /// how many entries were dropped.
    pub fn compact(&mut self, keep_from: u64) -> Result<u64, StatusError> {
        let mut bytes = Vec::new();
        self.file.seek(SeekFrom::Start(0)).map_err(io("seek", &self.path))?;
        self.file.read_to_end(&mut bytes).map_err(io("read", &self.path))?;
        check_header(&self.path, &bytes)?;
        let parsed = parse(&bytes[STATUS_HEADER_LEN..]);
        let kept: Vec<StatusEntry> = parsed.entries.iter().filter(|e| e.slot >= keep_from).copied().collect();
        let dropped = self.entries - kept.len() as u64;
        Self::create(&self.dir, &self.path, &kept)?;
        self.file = OpenOptions::new().read(true).write(true).open(&self.path).map_err(io("open", &self.path))?;
        self.file.seek(SeekFrom::End(0)).map_err(io("seek", &self.path))?;
        self.entries = kept.len() as u64;
        Ok(dropped)
    }

    /// Reads the journal in `dir` whole. A missing journal reads as no statuses; damaged entries
    /// are skipped and counted, a torn tail is ignored.
    pub fn read(dir: &Path) -> Result<SlotStatuses, StatusError> {
        let mut f = StatusFollower::new(dir);
        f.poll()?;
        Ok(f.statuses)
    }
}

/// What one [`StatusFollower::poll`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatusPoll {
    /// The entries appended since the previous poll, in order.
    pub entries: Vec<StatusEntry>,
    /// The journal was replaced (compacted, or set aside and started anew): the follower's
    /// statuses were rebuilt from the new file and `entries` are all of its entries.
    pub restarted: bool,
    /// Damaged entries skipped in this poll.
    pub damaged: u64,
}

/// Follows the journal as the writer appends to it, reading only what was appended since the
/// last poll, and keeps the resulting [`SlotStatuses`].
#[derive(Debug)]
pub struct StatusFollower {
    path: PathBuf,
    /// Byte offset of the next entry to read.
    offset: u64,
    /// `(device, inode)` of the file read so far.
    identity: Option<(u64, u64)>,
    statuses: SlotStatuses,
}

impl StatusFollower {
    /// A follower of the journal in `dir`; nothing is read until [`StatusFollower::poll`].
    pub fn new(dir: &Path) -> Self {
        Self { path: dir.join(STATUS_FILE), offset: 0, identity: None, statuses: SlotStatuses::default() }
    }

    /// The statuses after every entry read so far.
    pub fn statuses(&self) -> &SlotStatuses {
        &self.statuses
    }

    /// Reads what was appended since the last poll. A missing journal yields nothing (the writer
    /// creates it with its first entry); an entry not completely written yet is left for the
    /// next poll.
    pub fn poll(&mut self) -> Result<StatusPoll, StatusError> {
        use std::os::unix::fs::MetadataExt;
        let mut f = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(StatusPoll::default()),
            Err(e) => return Err(io("open", &self.path)(e)),
        };
        let meta = f.metadata().map_err(io("stat", &self.path))?;
        let identity = (meta.dev(), meta.ino());
        let mut out = StatusPoll::default();
        if self.identity != Some(identity) || meta.len() < self.offset {
            out.restarted = self.identity.is_some();
            self.identity = Some(identity);
            self.offset = 0;
            self.statuses = SlotStatuses::default();
        }
        if self.offset == 0 {
            let mut h = [0u8; STATUS_HEADER_LEN];
            if meta.len() < STATUS_HEADER_LEN as u64 {
                // Created under another name and renamed into place, so this is not a journal.
                return Err(StatusError::Header { path: self.path.clone(), reason: "shorter than its header".into() });
            }
            f.read_exact(&mut h).map_err(io("read", &self.path))?;
            check_header(&self.path, &h)?;
            self.offset = STATUS_HEADER_LEN as u64;
        }
        let mut bytes = Vec::new();
        f.seek(SeekFrom::Start(self.offset)).map_err(io("seek", &self.path))?;
        f.read_to_end(&mut bytes).map_err(io("read", &self.path))?;
        let parsed = parse(&bytes);
        self.offset += parsed.valid_len as u64;
        self.statuses.damaged += parsed.damaged;
        for e in &parsed.entries {
            self.statuses.apply(e);
        }
        out.entries = parsed.entries;
        out.damaged = parsed.damaged;
        Ok(out)
    }
}
