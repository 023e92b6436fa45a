//! A full queue: a bank merged into its queued parent is written as one file that proves the
//! child's state; a bank on another fork is given up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use aldb_core::ChangeSet;
use aldb_format::SnapshotReader;
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput, SnapshotWriter, WriterConfig};
use aldb_testkit::{State, Write, apply, naive_root};
use aldb_verify::Claim;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{Item, Pushed, Queue};
use crate::snapshots::Hold;
use crate::stats::NodeStats;
use crate::test_support::{acct, bank, engine_and_base};

fn draw(rng: &mut ChaCha8Rng, keys: &[[u8; 32]], n: usize) -> Vec<Write> {
    (0..n)
        .map(|_| {
            let key = if rng.random_bool(0.5) { keys[rng.random_range(0..keys.len())] } else { rng.random() };
            let lamports = if rng.random_bool(0.2) { 0 } else { rng.random_range(1..100) };
            (key, acct(lamports, vec![rng.random(); rng.random_range(0..40)]))
        })
        .collect()
}

/// `state` after `writes`.
fn after(state: &State, writes: &[Write]) -> State {
    let mut s = state.clone();
    apply(&mut s, writes);
    s
}

#[test]
fn a_bank_merged_into_its_parent_proves_its_own_state() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(21);
    let seed_keys: Vec<[u8; 32]> = (0..300).map(|_| rng.random()).collect();
    let genesis: Vec<_> = seed_keys.iter().map(|k| (*k, acct(rng.random_range(1..100), vec![1u8; 8]))).collect();
    let s0 = after(&State::new(), &genesis);
    let (mut engine, base) = engine_and_base(&genesis);

    let w1 = draw(&mut rng, &seed_keys, 40);
    let w2 = draw(&mut rng, &seed_keys, 40);
    let w3 = draw(&mut rng, &seed_keys, 10);
    let s2 = after(&after(&s0, &w1), &w2);
    let p = bank(&mut engine, 1, 0, &w1);
    let b = bank(&mut engine, 2, 1, &w2);
    let c = bank(&mut engine, 3, 0, &w3);
    assert_eq!(b.root, naive_root(&s2));

    let queue = Queue::new(1, usize::MAX, Arc::new(NodeStats::default()));
    assert_eq!(queue.push_bank(p), Pushed::Queued);
    assert_eq!(queue.push_bank(b), Pushed::Merged, "the newest queued bank is its parent");
    assert_eq!(queue.push_bank(c), Pushed::Lost, "the newest queued bank is not its parent");
    let Some(Item::Bank(merged)) = queue.pop() else { panic!("the merged bank") };
    assert_eq!((merged.slot, merged.parent, merged.root), (2, Some(0), naive_root(&s2)));

    let config = WriterConfig { forks: true, direct_io: false, ..WriterConfig::new(tmp.path()) };
    let writer = SnapshotWriter::start(config, None).unwrap();
    writer.submit(base).unwrap();
    writer.submit(merged).unwrap();
    writer.flush().unwrap();
    assert!(writer.take_refused().is_empty());
    writer.shutdown().unwrap();

    let reader = SnapshotReader::open(tmp.path()).unwrap();
    assert!(reader.slot(Some(1)).is_err(), "the merged-away parent is not served");
    let info = reader.slot(Some(2)).unwrap();
    assert_eq!((info.root, info.parent), (naive_root(&s2), Some(0)));
    let mut probes = seed_keys.clone();
    probes.extend(w2.iter().map(|w| w.0));
    for pk in &probes {
        let proof = reader.prove(pk, Some(2)).unwrap();
        let claim = proof.proof.verify(&info.root, pk).unwrap();
        match s2.get(pk) {
            Some(a) => {
                let got = proof.account.unwrap();
                assert_eq!(
                    (got.lamports, &got.owner, got.executable, &got.data),
                    (a.lamports, &a.owner, a.executable, &a.data)
                );
                assert_eq!(
                    claim,
                    Claim::Present { value: aldb_naive::value(a.lamports, &a.owner, a.executable, &a.data) }
                );
            }
            None => assert_eq!(claim, Claim::Absent),
        }
    }
}

/// An empty bank input: the hold only looks at slots.
fn empty(slot: u64, parent: u64) -> SlotInput {
    SlotInput {
        slot,
        parent: Some(parent),
        root: [0; 32],
        changes: ChangeSet::new(CAPTURE_OPTIONS),
        accounts: AccountBatch::default(),
        full: false,
    }
}

#[test]
fn a_held_bank_is_doomed_only_by_what_drops_or_replaces_it() {
    use std::time::Duration;

    use crate::snapshots::HeldWake;
    let queue = Queue::new(8, 1 << 20, Arc::new(NodeStats::default()));
    let short = Duration::from_millis(1);

    // Already queued when the hold begins: a dead fork holding it.
    queue.push(Item::Dead(4, vec![4, 5, 6]));
    queue.hold(5);
    assert_eq!(queue.wait_held(short), HeldWake::Doomed);
    queue.release();

    // Pushed while held: other forks dying, roots keeping it, banks on it change nothing.
    queue.hold(7);
    queue.push(Item::Dead(8, vec![8, 9]));
    queue.push(Item::Finalized(6, Vec::new(), vec![5]));
    assert_eq!(queue.push_bank(empty(10, 7)), Pushed::Queued);
    assert_eq!(queue.wait_held(short), HeldWake::Retry);
    // A root that abandons it.
    queue.push(Item::Finalized(9, Vec::new(), vec![7, 10]));
    assert_eq!(queue.wait_held(short), HeldWake::Doomed);
    queue.release();

    // A new version of the held slot, and a new base.
    queue.hold(11);
    assert_eq!(queue.push_bank(empty(11, 6)), Pushed::Queued);
    assert_eq!(queue.wait_held(short), HeldWake::Doomed);
    queue.release();
    queue.hold(12);
    assert_eq!(queue.wait_held(short), HeldWake::Retry);
    let base = SlotInput { parent: None, full: true, ..empty(20, 0) };
    assert!(queue.push_base(base));
    assert_eq!(queue.wait_held(short), HeldWake::Doomed);
    queue.release();

    // Closing wakes the holder for a last try (on a queue without that base in it).
    let queue = Queue::new(8, 1 << 20, Arc::new(NodeStats::default()));
    queue.hold(13);
    queue.close();
    assert_eq!(queue.wait_held(Duration::from_secs(60)), HeldWake::Closed);
}
