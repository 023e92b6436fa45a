//! The manifest: the one object that says which objects of a bucket prefix readers may trust
//! (`docs/OBJECT-STORE.md`). The shipper writes it after every object it names has been uploaded
//! completely, so an object a reader finds through it is whole; an object it does not name (an
//! upload in flight, or one a crash left behind) is never read.

use std::collections::BTreeMap;

use aldb_format::format::{FileKind, parse_published_name};
use aldb_format::records::segment_first_slot;
use serde::{Deserialize, Serialize};

/// The manifest's object name under the bucket prefix. No snapshot directory holds a file of
/// this name, so the bucket can mirror the directory's layout beside it.
pub const MANIFEST_NAME: &str = "aldb-manifest.json";
/// The value of the manifest's `format` field.
pub const MANIFEST_FORMAT: &str = "aldb-objstore-manifest";
/// The manifest version this build writes and reads; a reader refuses any other. Version 2 adds
/// each file's root, parent and writer gap (so a replica lists roots without fetching files) and
/// the slot-status journal.
pub const MANIFEST_VERSION: u32 = 2;
/// Where record-log segments live under the prefix, as under a snapshot directory.
pub const RECORDS_PREFIX: &str = aldb_format::records::RECORDS_DIR;
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
}

/// The manifest of one bucket prefix.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Always [`MANIFEST_FORMAT`].
    pub format: String,
    /// Always [`MANIFEST_VERSION`].
    pub version: u32,
    /// Increases by one with every manifest the shipper writes.
    pub generation: u64,
    /// The snapshot format version of the shipper's build (informational: each file's header
    /// carries its own, which readers check).
    pub snapshot_format: u32,
    /// Snapshot files, by ascending sequence number.
    pub snapshots: Vec<SnapshotObject>,
    /// Record-log segments, by ascending first slot.
    pub record_segments: Vec<SegmentObject>,
    /// Vote-evidence log segments, by ascending first slot; absent when the directory keeps no
    /// vote log (so a manifest without one reads in a build that does not know the field).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vote_segments: Vec<SegmentObject>,
    /// The slot-status journal, when the directory has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_journal: Option<JournalObject>,
}

impl Default for Manifest {
    fn default() -> Self {
        Self {
            format: MANIFEST_FORMAT.to_string(),
            version: MANIFEST_VERSION,
            generation: 0,
            snapshot_format: aldb_format::FORMAT_VERSION,
            snapshots: Vec::new(),
            record_segments: Vec::new(),
            vote_segments: Vec::new(),
            status_journal: None,
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

impl Manifest {
    /// Parses and checks a manifest: what it does not understand is refused, never guessed at.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| format!("not a manifest: {e}"))?;
        if m.format != MANIFEST_FORMAT {
            return Err(format!("format {:?}, expected {MANIFEST_FORMAT:?}", m.format));
        }
        if m.version != MANIFEST_VERSION {
            return Err(format!("manifest version {}, this build reads {MANIFEST_VERSION}", m.version));
        }
        let mut prev = None;
        for s in &m.snapshots {
            let Some((seq, slot, kind)) = parse_published_name(&s.name) else {
                return Err(format!("snapshot entry {:?} is not a snapshot file's name", s.name));
            };
            if (u64::from(seq), slot) != (s.seq, s.slot) {
                return Err(format!("snapshot entry {:?} does not name sequence {} slot {}", s.name, s.seq, s.slot));
            }
            if prev.is_some_and(|p| p >= s.seq) {
                return Err(format!("snapshot entries are not in ascending sequence order at {:?}", s.name));
            }
            if s.oldest_seq == 0 || s.oldest_seq > s.seq {
                return Err(format!(
                    "snapshot entry {:?}: oldest_seq {} is not in 1..={}",
                    s.name, s.oldest_seq, s.seq
                ));
            }
            if parse_checksum(&s.checksum).is_none() {
                return Err(format!("snapshot entry {:?}: bad checksum {:?}", s.name, s.checksum));
            }
            match (parse_root(&s.root), kind) {
                (None, _) => return Err(format!("snapshot entry {:?}: bad root {:?}", s.name, s.root)),
                // Only the slot file carries the root; a part's header holds zeros.
                (Some(r), FileKind::Part) if r != [0; 32] => {
                    return Err(format!("part entry {:?}: root {:?} is not zero", s.name, s.root));
                }
                _ => {}
            }
            if kind == FileKind::Part && s.gap.is_some() {
                return Err(format!("part entry {:?} carries a writer gap", s.name));
            }
            prev = Some(s.seq);
        }
        check_segments(&m.record_segments, |n| {
            n.strip_prefix(&format!("{RECORDS_PREFIX}/")).and_then(segment_first_slot)
        })?;
        check_segments(&m.vote_segments, |n| {
            n.strip_prefix(&format!("{VOTES_PREFIX}/")).and_then(aldb_format::votes::segment_first_slot)
        })?;
        if let Some(j) = &m.status_journal {
            if j.name != journal_object_name(j.epoch) {
                return Err(format!("journal entry {:?} does not name epoch {}", j.name, j.epoch));
            }
            if parse_checksum(&j.checksum).is_none() {
                return Err(format!("journal entry {:?}: bad checksum {:?}", j.name, j.checksum));
            }
        }
        Ok(m)
    }

    /// The manifest as stored: pretty JSON, one field a line, for operators reading it.
    pub fn encode(&self) -> Vec<u8> {
        // Serialising plain strings and integers cannot fail.
        serde_json::to_vec_pretty(self).unwrap_or_default()
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

/// Checks a list of segment entries: names that spell their first slot (`first_of` parses the
/// object name), ascending, with well-formed checksums.
fn check_segments(segments: &[SegmentObject], first_of: impl Fn(&str) -> Option<u64>) -> Result<(), String> {
    let mut prev = None;
    for g in segments {
        if first_of(&g.name) != Some(g.first_slot) {
            return Err(format!("segment entry {:?} does not name first slot {}", g.name, g.first_slot));
        }
        if prev.is_some_and(|p| p >= g.first_slot) {
            return Err(format!("segment entries are not in ascending order at {:?}", g.name));
        }
        if parse_checksum(&g.checksum).is_none() {
            return Err(format!("segment entry {:?}: bad checksum {:?}", g.name, g.checksum));
        }
        prev = Some(g.first_slot);
    }
    Ok(())
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
        });
        let bytes = m.encode();
        assert_eq!(Manifest::decode(&bytes), Ok(m.clone()));
        let edited = |f: &dyn Fn(&mut Manifest)| {
            let mut x = m.clone();
            f(&mut x);
            Manifest::decode(&x.encode())
        };
        assert!(edited(&|x| x.version = 1).is_err());
        assert!(edited(&|x| x.format = "other".into()).is_err());
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
        assert_eq!(Manifest::decode(&m.encode()), Ok(m.clone()));
        let s = m.servable();
        assert_eq!(s.keys().copied().collect::<Vec<_>>(), vec![10, 11]);
        assert_eq!(m.chain(&s[&11]).iter().map(|o| o.seq).collect::<Vec<_>>(), vec![1, 2, 3, 4]);
        // A missing part breaks every chain through it.
        let holed = Manifest { snapshots: m.snapshots.iter().filter(|o| o.seq != 2).cloned().collect(), ..m.clone() };
        assert!(holed.servable().is_empty());
        let edited = |f: &dyn Fn(&mut Manifest)| {
            let mut x = m.clone();
            f(&mut x);
            Manifest::decode(&x.encode())
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
}
