//! For random histories, every proof Hyades serves at every kept slot verifies against the root
//! Pleiades committed for that slot and agrees with a naive per-slot model of the accounts.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use aldb_core::{ChangeSet, Claim, Config, Pleiades};
use aldb_format::{QueryError, SnapshotReader};
use aldb_snapshot::{AccountBatch, SlotInput, SnapshotWriter, WriterConfig};
use aldb_testkit::random::{Mix, history_writes};
use aldb_testkit::{Acct, State, account_ref, refs};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Deletions from 88 of 100, data under 120 bytes.
const MIX: Mix = Mix { delete_from: 88, max_data: 120 };

struct Run {
    tree: Pleiades,
    writer: SnapshotWriter,
    state: State,
    history: BTreeMap<u64, ([u8; 32], State)>,
}

impl Run {
    fn commit(&mut self, slot: u64, accts: &[([u8; 32], Acct)], full: bool) {
        let refs = refs(accts);
        let updates = self.tree.hash_accounts(&refs);
        let batch = AccountBatch::from_updates(&updates, &refs);
        let mut changes = ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS);
        let root = self.tree.commit_capture(updates, &mut changes);
        let mut accounts = batch;
        if full {
            self.tree.capture_all(&mut changes);
            // A full snapshot carries every live account.
            accounts = AccountBatch::default();
            for (pk, a) in &self.state {
                accounts.push(aldb_verify::spec::key_path(pk), &account_ref(pk, a));
            }
            for (pk, a) in accts {
                accounts.push(aldb_verify::spec::key_path(pk), &account_ref(pk, a));
            }
        }
        for (pk, a) in accts {
            if a.lamports == 0 {
                self.state.remove(pk);
            } else {
                self.state.insert(*pk, a.clone());
            }
        }
        self.writer.submit(SlotInput { slot, parent: slot.checked_sub(1), root, changes, accounts, full }).unwrap();
        self.history.insert(slot, (root, self.state.clone()));
    }
}

fn check_slot(h: &SnapshotReader, slot: u64, root: &[u8; 32], state: &State, probes: &[[u8; 32]]) {
    for pk in probes {
        let p = h.prove(pk, Some(slot)).unwrap_or_else(|e| panic!("slot {slot}: {e}"));
        assert_eq!(&p.root, root, "slot {slot}");
        let claim = p.proof.verify(root, pk).unwrap_or_else(|e| panic!("slot {slot}: {e}"));
        match state.get(pk) {
            Some(a) => {
                let got = p.account.as_ref().expect("present account is served");
                assert_eq!(
                    (got.lamports, got.owner, got.executable, &got.data),
                    (a.lamports, a.owner, a.executable, &a.data)
                );
                assert_eq!(
                    claim,
                    Claim::Present { value: aldb_naive::value(a.lamports, &a.owner, a.executable, &a.data) }
                );
            }
            None => {
                assert!(p.account.is_none());
                assert_eq!(claim, Claim::Absent);
            }
        }
    }
}

fn run_history(seed: u64, config: Config, wc: impl Fn(&std::path::Path) -> WriterConfig, slots: u64, per_slot: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut keys = Vec::new();
    let mut run = Run {
        tree: Pleiades::new(config).unwrap(),
        writer: SnapshotWriter::start(wc(dir.path()), None).unwrap(),
        state: State::new(),
        history: BTreeMap::new(),
    };
    for slot in 0..slots {
        let accts = history_writes(&mut rng, &mut keys, per_slot, MIX);
        run.commit(slot, &accts, slot == 0);
    }
    run.writer.flush().unwrap();
    let keep = wc(dir.path()).keep_slots;
    let every = wc(dir.path()).every;
    let h = SnapshotReader::open(dir.path()).unwrap();
    let latest = h.latest().unwrap();
    assert_eq!(latest.slot, run.history.keys().rev().find(|s| (*s + 1) % every == 0).copied().unwrap());
    let mut probes: Vec<[u8; 32]> = keys.iter().step_by(3).copied().collect();
    probes.extend((0..10u8).map(|i| [i; 32]));
    let mut served = 0;
    for (slot, (root, state)) in &run.history {
        match h.slot(Some(*slot)) {
            Ok(info) => {
                assert_eq!(&info.root, root);
                check_slot(&h, *slot, root, state, &probes);
                served += 1;
            }
            // Slots before the first published one (every > 1) also report as pruned.
            Err(QueryError::Pruned { .. }) => {
                assert!(latest.slot - slot >= keep || *slot + 1 < every, "slot {slot} pruned too early")
            }
            Err(QueryError::NoSnapshot { .. }) => assert!(every > 1 && (slot + 1) % every != 0),
            Err(e) => panic!("slot {slot}: {e}"),
        }
    }
    assert!(served as u64 >= keep.min(slots / every));
    run.writer.shutdown().unwrap();
}

#[test]
fn every_slot_is_provable_without_pruning() {
    // Odd and even bucket levels: node records end with two bucket references (a single level
    // above the buckets), four, or eight (an odd bucket level below the top).
    for (shard_bits, bucket_bits) in [(0, 0), (1, 1), (1, 2), (1, 3), (2, 4), (2, 5), (3, 7), (4, 9)] {
        let config = Config::new(2, shard_bits, bucket_bits).unwrap();
        run_history(1, config, |d| WriterConfig { keep_slots: 1000, refresh_slots: 4, ..WriterConfig::new(d) }, 24, 60);
    }
}

#[test]
fn retention_prunes_files_but_keeps_kept_slots_provable() {
    let config = Config::new(2, 3, 8).unwrap();
    run_history(2, config, |d| WriterConfig { keep_slots: 6, refresh_slots: 4, ..WriterConfig::new(d) }, 40, 80);
}

#[test]
fn every_kth_slot_merges_changes() {
    let config = Config::new(2, 2, 6).unwrap();
    run_history(
        3,
        config,
        |d| WriterConfig { every: 3, keep_slots: 100, refresh_slots: 8, ..WriterConfig::new(d) },
        30,
        50,
    );
}

/// A run on a small tree, writing through `wc`.
fn small_run(wc: WriterConfig) -> Run {
    Run {
        tree: Pleiades::new(Config::new(2, 2, 6).unwrap()).unwrap(),
        writer: SnapshotWriter::start(wc, None).unwrap(),
        state: State::new(),
        history: BTreeMap::new(),
    }
}

/// An account with random fields and up to 119 bytes of data.
fn random_acct(rng: &mut ChaCha8Rng) -> Acct {
    Acct {
        lamports: rng.random_range(1..1_000_000),
        owner: rng.random(),
        executable: false,
        data: (0..rng.random_range(0..120)).map(|_| rng.random()).collect(),
    }
}

#[test]
fn refresh_carries_forward_only_records_from_before_its_cycle() {
    // 4 chunks, so a cycle is 4 delta files: slot 1 is the first file of cycle 1 (chunk 0).
    let dir = tempfile::tempdir().unwrap();
    let wc = WriterConfig { keep_slots: 2, refresh_slots: 4, ..WriterConfig::new(dir.path()) };
    let mut run = small_run(wc);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let acct = random_acct;
    let keys: Vec<[u8; 32]> = (0..64).map(|_| rng.random()).collect();
    let all = |rng: &mut ChaCha8Rng| keys.iter().map(|k| (*k, acct(rng))).collect::<Vec<_>>();
    let first = all(&mut rng);
    run.commit(0, &first, true);
    // Slot 1 rewrites every account, bucket and node, so nothing predates cycle 1.
    let again = all(&mut rng);
    run.commit(1, &again, false);
    let hot = keys[0];
    for slot in 2..=12 {
        let a = acct(&mut rng);
        run.commit(slot, &[(hot, a)], false);
        if slot == 4 {
            run.writer.flush().unwrap();
            let copied = run.writer.stats().refresh_bytes.load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(copied, 0, "cycle 1 found everything already written within it");
        }
        if slot == 8 {
            run.writer.flush().unwrap();
            let copied = run.writer.stats().refresh_bytes.load(std::sync::atomic::Ordering::Relaxed);
            assert!(copied > 63 * 76, "cycle 2 carries the 63 cold accounts forward, copied {copied}");
        }
    }
    run.writer.flush().unwrap();
    let h = SnapshotReader::open(dir.path()).unwrap();
    // Cycles 2 and 3 completed, so the files of slots 0 and 1 are gone...
    assert!(matches!(h.slot(Some(1)), Err(QueryError::Pruned { .. })));
    // ...and every account is still served, with proofs, at the kept slots.
    let probes: Vec<[u8; 32]> = keys.iter().copied().chain([[7u8; 32]]).collect();
    for slot in 11..=12 {
        let (root, state) = &run.history[&slot];
        check_slot(&h, slot, root, state, &probes);
    }
    run.writer.shutdown().unwrap();
}

#[test]
fn retention_waits_for_the_archive_hold() {
    // The same history as above, whose cycles prune the files of slots 0 and 1, with retention
    // held for a shipper: nothing is deleted before the shipper records a hold, nothing at or
    // above the hold after, and retention is as without a hold once the hold passes. (Deletion
    // itself is asynchronous, so only what must never be deleted is checked on the files.)
    let dir = tempfile::tempdir().unwrap();
    let wc = WriterConfig { keep_slots: 2, refresh_slots: 4, hold_for_shipper: true, ..WriterConfig::new(dir.path()) };
    let mut run = small_run(wc);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let acct = random_acct;
    let keys: Vec<[u8; 32]> = (0..64).map(|_| rng.random()).collect();
    let all = |rng: &mut ChaCha8Rng| keys.iter().map(|k| (*k, acct(rng))).collect::<Vec<_>>();
    let snaps = |dir: &std::path::Path| -> BTreeMap<u32, u64> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| aldb_format::format::parse_file_name(&e.unwrap().file_name().to_string_lossy()))
            .collect()
    };
    let first = all(&mut rng);
    run.commit(0, &first, true);
    let again = all(&mut rng);
    run.commit(1, &again, false);
    let hot = keys[0];
    let mut slot = 2;
    let mut step = |run: &mut Run, rng: &mut ChaCha8Rng| {
        let a = acct(rng);
        run.commit(slot, &[(hot, a)], false);
        slot += 1;
        run.writer.flush().unwrap();
    };
    for _ in 2..=12 {
        step(&mut run, &mut rng);
    }
    let published = snaps(dir.path());
    assert_eq!(published.len(), 13, "no hold file yet: every file is kept");
    let seq_of_slot1 = published.iter().find(|(_, s)| **s == 1).map(|(q, _)| *q).unwrap();
    aldb_format::shipped::write_shipped(dir.path(), u64::from(seq_of_slot1)).unwrap();
    step(&mut run, &mut rng);
    let held = snaps(dir.path());
    assert!(held.contains_key(&seq_of_slot1), "the file at the hold is kept: {held:?}");
    aldb_format::shipped::write_shipped(dir.path(), u64::MAX).unwrap();
    step(&mut run, &mut rng);
    let h = SnapshotReader::open(dir.path()).unwrap();
    assert!(matches!(h.slot(Some(1)), Err(QueryError::Pruned { .. })), "past the hold, retention as without it");
    let probes: Vec<[u8; 32]> = keys.iter().copied().chain([[7u8; 32]]).collect();
    let newest = *run.history.keys().next_back().unwrap();
    let (root, state) = &run.history[&newest];
    check_slot(&h, newest, root, state, &probes);
    run.writer.shutdown().unwrap();
}
