//! The manifest: what says which objects of a bucket prefix readers may trust
//! (`docs/OBJECT-STORE.md`). It is a small head object, the only one rewritten, naming the recent
//! entries and the sealed segments: immutable objects holding the older entries, each named with
//! its size and checksum, so a write costs the head (and once in a while one new segment) and a
//! reader fetches each segment once, whatever the archive's length. The shipper writes the head
//! after every object it names has been uploaded completely (segments included), so an object a
//! reader finds through it is whole; an object it does not name (an upload in flight, or one a
//! crash left behind) is never read.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Arc;

use aldb_format::format::{FileKind, parse_published_name};
use aldb_format::records::segment_first_slot;
use serde::{Deserialize, Serialize};

use crate::error::ManifestError;

/// The manifest's object name under the bucket prefix. No snapshot directory holds a file of
/// this name, so the bucket can mirror the directory's layout beside it.
pub const MANIFEST_NAME: &str = "aldb-manifest.json";
/// The value of the manifest's `format` field.
pub const MANIFEST_FORMAT: &str = "aldb-objstore-manifest";
/// The value of a sealed segment's `format` field.
pub const SEGMENT_FORMAT: &str = "aldb-objstore-manifest-segment";
/// The manifest version this build writes and reads; a reader refuses any other. Version 2 added
/// each file's root, parent and writer gap and the slot-status journal; version 3 splits the
/// manifest into a small head and sealed, immutable segments of older entries.
pub const MANIFEST_VERSION: u32 = 3;
/// Where sealed manifest segments live under the prefix.
pub const SEGMENTS_PREFIX: &str = "manifest";
/// The most bytes a head may have: the shipper's bound with the default `seal_entries` and
/// `fold_segments` is about 1.4 MB, with `seal_entries` at its maximum ([`MAX_SEAL_ENTRIES`])
/// about 2.7 MB. A reader refuses a larger head before reading it whole.
pub const MAX_HEAD_BYTES: u64 = 4 << 20;
/// The most bytes a sealed segment may have (a segment of [`MAX_SEAL_ENTRIES`] entries is about
/// 2 MB): a head naming a larger one is refused.
pub const MAX_SEGMENT_BYTES: u64 = 8 << 20;
/// The most entries a shipper seals at once, so a head stays within [`MAX_HEAD_BYTES`].
pub const MAX_SEAL_ENTRIES: usize = 8192;
/// The most bytes of a record-log, vote-evidence or journal object a reader fetches (a writer's
/// vote segment is at most 64 MiB, a record segment about 20 MB): an entry naming more is
/// refused before anything is fetched.
pub const MAX_LOG_OBJECT_BYTES: u64 = 128 << 20;
/// The most bytes a snapshot object may have: a file is at most 32 GiB of body (references
/// address 32 GiB), with its header and footer.
pub const MAX_SNAPSHOT_OBJECT_BYTES: u64 = (32 << 30) + 160;
/// Entries the head holds before the shipper seals them into a segment, by default.
pub const DEFAULT_SEAL_ENTRIES: usize = 4096;
/// Sealed segments the head names before the shipper folds them into one segment naming them,
/// by default.
pub const DEFAULT_FOLD_SEGMENTS: usize = 64;
/// Where record-log segments live under the prefix, as under a snapshot directory.
pub const RECORDS_PREFIX: &str = aldb_format::records::RECORDS_DIR;
/// The most epochs one vote-evidence segment entry may list as holding their transitions: a
/// writer carries 16 and keeps those whose segments it prunes, far fewer than this.
pub const MAX_SEGMENT_TRANSITIONS: usize = 4096;

/// Where vote-evidence log segments live under the prefix, as under a snapshot directory.
pub const VOTES_PREFIX: &str = aldb_format::votes::VOTES_DIR;
/// Where the slot-status journal's epochs live under the prefix.
pub const JOURNAL_PREFIX: &str = "status";

/// A published snapshot file, uploaded whole: a slot file (`.snap`) or a part of one (`.part`),
/// told apart by its name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SnapshotObject {
    /// The file name, which is also the object name under the prefix.
    pub name: String,
    /// The file's sequence number (from its header, equal to its name's).
    pub seq: u64,
    /// The slot it is the state of.
    pub slot: u64,
    /// Its header's `oldest_seq`: the slot is servable only with every file from here to `seq`.
    pub oldest_seq: u64,
    /// Size in bytes.
    pub size: u64,
    /// The footer checksum (XXH3-128 of the header and the body's digest), 32 hex digits of the
    /// footer's 16 little-endian bytes read as one u128.
    pub checksum: String,
    /// The header's state root, 64 lowercase hex digits: what a replica lists for the slot before
    /// it fetches the file, and what the fetched file's header must say. All zeros for a part.
    pub root: String,
    /// The header's parent slot.
    pub parent: Option<u64>,
    /// Present when the header marks the file as the first after a writer failure: the slots
    /// after `after` and before this file's were never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<WriterGap>,
}

impl SnapshotObject {
    /// Whether the name says a slot file or a part; `None` for a name that is neither (which
    /// [`Manifest::decode`] refuses).
    pub fn kind(&self) -> Option<FileKind> {
        parse_published_name(&self.name).map(|(_, _, kind)| kind)
    }
}

/// A failure of the snapshot writer that a file's header records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriterGap {
    /// The newest slot published before the writer failed (`None`: nothing since it started).
    pub after: Option<u64>,
}

/// The slot-status journal (`slot-status.log`), uploaded up to the end of its last complete
/// entry. Compaction replaces the local journal; each replacement is shipped under a new
/// `epoch`, so the bytes an object name stands for only ever grow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalObject {
    /// The object name under the prefix: `status/slot-status-<epoch, 20 digits>.log`.
    pub name: String,
    /// Increases by one each time the local journal was replaced.
    pub epoch: u64,
    /// The bytes readers may use: the object's first `size` bytes.
    pub size: u64,
    /// XXH3-128 of those bytes, 32 hex digits.
    pub checksum: String,
}

/// A segment of the record log or of the vote-evidence log, uploaded up to the end of its last
/// complete entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentObject {
    /// The object name under the prefix: `records/records-<first slot, 20 digits>.log` or
    /// `votes/votes-<first slot, 20 digits>.log`.
    pub name: String,
    /// The segment's first slot (from its name).
    pub first_slot: u64,
    /// The newest slot an entry of the shipped bytes names (a record's, or a bank's or block's),
    /// if any.
    pub last_slot: Option<u64>,
    /// The bytes readers may use: the object's first `size` bytes. The object may be longer (a
    /// later upload of the same growing segment); its first `size` bytes are these.
    pub size: u64,
    /// XXH3-128 of those bytes, 32 hex digits.
    pub checksum: String,
    /// Whether the segment was closed (a newer one existed) when these bytes were shipped: it
    /// will not grow any more.
    pub sealed: bool,
    /// Vote-evidence segments only: the epochs whose whole transition (`docs/SPEC.md` §11.4: a
    /// set's entry and kept evidence of a slot binding it) these bytes hold, ascending. Where a
    /// replica finds the transition to an epoch older than its copy of the log, and what the
    /// archive's retention never drops the last of.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transitions: Vec<u64>,
}

/// A sealed manifest segment as the head names it: an immutable object holding a contiguous run
/// of older entries, trusted only when its bytes have the head's size and checksum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedSegment {
    /// The object name under the prefix: `manifest/<generation, 20 digits>-<checksum>.json`, the
    /// generation of the first head naming it and the checksum of its bytes, so one name never
    /// stands for two contents.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// XXH3-128 of its bytes, 32 hex digits.
    pub checksum: String,
    /// How many snapshot entries it holds.
    pub snapshots: u64,
    /// How many record-log segment entries it holds.
    pub record_segments: u64,
    /// How many vote-evidence segment entries it holds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vote_segments: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How many leading entries of each list the sealed segments hold that the archive's retention
/// dropped: a reader skips them, and their objects may be gone. Dropping them this way leaves
/// every segment unchanged; a segment all of whose entries are dropped is no longer named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pruned {
    /// Leading snapshot entries dropped.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub snapshots: u64,
    /// Leading record-log segment entries dropped.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub record_segments: u64,
    /// Leading vote-evidence segment entries dropped.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vote_segments: u64,
}

impl Pruned {
    fn is_none(&self) -> bool {
        *self == Pruned::default()
    }
}

/// The head object (`aldb-manifest.json`): the recent entries, the journal, and the sealed
/// segments holding every older entry, oldest first. The only object rewritten; everything it
/// names is immutable or only grows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Head {
    /// Always [`MANIFEST_FORMAT`].
    pub format: String,
    /// Always [`MANIFEST_VERSION`].
    pub version: u32,
    /// Increases by one with every head the shipper writes.
    pub generation: u64,
    /// The snapshot format version of the shipper's build (informational).
    pub snapshot_format: u32,
    /// The sealed segments, oldest first: their entries come before the head's own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sealed_segments: Vec<SealedSegment>,
    /// Leading entries of the sealed segments that are no longer named.
    #[serde(default, skip_serializing_if = "Pruned::is_none")]
    pub pruned: Pruned,
    /// Snapshot entries newer than every sealed one, by ascending sequence number.
    pub snapshots: Vec<SnapshotObject>,
    /// Record-log segments after the sealed ones, by ascending first slot.
    pub record_segments: Vec<SegmentObject>,
    /// Vote-evidence segments after the sealed ones, by ascending first slot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vote_segments: Vec<SegmentObject>,
    /// The slot-status journal, when the directory has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_journal: Option<JournalObject>,
}

/// The body of a sealed segment: a contiguous run of entries of each list.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentBody {
    /// Always [`SEGMENT_FORMAT`].
    pub format: String,
    /// Always [`MANIFEST_VERSION`].
    pub version: u32,
    /// Earlier sealed segments this one folds, oldest first: their entries come before its own.
    /// A segment folding others holds no entry of its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sealed_segments: Vec<SealedSegment>,
    /// Snapshot entries, by ascending sequence number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub snapshots: Vec<SnapshotObject>,
    /// Record-log segment entries, by ascending first slot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub record_segments: Vec<SegmentObject>,
    /// Vote-evidence segment entries, by ascending first slot.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vote_segments: Vec<SegmentObject>,
}

/// The manifest of one bucket prefix as readers use it: the entries of every sealed segment and
/// of the head, in order. Written as a [`Head`] naming [`SegmentBody`] objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The head's generation.
    pub generation: u64,
    /// The snapshot format version of the shipper's build (informational: each file's header
    /// carries its own, which readers check).
    pub snapshot_format: u32,
    /// Snapshot files, by ascending sequence number.
    pub snapshots: Vec<SnapshotObject>,
    /// Record-log segments, by ascending first slot.
    pub record_segments: Vec<SegmentObject>,
    /// Vote-evidence log segments, by ascending first slot.
    pub vote_segments: Vec<SegmentObject>,
    /// The slot-status journal, when the directory has one.
    pub status_journal: Option<JournalObject>,
    /// The sealed segments, oldest first: together they hold the leading entries of each list
    /// above (as many as their counts say, less those `pruned`), the head the rest.
    pub sealed_segments: Vec<SealedSegment>,
    /// Leading entries of the sealed segments dropped by the archive's retention: not in the
    /// lists above.
    pub pruned: Pruned,
    /// The sealed segments that fold others, by name, with the segments they fold: what names
    /// every segment below the head's list.
    pub folds: BTreeMap<String, Vec<SealedSegment>>,
}

impl Default for Manifest {
    fn default() -> Self {
        Self {
            generation: 0,
            snapshot_format: aldb_format::FORMAT_VERSION,
            snapshots: Vec::new(),
            record_segments: Vec::new(),
            vote_segments: Vec::new(),
            status_journal: None,
            sealed_segments: Vec::new(),
            pruned: Pruned::default(),
            folds: BTreeMap::new(),
        }
    }
}

/// Formats a 128-bit checksum as the manifest spells it.
pub fn checksum_hex(sum: u128) -> String {
    format!("{sum:032x}")
}

/// Parses a manifest checksum; `None` unless exactly 32 lowercase hex digits.
pub fn parse_checksum(s: &str) -> Option<u128> {
    (s.len() == 32 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        .then(|| u128::from_str_radix(s, 16).ok())
        .flatten()
}

/// Formats a state root as the manifest spells it.
pub fn root_hex(root: &[u8; 32]) -> String {
    root.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses a manifest root; `None` unless exactly 64 lowercase hex digits.
pub fn parse_root(s: &str) -> Option<[u8; 32]> {
    let b = s.as_bytes();
    if b.len() != 64 || !b.iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c)) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// The object name of the slot-status journal shipped in `epoch`.
pub fn journal_object_name(epoch: u64) -> String {
    format!("{JOURNAL_PREFIX}/slot-status-{epoch:020}.log")
}

/// The object name of a record-log segment.
pub fn segment_object_name(file_name: &str) -> String {
    format!("{RECORDS_PREFIX}/{file_name}")
}

/// The object name of a vote-evidence log segment.
pub fn vote_segment_object_name(file_name: &str) -> String {
    format!("{VOTES_PREFIX}/{file_name}")
}

/// A servable slot as the manifest describes it: the newest file naming it, whose chain from its
/// `oldest_seq` is complete in the manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BucketSlot {
    /// The slot.
    pub slot: u64,
    /// The file that serves it.
    pub seq: u64,
    /// The first file its records may reach.
    pub oldest_seq: u64,
}

impl Head {
    /// Parses a head and checks what can be checked without its segments: what it does not
    /// understand (another format or version, an unknown field) is refused, never guessed at.
    pub fn decode(bytes: &[u8]) -> Result<Self, ManifestError> {
        if bytes.len() as u64 > MAX_HEAD_BYTES {
            return Err(ManifestError::TooLarge { what: "head", size: bytes.len() as u64, max: MAX_HEAD_BYTES });
        }
        let h: Head = serde_json::from_slice(bytes)
            .map_err(|e| ManifestError::Parse { segment: false, reason: e.to_string() })?;
        if h.format != MANIFEST_FORMAT {
            return Err(ManifestError::Format { found: h.format, expected: MANIFEST_FORMAT });
        }
        if h.version != MANIFEST_VERSION {
            return Err(ManifestError::Version { segment: false, found: h.version, reads: MANIFEST_VERSION });
        }
        h.sealed_segments.iter().try_for_each(check_sealed_ref)?;
        Ok(h)
    }

    /// The head as stored: pretty JSON, one field a line, for operators reading it.
    pub fn encode(&self) -> Vec<u8> {
        // Serialising plain strings and integers cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
    }
}

/// Checks a sealed segment's entry: its name must spell its checksum.
fn check_sealed_ref(r: &SealedSegment) -> Result<(), ManifestError> {
    if parse_checksum(&r.checksum).is_none() {
        return Err(ManifestError::Invalid(format!("sealed segment {:?}: bad checksum {:?}", r.name, r.checksum)));
    }
    if parse_sealed_name(&r.name).is_none_or(|(_, sum)| sum != r.checksum) {
        return Err(ManifestError::Invalid(format!(
            "sealed segment {:?} does not name its checksum {}",
            r.name, r.checksum
        )));
    }
    if r.size > MAX_SEGMENT_BYTES {
        return Err(ManifestError::TooLarge { what: "segment", size: r.size, max: MAX_SEGMENT_BYTES });
    }
    Ok(())
}

impl SegmentBody {
    /// Entries of each list it stands for: its own and those of the segments it folds.
    pub fn counts(&self) -> (u64, u64, u64) {
        let mut c = (self.snapshots.len() as u64, self.record_segments.len() as u64, self.vote_segments.len() as u64);
        for r in &self.sealed_segments {
            c = (
                c.0.saturating_add(r.snapshots),
                c.1.saturating_add(r.record_segments),
                c.2.saturating_add(r.vote_segments),
            );
        }
        c
    }

    /// Parses a segment's bytes, refusing another format or version and unknown fields.
    pub fn decode(bytes: &[u8]) -> Result<Self, ManifestError> {
        let b: SegmentBody =
            serde_json::from_slice(bytes).map_err(|e| ManifestError::Parse { segment: true, reason: e.to_string() })?;
        if b.format != SEGMENT_FORMAT {
            return Err(ManifestError::Format { found: b.format, expected: SEGMENT_FORMAT });
        }
        if b.version != MANIFEST_VERSION {
            return Err(ManifestError::Version { segment: true, found: b.version, reads: MANIFEST_VERSION });
        }
        b.sealed_segments.iter().try_for_each(check_sealed_ref)?;
        Ok(b)
    }

    /// The segment as stored: compact JSON (it is large and read by programs only).
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// Checks a sealed segment's bytes against the head's entry for it (size, checksum, then the
/// entries it holds of each list) and parses them: a segment is trusted only whole.
pub fn verify_segment(r: &SealedSegment, bytes: &[u8]) -> Result<SegmentBody, ManifestError> {
    if bytes.len() as u64 != r.size {
        return Err(ManifestError::Segment(format!("{} bytes, the head names {}", bytes.len(), r.size)));
    }
    if parse_checksum(&r.checksum) != Some(xxhash_rust::xxh3::xxh3_128(bytes)) {
        return Err(ManifestError::Segment("its checksum is not the head's".into()));
    }
    let b = SegmentBody::decode(bytes)?;
    let counts = b.counts();
    if counts != (r.snapshots, r.record_segments, r.vote_segments) {
        return Err(ManifestError::Segment(format!(
            "it holds {counts:?} entries, the head names ({}, {}, {})",
            r.snapshots, r.record_segments, r.vote_segments
        )));
    }
    Ok(b)
}

/// The object name of a sealed segment first named by the head of `generation`, whose bytes have
/// checksum `sum`.
pub fn sealed_object_name(generation: u64, sum: u128) -> String {
    format!("{SEGMENTS_PREFIX}/{generation:020}-{}.json", checksum_hex(sum))
}

/// The generation and checksum a sealed segment's object name spells; only the exact spelling.
pub fn parse_sealed_name(name: &str) -> Option<(u64, &str)> {
    let rest = name.strip_prefix(SEGMENTS_PREFIX)?.strip_prefix('/')?.strip_suffix(".json")?;
    let (g, sum) = rest.split_once('-')?;
    if g.len() != 20 || !g.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    parse_checksum(sum)?;
    Some((g.parse().ok()?, sum))
}

impl Manifest {
    /// Puts a head and the bodies of the sealed segments it names together, and checks the
    /// whole. `lookup` gives each segment's body by name (every one [`read_segments`] read, each
    /// verified with [`verify_segment`]).
    pub fn assemble<'a>(head: Head, lookup: &dyn Fn(&str) -> Option<&'a SegmentBody>) -> Result<Self, ManifestError> {
        let mut flat = Flat::default();
        let mut folds = BTreeMap::new();
        let (snapshots, record_segments, vote_segments) = {
            flatten(&head.sealed_segments, lookup, &mut flat, &mut folds)?;
            let p = head.pruned;
            if p.snapshots > flat.snapshots.len() as u64
                || p.record_segments > flat.record_segments.len() as u64
                || p.vote_segments > flat.vote_segments.len() as u64
            {
                return Err(ManifestError::Invalid(format!(
                    "the head drops more entries ({p:?}) than its sealed segments hold"
                )));
            }
            let skip = |x: u64| usize::try_from(x).unwrap_or(usize::MAX);
            let mut snapshots: Vec<SnapshotObject> =
                flat.snapshots.into_iter().skip(skip(p.snapshots)).cloned().collect();
            let mut records: Vec<SegmentObject> =
                flat.record_segments.into_iter().skip(skip(p.record_segments)).cloned().collect();
            let mut votes: Vec<SegmentObject> =
                flat.vote_segments.into_iter().skip(skip(p.vote_segments)).cloned().collect();
            snapshots.extend(head.snapshots);
            records.extend(head.record_segments);
            votes.extend(head.vote_segments);
            (snapshots, records, votes)
        };
        let m = Manifest {
            generation: head.generation,
            snapshot_format: head.snapshot_format,
            snapshots,
            record_segments,
            vote_segments,
            status_journal: head.status_journal,
            sealed_segments: head.sealed_segments,
            pruned: head.pruned,
            folds,
        };
        m.check()?;
        Ok(m)
    }

    /// Parses and checks a head that names no sealed segment (a manifest small enough to live
    /// in its head alone).
    pub fn decode(bytes: &[u8]) -> Result<Self, ManifestError> {
        let head = Head::decode(bytes)?;
        if !head.sealed_segments.is_empty() {
            return Err(ManifestError::Invalid("the head names sealed segments: read them first".into()));
        }
        Self::assemble(head, &|_| None)
    }

    /// How many leading entries of each list (snapshots, record segments, vote segments) the
    /// sealed segments hold, those pruned not counted.
    pub fn sealed_counts(&self) -> (usize, usize, usize) {
        let n = |f: fn(&SealedSegment) -> u64, pruned: u64| {
            usize::try_from(self.sealed_segments.iter().map(f).sum::<u64>().saturating_sub(pruned))
                .unwrap_or(usize::MAX)
        };
        let p = self.pruned;
        (
            n(|r| r.snapshots, p.snapshots),
            n(|r| r.record_segments, p.record_segments),
            n(|r| r.vote_segments, p.vote_segments),
        )
    }

    /// Entries the head holds itself.
    pub fn unsealed_entries(&self) -> usize {
        let (s, r, v) = self.sealed_counts();
        self.snapshots.len().saturating_sub(s)
            + self.record_segments.len().saturating_sub(r)
            + self.vote_segments.len().saturating_sub(v)
    }

    /// The head of this manifest: its unsealed entries and the sealed segments' names.
    pub fn head(&self) -> Head {
        let (s, r, v) = self.sealed_counts();
        Head {
            format: MANIFEST_FORMAT.to_string(),
            version: MANIFEST_VERSION,
            generation: self.generation,
            snapshot_format: self.snapshot_format,
            sealed_segments: self.sealed_segments.clone(),
            pruned: self.pruned,
            snapshots: self.snapshots.get(s..).unwrap_or_default().to_vec(),
            record_segments: self.record_segments.get(r..).unwrap_or_default().to_vec(),
            vote_segments: self.vote_segments.get(v..).unwrap_or_default().to_vec(),
            status_journal: self.status_journal.clone(),
        }
    }

    /// The head as stored.
    pub fn encode_head(&self) -> Vec<u8> {
        self.head().encode()
    }

    /// The segment that would seal the head's entries now, for the head of `generation`: every
    /// unsealed snapshot entry and every unsealed log entry but each log's newest (which may
    /// still grow). `None` when there is nothing to seal. The caller uploads it, then names it
    /// by pushing the entry onto `sealed_segments`.
    pub fn seal(&self, generation: u64) -> Option<(SealedSegment, Vec<u8>)> {
        let (s, r, v) = self.sealed_counts();
        let upto = |len: usize, sealed: usize| len.saturating_sub(1).max(sealed);
        let body = SegmentBody {
            format: SEGMENT_FORMAT.to_string(),
            version: MANIFEST_VERSION,
            sealed_segments: Vec::new(),
            snapshots: self.snapshots.get(s..).unwrap_or_default().to_vec(),
            record_segments: self
                .record_segments
                .get(r..upto(self.record_segments.len(), r))
                .unwrap_or_default()
                .to_vec(),
            vote_segments: self.vote_segments.get(v..upto(self.vote_segments.len(), v)).unwrap_or_default().to_vec(),
        };
        segment_of(body, generation)
    }

    /// Drops the leading entries of each list whose flag in `snapshots`, `records` or `votes`
    /// (one flag an entry) is `false`, up to the first kept one (retention drops the oldest;
    /// an entry it spares stops the drop there). Entries in sealed segments are dropped by
    /// raising the head's floor ([`Manifest::pruned`]), so no segment is rewritten; a segment
    /// left wholly below the floor is no longer named. Returns the objects no longer named (the
    /// entries' own and those segments): delete them only after the head is written.
    pub fn prune_leading(&mut self, snapshots: &[bool], records: &[bool], votes: &[bool]) -> Vec<String> {
        let lead = |mask: &[bool]| mask.iter().take_while(|k| !**k).count();
        let (ps, pr, pv) = (lead(snapshots), lead(records), lead(votes));
        let (ss, sr, sv) = self.sealed_counts();
        let mut gone: Vec<String> = self.snapshots.drain(..ps.min(self.snapshots.len())).map(|s| s.name).collect();
        gone.extend(self.record_segments.drain(..pr.min(self.record_segments.len())).map(|g| g.name));
        gone.extend(self.vote_segments.drain(..pv.min(self.vote_segments.len())).map(|g| g.name));
        let n = |x: usize| x as u64;
        let floor = &mut self.pruned;
        floor.snapshots += n(ps.min(ss));
        floor.record_segments += n(pr.min(sr));
        floor.vote_segments += n(pv.min(sv));
        while let Some(r) = self.sealed_segments.first().cloned() {
            let f = self.pruned;
            if r.snapshots <= f.snapshots
                && r.record_segments <= f.record_segments
                && r.vote_segments <= f.vote_segments
            {
                self.sealed_segments.remove(0);
                self.pruned.snapshots -= r.snapshots;
                self.pruned.record_segments -= r.record_segments;
                self.pruned.vote_segments -= r.vote_segments;
                self.take_subtree(&r, &mut gone);
                continue;
            }
            // The floor cuts into a fold: the head names what it folds instead, so the older of
            // them can go whole.
            if f != Pruned::default()
                && let Some(children) = self.folds.remove(&r.name)
            {
                self.sealed_segments.splice(0..1, children);
                gone.push(r.name);
                continue;
            }
            break;
        }
        gone
    }

    /// The segment that would fold every sealed segment the head names into one naming them,
    /// for the head of `generation`, so the head names one. `None` when it names none. The
    /// caller uploads it, then replaces the head's list with it and records it in `folds`.
    pub fn fold(&self, generation: u64) -> Option<(SealedSegment, Vec<u8>)> {
        if self.sealed_segments.is_empty() {
            return None;
        }
        let body = SegmentBody {
            format: SEGMENT_FORMAT.to_string(),
            version: MANIFEST_VERSION,
            sealed_segments: self.sealed_segments.clone(),
            ..SegmentBody::default()
        };
        segment_of(body, generation)
    }

    /// Every sealed segment named, directly by the head or through a fold.
    pub fn named_segments(&self) -> Vec<String> {
        let mut out: Vec<String> = self.sealed_segments.iter().map(|r| r.name.clone()).collect();
        out.extend(self.folds.values().flatten().map(|r| r.name.clone()));
        out
    }

    /// The names of `r` and of every segment it folds, directly or not, forgetting the folds.
    fn take_subtree(&mut self, r: &SealedSegment, out: &mut Vec<String>) {
        let mut todo = vec![r.name.clone()];
        while let Some(name) = todo.pop() {
            if let Some(children) = self.folds.remove(&name) {
                todo.extend(children.into_iter().map(|c| c.name));
            }
            out.push(name);
        }
    }

    /// Checks the whole: names, order, checksums, roots, and that the sealed segments' counts
    /// fit the lists.
    pub fn check(&self) -> Result<(), ManifestError> {
        let m = self;
        let (s, r, v) = m.sealed_counts();
        if s > m.snapshots.len() || r > m.record_segments.len() || v > m.vote_segments.len() {
            return Err(invalid("the sealed segments' counts exceed the entries"));
        }
        let mut prev = None;
        for s in &m.snapshots {
            let Some((seq, slot, kind)) = parse_published_name(&s.name) else {
                return Err(invalid(format!("snapshot entry {:?} is not a snapshot file's name", s.name)));
            };
            if (u64::from(seq), slot) != (s.seq, s.slot) {
                return Err(invalid(format!(
                    "snapshot entry {:?} does not name sequence {} slot {}",
                    s.name, s.seq, s.slot
                )));
            }
            if prev.is_some_and(|p| p >= s.seq) {
                return Err(invalid(format!("snapshot entries are not in ascending sequence order at {:?}", s.name)));
            }
            if s.oldest_seq == 0 || s.oldest_seq > s.seq {
                return Err(invalid(format!(
                    "snapshot entry {:?}: oldest_seq {} is not in 1..={}",
                    s.name, s.oldest_seq, s.seq
                )));
            }
            if parse_checksum(&s.checksum).is_none() {
                return Err(invalid(format!("snapshot entry {:?}: bad checksum {:?}", s.name, s.checksum)));
            }
            match (parse_root(&s.root), kind) {
                (None, _) => return Err(invalid(format!("snapshot entry {:?}: bad root {:?}", s.name, s.root))),
                // Only the slot file carries the root; a part's header holds zeros.
                (Some(r), FileKind::Part) if r != [0; 32] => {
                    return Err(invalid(format!("part entry {:?}: root {:?} is not zero", s.name, s.root)));
                }
                _ => {}
            }
            if kind == FileKind::Part && s.gap.is_some() {
                return Err(invalid(format!("part entry {:?} carries a writer gap", s.name)));
            }
            prev = Some(s.seq);
        }
        check_segments(
            &m.record_segments,
            |n| n.strip_prefix(&format!("{RECORDS_PREFIX}/")).and_then(segment_first_slot),
            false,
        )?;
        check_segments(
            &m.vote_segments,
            |n| n.strip_prefix(&format!("{VOTES_PREFIX}/")).and_then(aldb_format::votes::segment_first_slot),
            true,
        )?;
        if let Some(j) = &m.status_journal {
            if j.name != journal_object_name(j.epoch) {
                return Err(invalid(format!("journal entry {:?} does not name epoch {}", j.name, j.epoch)));
            }
            if parse_checksum(&j.checksum).is_none() {
                return Err(invalid(format!("journal entry {:?}: bad checksum {:?}", j.name, j.checksum)));
            }
        }
        Ok(())
    }

    /// The snapshot entry of sequence number `seq`.
    pub fn snapshot(&self, seq: u64) -> Option<&SnapshotObject> {
        self.snapshots.binary_search_by_key(&seq, |s| s.seq).ok().map(|i| &self.snapshots[i])
    }

    /// Every slot a reader can serve from the objects named, oldest first: the slot's newest
    /// file, when every file from its `oldest_seq` up to its own is named too. Parts count as
    /// files of a chain but never serve a slot themselves.
    pub fn servable(&self) -> BTreeMap<u64, BucketSlot> {
        let mut slots: BTreeMap<u64, BucketSlot> = BTreeMap::new();
        let seqs: Vec<u64> = self.snapshots.iter().map(|s| s.seq).collect();
        for s in self.snapshots.iter().filter(|s| s.kind() == Some(FileKind::Slot)) {
            let lo = seqs.partition_point(|&q| q < s.oldest_seq);
            let hi = seqs.partition_point(|&q| q <= s.seq);
            if (hi - lo) as u64 != s.seq - s.oldest_seq + 1 {
                continue;
            }
            // A restarted writer may publish a slot again; the newer file serves it.
            if slots.get(&s.slot).is_none_or(|b| b.seq < s.seq) {
                slots.insert(s.slot, BucketSlot { slot: s.slot, seq: s.seq, oldest_seq: s.oldest_seq });
            }
        }
        slots
    }

    /// The snapshot entries a slot served by `b` needs, oldest first, parts among them.
    pub fn chain(&self, b: &BucketSlot) -> Vec<&SnapshotObject> {
        let lo = self.snapshots.partition_point(|s| s.seq < b.oldest_seq);
        let hi = self.snapshots.partition_point(|s| s.seq <= b.seq);
        self.snapshots[lo..hi].iter().collect()
    }
}

/// A sealed segment of `body`'s entries for the head of `generation`: its name, size, checksum
/// and counts, and its bytes. `None` when the body holds no entry.
pub fn segment_of(body: SegmentBody, generation: u64) -> Option<(SealedSegment, Vec<u8>)> {
    let (snapshots, record_segments, vote_segments) = body.counts();
    if body.sealed_segments.is_empty() && (snapshots, record_segments, vote_segments) == (0, 0, 0) {
        return None;
    }
    let bytes = body.encode();
    let sum = xxhash_rust::xxh3::xxh3_128(&bytes);
    let r = SealedSegment {
        name: sealed_object_name(generation, sum),
        size: bytes.len() as u64,
        checksum: checksum_hex(sum),
        snapshots,
        record_segments,
        vote_segments,
    };
    Some((r, bytes))
}

/// Every sealed segment `head` names, directly or through segments folding others: each taken
/// from `held` (a verified copy kept from an earlier read: segments are immutable and a name
/// spells its checksum) or else from `fetch`, which must check it with [`verify_segment`].
pub async fn read_segments<E, Fut>(
    head: &Head,
    held: impl Fn(&str) -> Option<Arc<SegmentBody>>,
    mut fetch: impl FnMut(SealedSegment) -> Fut,
) -> Result<HashMap<String, Arc<SegmentBody>>, E>
where
    Fut: Future<Output = Result<Arc<SegmentBody>, E>>,
{
    let mut out: HashMap<String, Arc<SegmentBody>> = HashMap::new();
    let mut todo: Vec<SealedSegment> = head.sealed_segments.clone();
    while let Some(r) = todo.pop() {
        if out.contains_key(&r.name) {
            continue;
        }
        let body = match held(&r.name) {
            Some(b) => b,
            None => fetch(r.clone()).await?,
        };
        todo.extend(body.sealed_segments.iter().cloned());
        out.insert(r.name, body);
    }
    Ok(out)
}

/// The entries a manifest's sealed segments hold, in order, while they are put together.
#[derive(Default)]
struct Flat<'a> {
    snapshots: Vec<&'a SnapshotObject>,
    record_segments: Vec<&'a SegmentObject>,
    vote_segments: Vec<&'a SegmentObject>,
}

/// Appends the entries of the segments `refs` name, in order (those a segment folds before its
/// own), to `out`, recording the folds. Iterative, and each segment may be named once only, so a
/// malformed manifest costs a reader no more than the segments it names.
fn flatten<'a>(
    refs: &[SealedSegment],
    lookup: &dyn Fn(&str) -> Option<&'a SegmentBody>,
    out: &mut Flat<'a>,
    folds: &mut BTreeMap<String, Vec<SealedSegment>>,
) -> Result<(), ManifestError> {
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut stack: Vec<(SealedSegment, bool)> = refs.iter().rev().map(|r| (r.clone(), false)).collect();
    while let Some((r, expanded)) = stack.pop() {
        let b =
            lookup(&r.name).ok_or_else(|| ManifestError::Invalid(format!("sealed segment {} was not read", r.name)))?;
        if expanded {
            out.snapshots.extend(&b.snapshots);
            out.record_segments.extend(&b.record_segments);
            out.vote_segments.extend(&b.vote_segments);
            continue;
        }
        if !seen.insert(r.name.clone()) {
            return Err(ManifestError::Invalid(format!("sealed segment {} is named twice", r.name)));
        }
        if b.counts() != (r.snapshots, r.record_segments, r.vote_segments) {
            return Err(ManifestError::Invalid(format!("sealed segment {} does not hold the entries named", r.name)));
        }
        if !b.sealed_segments.is_empty() {
            folds.insert(r.name.clone(), b.sealed_segments.clone());
        }
        stack.push((r, true));
        stack.extend(b.sealed_segments.iter().rev().map(|c| (c.clone(), false)));
    }
    Ok(())
}

/// Checks a list of segment entries: names that spell their first slot (`first_of` parses the
/// object name), ascending, with well-formed checksums.
fn check_segments(
    segments: &[SegmentObject],
    first_of: impl Fn(&str) -> Option<u64>,
    transitions: bool,
) -> Result<(), ManifestError> {
    let mut prev = None;
    for g in segments {
        if !transitions && !g.transitions.is_empty() {
            return Err(invalid(format!("record segment entry {:?} lists epoch transitions", g.name)));
        }
        if g.transitions.len() > MAX_SEGMENT_TRANSITIONS || !g.transitions.windows(2).all(|w| w[0] < w[1]) {
            return Err(invalid(format!(
                "segment entry {:?}: its transitions are not at most {MAX_SEGMENT_TRANSITIONS} ascending epochs",
                g.name
            )));
        }
        if first_of(&g.name) != Some(g.first_slot) {
            return Err(invalid(format!("segment entry {:?} does not name first slot {}", g.name, g.first_slot)));
        }
        if prev.is_some_and(|p| p >= g.first_slot) {
            return Err(invalid(format!("segment entries are not in ascending order at {:?}", g.name)));
        }
        if parse_checksum(&g.checksum).is_none() {
            return Err(invalid(format!("segment entry {:?}: bad checksum {:?}", g.name, g.checksum)));
        }
        prev = Some(g.first_slot);
    }
    Ok(())
}

/// A [`ManifestError::Invalid`] saying `why`.
fn invalid(why: impl Into<String>) -> ManifestError {
    ManifestError::Invalid(why.into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(seq: u64, slot: u64, oldest_seq: u64) -> SnapshotObject {
        SnapshotObject {
            name: aldb_format::format::file_name(seq as u32, slot),
            seq,
            slot,
            oldest_seq,
            size: 100,
            checksum: checksum_hex(u128::from(seq)),
            root: root_hex(&[seq as u8; 32]),
            parent: slot.checked_sub(1),
            gap: None,
        }
    }

    #[test]
    fn round_trips_and_refuses_what_it_does_not_understand() {
        let mut m = Manifest { snapshots: vec![snap(1, 10, 1), snap(2, 11, 1), snap(3, 12, 2)], ..Manifest::default() };
        m.record_segments.push(SegmentObject {
            name: segment_object_name(&aldb_format::records::segment_name(10)),
            first_slot: 10,
            last_slot: Some(12),
            size: 16,
            checksum: checksum_hex(7),
            sealed: false,
            transitions: Vec::new(),
        });
        let bytes = m.encode_head();
        assert_eq!(Manifest::decode(&bytes), Ok(m.clone()));
        let edited = |f: &dyn Fn(&mut Manifest)| {
            let mut x = m.clone();
            f(&mut x);
            Manifest::decode(&x.encode_head())
        };
        let head_edited = |f: &dyn Fn(&mut Head)| {
            let mut h = m.head();
            f(&mut h);
            Manifest::decode(&h.encode())
        };
        for v in [1, 2, 4] {
            let err = head_edited(&|h| h.version = v).unwrap_err().to_string();
            assert!(err.contains(&format!("manifest version {v}")) && err.contains("reads 3"), "{err}");
        }
        assert!(head_edited(&|h| h.format = "other".into()).is_err());
        assert!(edited(&|x| x.snapshots.swap(0, 1)).is_err());
        assert!(edited(&|x| x.snapshots[1].slot = 99).is_err());
        assert!(edited(&|x| x.snapshots[1].oldest_seq = 3).is_err());
        assert!(edited(&|x| x.snapshots[1].checksum = "xyz".into()).is_err());
        assert!(edited(&|x| x.record_segments[0].first_slot = 11).is_err());
        // Vote segments: named under `votes/` with the vote log's spelling, and absent from the
        // JSON when there are none, so a build that does not know them reads such a manifest.
        assert!(!String::from_utf8(bytes.clone()).unwrap().contains("vote_segments"));
        let vote = SegmentObject {
            name: vote_segment_object_name(&aldb_format::votes::segment_name(10)),
            ..m.record_segments[0].clone()
        };
        assert!(edited(&|x| x.vote_segments = vec![vote.clone()]).is_ok());
        assert!(edited(&|x| x.vote_segments = vec![m.record_segments[0].clone()]).is_err(), "a record segment");
        assert!(edited(&|x| x.record_segments = vec![vote.clone()]).is_err(), "a vote segment");
        // The epochs whose transitions a vote segment holds: ascending, bounded, and only on vote
        // segments; absent from the JSON when there are none.
        assert!(!String::from_utf8(bytes.clone()).unwrap().contains("transitions"));
        let holding = SegmentObject { transitions: vec![3, 4, 9], ..vote.clone() };
        let with = Manifest { vote_segments: vec![holding.clone()], ..m.clone() };
        assert_eq!(Manifest::decode(&with.encode_head()), Ok(with.clone()));
        assert!(String::from_utf8(with.encode_head()).unwrap().contains("\"transitions\""));
        for bad in [vec![4, 3], vec![3, 3], (0..=MAX_SEGMENT_TRANSITIONS as u64).collect()] {
            let g = SegmentObject { transitions: bad, ..vote.clone() };
            assert!(edited(&|x| x.vote_segments = vec![g.clone()]).is_err());
        }
        let record = SegmentObject { transitions: vec![3], ..m.record_segments[0].clone() };
        assert!(edited(&|x| x.record_segments = vec![record.clone()]).is_err(), "a record segment listing one");
        assert!(edited(&|x| x.vote_segments = vec![vote.clone(), vote.clone()]).is_err(), "not ascending");
        assert!(edited(&|x| x.snapshots[0].root = "ab".into()).is_err());
        assert!(edited(&|x| x.snapshots[0].gap = Some(WriterGap { after: Some(3) })).is_ok());
        let journal = JournalObject { name: journal_object_name(2), epoch: 2, size: 48, checksum: checksum_hex(9) };
        assert!(edited(&|x| x.status_journal = Some(journal.clone())).is_ok());
        assert!(edited(&|x| x.status_journal = Some(JournalObject { epoch: 3, ..journal.clone() })).is_err());
        assert_eq!(parse_root(&root_hex(&[0xa7; 32])), Some([0xa7; 32]));
        let mut unknown: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        unknown["extra"] = serde_json::json!(1);
        assert!(Manifest::decode(&serde_json::to_vec(&unknown).unwrap()).is_err());
    }

    fn part(seq: u64, slot: u64, oldest_seq: u64) -> SnapshotObject {
        SnapshotObject {
            name: aldb_format::format::part_file_name(seq as u32, slot),
            root: root_hex(&[0; 32]),
            ..snap(seq, slot, oldest_seq)
        }
    }

    #[test]
    fn parts_complete_chains_but_are_never_slots() {
        // Slot 10 is full over parts 1..=2 and its file 3; slot 11 a delta (4); parts 5 and 6 of
        // slot 12 were published, its file never was.
        let m = Manifest {
            snapshots: vec![
                part(1, 10, 1),
                part(2, 10, 1),
                snap(3, 10, 1),
                snap(4, 11, 1),
                part(5, 12, 1),
                part(6, 12, 1),
            ],
            ..Manifest::default()
        };
        assert_eq!(Manifest::decode(&m.encode_head()), Ok(m.clone()));
        let s = m.servable();
        assert_eq!(s.keys().copied().collect::<Vec<_>>(), vec![10, 11]);
        assert_eq!(m.chain(&s[&11]).iter().map(|o| o.seq).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        // A missing part breaks every chain through it.
        let holed = Manifest { snapshots: m.snapshots.iter().filter(|o| o.seq != 2).cloned().collect(), ..m.clone() };
        assert!(holed.servable().is_empty());
        let edited = |f: &dyn Fn(&mut Manifest)| {
            let mut x = m.clone();
            f(&mut x);
            Manifest::decode(&x.encode_head())
        };
        assert!(edited(&|x| x.snapshots[0].root = root_hex(&[1; 32])).is_err(), "a part with a root");
        assert!(edited(&|x| x.snapshots[0].gap = Some(WriterGap { after: None })).is_err(), "a part with a gap");
        assert!(edited(&|x| x.snapshots[0].name = "0000000001-00000000000000000010.prt".into()).is_err());
        assert!(edited(&|x| x.snapshots[1].slot = 11).is_err(), "the name says slot 10");
    }

    #[test]
    fn serves_only_complete_chains() {
        // Sequence 2 missing: slot 12 (oldest 2) and slot 13 (oldest 1) cannot be served.
        let m = Manifest {
            snapshots: vec![snap(1, 10, 1), snap(3, 12, 2), snap(4, 13, 1), snap(5, 14, 3)],
            ..Manifest::default()
        };
        let s = m.servable();
        assert_eq!(s.keys().copied().collect::<Vec<_>>(), vec![10, 14]);
        assert_eq!(m.chain(&s[&14]).iter().map(|o| o.seq).collect::<Vec<_>>(), vec![3, 4, 5]);
        assert_eq!(parse_checksum(&checksum_hex(u128::MAX)), Some(u128::MAX));
        assert_eq!(parse_checksum("ABCDEF0123456789abcdef0123456789"), None);
    }

    fn record(first: u64, sealed: bool) -> SegmentObject {
        SegmentObject {
            name: segment_object_name(&aldb_format::records::segment_name(first)),
            first_slot: first,
            last_slot: Some(first + 1),
            size: 16,
            checksum: checksum_hex(u128::from(first)),
            sealed,
            transitions: Vec::new(),
        }
    }

    /// Puts a manifest back together from its head and the bodies of the segments it names, as
    /// a reader does.
    fn reassemble(m: &Manifest, objects: &BTreeMap<String, Vec<u8>>) -> Result<Manifest, String> {
        let head = Head::decode(&m.encode_head()).map_err(|e| e.to_string())?;
        let fetch = |r: SealedSegment| async move {
            verify_segment(&r, objects.get(&r.name).ok_or("missing")?).map(Arc::new).map_err(|e| e.to_string())
        };
        let bodies =
            futures_util::FutureExt::now_or_never(read_segments(&head, |_| None, fetch)).ok_or("pending")??;
        Manifest::assemble(head, &|n| bodies.get(n).map(|b| b.as_ref())).map_err(|e| e.to_string())
    }

    #[test]
    fn sealed_segments_hold_the_older_entries_and_round_trip() {
        let mut m = Manifest::default();
        let mut objects = BTreeMap::new();
        for seq in 1..=10 {
            m.snapshots.push(snap(seq, 100 + seq, 1));
        }
        m.record_segments = vec![record(100, true), record(104, true), record(108, false)];
        let (r, bytes) = m.seal(7).unwrap();
        // Everything but each log's newest entry, which may still grow.
        assert_eq!((r.snapshots, r.record_segments, r.vote_segments), (10, 2, 0));
        assert_eq!(parse_sealed_name(&r.name), Some((7, r.checksum.as_str())));
        objects.insert(r.name.clone(), bytes.clone());
        m.sealed_segments.push(r.clone());
        assert_eq!(m.unsealed_entries(), 1);
        let head = m.head();
        assert!(head.snapshots.is_empty() && head.record_segments.len() == 1, "{head:?}");
        for seq in 11..=13 {
            m.snapshots.push(snap(seq, 100 + seq, 1));
        }
        assert_eq!(m.unsealed_entries(), 4);
        assert_eq!(reassemble(&m, &objects), Ok(m.clone()));
        assert!(Manifest::decode(&m.encode_head()).unwrap_err().to_string().contains("sealed segments"));

        // A segment is trusted only whole and only as the head names it.
        let mut flipped = bytes.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 1;
        assert!(verify_segment(&r, &flipped).unwrap_err().to_string().contains("checksum"));
        assert!(verify_segment(&r, &bytes[..bytes.len() - 1]).unwrap_err().to_string().contains("bytes"));
        let miscounted = SealedSegment { snapshots: 9, ..r.clone() };
        assert!(verify_segment(&miscounted, &bytes).unwrap_err().to_string().contains("entries"));
        // A segment of another version or with a field this build does not know is refused.
        let mut body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        body["version"] = serde_json::json!(2);
        assert!(
            SegmentBody::decode(&serde_json::to_vec(&body).unwrap()).unwrap_err().to_string().contains("version 2")
        );
        let mut body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        body["extra"] = serde_json::json!(1);
        assert!(SegmentBody::decode(&serde_json::to_vec(&body).unwrap()).unwrap_err().to_string().contains("extra"));
        // The head must spell each segment's checksum in its name.
        let mut h = m.head();
        h.sealed_segments[0].name = sealed_object_name(7, 5);
        assert!(Head::decode(&h.encode()).unwrap_err().to_string().contains("does not name its checksum"));
        let mut unknown: serde_json::Value = serde_json::from_slice(&m.encode_head()).unwrap();
        unknown["sealed_segments"][0]["extra"] = serde_json::json!(1);
        assert!(Head::decode(&serde_json::to_vec(&unknown).unwrap()).unwrap_err().to_string().contains("extra"));

        // Entries out of order across a segment and the head are refused when assembled.
        let mut bad = m.clone();
        bad.snapshots[10] = snap(3, 200, 1);
        assert!(reassemble(&bad, &objects).unwrap_err().to_string().contains("ascending"));
    }

    #[test]
    fn retention_raises_the_floor_and_drops_whole_segments() {
        let mut m = Manifest::default();
        let mut objects = BTreeMap::new();
        for seq in 1..=12 {
            m.snapshots.push(snap(seq, 100 + seq, seq));
            if seq % 4 == 0 {
                let (r, bytes) = m.seal(seq).unwrap();
                objects.insert(r.name.clone(), bytes);
                m.sealed_segments.push(r);
            }
        }
        m.snapshots.push(snap(13, 113, 13));
        let names: Vec<String> = m.sealed_segments.iter().map(|r| r.name.clone()).collect();
        // Keep sequence 6 on: the first segment (1..=4) goes, the second (5..=8) keeps 6..=8.
        let keep: Vec<bool> = m.snapshots.iter().map(|s| s.seq >= 6).collect();
        let gone = m.prune_leading(&keep, &[], &[]);
        assert_eq!(m.snapshots.first().map(|s| s.seq), Some(6));
        assert_eq!(m.sealed_segments.iter().map(|r| &r.name).collect::<Vec<_>>(), vec![&names[1], &names[2]]);
        assert_eq!(m.pruned, Pruned { snapshots: 1, ..Pruned::default() }, "sequence 5 is below the floor");
        assert!(gone.contains(&names[0]) && !gone.contains(&names[1]), "{gone:?}");
        assert_eq!(gone.iter().filter(|n| n.ends_with(".snap")).count(), 5);
        assert_eq!(reassemble(&m, &objects), Ok(m.clone()), "no segment was rewritten");
        assert_eq!(m.servable().len(), 8);
        assert_eq!(m.unsealed_entries(), 1);
        // An entry retention spares stops the drop there; dropping into the head's own entries
        // leaves no segment named.
        let mut keep: Vec<bool> = m.snapshots.iter().map(|s| s.seq >= 13).collect();
        keep[2] = true;
        m.prune_leading(&keep, &[], &[]);
        assert_eq!(m.snapshots.first().map(|s| s.seq), Some(8));
        let keep: Vec<bool> = m.snapshots.iter().map(|s| s.seq >= 13).collect();
        let gone = m.prune_leading(&keep, &[], &[]);
        assert!(m.sealed_segments.is_empty() && m.pruned == Pruned::default(), "{m:?}");
        assert!(gone.contains(&names[1]) && gone.contains(&names[2]), "{gone:?}");
        assert_eq!(Manifest::decode(&m.encode_head()), Ok(m.clone()));
        // A floor beyond what the segments hold is refused.
        let mut h = m.head();
        h.pruned.snapshots = 1;
        assert!(Manifest::assemble(h, &|_| None).unwrap_err().to_string().contains("drops more"));
    }

    #[test]
    fn folded_segments_are_read_through_the_fold_and_unfolded_by_retention() {
        let mut m = Manifest::default();
        let mut objects = BTreeMap::new();
        for seq in 1..=12 {
            m.snapshots.push(snap(seq, 100 + seq, seq));
            if seq % 2 == 0 {
                let (r, bytes) = m.seal(seq).unwrap();
                objects.insert(r.name.clone(), bytes);
                m.sealed_segments.push(r);
            }
            if m.sealed_segments.len() > 2 {
                let (r, bytes) = m.fold(seq).unwrap();
                assert_eq!(r.snapshots, m.sealed_counts().0 as u64, "a fold stands for every entry it names");
                objects.insert(r.name.clone(), bytes);
                let folded = std::mem::replace(&mut m.sealed_segments, vec![r.clone()]);
                m.folds.insert(r.name, folded);
            }
        }
        m.snapshots.push(snap(13, 113, 13));
        assert!(m.sealed_segments.len() <= 3 && m.folds.len() >= 2, "{:?}", m.sealed_segments);
        assert_eq!(reassemble(&m, &objects), Ok(m.clone()), "entries and folds are read back");
        let mut named = m.named_segments();
        named.sort();
        assert_eq!(named, objects.keys().cloned().collect::<Vec<_>>(), "every segment is named");
        // A damaged segment below a fold refuses the whole.
        let leaf = m.folds.values().flatten().find(|r| !m.folds.contains_key(&r.name)).unwrap().name.clone();
        let mut damaged = objects.clone();
        damaged.get_mut(&leaf).unwrap()[3] ^= 1;
        assert!(reassemble(&m, &damaged).unwrap_err().to_string().contains("checksum"));
        // A segment named twice (here directly and through its fold) is refused.
        let mut twice = m.clone();
        twice.sealed_segments.insert(0, m.folds.values().flatten().next().unwrap().clone());
        assert!(reassemble(&twice, &objects).unwrap_err().to_string().contains("named twice"));

        // Retention keeping sequence 6 on: the folds it cuts into are unfolded, the segments
        // wholly below it go, and what is left reads back.
        let keep: Vec<bool> = m.snapshots.iter().map(|s| s.seq >= 6).collect();
        let gone = m.prune_leading(&keep, &[], &[]);
        assert_eq!(m.snapshots.first().map(|s| s.seq), Some(6));
        for n in &gone {
            objects.remove(n);
        }
        let mut named = m.named_segments();
        named.sort();
        assert_eq!(named, objects.keys().filter(|n| n.starts_with("manifest/")).cloned().collect::<Vec<_>>());
        assert_eq!(reassemble(&m, &objects), Ok(m.clone()));
        assert_eq!(m.servable().len(), 8);
    }
}
