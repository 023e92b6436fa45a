//! A bank held through a failed write is the input the module submitted, back from the writer,
//! not a copy: the writer ends up with the only buffers (and hands them back once written), and
//! the writer thread gives back none of its own.
//!
//! The fault is real and local to the directory: a directory stands where the writer creates the
//! bank's temporary file, so creating it fails (`EISDIR`, an I/O error that can pass) until the
//! directory is removed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aldb_format::SnapshotReader;
use aldb_format::format::{file_name, parse_file_name};
use aldb_snapshot::WriterConfig;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::queued::queue::Queue;
use crate::snapshots::Snapshots;
use crate::spares::Spares;
use crate::stats::NodeStats;
use crate::test_support::{acct, bank, engine_and_base};
use crate::{NodeConfig, WritePolicy};

/// The newest published file's sequence number.
fn last_seq(dir: &std::path::Path) -> u32 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| parse_file_name(&e.unwrap().file_name().to_string_lossy()))
        .map(|(seq, _)| seq)
        .max()
        .unwrap()
}

#[test]
fn a_held_bank_is_the_submitted_input_not_a_copy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().to_path_buf();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let genesis: Vec<_> = (0..300).map(|_| (rng.random(), acct(rng.random_range(1..100), vec![1u8; 8]))).collect();
    let (mut engine, base) = engine_and_base(&genesis);
    let mut writes = BTreeMap::new();
    for slot in 1..=2u64 {
        let w: Vec<_> = (0..40).map(|_| (rng.random(), acct(rng.random_range(1..100), vec![2u8; 16]))).collect();
        writes.insert(slot, w);
    }

    let stats = Arc::new(NodeStats::default());
    let config = NodeConfig {
        name: "aldb-bank",
        writer: WriterConfig { forks: true, direct_io: false, ..WriterConfig::new(&dir) },
        writes: WritePolicy::HoldAndRetry,
        records: None,
        bank_hash_slots: 1 << 14,
    };
    let spares = Arc::new(Spares::default());
    let mut worker = Snapshots::start(&config, stats.clone(), spares.clone()).unwrap();
    let writer_stats = worker.writer_stats().clone();
    worker.set_holder(Arc::new(Queue::new(64, usize::MAX, stats.clone())));
    worker.write(base);
    worker.write(bank(&mut engine, 1, 0, &writes[&1]));

    // Slot 2's file cannot be created until the directory in its way is removed, which happens
    // once the writer has refused the first try.
    let blocker = dir.join(format!(".{}.tmp", file_name(last_seq(&dir) + 1, 2)));
    std::fs::create_dir(&blocker).unwrap();
    let input = bank(&mut engine, 2, 1, &writes[&2]);
    let (root, submitted) = (input.root, input.accounts.entries().as_ptr());
    let unblock = std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(60);
        while writer_stats.fork_refused.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < deadline, "the first try was never refused");
            std::thread::sleep(Duration::from_millis(5));
        }
        std::fs::remove_dir(&blocker).unwrap();
    });
    worker.write(input);
    unblock.join().unwrap();
    assert_eq!(NodeStats::get(&stats.write_recoveries), 1);
    assert!(NodeStats::get(&stats.write_retries) >= 1);
    assert_eq!(NodeStats::get(&stats.banks_refused), 0);

    // Every input the writer was given came back from it once written, slot 2's in the buffers
    // first submitted; the writer thread itself kept no input to give back.
    let mut back = Vec::new();
    while let Some((_, accounts)) = worker.writer.take_spare() {
        back.push(accounts.entries().as_ptr());
    }
    assert_eq!(back.len(), 3, "one set of buffers per bank written, none for a copy");
    assert_eq!(back[2], submitted, "slot 2 was written from the buffers submitted");
    assert!(spares.take().is_none(), "the writer thread recycled nothing of its own");

    let Snapshots { writer, .. } = worker;
    writer.shutdown().unwrap();
    assert_eq!(SnapshotReader::open(&dir).unwrap().slot(Some(2)).unwrap().root, root);
}
