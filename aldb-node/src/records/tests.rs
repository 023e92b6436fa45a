//! The records of both schedules: the geyser plugin's (a record at commit, `finalized` ones once
//! rooted, or at `processed` from status changes) and the in-process module's (each level as a
//! bank reaches it), on real record logs in temporary directories.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;

use aldb_format::records::RecordLogReader;
use aldb_snapshot::WriterConfig;

use super::*;
use crate::config::RecordSettings;

/// Records paused after a failed open, as the geyser plugin pauses them.
const RETRY_COMMITS: u64 = 64;

/// The pipeline config of the geyser plugin for `snap` under `dir`, with records for `genesis`
/// at `schedule`.
fn plugin_config(dir: &Path, genesis: [u8; 32], schedule: Schedule, keep_slots: u64, held: bool) -> NodeConfig {
    let writer = WriterConfig { hold_for_shipper: held, ..WriterConfig::new(dir.join("snap")) };
    let records = RecordSettings {
        genesis_hash: genesis,
        keypair: None,
        keep_slots,
        schedule,
        reopen_every: RETRY_COMMITS,
        must_open: false,
    };
    NodeConfig {
        name: "aldb-plugin",
        writer,
        writes: crate::WritePolicy::HandOff,
        records: Some(records),
        bank_hash_slots: 4096,
    }
}

fn config(dir: &Path, genesis: [u8; 32]) -> NodeConfig {
    plugin_config(dir, genesis, Schedule::AtCommit(Commitment::Confirmed), 1_000_000, false)
}

fn commit(slot: u64, parent: Option<u64>) -> BankRecord {
    BankRecord { slot, parent, root: [slot as u8; 32], block: None, parent_bank_hash: None }
}

/// What a status change asks of the records (as the plugin's commit worker hands them on).
#[derive(Clone, Copy)]
enum StatusKind {
    Confirmed,
    Finalized,
    Abandoned,
}

struct StatusChange {
    slot: u64,
    kind: StatusKind,
    root: [u8; 32],
    parent: Option<u64>,
}

fn status(r: &mut Records, ch: &StatusChange, stats: &NodeStats) {
    let bank = BankRecord { slot: ch.slot, parent: ch.parent, root: ch.root, ..BankRecord::default() };
    match ch.kind {
        StatusKind::Confirmed => r.reached(&bank, Commitment::Confirmed, stats),
        StatusKind::Finalized => r.reached(&bank, Commitment::Finalized, stats),
        StatusKind::Abandoned => {}
    }
}

/// Cuts the log into segments of three records (a real log cuts every 65,536), so pruning has
/// something to delete after a few records.
fn cut_in_threes(dir: &Path) {
    use aldb_format::records::{encode_entry, list_segments, segment_header, segment_name};
    let logged = RecordLogReader::new(dir).refresh().unwrap();
    for (_, path) in list_segments(&dir.join("records")).unwrap() {
        std::fs::remove_file(path).unwrap();
    }
    for chunk in logged.chunks(3) {
        let mut bytes = segment_header().to_vec();
        chunk.iter().for_each(|l| bytes.extend(encode_entry(l)));
        std::fs::write(dir.join("records").join(segment_name(chunk[0].record.slot)), bytes).unwrap();
    }
}

/// With `hold_for_shipper` pruning keeps every record segment the shipper has not recorded as
/// archived (`shipped-records.slot`), and all of them before it recorded anything; without it
/// `record_keep_slots` alone rules.
#[test]
fn record_pruning_waits_for_the_shipper_when_held() {
    use aldb_format::records::list_segments;
    for held in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let snap = dir.path().join("snap");
        let counters = NodeStats::default();
        let config = plugin_config(dir.path(), [1; 32], Schedule::AtCommit(Commitment::Confirmed), 1, held);
        let mut r = Records::start(&config).unwrap().unwrap();
        for s in 0..6 {
            r.committed(&commit(s, s.checked_sub(1)), &counters);
        }
        cut_in_threes(&snap);
        r.log.reopen().unwrap();
        let names = || list_segments(&snap.join("records")).unwrap().into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        r.log.prune_in = 1;
        r.committed(&commit(6, Some(5)), &counters);
        if !held {
            assert_eq!(names(), [3], "segment 0 holds only slots below 5");
            continue;
        }
        assert_eq!(names(), [0, 3], "no hold yet: nothing may go");
        aldb_format::shipped::write_records_shipped(&snap, 3).unwrap();
        r.log.prune_in = 1;
        r.committed(&commit(7, Some(6)), &counters);
        assert_eq!(names(), [3]);
        assert_eq!(counters.records_produced.load(Ordering::Relaxed), 8);
    }
}

#[test]
fn a_torn_tail_is_cut_off_and_the_chain_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let counters = NodeStats::default();
    let mut r = Records::start(&config(dir.path(), [1; 32])).unwrap().unwrap();
    for s in 0..3 {
        r.committed(&commit(s, s.checked_sub(1)), &counters);
    }
    // What a failed append can leave behind: part of an entry.
    let seg = std::fs::read_dir(dir.path().join("snap/records")).unwrap().next().unwrap().unwrap().path();
    std::fs::OpenOptions::new().append(true).open(&seg).unwrap().write_all(&[200, 0, 0, 0, 1, 2]).unwrap();
    r.log.reopen().unwrap();
    r.committed(&commit(3, Some(2)), &counters);
    r.committed(&commit(2, Some(1)), &counters); // never a second record for a slot
    assert_eq!(counters.records_produced.load(Ordering::Relaxed), 4);
    assert_eq!(counters.records_skipped.load(Ordering::Relaxed), 1);
    let mut reader = RecordLogReader::new(&dir.path().join("snap"));
    let logged = reader.refresh().unwrap();
    assert_eq!(logged.iter().map(|l| l.record.slot).collect::<Vec<_>>(), [0, 1, 2, 3]);
    assert!(logged[3].record.extends(&logged[2].record, &logged[2].record_hash));
    assert_eq!(reader.bad_entries(), 0);
}

#[test]
fn another_clusters_log_pauses_records_without_failing() {
    let dir = tempfile::tempdir().unwrap();
    let counters = NodeStats::default();
    let mut r = Records::start(&config(dir.path(), [1; 32])).unwrap().unwrap();
    r.committed(&commit(0, None), &counters);
    drop(r);
    let mut other = Records::start(&config(dir.path(), [2; 32])).unwrap().unwrap();
    assert!(!other.enabled());
    for s in 1..=(RETRY_COMMITS + 1) {
        other.committed(&commit(s, Some(s - 1)), &counters);
    }
    assert!(!other.enabled());
    assert!(!counters.records_enabled.load(Ordering::Relaxed));
    assert_eq!(counters.record_errors.load(Ordering::Relaxed), RETRY_COMMITS + 1);
    assert_eq!(counters.records_produced.load(Ordering::Relaxed), 1);
}

fn levels(dir: &Path) -> Vec<(u64, Commitment)> {
    let logged = RecordLogReader::new(&dir.join("snap")).refresh().unwrap();
    logged.iter().map(|l| (l.record.slot, l.record.commitment)).collect()
}

#[test]
fn rooted_slots_get_a_finalized_record_chained_to_the_finalized_parent() {
    use Commitment::{Confirmed, Finalized};
    let dir = tempfile::tempdir().unwrap();
    let counters = NodeStats::default();
    let mut r = Records::start(&config(dir.path(), [1; 32])).unwrap().unwrap();
    let rooted = r.rooted_slots().expect("confirmed commits get finalized records");
    for s in 0..4 {
        r.committed(&commit(s, s.checked_sub(1)), &counters);
    }
    // Rooted before its commit (a worker behind the callbacks): held until slot 5 commits.
    rooted.push(5);
    // Slot 2 rooted: it and its committed ancestors are final; 3 waits.
    rooted.push(2);
    rooted.push(1); // repeated by a later status: nothing new
    r.tick(&counters);
    r.tick(&counters);
    assert_eq!(
        levels(dir.path()),
        [
            (0, Confirmed),
            (1, Confirmed),
            (2, Confirmed),
            (3, Confirmed),
            (0, Finalized),
            (1, Finalized),
            (2, Finalized)
        ]
    );
    // Slot 4 is skipped by the cluster: 5's parent is 3. Committing 5 finalizes 3 and 5.
    r.committed(&commit(5, Some(3)), &counters);
    let all = levels(dir.path());
    assert_eq!(&all[7..], [(5, Confirmed), (3, Finalized), (5, Finalized)]);
    assert_eq!(counters.records_produced.load(Ordering::Relaxed), 10);
    let logged = RecordLogReader::new(&dir.path().join("snap")).refresh().unwrap();
    let fin: Vec<_> = logged.iter().filter(|l| l.record.commitment == Finalized).collect();
    for w in fin.windows(2) {
        assert!(w[1].record.extends(&w[0].record, &w[0].record_hash), "slot {}", w[1].record.slot);
    }
    drop(r);

    // Restarted: the validator commits slots 3 to 6 again (replay) and roots them. Nothing
    // is signed twice at either level; 6 gets both records, chained to 5's.
    let mut r = Records::start(&config(dir.path(), [1; 32])).unwrap().unwrap();
    let rooted = r.rooted_slots().unwrap();
    for (s, p) in [(3, 2), (5, 3), (6, 5)] {
        r.committed(&commit(s, Some(p)), &counters);
        rooted.push(s);
        r.tick(&counters);
    }
    assert_eq!(&levels(dir.path())[10..], [(6, Confirmed), (6, Finalized)]);
    assert_eq!(counters.records_skipped.load(Ordering::Relaxed), 4);
    let logged = RecordLogReader::new(&dir.path().join("snap")).refresh().unwrap();
    assert!(logged[11].record.extends(&logged[9].record, &logged[9].record_hash));
}

#[test]
fn at_processed_commitment_status_changes_make_the_records() {
    use Commitment::{Confirmed, Finalized};
    let dir = tempfile::tempdir().unwrap();
    let schedule = Schedule::AtStatus(crate::Levels::BOTH);
    let mut r = Records::start(&plugin_config(dir.path(), [1; 32], schedule, 1_000_000, false)).unwrap().unwrap();
    assert!(r.rooted_slots().is_none(), "the adapter reports roots");
    let counters = NodeStats::default();
    // Freezes make no record, forks included.
    for (s, p) in [(0, None), (1, Some(0)), (2, Some(0)), (3, Some(1))] {
        r.committed(&commit(s, p), &counters);
    }
    assert!(levels(dir.path()).is_empty());
    let ch = |slot: u64, parent: Option<u64>, kind| StatusChange { slot, kind, root: [slot as u8; 32], parent };
    for c in [
        ch(0, None, StatusKind::Confirmed),
        ch(0, None, StatusKind::Finalized),
        ch(1, Some(0), StatusKind::Confirmed),
        ch(2, Some(0), StatusKind::Abandoned),
        ch(3, Some(1), StatusKind::Confirmed),
        ch(1, Some(0), StatusKind::Finalized),
        ch(3, Some(1), StatusKind::Finalized),
    ] {
        status(&mut r, &c, &counters);
    }
    assert_eq!(
        levels(dir.path()),
        [(0, Confirmed), (0, Finalized), (1, Confirmed), (3, Confirmed), (1, Finalized), (3, Finalized)]
    );
    let logged = RecordLogReader::new(&dir.path().join("snap")).refresh().unwrap();
    for level in [Confirmed, Finalized] {
        let chain: Vec<_> = logged.iter().filter(|l| l.record.commitment == level).collect();
        for w in chain.windows(2) {
            assert!(w[1].record.extends(&w[0].record, &w[0].record_hash), "{level:?} slot {}", w[1].record.slot);
        }
    }
    // Once per slot and level, as at the other commitments.
    status(&mut r, &ch(3, Some(1), StatusKind::Confirmed), &counters);
    assert_eq!(levels(dir.path()).len(), 6);
    assert_eq!(counters.records_skipped.load(Ordering::Relaxed), 1);
}

#[test]
fn at_finalized_commitment_there_is_one_level() {
    let dir = tempfile::tempdir().unwrap();
    let schedule = Schedule::AtCommit(Commitment::Finalized);
    let mut r = Records::start(&plugin_config(dir.path(), [1; 32], schedule, 1_000_000, false)).unwrap().unwrap();
    assert!(r.rooted_slots().is_none());
    let counters = NodeStats::default();
    r.committed(&commit(0, None), &counters);
    r.tick(&counters);
    assert_eq!(levels(dir.path()), [(0, Commitment::Finalized)]);
}

/// The in-process module's record log retention: with `hold_for_shipper` no segment the shipper
/// has not recorded as archived (`shipped-records.slot`) is deleted, and none before it recorded
/// anything; without it `records.keep_slots` alone rules.
mod levels {
    use std::path::Path;

    use aldb_format::records::list_segments;
    use aldb_snapshot::WriterConfig;
    use aldb_verify::Commitment;

    use super::cut_in_threes;

    use crate::config::{Levels, RecordSettings};
    use crate::records::{BankRecord, Records};
    use crate::{NodeConfig, NodeStats, Schedule, WritePolicy};

    fn bank(slot: u64) -> BankRecord {
        BankRecord { slot, parent: slot.checked_sub(1), root: [slot as u8; 32], ..BankRecord::default() }
    }

    /// The first slots of the record log's segments.
    fn segments(dir: &Path) -> Vec<u64> {
        list_segments(&dir.join("records")).unwrap().into_iter().map(|(first, _)| first).collect()
    }

    /// The in-process module's pipeline config: confirmed records only, one slot kept.
    fn config(dir: &Path, held: bool) -> NodeConfig {
        let records = RecordSettings {
            genesis_hash: [1; 32],
            keypair: None,
            keep_slots: 1,
            schedule: Schedule::AtStatus(Levels { confirmed: true, finalized: false }),
            reopen_every: 1,
            must_open: true,
        };
        NodeConfig {
            name: "aldb-bank",
            writer: WriterConfig { hold_for_shipper: held, ..WriterConfig::new(dir) },
            writes: WritePolicy::HoldAndRetry,
            records: Some(records),
            bank_hash_slots: 1 << 14,
        }
    }

    #[test]
    fn record_pruning_waits_for_the_shipper_when_held() {
        for held in [false, true] {
            let tmp = tempfile::tempdir().unwrap();
            let dir = tmp.path().to_path_buf();
            let stats = NodeStats::default();
            let mut r = Records::start(&config(&dir, held)).unwrap().unwrap();
            let confirmed = |r: &mut Records, s| r.reached(&bank(s), Commitment::Confirmed, &stats);
            for s in 0..6 {
                confirmed(&mut r, s);
            }
            cut_in_threes(&dir);
            r.log.reopen().unwrap();
            r.log.prune_in = 1;
            confirmed(&mut r, 6);
            if !held {
                assert_eq!(segments(&dir), [3], "segment 0 holds only slots below 5");
                continue;
            }
            assert_eq!(segments(&dir), [0, 3], "no hold yet: nothing may go");
            // The shipper archived segment 0 only: it goes, segment 3 stays though it is old enough.
            aldb_format::shipped::write_records_shipped(&dir, 3).unwrap();
            for s in 7..10 {
                confirmed(&mut r, s);
            }
            cut_in_threes(&dir);
            r.log.reopen().unwrap();
            assert_eq!(segments(&dir), [0, 3, 6, 9]);
            r.log.prune_in = 1;
            confirmed(&mut r, 10);
            assert_eq!(segments(&dir), [3, 6, 9], "below the hold only");
            // The hold passes everything old enough: retention as without it.
            aldb_format::shipped::write_records_shipped(&dir, 9).unwrap();
            r.log.prune_in = 1;
            confirmed(&mut r, 11);
            assert_eq!(segments(&dir), [9]);
            assert_eq!(NodeStats::get(&stats.records_produced), 12);
            assert_eq!(NodeStats::get(&stats.record_errors), 0);
        }
    }
}
