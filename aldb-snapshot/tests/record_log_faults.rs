//! Fault injection on the record log: a log of real writer output, split into segments, gets
//! random damage (bit flips, overwritten and zeroed spans, truncation, stray and duplicate
//! segment files); then
//!
//! (a) a reader returns exactly the records whose entries the damage left intact (computed here
//!     from which bytes changed), never a damaged or invented one, counts each damaged span once,
//!     and reports every damaged record's slot inside a reported span;
//! (b) a reopened writer keeps every intact record on disk, and the producer chains its next
//!     record to the newest intact one and never signs an intact slot again; a follower that
//!     read the damaged log sees the new record.
//!
//! Fixed seeds, one per case.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;

use aldb_format::records::{HEADER_LEN, LoggedRecord, RECORDS_DIR, RecordLogReader, parse_segment};
use aldb_snapshot::records::{RecordInput, RecordLogWriter, RecordProducer};
use aldb_verify::record::{Attestation, Commitment, ParentLink, RECORD_LEN, RootRecord};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const GENESIS: [u8; 32] = [0x47; 32];
const CASES: u64 = 200;
const RECORDS: usize = 48;
/// Record indices where a new segment starts.
const SPLITS: [usize; 3] = [0, 17, 33];

/// One segment of the clean log: its first slot, bytes, and where each of its records' entries is.
struct Segment {
    first: u64,
    bytes: Vec<u8>,
    entries: Vec<(Range<usize>, usize)>,
}

/// The clean log: its records (chained, with 0 to 3 attestations, some slots skipped) and its
/// segments.
fn clean_log() -> (Vec<LoggedRecord>, Vec<Segment>) {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut records: Vec<LoggedRecord> = Vec::new();
    let mut slot = 100;
    for _ in 0..RECORDS {
        let parent = records.last().map(|p| ParentLink {
            slot: p.record.slot,
            record_hash: Some(p.record_hash),
            bank_hash: None,
        });
        let record = RootRecord {
            genesis_hash: GENESIS,
            slot,
            parent,
            commitment: Commitment::Confirmed,
            state_root: rng.random(),
            block: None,
            bank_hash: None,
        };
        let attestations = (0..rng.random_range(0..=3usize))
            .map(|_| {
                let mut signature = [0u8; 64];
                rng.fill(&mut signature[..]);
                Attestation { identity: rng.random(), signature }
            })
            .collect();
        records.push(LoggedRecord { record_hash: record.hash(), record, attestations });
        slot += rng.random_range(1..=3);
    }
    // Written by the real writer, then split where the writer would start new segments if they
    // were this small: each segment is the header and its records' entries.
    let dir = tempfile::tempdir().unwrap();
    let (mut w, _) = RecordLogWriter::open(dir.path()).unwrap();
    for r in &records {
        w.append(r).unwrap();
    }
    drop(w);
    let written = std::fs::read(dir.path().join(RECORDS_DIR).join(name(0))).unwrap();
    let mut at = HEADER_LEN;
    let mut spans = Vec::new();
    for r in &records {
        let len = 4 + RECORD_LEN + 1 + 96 * r.attestations.len() + 8;
        spans.push(at..at + len);
        at += len;
    }
    assert_eq!(at, written.len());
    let parsed = parse_segment(&written);
    assert!(parsed.header_ok && parsed.damaged.is_empty());
    assert_eq!(
        parsed.entries.iter().map(|(o, r)| (*o, r.clone())).collect::<Vec<_>>(),
        spans.iter().map(|s| s.start).zip(records.iter().cloned()).collect::<Vec<_>>()
    );
    let mut segments = Vec::new();
    for (k, &from) in SPLITS.iter().enumerate() {
        let to = SPLITS.get(k + 1).copied().unwrap_or(RECORDS);
        let mut bytes = written[..HEADER_LEN].to_vec();
        let mut entries = Vec::new();
        for (i, span) in spans.iter().enumerate().take(to).skip(from) {
            entries.push((bytes.len()..bytes.len() + span.len(), i));
            bytes.extend_from_slice(&written[span.clone()]);
        }
        segments.push(Segment { first: records[from].record.slot, bytes, entries });
    }
    (records, segments)
}

fn name(first: u64) -> String {
    format!("records-{first:020}.log")
}

/// A file of the damaged log directory.
struct File {
    name: String,
    bytes: Vec<u8>,
    /// The clean segment it is (a copy of), if any.
    origin: Option<usize>,
}

impl File {
    fn canonical_slot(&self) -> Option<u64> {
        let d = self.name.strip_prefix("records-")?.strip_suffix(".log")?;
        (d.len() == 20 && d.bytes().all(|b| b.is_ascii_digit())).then(|| d.parse().ok()).flatten()
    }
}

/// Applies one to three random faults; returns a description of each and whether a canonically
/// named file was added.
fn damage(rng: &mut ChaCha8Rng, files: &mut Vec<File>, newest_slot: u64) -> (Vec<String>, bool) {
    let mut done = Vec::new();
    let mut added = false;
    for _ in 0..rng.random_range(1..=3) {
        let f = rng.random_range(0..files.len());
        let len = files[f].bytes.len();
        match rng.random_range(0..6) {
            0 if len > 0 => {
                let at = rng.random_range(0..len);
                files[f].bytes[at] ^= 1 << rng.random_range(0..8);
                done.push(format!("flip {} @{at}", files[f].name));
            }
            1 | 2 if len > 0 => {
                let at = rng.random_range(0..len);
                let end = (at + rng.random_range(1..=400)).min(len);
                let zero = rng.random_bool(0.5);
                for b in &mut files[f].bytes[at..end] {
                    *b = if zero { 0 } else { rng.random() };
                }
                done.push(format!("{} {} {at}..{end}", if zero { "zero" } else { "overwrite" }, files[f].name));
            }
            3 => {
                let to = rng.random_range(0..=len);
                files[f].bytes.truncate(to);
                done.push(format!("truncate {} to {to}", files[f].name));
            }
            4 => {
                // A stray: a name readers must ignore, or a segment name with a garbage body
                // (sometimes behind a valid header).
                let canonical = rng.random_bool(0.5);
                let name = if canonical {
                    name(rng.random_range(0..newest_slot + 50))
                } else {
                    [
                        "records-7.log",
                        "records-+0000000000000000101.log",
                        "records-x.log",
                        "records-00000000000000000100.log.tmp",
                    ][rng.random_range(0..4)]
                    .to_string()
                };
                let mut bytes: Vec<u8> = (0..rng.random_range(0..3000)).map(|_| rng.random()).collect();
                if rng.random_bool(0.5) && bytes.len() >= HEADER_LEN {
                    bytes[..HEADER_LEN].copy_from_slice(
                        &files[0].bytes.get(..HEADER_LEN).map_or([0; HEADER_LEN], |h| h.try_into().unwrap()),
                    );
                }
                if !files.iter().any(|x| x.name == name) {
                    done.push(format!("stray {name} ({} bytes)", bytes.len()));
                    added |= canonical;
                    files.push(File { name, bytes, origin: None });
                }
            }
            _ => {
                // A copy of a file under another segment name.
                let name = name(rng.random_range(0..newest_slot + 50));
                if !files.iter().any(|x| x.name == name) && files[f].canonical_slot().is_some() {
                    done.push(format!("duplicate {} as {name}", files[f].name));
                    added = true;
                    let copy = File { name, bytes: files[f].bytes.clone(), origin: files[f].origin };
                    files.push(copy);
                }
            }
        }
    }
    (done, added)
}

fn write(dir: &Path, files: &[File]) {
    let rdir = dir.join(RECORDS_DIR);
    std::fs::create_dir_all(&rdir).unwrap();
    for f in files {
        std::fs::write(rdir.join(&f.name), &f.bytes).unwrap();
    }
}

#[test]
fn a_damaged_record_log_loses_only_the_damaged_records() {
    let (records, segments) = clean_log();
    let newest_slot = records.last().unwrap().record.slot;
    let by_slot: BTreeMap<u64, &LoggedRecord> = records.iter().map(|r| (r.record.slot, r)).collect();
    let (mut lost_total, mut spans_total) = (0, 0);
    for case in 0..CASES {
        let mut rng = ChaCha8Rng::seed_from_u64(1000 + case);
        let mut files: Vec<File> = segments
            .iter()
            .enumerate()
            .map(|(k, s)| File { name: name(s.first), bytes: s.bytes.clone(), origin: Some(k) })
            .collect();
        let (faults, added) = damage(&mut rng, &mut files, newest_slot);
        let ctx = format!("case {case}: {faults:?}");

        // What the damage left: a record is intact where a segment file (or a copy) still holds
        // its entry's bytes unchanged; it is damaged where part of its entry is still there.
        let mut canonical: Vec<&File> = files.iter().filter(|f| f.canonical_slot().is_some()).collect();
        canonical.sort_by_key(|f| f.canonical_slot());
        let mut intact = BTreeSet::new();
        let mut must_report = BTreeSet::new();
        for (n, f) in canonical.iter().enumerate() {
            let Some(k) = f.origin else { continue };
            let seg = &segments[k];
            let ok: Vec<bool> =
                seg.entries.iter().map(|(r, _)| f.bytes.get(r.clone()) == Some(&seg.bytes[r.clone()])).collect();
            for (j, (r, i)) in seg.entries.iter().enumerate() {
                let slot = records[*i].record.slot;
                if ok[j] {
                    intact.insert(slot);
                } else if f.bytes.len() > r.start && (n + 1 < canonical.len() || ok[j + 1..].iter().any(|&o| o)) {
                    // Damaged, and not the newest segment's unfinished tail.
                    must_report.insert(slot);
                }
            }
        }
        let lost: BTreeSet<u64> = by_slot.keys().copied().filter(|s| !intact.contains(s)).collect();
        lost_total += lost.len();

        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), &files);

        // (a) A follower reads exactly the intact records.
        let mut follower = RecordLogReader::new(dir.path());
        let got = follower.refresh().unwrap();
        for r in &got {
            assert_eq!(Some(&r), by_slot.get(&r.record.slot), "{ctx}: a damaged or invented record was served");
        }
        let got_slots: BTreeSet<u64> = got.iter().map(|r| r.record.slot).collect();
        assert_eq!(got_slots, intact, "{ctx}");
        let spans = follower.bad_entries();
        spans_total += spans;
        let damage = follower.take_damage();
        assert_eq!(damage.len() as u64, spans, "{ctx}");
        assert!(follower.refresh().unwrap().is_empty(), "{ctx}");
        assert_eq!(follower.bad_entries(), spans, "{ctx}: damage counted again");
        if !added {
            // Reported with the intact records around it, so a service can say which slots may
            // have lost their record (copies under other names reorder the log; not checked).
            for slot in &must_report {
                assert!(
                    damage
                        .iter()
                        .filter(|d| !d.in_header())
                        .any(|d| d.after_slot.is_none_or(|a| a < *slot) && d.before_slot.is_none_or(|b| *slot < b)),
                    "{ctx}: slot {slot} lost without a damage report around it: {damage:?}"
                );
            }
        }

        // (b) The writer reopens without losing an intact record, and chains on from the newest.
        let mut p = RecordProducer::open(dir.path(), GENESIS, None).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        let on_disk: BTreeSet<u64> =
            RecordLogReader::new(dir.path()).refresh().unwrap().iter().map(|r| r.record.slot).collect();
        assert_eq!(on_disk, intact, "{ctx}: the writer lost or invented records");
        let newest = intact.last().copied();
        assert_eq!(p.last_slot(), newest, "{ctx}");
        let input = |slot: u64, parent: Option<u64>| RecordInput {
            slot,
            parent,
            commitment: Commitment::Confirmed,
            state_root: [9; 32],
            block: None,
            parent_bank_hash: None,
            bank_hash: None,
        };
        if let Some(n) = newest {
            assert_eq!(p.produce(input(n, n.checked_sub(1))).unwrap(), None, "{ctx}: an intact slot signed again");
        }
        let next = newest.map_or(newest_slot + 1, |n| n + 1);
        let rec = p.produce(input(next, newest)).unwrap().unwrap();
        assert_eq!(
            rec.record.parent_record_hash(),
            newest.map(|n| by_slot[&n].record_hash),
            "{ctx}: the chain restarted"
        );
        assert_eq!(follower.refresh().unwrap(), vec![rec.clone()], "{ctx}");
        let mut after = intact.clone();
        after.insert(next);
        let on_disk: BTreeSet<u64> =
            RecordLogReader::new(dir.path()).refresh().unwrap().iter().map(|r| r.record.slot).collect();
        assert_eq!(on_disk, after, "{ctx}");
    }
    println!("{CASES} cases: {lost_total} records lost to damage, {spans_total} damaged spans reported");
    // The faults must have done something, or the checks above prove nothing.
    assert!(lost_total > CASES as usize / 2 && spans_total > CASES / 2, "{lost_total} lost, {spans_total} spans");
}
