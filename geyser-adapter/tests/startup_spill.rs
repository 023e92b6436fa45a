//! Streaming startup: startup accounts handed to the node pipeline's spill as they arrive, the
//! base state bulk-built from their hashes, and the full snapshot written from the spill.
//!
//! Duplicates across slots and write versions come in random order (fixed seeds), from several
//! threads; the root must be the naive model's, and the full snapshot must serve every winning
//! account bit for bit (and no deleted one).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use aldb_format::SnapshotReader;
use aldb_naive::NaiveState;
use aldb_node::StartupAccounts;
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SPILL_DIR, SlotInput, SnapshotWriter, StartupSpill, WriterConfig};
use geyser_adapter::{Adapter, AdapterConfig, CommitKind, Commitment, KeepAccounts, NoRecords, Retain, StartupSink};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

mod common;
use common::Acct;

/// `distinct` accounts with 1 to 4 states each (other slots and write versions, sometimes the
/// same rank twice, sometimes a deletion), shuffled.
fn startup_accounts(seed: u64, distinct: usize) -> Vec<Acct> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out: Vec<Acct> = Vec::new();
    for _ in 0..distinct {
        let pubkey: [u8; 32] = rng.random();
        for _ in 0..rng.random_range(1..=4) {
            let tie = !out.is_empty() && rng.random_range(0..8) == 0;
            let (slot, write_version) = match (tie, out.last()) {
                (true, Some(prev)) if prev.pubkey == pubkey => (prev.slot, prev.write_version),
                _ => (rng.random_range(100..110), rng.random_range(0..4)),
            };
            let len = [0, 1, 31, 165, 1000, 4096][rng.random_range(0..6)];
            out.push(Acct {
                slot,
                write_version,
                pubkey,
                lamports: if rng.random_range(0..6) == 0 { 0 } else { rng.random_range(1..1 << 40) },
                owner: rng.random(),
                executable: rng.random(),
                data: (0..len).map(|_| rng.random()).collect(),
                is_startup: true,
            });
        }
    }
    out.shuffle(&mut rng);
    out
}

/// The winner of each pubkey: the highest `(slot, write_version)`, the later arrival of equal
/// ones. Feeding splits by pubkey, so each pubkey's states arrive in list order.
fn winners(accts: &[Acct]) -> BTreeMap<[u8; 32], Acct> {
    let mut w: BTreeMap<[u8; 32], Acct> = BTreeMap::new();
    for a in accts {
        match w.get(&a.pubkey) {
            Some(old) if (old.slot, old.write_version) > (a.slot, a.write_version) => {}
            _ => {
                w.insert(a.pubkey, a.clone());
            }
        }
    }
    w
}

fn naive_root(w: &BTreeMap<[u8; 32], Acct>) -> [u8; 32] {
    let mut s = NaiveState::default();
    for a in w.values() {
        s.apply_account(&a.pubkey, a.lamports, &a.owner, a.executable, &a.data);
    }
    s.root()
}

/// Feeds the accounts from `threads` threads, each pubkey always from the same one.
fn feed<R: Retain>(adapter: &Adapter<R>, accts: &[Acct], threads: usize) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for a in accts.iter().filter(|a| usize::from(a.pubkey[31]) % threads == t) {
                    adapter.update_account(&a.update()).unwrap();
                }
            });
        }
    });
}

/// The adapter's handle on the pipeline's spill, as the plugin makes it.
struct Feed(Arc<StartupAccounts>);

impl StartupSink for Feed {
    fn append(&self, path: &[u8; 32], rank: (u64, u64), account: &aldb_core::AccountRef<'_>) {
        self.0.append(path, rank, account);
    }
}

/// The pipeline's spill in `dir` (partitions as `bits`), and the adapter's handle on it.
fn spill(dir: &Path, bits: u8) -> (Arc<StartupAccounts>, Arc<dyn StartupSink>) {
    let accounts = Arc::new(StartupAccounts::new(StartupSpill::create(dir, bits).unwrap()));
    (accounts.clone(), Arc::new(Feed(accounts)))
}

fn config(leaves: u64) -> AdapterConfig {
    let mut c = AdapterConfig::new(Commitment::Confirmed, aldb_core::Config::for_leaves(leaves, 2));
    c.capture_changes = Some(CAPTURE_OPTIONS);
    // One stripe: its startup batches fill up and go to the builder during the feed, as they do
    // with the default 64 stripes at real sizes.
    c.stripes = 1;
    c
}

/// Runs a spilled startup into `dir`: returns the committed slot and root after the full
/// snapshot is written.
fn spilled_startup(dir: &Path, accts: &[Acct], threads: usize) -> (u64, [u8; 32]) {
    let adapter = Adapter::with_retain(config(accts.len() as u64), KeepAccounts).unwrap();
    let (accounts, sink) = spill(dir, 3);
    adapter.spill_startup(sink).unwrap();
    assert!(adapter.take_startup_sink().is_none(), "startup still open");
    feed(&adapter, accts, threads);
    assert!(dir.join(SPILL_DIR).exists());
    adapter.end_of_startup().unwrap();
    let mut committed = adapter.commit_ready();
    assert_eq!(committed.len(), 1);
    let c = committed.remove(0);
    assert_eq!(c.kind, CommitKind::Startup);
    assert!(c.records.is_empty(), "a spilled startup keeps no records");
    adapter.take_startup_sink().expect("startup is over");
    let spill = accounts.finish().expect("a spill").expect("no append failed");
    assert_eq!(spill.accounts(), accts.len() as u64);
    let writer = SnapshotWriter::start(WriterConfig::new(dir), None).unwrap();
    let input = SlotInput {
        slot: c.slot,
        parent: None,
        root: c.root,
        changes: c.changes.expect("captured"),
        accounts: AccountBatch::from_spill(spill),
        full: true,
    };
    writer.submit(input).unwrap();
    writer.flush().unwrap();
    writer.shutdown().unwrap();
    assert!(!dir.join(SPILL_DIR).exists(), "the spill is removed once written");
    (c.slot, c.root)
}

fn check_served(dir: &Path, slot: u64, root: [u8; 32], w: &BTreeMap<[u8; 32], Acct>) {
    let reader = SnapshotReader::open(dir).unwrap();
    assert_eq!(reader.latest().map(|i| (i.slot, i.root)), Some((slot, root)));
    for a in w.values() {
        let got = reader.prove(&a.pubkey, Some(slot)).unwrap();
        match got.account {
            None => assert_eq!(a.lamports, 0, "a live winner is missing"),
            Some(g) => {
                assert_ne!(a.lamports, 0, "a deleted account is served");
                assert_eq!(
                    (g.pubkey, g.lamports, g.owner, g.executable, &g.data),
                    (a.pubkey, a.lamports, a.owner, a.executable, &a.data)
                );
            }
        }
    }
}

#[test]
fn spilled_startup_gives_the_naive_root_and_serves_every_winner() {
    for (seed, distinct, threads) in [(1u64, 1, 1), (2, 700, 1), (3, 3000, 4), (4, 5000, 3)] {
        let accts = startup_accounts(seed, distinct);
        let w = winners(&accts);
        let dir = tempfile::tempdir().unwrap();
        let (slot, root) = spilled_startup(dir.path(), &accts, threads);
        assert_eq!(root, naive_root(&w), "seed {seed}");
        assert_eq!(slot, accts.iter().map(|a| a.slot).max().unwrap());
        check_served(dir.path(), slot, root, &w);
    }
}

/// The hashes alone stream into the builder too (no records to resolve): same root as keeping
/// every startup account until the end.
#[test]
fn streamed_hashes_give_the_same_root_as_held_records() {
    let accts = startup_accounts(11, 20_000);
    let w = winners(&accts);
    let streamed = Adapter::with_retain(config(accts.len() as u64), NoRecords).unwrap();
    feed(&streamed, &accts, 4);
    streamed.end_of_startup().unwrap();
    let held = Adapter::with_retain(config(accts.len() as u64), KeepAccounts).unwrap();
    feed(&held, &accts, 4);
    held.end_of_startup().unwrap();
    let (a, b) = (streamed.commit_ready(), held.commit_ready());
    assert_eq!(a[0].root, naive_root(&w));
    assert_eq!(b[0].root, a[0].root);
    assert_eq!(b[0].records.len(), w.values().filter(|a| a.lamports != 0).count());
}

/// A spill left by a start that crashed is never served, is removed by the next start's spill,
/// and the next start publishes its own full state.
#[test]
fn a_spill_left_by_a_crash_is_ignored_and_removed() {
    let dir = tempfile::tempdir().unwrap();
    // A published full state from an earlier run.
    let first = startup_accounts(21, 400);
    let (slot, root) = spilled_startup(dir.path(), &first, 2);
    // A start that crashed during startup: a spill is half written and never finished.
    {
        let crashed = StartupSpill::create(dir.path(), 3).unwrap();
        for a in startup_accounts(22, 300).iter() {
            let u = a.update();
            crashed.append(&aldb_verify::spec::key_path(&a.pubkey), (a.slot, a.write_version), &u.account()).unwrap();
        }
        // Dropped unfinished, as a crash leaves it: its files stay.
        drop(crashed);
    }
    let partial = dir.path().join(SPILL_DIR);
    assert!(std::fs::read_dir(&partial).unwrap().count() > 0);
    // Readers and a writer starting on the directory see only the published state.
    let reader = SnapshotReader::open(dir.path()).unwrap();
    assert_eq!(reader.latest().map(|i| (i.slot, i.root)), Some((slot, root)));
    assert!(reader.damaged_files().is_empty());
    drop(reader);
    let writer = SnapshotWriter::start(WriterConfig::new(dir.path()), None).unwrap();
    writer.shutdown().unwrap();
    // The restart's own spill removes it before taking the startup accounts again.
    let second = startup_accounts(23, 500);
    let w = winners(&second);
    let adapter = Adapter::with_retain(config(16), KeepAccounts).unwrap();
    adapter.spill_startup(spill(dir.path(), 3).1).unwrap();
    assert!(std::fs::read_dir(&partial).unwrap().next().is_none(), "the crashed start's partitions are gone");
    drop(adapter);
    let (slot2, root2) = spilled_startup(dir.path(), &second, 2);
    assert_eq!(root2, naive_root(&w));
    check_served(dir.path(), slot2, root2, &w);
}

/// The spill must be set before startup accounts arrive.
#[test]
fn a_spill_set_late_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let adapter = Adapter::with_retain(config(16), KeepAccounts).unwrap();
    let a = &startup_accounts(5, 1)[0];
    adapter.update_account(&a.update()).unwrap();
    assert!(adapter.spill_startup(spill(dir.path(), 1).1).is_err());
}

/// A spilled full state merged with the next slot before either is written (`every = 2`, as a
/// failing writer also merges what it holds): each leaf's account comes from the slot when it
/// wrote it, else from the spill; accounts the slot deleted are gone.
#[test]
fn a_spilled_full_state_merges_with_the_next_slot() {
    use geyser_adapter::{SlotEvent, SlotStatus};
    let dir = tempfile::tempdir().unwrap();
    let accts = startup_accounts(31, 2000);
    let mut w = winners(&accts);
    let adapter = Adapter::with_retain(config(accts.len() as u64), KeepAccounts).unwrap();
    let (accounts, sink) = spill(dir.path(), 3);
    adapter.spill_startup(sink).unwrap();
    feed(&adapter, &accts, 2);
    adapter.end_of_startup().unwrap();
    let base = adapter.commit_ready().remove(0);
    adapter.take_startup_sink().unwrap();
    let spill = accounts.finish().unwrap().unwrap();

    // The next slot rewrites some accounts, deletes some, creates some.
    let next = base.slot + 1;
    let mut rng = ChaCha8Rng::seed_from_u64(32);
    let live: Vec<[u8; 32]> = w.values().filter(|a| a.lamports != 0).map(|a| a.pubkey).collect();
    let mut slot_accts = Vec::new();
    for (i, pk) in live.iter().take(120).enumerate() {
        let lamports = if i % 4 == 0 { 0 } else { rng.random_range(1..1 << 40) };
        slot_accts.push(Acct {
            slot: next,
            write_version: 1,
            pubkey: *pk,
            lamports,
            owner: [3; 32],
            executable: false,
            data: vec![i as u8; i],
            is_startup: false,
        });
    }
    for i in 0..40u8 {
        slot_accts.push(Acct {
            slot: next,
            write_version: 1,
            pubkey: rng.random(),
            lamports: 5,
            owner: [4; 32],
            executable: true,
            data: vec![i; 70],
            is_startup: false,
        });
    }
    adapter.update_slot_status(SlotEvent::new(next, Some(base.slot), SlotStatus::CreatedBank)).unwrap();
    for a in &slot_accts {
        adapter.update_account(&a.update()).unwrap();
        w.insert(a.pubkey, a.clone());
    }
    adapter.update_slot_status(SlotEvent::new(next, Some(base.slot), SlotStatus::Processed)).unwrap();
    adapter.update_slot_status(SlotEvent::new(next, None, SlotStatus::Confirmed)).unwrap();
    let slot = adapter.commit_ready().remove(0);
    assert_eq!(slot.slot, next);
    assert_eq!(slot.root, naive_root(&w));

    let mut cfg = WriterConfig::new(dir.path());
    cfg.every = 2;
    let writer = SnapshotWriter::start(cfg, None).unwrap();
    let full = SlotInput {
        slot: base.slot,
        parent: None,
        root: base.root,
        changes: base.changes.unwrap(),
        accounts: AccountBatch::from_spill(spill),
        full: true,
    };
    writer.submit(full).unwrap();
    let mut batch = AccountBatch::default();
    for r in &slot.records {
        let a = aldb_core::AccountRef {
            pubkey: &r.pubkey,
            lamports: r.lamports,
            owner: &r.owner,
            executable: r.executable,
            data: &r.data,
        };
        batch.push(r.hashed.path, &a);
    }
    let delta = SlotInput {
        slot: next,
        parent: Some(base.slot),
        root: slot.root,
        changes: slot.changes.unwrap(),
        accounts: batch,
        full: false,
    };
    writer.submit(delta).unwrap();
    writer.flush().unwrap();
    writer.shutdown().unwrap();
    assert!(!dir.path().join(SPILL_DIR).exists());
    check_served(dir.path(), next, slot.root, &w);
}
