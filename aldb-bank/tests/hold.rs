//! `hold_for_shipper`: the sink's retention deletes no snapshot file the shipper has not recorded
//! as archived (`shipped.seq`), and none before it recorded anything; once it has, pruning goes
//! on up to the hold. The same history without the option prunes below the hold, so the kept
//! files are the option's doing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use aldb_bank::{BankRoots, SinkConfig};
use aldb_format::SnapshotReader;
use aldb_testkit::{State, apply, naive_root, random::bank_writes, refs};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// The published snapshot files of `dir`: sequence number to slot.
fn files(dir: &Path) -> BTreeMap<u32, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| aldb_format::format::parse_file_name(&e.unwrap().file_name().to_string_lossy()))
        .collect()
}

/// Waits (up to a minute, which only a broken pruner needs) until `done` holds: files are
/// deleted by the writer's pruner thread, after the write that allows it.
fn wait_for(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A chain of rooted banks written with two slots kept and a refresh over four, so old files
/// become unreachable quickly.
struct Chain {
    roots: BankRoots,
    states: BTreeMap<u64, State>,
    rng: ChaCha8Rng,
    next: u64,
}

impl Chain {
    fn new(dir: &Path, hold_for_shipper: bool) -> Self {
        let config = SinkConfig {
            keep_slots: 2,
            refresh_slots: 4,
            threads: Some(2),
            queue_bound: 4096,
            direct_io: false,
            hold_for_shipper,
            ..SinkConfig::new(dir)
        };
        let mut roots = BankRoots::with_sink(&config).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(21);
        let g = bank_writes(&mut rng, &State::new(), 100);
        let mut genesis = State::new();
        apply(&mut genesis, &g);
        roots.build_base(0, &refs(&g)).unwrap();
        Self { roots, states: BTreeMap::from([(0, genesis)]), rng, next: 1 }
    }

    /// Freezes, confirms and roots the next `n` slots, and waits until the writer has them.
    fn extend(&mut self, n: u64) {
        for _ in 0..n {
            let (slot, parent) = (self.next, self.next - 1);
            let mut state = self.states[&parent].clone();
            let w = bank_writes(&mut self.rng, &state, 10);
            apply(&mut state, &w);
            assert_eq!(self.roots.freeze(slot, parent, &refs(&w)).unwrap(), naive_root(&state));
            self.roots.confirmed(slot).unwrap();
            self.roots.root(slot).unwrap();
            self.states.insert(slot, state);
            self.next += 1;
        }
        self.roots.flush_sink();
    }
}

#[test]
fn retention_waits_for_the_shipper_and_resumes_up_to_its_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let (free_dir, held_dir) = (tmp.path().join("free"), tmp.path().join("held"));

    // Without the option, this history prunes every file below slot 5's (the two slots kept
    // reach no further back).
    let mut free = Chain::new(&free_dir, false);
    free.extend(12);
    wait_for("the files below slot 5 to be pruned", || files(&free_dir).values().all(|&s| s >= 5));

    // With it and no `shipped.seq`, nothing goes: every bank's file is there, past `keep_slots`.
    let mut held = Chain::new(&held_dir, true);
    held.extend(12);
    let before = files(&held_dir);
    assert_eq!(before.values().copied().collect::<Vec<_>>(), (0..=12).collect::<Vec<u64>>());

    // The shipper archived the files below slot 2's: those may go, and go with the next write;
    // slot 2's and every later one stay, though the history alone prunes those of slots 2 to 4.
    let hold = before.iter().find(|(_, s)| **s == 2).map(|(q, _)| *q).unwrap();
    aldb_format::shipped::write_shipped(&held_dir, u64::from(hold)).unwrap();
    held.extend(1);
    wait_for("the files below the hold to be pruned", || files(&held_dir).keys().all(|&q| q >= hold));
    let after = files(&held_dir);
    for (seq, slot) in before.range(hold..) {
        assert_eq!(after.get(seq), Some(slot), "file {seq} (slot {slot}) is at or above the hold");
    }
    assert_eq!(after.values().copied().collect::<Vec<_>>(), (2..=13).collect::<Vec<u64>>());

    // What is kept is still served: the newest slot proves its root.
    let reader = SnapshotReader::open(&held_dir).unwrap();
    assert_eq!(reader.slot(Some(13)).unwrap().root, naive_root(&held.states[&13]));
}
