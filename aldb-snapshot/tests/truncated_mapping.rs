//! A snapshot file truncated while Hyades has it mapped: the queries that read it fail with an
//! error naming the file, the process lives, and everything else keeps answering. A `SIGBUS`
//! that is not about a snapshot mapping still kills.

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use aldb_core::{AccountRef, ChangeSet, Config, Pleiades};
use aldb_format::{AccountProof, QueryError, SnapshotReader};
use aldb_snapshot::{AccountBatch, SlotInput, SnapshotWriter, WriterConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Set in the child process of [`a_sigbus_outside_snapshot_mappings_still_kills`].
const CHILD: &str = "ALDB_SIGBUS_CHILD";

/// Writes `slots` slots of random accounts (a few hundred KiB per file); returns the keys.
fn write_dir(dir: &Path, slots: u64) -> Vec<[u8; 32]> {
    let mut rng = ChaCha8Rng::seed_from_u64(41);
    let mut tree = Pleiades::new(Config::new(2, 2, 6).unwrap()).unwrap();
    let writer = SnapshotWriter::start(WriterConfig { refresh_slots: 4, ..WriterConfig::new(dir) }, None).unwrap();
    let keys: Vec<[u8; 32]> = (0..2000).map(|_| rng.random()).collect();
    let owner = [3u8; 32];
    for slot in 0..slots {
        let datas: Vec<Vec<u8>> =
            (0..600).map(|_| (0..rng.random_range(0..300)).map(|_| rng.random()).collect()).collect();
        let picks: Vec<usize> = (0..600).map(|_| rng.random_range(0..keys.len())).collect();
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

/// Snapshot files, oldest first (names start with the zero-padded sequence number).
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "snap"))
        .collect();
    v.sort();
    v
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap()
}

/// Cuts `path` to `len` bytes in place, as a copy tool writing over it would.
fn truncate(path: &Path, len: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    assert!(f.metadata().unwrap().len() > len, "{} is too small to cut to {len}", path.display());
    f.set_len(len).unwrap();
    f.sync_all().unwrap();
}

fn answers(h: &SnapshotReader, keys: &[[u8; 32]], slot: u64) -> Vec<AccountProof> {
    keys.iter()
        .map(|k| {
            let p = h.prove(k, Some(slot)).unwrap();
            p.proof.verify(&p.root, k).unwrap();
            p
        })
        .collect()
}

#[test]
fn a_file_truncated_while_mapped_fails_its_queries_by_name_and_the_rest_still_answer() {
    let dir = tempfile::tempdir().unwrap();
    let keys = write_dir(dir.path(), 6);
    let probe: Vec<[u8; 32]> = keys.iter().step_by(37).copied().collect();
    let h = SnapshotReader::open(dir.path()).unwrap();
    assert_eq!(h.latest().map(|s| s.slot), Some(5));
    let before: Vec<Vec<AccountProof>> = (0..6).map(|slot| answers(&h, &probe, slot)).collect();

    // The newest file: no older slot reaches into it. Its walks start at the top record, written
    // last, so every query of slot 5 reads a page wholly past the new end and faults.
    let victim = files(dir.path()).pop().unwrap();
    let name = victim.file_name().unwrap().to_str().unwrap().to_string();
    truncate(&victim, page_size());
    for k in &probe {
        match h.prove(k, Some(5)) {
            Err(e @ (QueryError::Corrupt { slot: 5, .. } | QueryError::Damaged { slot: 5, .. })) => {
                let msg = e.to_string();
                assert!(msg.contains(&name) && msg.contains("truncated or changed while mapped"), "{msg}");
                // The read's own error is the answer's cause, not only its text.
                let cause = std::error::Error::source(&e).and_then(|c| c.downcast_ref::<aldb_format::SnapshotError>());
                assert!(cause.is_some_and(|c| c.is_damage() && c.to_string().contains(&name)), "{e:?}");
            }
            other => panic!("a query of the truncated file answered {other:?}"),
        }
    }
    for slot in 0..5 {
        assert_eq!(answers(&h, &probe, slot), before[slot as usize], "slot {slot} does not use the truncated file");
    }

    // The next refresh drops the file: its slot is no longer served (and says why), the others
    // are unchanged.
    h.refresh().unwrap();
    assert_eq!(h.latest().map(|s| s.slot), Some(4));
    match h.prove(&probe[0], Some(5)) {
        Err(e @ QueryError::Corrupt { slot: 5, .. }) => assert!(e.to_string().contains(&name), "{e}"),
        other => panic!("slot 5 after the refresh: {other:?}"),
    }
    for slot in 0..5 {
        assert_eq!(answers(&h, &probe, slot), before[slot as usize], "slot {slot} after the refresh");
    }
}

#[test]
fn a_file_cut_inside_a_page_is_caught_without_a_fault() {
    // The page holding the new end stays mapped and reads zeros past it without faulting; the
    // end-magic check after each read catches it.
    let dir = tempfile::tempdir().unwrap();
    let keys = write_dir(dir.path(), 3);
    let probe: Vec<[u8; 32]> = keys.iter().step_by(53).copied().collect();
    let h = SnapshotReader::open(dir.path()).unwrap();
    let victim = files(dir.path()).pop().unwrap();
    let len = std::fs::metadata(&victim).unwrap().len();
    // A few bytes short of the footer: every record but the last is still in the file, and the
    // new end lies in the file's last page, which therefore never faults.
    assert_eq!((len - 40) / page_size(), (len - 1) / page_size(), "the cut must stay inside the last page");
    truncate(&victim, len - 40);
    let name = victim.file_name().unwrap().to_str().unwrap().to_string();
    for k in &probe {
        match h.prove(k, Some(2)) {
            Err(e @ (QueryError::Corrupt { slot: 2, .. } | QueryError::Damaged { slot: 2, .. })) => {
                let msg = e.to_string();
                assert!(msg.contains(&name) && msg.contains("truncated or changed while mapped"), "{msg}");
            }
            other => panic!("a query of the cut file answered {other:?}"),
        }
    }
    for slot in 0..2 {
        answers(&h, &probe, slot);
    }
}

/// Runs [`sigbus_child`] in a child process: a truncated snapshot file it survives, then a
/// `SIGBUS` in a mapping of its own that is no snapshot's, which must kill it as it always did.
#[test]
fn a_sigbus_outside_snapshot_mappings_still_kills() {
    use std::os::unix::process::ExitStatusExt;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "sigbus_child", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stdout.contains("snapshot fault survived"),
        "the child did not get as far as the foreign fault:\n{stdout}\n{stderr}"
    );
    assert!(!stdout.contains("foreign fault survived"), "a SIGBUS outside any snapshot mapping was swallowed");
    assert_eq!(out.status.signal(), Some(libc::SIGBUS), "{:?}:\n{stdout}\n{stderr}", out.status);
}

/// Only does something in the child of [`a_sigbus_outside_snapshot_mappings_still_kills`].
#[test]
fn sigbus_child() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let keys = write_dir(dir.path(), 1);
    let h = SnapshotReader::open(dir.path()).unwrap();
    truncate(&files(dir.path())[0], page_size());
    assert!(matches!(h.prove(&keys[0], None), Err(QueryError::Corrupt { .. } | QueryError::Damaged { .. })));
    println!("snapshot fault survived");

    let page = page_size() as usize;
    let path = dir.path().join("not-a-snapshot");
    std::fs::write(&path, vec![7u8; 4 * page]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    // SAFETY: the file is this test's own; the point is to read it after it shrinks.
    let map = unsafe { memmap2::Mmap::map(&file) }.unwrap();
    truncate(&path, 0);
    // SAFETY: in bounds of the mapping; volatile so the read is not elided. It faults.
    let byte = unsafe { std::ptr::read_volatile(map.as_ptr().add(2 * page)) };
    println!("foreign fault survived (read {byte})");
}
