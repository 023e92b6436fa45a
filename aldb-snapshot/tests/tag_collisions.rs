//! Two accounts whose key paths share their bucket and the 16 bits below it, the tag by which the
//! writer tells a bucket's leaves apart in memory: each slot updates one, deletes one or adds
//! one, and the other must keep its own record, which the writer can only tell by reading both
//! records back. Every slot's proofs are checked against the model.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use aldb_core::{AccountRef, ChangeSet, Claim, Config, Pleiades};
use aldb_format::SnapshotReader;
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput, SnapshotWriter, WriterConfig};
use aldb_verify::spec::key_path;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const BUCKET_BITS: u8 = 4;

/// The bucket bits and the 16 tag bits of a key's path.
fn top20(pk: &[u8; 32]) -> u32 {
    let p = key_path(pk);
    (u32::from(p[0]) << 12) | (u32::from(p[1]) << 4) | (u32::from(p[2]) >> 4)
}

/// Keys drawn until three share their top 20 path bits (a birthday search over a few thousand).
fn colliding(rng: &mut ChaCha8Rng) -> Vec<[u8; 32]> {
    let mut seen: BTreeMap<u32, Vec<[u8; 32]>> = BTreeMap::new();
    loop {
        let k: [u8; 32] = rng.random();
        let group = seen.entry(top20(&k)).or_default();
        group.push(k);
        if group.len() == 3 {
            return group.clone();
        }
    }
}

type State = BTreeMap<[u8; 32], (u64, Vec<u8>)>;

fn commit(tree: &mut Pleiades, w: &SnapshotWriter, state: &mut State, slot: u64, accts: &[([u8; 32], u64)]) {
    let data: Vec<Vec<u8>> =
        accts.iter().map(|(pk, l)| [&pk[..4], &l.to_le_bytes()[..], &slot.to_le_bytes()].concat()).collect();
    let refs: Vec<AccountRef<'_>> = accts
        .iter()
        .zip(&data)
        .map(|((pk, lamports), d)| AccountRef {
            pubkey: pk,
            lamports: *lamports,
            owner: pk,
            executable: false,
            data: d,
        })
        .collect();
    let updates = tree.hash_accounts(&refs);
    let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
    let root = tree.commit_capture(updates.clone(), &mut changes);
    for ((pk, lamports), d) in accts.iter().zip(&data) {
        if *lamports == 0 {
            state.remove(pk);
        } else {
            state.insert(*pk, (*lamports, d.clone()));
        }
    }
    let full = slot == 0;
    let accounts = if full {
        tree.capture_all(&mut changes);
        let mut b = AccountBatch::default();
        // A full state is written in key-path order.
        let mut live: Vec<([u8; 32], &[u8; 32])> = state.keys().map(|pk| (key_path(pk), pk)).collect();
        live.sort();
        for (path, pk) in live {
            let (lamports, d) = &state[pk];
            b.push(path, &AccountRef { pubkey: pk, lamports: *lamports, owner: pk, executable: false, data: d });
        }
        b
    } else {
        AccountBatch::from_updates(&updates, &refs)
    };
    let parent = slot.checked_sub(1);
    w.submit(SlotInput { slot, parent, root, changes, accounts, full }).unwrap();
}

#[test]
fn leaves_sharing_a_tag_keep_their_own_records() {
    let mut rng = ChaCha8Rng::seed_from_u64(0x7a6);
    let [a, b, c] = colliding(&mut rng)[..] else { panic!("three keys") };
    let dir = tempfile::tempdir().unwrap();
    let w = SnapshotWriter::start(WriterConfig { keep_slots: 100, ..WriterConfig::new(dir.path()) }, None).unwrap();
    let mut tree = Pleiades::new(Config::new(1, 2, BUCKET_BITS).unwrap()).unwrap();
    let others: Vec<[u8; 32]> = (0..40).map(|_| rng.random()).collect();
    let mut state = State::new();
    let mut base: Vec<([u8; 32], u64)> = others.iter().map(|k| (*k, 7)).collect();
    base.extend([(a, 1), (b, 2)]);
    let steps: Vec<Vec<([u8; 32], u64)>> = vec![
        base,
        vec![(a, 11)],
        vec![(b, 12)],
        vec![(c, 13)],
        vec![(a, 0), (others[0], 9)],
        vec![(c, 14)],
        vec![(b, 0), (a, 15)],
        vec![(c, 0)],
    ];
    let mut expected = Vec::new();
    for (slot, accts) in steps.iter().enumerate() {
        commit(&mut tree, &w, &mut state, slot as u64, accts);
        expected.push((tree.root(), state.clone()));
    }
    w.flush().unwrap();
    let h = SnapshotReader::open(dir.path()).unwrap();
    for (slot, (root, state)) in expected.iter().enumerate() {
        let slot = slot as u64;
        assert_eq!(h.slot(Some(slot)).unwrap().root, *root, "slot {slot}");
        for pk in [a, b, c, others[0], others[1]] {
            let p = h.prove(&pk, Some(slot)).unwrap();
            let claim = p.proof.verify(root, &pk).unwrap();
            match state.get(&pk) {
                Some((lamports, data)) => {
                    let got = p.account.as_ref().unwrap_or_else(|| panic!("slot {slot}: account missing"));
                    assert_eq!((got.lamports, &got.data), (*lamports, data), "slot {slot}");
                    assert!(matches!(claim, Claim::Present { .. }));
                }
                None => {
                    assert!(p.account.is_none(), "slot {slot}");
                    assert_eq!(claim, Claim::Absent);
                }
            }
        }
    }
    w.shutdown().unwrap();
}
