//! A sink that cannot write (its directory gone, a file in its place) changes no root and fails
//! no call: the module answers exactly what a module without a sink answers. A directory gone is
//! not waited for (`tests/retry.rs` has the failures that are): files come back with the next base
//! once the directory is back.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use aldb_bank::{BankRoots, RecordsConfig, SinkConfig, SinkStats};
use aldb_format::SnapshotReader;
use aldb_testkit::{State, apply, as_writes, naive_root, random::bank_writes, refs};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The same calls to a module with a sink and one without: the same answers.
struct Pair {
    with: BankRoots,
    without: BankRoots,
    states: BTreeMap<u64, State>,
    rng: ChaCha8Rng,
}

impl Pair {
    fn base(&mut self, slot: u64, state: &State) {
        let all = as_writes(state);
        let a = self.with.build_base(slot, &refs(&all)).unwrap();
        assert_eq!(a, self.without.build_base(slot, &refs(&all)).unwrap());
        assert_eq!(a, naive_root(state));
        self.states = BTreeMap::from([(slot, state.clone())]);
    }

    fn freeze(&mut self, slot: u64, parent: u64) -> [u8; 32] {
        let mut state = self.states[&parent].clone();
        let n = self.rng.random_range(1..30);
        let w = bank_writes(&mut self.rng, &state, n);
        apply(&mut state, &w);
        let a = self.with.freeze(slot, parent, &refs(&w)).unwrap();
        assert_eq!(a, self.without.freeze(slot, parent, &refs(&w)).unwrap(), "slot {slot}");
        assert_eq!(a, naive_root(&state), "slot {slot}");
        self.with.bank_hash(slot, aldb_bank::BankMeta::default()).unwrap();
        self.states.insert(slot, state);
        a
    }

    fn confirm_and_root(&mut self, slot: u64) {
        self.with.confirmed(slot).unwrap();
        assert_eq!(self.with.root(slot).unwrap(), self.without.root(slot).unwrap());
    }

    fn dead(&mut self, slot: u64) {
        assert_eq!(self.with.dead(slot).unwrap(), self.without.dead(slot).unwrap());
    }
}

#[test]
fn a_sink_that_cannot_write_changes_no_root() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("snapshots");
    let config = SinkConfig {
        records: Some(RecordsConfig {
            keypair: None,
            levels: vec![aldb_bank::RecordLevel::Finalized],
            keep_slots: 100,
        }),
        genesis_hash: Some([1; 32]),
        threads: Some(2),
        queue_bound: 4096,
        direct_io: false,
        ..SinkConfig::new(&dir)
    };
    let mut p = Pair {
        with: BankRoots::with_sink(&config).unwrap(),
        without: BankRoots::new(1),
        states: BTreeMap::new(),
        rng: ChaCha8Rng::seed_from_u64(5),
    };
    let mut genesis = State::new();
    let g = bank_writes(&mut p.rng, &genesis, 200);
    apply(&mut genesis, &g);
    p.base(0, &genesis);
    for slot in 1..6 {
        p.freeze(slot, slot - 1);
    }
    p.confirm_and_root(3);
    p.with.flush_sink();
    let stats = p.with.sink_stats().unwrap();
    assert_eq!(SinkStats::get(&stats.banks_refused), 0);

    // The directory goes away and a file takes its place: every write and every record fails.
    std::fs::rename(&dir, tmp.path().join("moved")).unwrap();
    std::fs::write(&dir, b"in the way").unwrap();
    for slot in 6..30u64 {
        let mut parent = if slot % 5 == 0 { slot - 2 } else { slot - 1 };
        while !p.without.holds(parent) {
            parent -= 1;
        }
        p.freeze(slot, parent);
        if slot % 7 == 0 {
            p.confirm_and_root(slot - 1);
        }
        if slot % 9 == 0 {
            p.dead(slot);
        }
    }
    p.with.flush_sink();
    assert!(SinkStats::get(&stats.banks_refused) > 0, "the failed writes were counted");
    // A directory that is not a directory is no failure a wait cures: refused at once, as the
    // module never held a bank for it.
    assert_eq!(SinkStats::get(&stats.write_retries), 0);
    assert_eq!(SinkStats::get(&stats.write_failing), 0);

    // Back again: a new base (a restart's first freeze) writes a whole file, and banks on it.
    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(tmp.path().join("moved"), &dir).unwrap();
    let newest = *p.states.keys().max().unwrap();
    let state = p.states[&newest].clone();
    p.base(100, &state);
    let r101 = p.freeze(101, 100);
    p.with.flush_sink();
    let reader = SnapshotReader::open(&dir).unwrap();
    assert_eq!(reader.slot(Some(100)).unwrap().root, naive_root(&state));
    assert_eq!(reader.slot(Some(101)).unwrap().root, r101);
    assert_eq!(reader.latest().unwrap().slot, 101);
}
