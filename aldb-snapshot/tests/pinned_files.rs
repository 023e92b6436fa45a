//! The writer's files for fixed inputs, pinned by digest: a change to how the writer keeps its
//! tables in memory (not to the format) must leave every byte it writes as it was. Three runs:
//! a chain whose full state comes from a startup spill, the same chain from an in-memory batch,
//! and fork-mode banks on two branches with switches between them. Each runs inserts, updates
//! and deletes through the real engine over a short refresh cycle, so buckets grow, shrink,
//! empty and are carried forward.
//!
//! A deliberate format change (with its version bumped) changes the digests: print them with
//! `cargo test -p aldb-snapshot --test pinned_files -- --nocapture` and update them here.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use aldb_core::{ChangeSet, Config, ForkEngine, ForkLimits, Pleiades};
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput, SnapshotWriter, WriterConfig};
use aldb_testkit::random::{Mix, history_writes};
use aldb_testkit::refs;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Deletions from 88 of 100, data under 80 bytes.
const MIX: Mix = Mix { delete_from: 88, max_data: 80 };

/// Digest of every file in `dir` (subdirectories skipped), by name order: name, length, bytes.
fn digest(dir: &Path) -> String {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    names.sort();
    let mut h = blake2s_simd::State::new();
    for name in &names {
        let bytes = std::fs::read(dir.join(name)).unwrap();
        h.update(name.as_bytes());
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(&bytes);
    }
    let out = h.finalize();
    println!("{}: {} files, digest {}", dir.display(), names.len(), out.to_hex());
    out.to_hex().to_string()
}

const CONFIG: (u8, u8) = (4, 10);

fn writer_config(dir: &Path, forks: bool) -> WriterConfig {
    // Nothing is pruned (so which files exist does not depend on the pruner's timing), and the
    // refresh cycle is short, so most buckets are carried forward at least once.
    WriterConfig { keep_slots: 10_000, refresh_slots: 8, forks, ..WriterConfig::new(dir) }
}

/// The base state: 3,000 draws committed at once (about three leaves per bucket), submitted as
/// a full snapshot from a startup spill or from one batch.
fn base(rng: &mut ChaCha8Rng, keys: &mut Vec<[u8; 32]>, w: &SnapshotWriter, from_spill: bool) -> Pleiades {
    let mut tree = Pleiades::new(Config::new(1, CONFIG.0, CONFIG.1).unwrap()).unwrap();
    let accts = history_writes(rng, keys, 3000, MIX);
    let r = refs(&accts);
    let updates = tree.hash_accounts(&r);
    let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
    let root = tree.commit_capture(updates.clone(), &mut changes);
    tree.capture_all(&mut changes);
    let accounts = if from_spill {
        // Arrival order is the rank, as a validator's startup gives later states a higher
        // write version; deleted accounts stay in the spill and lose to nothing.
        let spill = w.startup_spill(3).unwrap();
        for (i, (a, u)) in r.iter().zip(&updates).enumerate() {
            spill.append(&u.path, (0, i as u64), a).unwrap();
        }
        AccountBatch::from_spill(spill.finish().unwrap())
    } else {
        let mut live = std::collections::BTreeMap::new();
        for (a, u) in r.iter().zip(&updates) {
            if a.lamports == 0 {
                live.remove(&u.path);
            } else {
                live.insert(u.path, *a);
            }
        }
        let mut batch = AccountBatch::default();
        for (path, a) in &live {
            batch.push(*path, a);
        }
        batch
    };
    w.submit(SlotInput { slot: 0, parent: None, root, changes, accounts, full: true }).unwrap();
    tree
}

/// The chain's files, written by the writer whose leaf views were one shared allocation per
/// bucket; the spill and the in-memory batch write the same full file.
const CHAIN: &str = "fa86410554e335c4a957ce93c3050258b5c0456106a6e90cd06cce3bd266edd5";
/// The fork run's files, from the same writer.
const FORKS: &str = "7a48803ace37e3637b9f24614773039bb5a5951ab5b06bf6b2f4bacb082b3686";

fn chain(from_spill: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0x5eed_f11e);
    let mut keys = Vec::new();
    let w = SnapshotWriter::start(writer_config(dir.path(), false), None).unwrap();
    let mut tree = base(&mut rng, &mut keys, &w, from_spill);
    for slot in 1..=40 {
        let n = rng.random_range(0..=300);
        let accts = history_writes(&mut rng, &mut keys, n, MIX);
        let r = refs(&accts);
        let updates = tree.hash_accounts(&r);
        let accounts = AccountBatch::from_updates(&updates, &r);
        let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
        let root = tree.commit_capture(updates, &mut changes);
        w.submit(SlotInput { slot, parent: Some(slot - 1), root, changes, accounts, full: false }).unwrap();
    }
    w.shutdown().unwrap();
    digest(dir.path())
}

#[test]
fn a_chain_from_a_startup_spill_writes_the_pinned_bytes() {
    assert_eq!(chain(true), CHAIN);
}

#[test]
fn a_chain_from_an_in_memory_full_batch_writes_the_pinned_bytes() {
    assert_eq!(chain(false), CHAIN);
}

#[test]
fn fork_mode_banks_write_the_pinned_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(0xf0_4c5);
    let mut keys = Vec::new();
    let w = SnapshotWriter::start(writer_config(dir.path(), true), None).unwrap();
    let tree = base(&mut rng, &mut keys, &w, true);
    let mut engine = ForkEngine::new(tree, 0, ForkLimits::default());
    // Two branches from slot 2, frozen alternately, so the writer's tables switch back and forth
    // across several banks; then a third branch from slot 1.
    let banks: [(u64, u64); 14] = [
        (1, 0),
        (2, 1),
        (3, 2),
        (4, 2),
        (5, 3),
        (6, 4),
        (7, 5),
        (8, 6),
        (9, 7),
        (10, 8),
        (11, 1),
        (12, 9),
        (13, 11),
        (14, 10),
    ];
    for (slot, parent) in banks {
        let n = rng.random_range(0..=300);
        let accts = history_writes(&mut rng, &mut keys, n, MIX);
        let r = refs(&accts);
        let updates = engine.tree().hash_accounts(&r);
        let accounts = AccountBatch::from_updates(&updates, &r);
        let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
        let root = engine.freeze_capture(slot, parent, updates, &mut changes).unwrap();
        w.submit(SlotInput { slot, parent: Some(parent), root, changes, accounts, full: false }).unwrap();
    }
    w.flush().unwrap();
    assert!(w.take_refused().is_empty());
    w.shutdown().unwrap();
    assert_eq!(digest(dir.path()), FORKS);
}
