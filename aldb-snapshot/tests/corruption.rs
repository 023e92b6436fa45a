//! Damaged files are refused or reported, never served as valid and never a panic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aldb_core::{AccountRef, ChangeSet, Config, Pleiades};
use aldb_format::format::{FOOTER_LEN, HEADER_LEN, file_checksum};
use aldb_format::{QueryError, SnapshotReader};
use aldb_snapshot::{AccountBatch, SlotInput, SnapshotWriter, WriterConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Writes `slots` slots of random accounts; returns the pubkeys used.
fn write_dir(dir: &std::path::Path, slots: u64) -> Vec<[u8; 32]> {
    let mut rng = ChaCha8Rng::seed_from_u64(77);
    let mut tree = Pleiades::new(Config::new(2, 2, 6).unwrap()).unwrap();
    let writer = SnapshotWriter::start(WriterConfig { refresh_slots: 4, ..WriterConfig::new(dir) }, None).unwrap();
    let keys: Vec<[u8; 32]> = (0..200).map(|_| rng.random()).collect();
    let owner = [3u8; 32];
    for slot in 0..slots {
        let datas: Vec<Vec<u8>> =
            (0..60).map(|_| (0..rng.random_range(0..90)).map(|_| rng.random()).collect()).collect();
        let picks: Vec<usize> = (0..60).map(|_| rng.random_range(0..keys.len())).collect();
        let refs: Vec<AccountRef<'_>> = picks
            .iter()
            .zip(&datas)
            .map(|(&k, d)| AccountRef {
                pubkey: &keys[k],
                lamports: 1 + k as u64,
                owner: &owner,
                executable: false,
                data: d,
            })
            .collect();
        let updates = tree.hash_accounts(&refs);
        let batch = AccountBatch::from_updates(&updates, &refs);
        let mut changes = ChangeSet::default();
        let root = tree.commit_capture(updates, &mut changes);
        // Slot 0 carries the whole (so far only this slot's) state: it is the full snapshot.
        if slot == 0 {
            tree.capture_all(&mut changes);
        }
        writer
            .submit(SlotInput { slot, parent: slot.checked_sub(1), root, changes, accounts: batch, full: slot == 0 })
            .unwrap();
    }
    writer.shutdown().unwrap();
    keys
}

fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_flipped_byte_is_caught_by_the_checksum() {
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), 6);
    let victim = &files(dir.path())[3];
    let mut bytes = std::fs::read(victim).unwrap();
    let at = HEADER_LEN + (bytes.len() - HEADER_LEN - FOOTER_LEN) / 2;
    bytes[at] ^= 0x10;
    std::fs::write(victim, &bytes).unwrap();
    let h = SnapshotReader::open(dir.path()).unwrap();
    // The damaged slot and every later slot that may reach into it are refused as corrupt (an
    // operator must act), not served and not passed off as skipped or pruned.
    assert!(matches!(h.slot(Some(3)), Err(QueryError::Corrupt { slot: 3, .. })), "{:?}", h.slot(Some(3)));
    for slot in 0..3 {
        assert!(h.slot(Some(slot)).is_ok(), "slot {slot} does not depend on the damaged file");
    }
    for slot in 4..6 {
        assert!(
            matches!(h.slot(Some(slot)), Err(QueryError::Corrupt { .. })),
            "slot {slot} may reference the damaged file"
        );
    }
}

#[test]
fn truncated_and_foreign_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    write_dir(dir.path(), 3);
    let fs = files(dir.path());
    let bytes = std::fs::read(&fs[2]).unwrap();
    std::fs::write(&fs[2], &bytes[..bytes.len() / 2]).unwrap();
    std::fs::write(dir.path().join("0000000009-00000000000000000009.snap"), b"not a snapshot").unwrap();
    std::fs::write(dir.path().join("0000000010-00000000000000000010.snap"), b"").unwrap();
    let h = SnapshotReader::open(dir.path()).unwrap();
    assert_eq!(h.latest().map(|s| s.slot), Some(1));
}

#[test]
fn resealed_garbage_never_panics_and_never_verifies_falsely() {
    // A writer that wrote garbage but a valid checksum: the bounds checks must hold.
    let dir = tempfile::tempdir().unwrap();
    let keys = write_dir(dir.path(), 4);
    let fs = files(dir.path());
    let pristine: Vec<Vec<u8>> = fs.iter().map(|f| std::fs::read(f).unwrap()).collect();
    let roots: Vec<[u8; 32]> = {
        let h = SnapshotReader::open(dir.path()).unwrap();
        (0..4).map(|s| h.slot(Some(s)).unwrap().root).collect()
    };
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    for round in 0..60 {
        let i = rng.random_range(0..fs.len());
        let mut bytes = pristine[i].clone();
        let body = HEADER_LEN..bytes.len() - FOOTER_LEN;
        for _ in 0..rng.random_range(1..8) {
            let at = rng.random_range(body.clone());
            bytes[at] = rng.random();
        }
        let end = bytes.len() - FOOTER_LEN;
        let sum = file_checksum(&bytes[..HEADER_LEN], &bytes[HEADER_LEN..end]);
        bytes[end..end + 16].copy_from_slice(&sum.to_le_bytes());
        std::fs::write(&fs[i], &bytes).unwrap();
        let h = SnapshotReader::open(dir.path()).unwrap();
        for slot in 0..4u64 {
            for k in keys.iter().step_by(11) {
                if let Ok(p) = h.prove(k, Some(slot)) {
                    // Whatever comes back, a proof that verifies must be against the true root.
                    if p.proof.verify(&p.root, k).is_ok() {
                        assert_eq!(p.root, roots[slot as usize], "round {round}");
                    }
                }
            }
        }
        std::fs::write(&fs[i], &pristine[i]).unwrap();
    }
}

#[test]
fn a_change_set_missing_stored_levels_is_refused() {
    // Captured with every fourth level only, a change set lacks levels the files store: the
    // writer refuses it with a clear error instead of writing records that point at stale nodes.
    let dir = tempfile::tempdir().unwrap();
    let mut tree = Pleiades::new(Config::new(2, 2, 6).unwrap()).unwrap();
    let writer = SnapshotWriter::start(WriterConfig::new(dir.path()), None).unwrap();
    let (key, owner, data) = ([5u8; 32], [3u8; 32], [1u8; 10]);
    let refs = [AccountRef { pubkey: &key, lamports: 9, owner: &owner, executable: false, data: &data }];
    let updates = tree.hash_accounts(&refs);
    let batch = AccountBatch::from_updates(&updates, &refs);
    let root = tree.commit(updates);
    let mut changes = ChangeSet::new(aldb_core::CaptureOptions::ALL.with_level_step(4));
    tree.capture_all(&mut changes);
    writer.submit(SlotInput { slot: 0, parent: None, root, changes, accounts: batch, full: true }).unwrap();
    let err = writer.flush().unwrap_err().to_string();
    assert!(err.contains("leaves out level 2"), "{err}");
    assert!(files(dir.path()).is_empty(), "nothing published");
}
