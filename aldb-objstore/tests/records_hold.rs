//! The root-record log's archive hold (`shipped-records.slot`), against a real object store
//! (SeaweedFS on loopback): a shipper killed at its manifest's PUT records no hold, so a producer
//! holding for it deletes nothing; a completed pass records the first slot of the newest local
//! segment, every segment below it archived whole, and a segment sealed later is held until a pass
//! archives it sealed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use aldb_format::records::{LoggedRecord, RECORDS_DIR, RecordLogReader, encode_entry, list_segments, segment_header};
use aldb_objstore::Shipper;
use aldb_snapshot::records::RecordLogWriter;
use object_store::ObjectStore;
use object_store::path::Path;

use common::ship::{kill_at_manifest, object, read_manifest, rt};
use common::weed::Weed;

/// Writes `records` as one segment named by its first record's slot.
fn write_segment(dir: &std::path::Path, records: &[LoggedRecord]) {
    let mut bytes = segment_header().to_vec();
    for r in records {
        bytes.extend(encode_entry(r));
    }
    let name = aldb_format::records::segment_name(records[0].record.slot);
    std::fs::write(dir.join(RECORDS_DIR).join(name), bytes).unwrap();
}

/// A directory with snapshots of slots 100..=111 and their records cut in segments of three
/// (a real log cuts every 65,536 records): 100, 103 and 106 on disk, 109..=111 returned to be
/// written as a later segment.
fn history(dir: &std::path::Path) -> Vec<LoggedRecord> {
    common::write_history(dir, 8, 100, 12, 1000);
    let records = RecordLogReader::new(dir).refresh().unwrap();
    assert_eq!(records.iter().map(|r| r.record.slot).collect::<Vec<_>>(), (100..=111).collect::<Vec<_>>());
    for (_, path) in list_segments(&dir.join(RECORDS_DIR)).unwrap() {
        std::fs::remove_file(path).unwrap();
    }
    for chunk in records[..9].chunks(3) {
        write_segment(dir, chunk);
    }
    records[9..].to_vec()
}

fn names(dir: &std::path::Path) -> Vec<u64> {
    list_segments(&dir.join(RECORDS_DIR)).unwrap().into_iter().map(|(f, _)| f).collect()
}

/// A shipper killed at its manifest's PUT records no record hold (the archive may lack every
/// segment, and the producer holding for it deletes nothing); a completed pass records the first
/// slot of the newest local segment, every segment below it archived whole.
#[test]
fn a_pass_records_the_record_hold_after_its_manifest_is_durable() {
    let Some(weed) = Weed::start() else { return };
    let rt = rt();
    let (store, _) = weed.bucket("recordhold");
    let dir = tempfile::tempdir().unwrap();
    let later = history(dir.path());
    assert_eq!(names(dir.path()), [100, 103, 106]);
    let prefix = Path::from("held");
    let cfg = kill_at_manifest(&rt, &store, history, dir.path(), &prefix, "records", 103);
    assert_eq!(aldb_format::shipped::read_records_shipped(dir.path()).unwrap(), None);
    let (mut log, _) = RecordLogWriter::open(dir.path()).unwrap();
    assert_eq!(log.prune_before_held(1000).unwrap(), 0, "no hold yet: nothing may go");
    assert_eq!(names(dir.path()), [100, 103, 106]);

    let mut shipper = Shipper::new(store.clone(), prefix.clone(), cfg).unwrap();
    rt.block_on(shipper.ship_once()).unwrap();
    let hold = aldb_format::shipped::read_records_shipped(dir.path()).unwrap();
    assert_eq!(hold, Some(106), "the newest segment is the only one the archive may lack");
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    for (first, path) in list_segments(&dir.path().join(RECORDS_DIR)).unwrap() {
        let g = m.record_segments.iter().find(|g| g.first_slot == first).unwrap();
        assert_eq!(g.sealed, first < 106, "{}", g.name);
        if first < 106 {
            let b = rt.block_on(async { store.get(&object(&prefix, &g.name)).await.unwrap().bytes().await.unwrap() });
            assert_eq!(
                b.to_vec(),
                std::fs::read(&path).unwrap(),
                "{} is archived whole before the hold passes it",
                g.name
            );
        }
    }
    assert_eq!(log.prune_before_held(1000).unwrap(), 2);
    assert_eq!(names(dir.path()), [106]);

    // A new segment: the one it seals is held until a pass archives it sealed.
    drop(log);
    write_segment(dir.path(), &later);
    assert_eq!(names(dir.path()), [106, 109]);
    let (mut log, _) = RecordLogWriter::open(dir.path()).unwrap();
    assert_eq!(log.prune_before_held(1000).unwrap(), 0, "106 is at the hold");
    rt.block_on(shipper.ship_once()).unwrap();
    assert_eq!(aldb_format::shipped::read_records_shipped(dir.path()).unwrap(), Some(109));
    let m = rt.block_on(read_manifest(&store, &prefix)).unwrap();
    assert!(m.record_segments.iter().any(|g| g.first_slot == 106 && g.sealed && g.last_slot == Some(108)));
    assert_eq!(log.prune_before_held(1000).unwrap(), 1);
    assert_eq!(names(dir.path()), [109]);
    assert_eq!(shipper.metrics().failures.get(), 0);
}
