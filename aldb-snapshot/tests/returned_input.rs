//! `WriterConfig::return_refused`: a fork-mode bank the writer refuses comes back in its refusal,
//! the very input submitted (its buffers, unchanged), so a caller can submit it again once the
//! cause has passed without having kept a copy; the retried file is the one a first-time success
//! writes. Without the option, refusals carry no input, as before.
//!
//! The write failure is real and local to the directory: a directory stands where the writer
//! creates the bank's temporary file, so creating it fails (`EISDIR`) until it is removed.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use aldb_core::{ChangeSet, Config, ForkEngine, ForkLimits, Pleiades};
use aldb_format::SnapshotReader;
use aldb_format::format::{file_name, parse_file_name};
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput, SnapshotError, SnapshotWriter, WriterConfig};
use aldb_testkit::random::{Mix, history_writes};
use aldb_testkit::{State, account_ref, apply, naive_root, refs};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

const MIX: Mix = Mix { delete_from: 88, max_data: 80 };

/// A chain of banks from a random base, each input built by the real engine.
struct Chain {
    engine: ForkEngine,
    rng: ChaCha8Rng,
    keys: Vec<[u8; 32]>,
    states: Vec<State>,
}

impl Chain {
    /// The base state, as the full input of slot 0.
    fn start(seed: u64) -> (Self, SlotInput) {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut keys = Vec::new();
        let mut tree = Pleiades::new(Config::new(1, 2, 6).unwrap()).unwrap();
        let accts = history_writes(&mut rng, &mut keys, 500, MIX);
        let mut state = State::new();
        apply(&mut state, &accts);
        let updates = tree.hash_accounts(&refs(&accts));
        let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
        let root = tree.commit_capture(updates, &mut changes);
        tree.capture_all(&mut changes);
        let mut accounts = AccountBatch::default();
        for (pk, a) in &state {
            accounts.push(aldb_verify::spec::key_path(pk), &account_ref(pk, a));
        }
        let base = SlotInput { slot: 0, parent: None, root, changes, accounts, full: true };
        let engine = ForkEngine::new(tree, 0, ForkLimits::default());
        (Self { engine, rng, keys, states: vec![state] }, base)
    }

    /// The next bank on the chain.
    fn next(&mut self) -> SlotInput {
        let slot = self.states.len() as u64;
        let accts = history_writes(&mut self.rng, &mut self.keys, 60, MIX);
        let r = refs(&accts);
        let updates = self.engine.tree().hash_accounts(&r);
        let accounts = AccountBatch::from_updates(&updates, &r);
        let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
        let root = self.engine.freeze_capture(slot, slot - 1, updates, &mut changes).unwrap();
        let mut state = self.states[slot as usize - 1].clone();
        apply(&mut state, &accts);
        assert_eq!(root, naive_root(&state));
        self.states.push(state);
        SlotInput { slot, parent: Some(slot - 1), root, changes, accounts, full: false }
    }
}

/// The names of the published files, in order.
fn published(dir: &Path) -> Vec<(u32, u64)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| parse_file_name(&e.unwrap().file_name().to_string_lossy()))
        .collect();
    v.sort();
    v
}

/// Puts a directory where the writer will create the next file, of `slot`; returns it.
fn block_next(dir: &Path, slot: u64) -> std::path::PathBuf {
    let next = published(dir).last().unwrap().0 + 1;
    let blocker = dir.join(format!(".{}.tmp", file_name(next, slot)));
    std::fs::create_dir(&blocker).unwrap();
    blocker
}

/// Writes slots 0 to 4 with slot 3's first try failing; with `return_refused` it is submitted
/// again from its refusal. Returns whether the refusal carried the input.
fn run(dir: &Path, return_refused: bool) -> bool {
    let config = WriterConfig { forks: true, return_refused, direct_io: false, ..WriterConfig::new(dir) };
    let w = SnapshotWriter::start(config, None).unwrap();
    let (mut chain, base) = Chain::start(7);
    w.submit(base).unwrap();
    for _ in 1..=2 {
        w.submit(chain.next()).unwrap();
    }
    w.flush().unwrap();
    assert!(w.take_refused().is_empty());

    let blocker = block_next(dir, 3);
    let input = chain.next();
    let (root, entries, data) = (input.root, input.accounts.entries().as_ptr(), input.accounts.heap_bytes());
    let changes = input.changes.heap_bytes();
    w.submit(input).unwrap();
    w.flush().unwrap();
    let mut refused = w.take_refused();
    assert_eq!(refused.len(), 1);
    let r = refused.pop().unwrap();
    assert_eq!(r.slot, 3);
    assert!(matches!(r.error, SnapshotError::Io { .. }), "{}", r.error);
    std::fs::remove_dir(&blocker).unwrap();
    assert!(!published(dir).iter().any(|&(_, s)| s == 3), "a failed write publishes nothing");
    let returned = r.input.is_some();
    match r.input {
        None => assert!(!return_refused, "asked for, the input comes back"),
        Some(back) => {
            assert!(return_refused, "not asked for, no input is kept");
            // The same buffers, as they were: nothing was copied or changed.
            assert_eq!((back.slot, back.parent, back.root, back.full), (3, Some(2), root, false));
            assert_eq!(back.accounts.entries().as_ptr(), entries);
            assert_eq!((back.accounts.heap_bytes(), back.changes.heap_bytes()), (data, changes));
            w.submit(back).unwrap();
        }
    }
    w.submit(chain.next()).unwrap();
    w.flush().unwrap();
    let later = w.take_refused();
    w.shutdown().unwrap();
    let reader = SnapshotReader::open(dir).unwrap();
    if return_refused {
        assert!(later.is_empty());
        for slot in 0..=4 {
            assert_eq!(reader.slot(Some(slot)).unwrap().root, naive_root(&chain.states[slot as usize]), "slot {slot}");
        }
    } else {
        // Slot 3 was never written, so slot 4 on it is refused too.
        assert_eq!(later.iter().map(|r| (r.slot, r.input.is_some())).collect::<Vec<_>>(), [(4, false)]);
        assert!(reader.slot(Some(3)).is_err());
    }
    returned
}

#[test]
fn a_refused_bank_comes_back_unchanged_and_writes_the_file_a_first_success_would() {
    let tmp = tempfile::tempdir().unwrap();
    let (retried, control) = (tmp.path().join("retried"), tmp.path().join("control"));
    assert!(run(&retried, true));

    // The same chain with no fault: the same files, byte for byte, under the same names.
    let config = WriterConfig { forks: true, direct_io: false, ..WriterConfig::new(&control) };
    let w = SnapshotWriter::start(config, None).unwrap();
    let (mut chain, base) = Chain::start(7);
    w.submit(base).unwrap();
    for _ in 1..=4 {
        w.submit(chain.next()).unwrap();
    }
    w.flush().unwrap();
    assert!(w.take_refused().is_empty());
    w.shutdown().unwrap();
    let names = published(&control);
    assert_eq!(published(&retried), names);
    for (seq, slot) in names {
        let name = file_name(seq, slot);
        assert!(std::fs::read(retried.join(&name)).unwrap() == std::fs::read(control.join(&name)).unwrap(), "{name}");
    }
}

#[test]
fn without_the_option_a_refusal_carries_no_input() {
    let tmp = tempfile::tempdir().unwrap();
    assert!(!run(tmp.path(), false));
}
