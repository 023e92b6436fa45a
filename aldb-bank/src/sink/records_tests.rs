//! Record log retention: with `hold_for_shipper` no segment the shipper has not recorded as
//! archived (`shipped-records.slot`) is deleted, and none before it recorded anything; without it
//! `records.keep_slots` alone rules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use aldb_format::records::{RecordLogReader, encode_entry, list_segments, segment_header, segment_name};

use super::Records;
use crate::config::{RecordLevel, RecordsConfig};
use crate::sink::queue::BankId;
use crate::sink::stats::SinkStats;

fn bank(slot: u64) -> BankId {
    BankId { slot, parent: slot.checked_sub(1), root: [slot as u8; 32] }
}

/// The first slots of the record log's segments.
fn segments(dir: &Path) -> Vec<u64> {
    list_segments(&dir.join("records")).unwrap().into_iter().map(|(first, _)| first).collect()
}

/// Cuts the log into segments of three records (a real log cuts every 65,536), so pruning has
/// something to delete after a few records.
fn cut_in_threes(dir: &Path) {
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

#[test]
fn record_pruning_waits_for_the_shipper_when_held() {
    for held in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let config = RecordsConfig { keypair: None, levels: vec![RecordLevel::Confirmed], keep_slots: 1 };
        let stats = SinkStats::default();
        let mut r = Records::open(dir.clone(), [1; 32], &config, held).unwrap();
        for s in 0..6 {
            r.confirmed(&bank(s), None, &stats);
        }
        cut_in_threes(&dir);
        r.reopen().unwrap();
        r.prune_in = 1;
        r.confirmed(&bank(6), None, &stats);
        if !held {
            assert_eq!(segments(&dir), [3], "segment 0 holds only slots below 5");
            continue;
        }
        assert_eq!(segments(&dir), [0, 3], "no hold yet: nothing may go");
        // The shipper archived segment 0 only: it goes, segment 3 stays though it is old enough.
        aldb_format::shipped::write_records_shipped(&dir, 3).unwrap();
        for s in 7..10 {
            r.confirmed(&bank(s), None, &stats);
        }
        cut_in_threes(&dir);
        r.reopen().unwrap();
        assert_eq!(segments(&dir), [0, 3, 6, 9]);
        r.prune_in = 1;
        r.confirmed(&bank(10), None, &stats);
        assert_eq!(segments(&dir), [3, 6, 9], "below the hold only");
        // The hold passes everything old enough: retention as without it.
        aldb_format::shipped::write_records_shipped(&dir, 9).unwrap();
        r.prune_in = 1;
        r.confirmed(&bank(11), None, &stats);
        assert_eq!(segments(&dir), [9]);
        assert_eq!(SinkStats::get(&stats.records_produced), 12);
        assert_eq!(SinkStats::get(&stats.record_errors), 0);
    }
}
