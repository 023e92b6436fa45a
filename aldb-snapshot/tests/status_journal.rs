//! The slot-status journal on real files: a torn tail is ignored by readers and cut by the
//! writer, a damaged entry costs only itself, compaction drops old slots by an atomic rename, and
//! a follower reading while the writer appends sees every entry once, in order.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;

use aldb_format::status::{
    STATUS_ENTRY_LEN, STATUS_FILE, STATUS_HEADER_LEN, SlotStatusKind, StatusEntry, StatusFollower, StatusJournal,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn processed(slot: u64) -> StatusEntry {
    StatusEntry { slot, kind: SlotStatusKind::Processed, parent: Some(slot - 1), seq: Some(slot as u32) }
}

fn mark(slot: u64, kind: SlotStatusKind) -> StatusEntry {
    StatusEntry { slot, kind, parent: None, seq: None }
}

#[test]
fn entries_read_back_with_their_statuses() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = StatusJournal::open(dir.path()).unwrap();
    j.append(&[processed(1), processed(2), processed(3)]).unwrap();
    j.append(&[mark(2, SlotStatusKind::Confirmed), mark(3, SlotStatusKind::Abandoned)]).unwrap();
    j.append(&[mark(2, SlotStatusKind::Finalized), mark(2, SlotStatusKind::Confirmed)]).unwrap();
    let s = StatusJournal::read(dir.path()).unwrap();
    assert_eq!(s.status(1), Some(SlotStatusKind::Processed));
    // A late `Confirmed` does not take back `Finalized`.
    assert_eq!(s.status(2), Some(SlotStatusKind::Finalized));
    assert_eq!(s.status(3), Some(SlotStatusKind::Abandoned));
    assert_eq!(s.status(4), None);
    assert_eq!(s.get(3).unwrap().parent, Some(2));
    assert_eq!(s.get(3).unwrap().seq, Some(3));
    assert_eq!(s.newest_finalized(), Some(2));
    // A slot processed again after it was dropped starts over.
    j.append(&[processed(3)]).unwrap();
    assert_eq!(StatusJournal::read(dir.path()).unwrap().status(3), Some(SlotStatusKind::Processed));
    // The name is not a snapshot file's.
    assert!(aldb_format::format::parse_file_name(STATUS_FILE).is_none());
}

#[test]
fn a_torn_tail_is_ignored_by_readers_and_cut_by_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STATUS_FILE);
    let mut j = StatusJournal::open(dir.path()).unwrap();
    j.append(&[processed(1), processed(2)]).unwrap();
    drop(j);
    // Half an entry, as a crash mid-append leaves it.
    let torn = processed(3).encode();
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&torn[..13]).unwrap();
    let s = StatusJournal::read(dir.path()).unwrap();
    assert_eq!((s.len(), s.damaged_entries()), (2, 0));
    // A whole last entry whose checksum fails is a torn tail too (nothing valid follows it).
    let mut bad = processed(3).encode();
    bad[0] ^= 1;
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&[0u8; 19]).unwrap();
    std::fs::OpenOptions::new().append(true).open(&path).unwrap().write_all(&bad).unwrap();
    let s = StatusJournal::read(dir.path()).unwrap();
    assert_eq!(s.len(), 2);
    let mut j = StatusJournal::open(dir.path()).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), (STATUS_HEADER_LEN + 2 * STATUS_ENTRY_LEN) as u64);
    assert_eq!(j.entries(), 2);
    j.append(&[processed(3)]).unwrap();
    let s = StatusJournal::read(dir.path()).unwrap();
    assert_eq!((s.len(), s.damaged_entries()), (3, 0));
}

#[test]
fn a_damaged_entry_costs_only_itself() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(STATUS_FILE);
    let mut j = StatusJournal::open(dir.path()).unwrap();
    j.append(&(1..=5).map(processed).collect::<Vec<_>>()).unwrap();
    drop(j);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[STATUS_HEADER_LEN + STATUS_ENTRY_LEN + 5] ^= 0x40; // inside slot 2's entry
    std::fs::write(&path, &bytes).unwrap();
    let s = StatusJournal::read(dir.path()).unwrap();
    assert_eq!(s.damaged_entries(), 1);
    assert_eq!(s.iter().map(|(slot, _)| slot).collect::<Vec<_>>(), vec![1, 3, 4, 5]);
    // The writer keeps the damaged entry (only a tail is cut) and appends after it.
    let mut j = StatusJournal::open(dir.path()).unwrap();
    j.append(&[processed(6)]).unwrap();
    let s = StatusJournal::read(dir.path()).unwrap();
    assert_eq!((s.len(), s.damaged_entries()), (5, 1));
    // A header that is not a journal's is set aside, and a new journal starts.
    std::fs::write(&path, b"not a journal at all").unwrap();
    assert!(StatusJournal::read(dir.path()).is_err());
    let mut j = StatusJournal::open(dir.path()).unwrap();
    j.append(&[processed(7)]).unwrap();
    assert_eq!(StatusJournal::read(dir.path()).unwrap().len(), 1);
    assert!(dir.path().join(format!("{STATUS_FILE}.damaged")).exists());
}

#[test]
fn compaction_drops_old_slots_and_a_follower_notices() {
    let dir = tempfile::tempdir().unwrap();
    let mut j = StatusJournal::open(dir.path()).unwrap();
    let mut f = StatusFollower::new(dir.path());
    j.append(&(1..=100).map(processed).collect::<Vec<_>>()).unwrap();
    j.append(&[mark(50, SlotStatusKind::Finalized)]).unwrap();
    assert_eq!(f.poll().unwrap().entries.len(), 101);
    assert_eq!(j.compact(60).unwrap(), 60);
    assert_eq!(j.entries(), 41);
    j.append(&[processed(101)]).unwrap();
    let p = f.poll().unwrap();
    assert!(p.restarted);
    assert_eq!(p.entries.len(), 42);
    assert_eq!(f.statuses().status(50), None);
    assert_eq!(f.statuses().status(60), Some(SlotStatusKind::Processed));
    assert_eq!(f.statuses(), &StatusJournal::read(dir.path()).unwrap());
    // Reopened, the compacted journal continues.
    drop(j);
    let mut j = StatusJournal::open(dir.path()).unwrap();
    assert_eq!(j.entries(), 42);
    j.append(&[mark(101, SlotStatusKind::Confirmed)]).unwrap();
    let p = f.poll().unwrap();
    assert!(!p.restarted);
    assert_eq!(p.entries, vec![mark(101, SlotStatusKind::Confirmed)]);
}

#[test]
fn a_follower_reading_while_the_writer_appends_sees_every_entry_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let batches: Vec<Vec<StatusEntry>> = (0..300u64)
        .map(|b| {
            (0..rng.random_range(1..4u64))
                .map(|i| {
                    let slot = 1 + b * 4 + i;
                    if rng.random_bool(0.5) { processed(slot) } else { mark(slot, SlotStatusKind::Confirmed) }
                })
                .collect()
        })
        .collect();
    let expect: Vec<StatusEntry> = batches.iter().flatten().copied().collect();
    let writer = std::thread::spawn(move || {
        let mut j = StatusJournal::open(&path).unwrap();
        for b in &batches {
            j.append(b).unwrap();
        }
    });
    let mut f = StatusFollower::new(dir.path());
    let mut seen = Vec::new();
    loop {
        let finished = writer.is_finished();
        let p = f.poll().unwrap();
        assert!(!p.restarted && p.damaged == 0);
        seen.extend(p.entries);
        // A poll begun after the writer finished reads everything it wrote.
        if finished {
            break;
        }
        std::thread::yield_now();
    }
    writer.join().unwrap();
    assert_eq!(seen, expect);
}
