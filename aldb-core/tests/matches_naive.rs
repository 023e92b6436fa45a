//! The engine's root is a function of the account set only: compared with the naive model over
//! random insert/update/delete histories, for many layouts, thread counts and commit cadences.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aldb_core::{BulkBuilder, BulkEntry, CaptureOptions, Claim, Config, Pleiades, Update};
use aldb_naive::NaiveState;
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, RngAlgorithm};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn random_value(rng: &mut ChaCha8Rng) -> [u8; 32] {
    let lamports = rng.random_range(1..1_000_000u64);
    let owner: [u8; 32] = rng.random();
    let len = rng.random_range(0..200usize);
    let data: Vec<u8> = (0..len).map(|_| rng.random()).collect();
    aldb_naive::value(lamports, &owner, rng.random(), &data)
}

/// A random history: slots of updates over a growing key set, 60% update / 25% insert / 15% delete.
fn history(seed: u64, slots: usize, per_slot: usize) -> Vec<Vec<Update>> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut keys: Vec<[u8; 32]> = Vec::new();
    (0..slots)
        .map(|_| {
            (0..per_slot)
                .map(|_| {
                    let roll = rng.random_range(0..100);
                    let path = if keys.is_empty() || roll < 25 {
                        let pk: [u8; 32] = rng.random();
                        let p = aldb_naive::path(&pk);
                        keys.push(p);
                        p
                    } else {
                        keys[rng.random_range(0..keys.len())]
                    };
                    let value = if roll >= 85 { None } else { Some(random_value(&mut rng)) };
                    Update { path, value }
                })
                .collect()
        })
        .collect()
}

fn check_proofs(tree: &Pleiades, naive: &NaiveState, probes: &[[u8; 32]]) {
    let root = tree.root();
    for path in probes {
        let proof = tree.prove(path);
        let claim = proof.verify_path(&root, path).expect("proof verifies");
        match naive.leaves.get(path) {
            Some(v) => assert_eq!(claim, Claim::Present { value: *v }),
            None => assert_eq!(claim, Claim::Absent),
        }
        assert_eq!(tree.get(path), naive.leaves.get(path).copied());
    }
}

fn run(config: Config, seed: u64, slots: usize, per_slot: usize, cadence: usize) {
    let hist = history(seed, slots, per_slot);
    let mut tree = Pleiades::new(config).expect("config");
    let mut naive = NaiveState::default();
    let mut pending = Vec::new();
    for (i, slot) in hist.iter().enumerate() {
        for u in slot {
            naive.apply(u.path, u.value);
        }
        pending.extend_from_slice(slot);
        if (i + 1) % cadence == 0 || i + 1 == hist.len() {
            let root = tree.commit(std::mem::take(&mut pending));
            assert_eq!(root, naive.root(), "slot {i} config {config:?}");
            assert_eq!(tree.len(), naive.leaves.len());
        }
    }
    let mut probes: Vec<[u8; 32]> = naive.leaves.keys().take(50).copied().collect();
    probes.extend(hist.iter().flatten().filter(|u| u.value.is_none()).take(20).map(|u| u.path));
    probes.extend((0..20u8).map(|i| aldb_naive::path(&[i; 32])));
    check_proofs(&tree, &naive, &probes);
}

#[test]
fn root_is_independent_of_threads_and_layout() {
    for threads in [1, 2, 3, 8] {
        for (shard_bits, bucket_bits) in [(0, 0), (0, 3), (2, 2), (4, 6), (4, 10), (8, 12)] {
            let config = Config::new(threads, shard_bits, bucket_bits).expect("valid");
            run(config, 7 + threads as u64, 12, 300, 1);
        }
    }
}

#[test]
fn root_is_independent_of_commit_cadence() {
    for cadence in [1, 2, 5, 40] {
        run(Config::new(2, 4, 8).expect("valid"), 99, 40, 150, cadence);
    }
}

#[test]
fn dense_buckets_and_sparse_buckets_agree() {
    // Few bucket bits put hundreds of leaves in one bucket; many put at most one.
    run(Config::new(2, 1, 1).expect("valid"), 5, 6, 700, 1);
    run(Config::new(2, 6, 20).expect("valid"), 5, 6, 700, 1);
}

#[test]
fn deleting_everything_gives_the_empty_root() {
    let mut tree = Pleiades::new(Config::new(2, 3, 6).expect("valid")).expect("config");
    let paths: Vec<[u8; 32]> = (0..500u32)
        .map(|i| {
            let mut pk = [7u8; 32];
            pk[..4].copy_from_slice(&i.to_le_bytes());
            aldb_naive::path(&pk)
        })
        .collect();
    tree.commit(paths.iter().map(|p| Update { path: *p, value: Some(*p) }).collect());
    assert_eq!(tree.len(), 500);
    let root = tree.commit(paths.iter().map(|p| Update { path: *p, value: None }).collect());
    assert_eq!(root, [0u8; 32]);
    assert!(tree.is_empty());
    let proof = tree.prove(&paths[0]);
    assert_eq!(proof.verify_path(&root, &paths[0]), Ok(Claim::Absent));
}

#[test]
fn later_update_in_a_batch_wins() {
    let mut tree = Pleiades::new(Config::new(2, 2, 4).expect("valid")).expect("config");
    let p = aldb_naive::path(&[9; 32]);
    let root = tree.commit(vec![
        Update { path: p, value: Some([1; 32]) },
        Update { path: p, value: None },
        Update { path: p, value: Some([2; 32]) },
    ]);
    let mut naive = NaiveState::default();
    naive.apply(p, Some([2; 32]));
    assert_eq!(root, naive.root());
    let root = tree.commit(vec![Update { path: p, value: Some([3; 32]) }, Update { path: p, value: None }]);
    assert_eq!(root, [0; 32]);
}

#[test]
fn bulk_build_matches_naive_with_ranks_and_tombstones() {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let keys: Vec<[u8; 32]> = (0..3000).map(|_| aldb_naive::path(&rng.random())).collect();
    let mut entries = Vec::new();
    // Several versions per key in random order; the highest (slot, write_version) must win.
    for k in &keys {
        for _ in 0..rng.random_range(1..4) {
            let rank = (rng.random_range(0..5u64), rng.random_range(0..5u64));
            let value = if rng.random_range(0..5) == 0 { None } else { Some(random_value(&mut rng)) };
            entries.push(BulkEntry { path: *k, value, rank });
        }
    }
    for i in (1..entries.len()).rev() {
        entries.swap(i, rng.random_range(0..=i));
    }
    let mut naive = NaiveState::default();
    let mut best: std::collections::BTreeMap<[u8; 32], (usize, (u64, u64))> = Default::default();
    for (i, e) in entries.iter().enumerate() {
        let cur = best.entry(e.path).or_insert((i, e.rank));
        if e.rank >= cur.1 {
            *cur = (i, e.rank);
        }
    }
    for (path, (i, _)) in &best {
        naive.apply(*path, entries[*i].value);
    }
    for threads in [1, 2, 3] {
        let mut b = BulkBuilder::new(Config::for_leaves(3000, threads)).expect("config");
        for chunk in entries.chunks(777) {
            b.push(chunk);
        }
        let tree = b.finish();
        assert_eq!(tree.root(), naive.root());
        assert_eq!(tree.len(), naive.leaves.len());
    }
}

/// Bulk-builds the first slots of a history, then commits the rest: buckets laid down by the
/// build must read, rewrite, grow, shrink and recycle like any other.
fn bulk_then_commit(config: Config, seed: u64, with_deletes: bool) {
    let hist = history(seed, 16, 400);
    let (first, rest) = hist.split_at(8);
    let mut naive = NaiveState::default();
    let mut b = BulkBuilder::new(config).expect("config");
    for slot in first {
        // Without deletes every entry is live with one rank: the builder stores neither.
        let entries: Vec<BulkEntry> = slot
            .iter()
            .filter(|u| with_deletes || u.value.is_some())
            .map(|u| BulkEntry { path: u.path, value: u.value, rank: (3, 1) })
            .collect();
        for e in &entries {
            naive.apply(e.path, e.value);
        }
        b.push(&entries);
    }
    let mut tree = b.finish();
    assert_eq!(tree.root(), naive.root(), "bulk build, config {config:?}");
    assert_eq!(tree.len(), naive.leaves.len());
    for (i, slot) in rest.iter().enumerate() {
        for u in slot {
            naive.apply(u.path, u.value);
        }
        assert_eq!(tree.commit(slot.clone()), naive.root(), "slot {i} after the build, config {config:?}");
        assert_eq!(tree.len(), naive.leaves.len());
    }
    let probes: Vec<[u8; 32]> = hist.iter().flatten().map(|u| u.path).step_by(7).collect();
    check_proofs(&tree, &naive, &probes);
}

#[test]
fn commits_after_a_bulk_build_match_naive() {
    // (1, 3) puts hundreds of leaves in a bucket (longer than the exact-fit classes); the others
    // a few.
    for (shard_bits, bucket_bits) in [(0, 0), (1, 3), (2, 9), (4, 11)] {
        for with_deletes in [false, true] {
            bulk_then_commit(Config::new(2, shard_bits, bucket_bits).expect("valid"), 11, with_deletes);
        }
    }
    bulk_then_commit(Config::for_leaves(2000, 3), 12, false);
}

proptest! {
    #![proptest_config(PtConfig {
        cases: 48,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0xa1db),
        ..PtConfig::default()
    })]

    #[test]
    fn arbitrary_small_histories(
        ops in prop::collection::vec((0u8..40, prop::option::of(any::<u8>())), 1..120),
        cadence in 1usize..10,
        shard_bits in 0u8..4,
        extra in 0u8..5,
    ) {
        let mut tree = Pleiades::new(Config::new(2, shard_bits, shard_bits + extra).expect("valid")).expect("config");
        let mut naive = NaiveState::default();
        let mut pending = Vec::new();
        for (i, (k, v)) in ops.iter().enumerate() {
            let path = aldb_naive::path(&[*k; 32]);
            let value = v.map(|b| [b; 32]);
            naive.apply(path, value);
            pending.push(Update { path, value });
            if (i + 1) % cadence == 0 {
                prop_assert_eq!(tree.commit(std::mem::take(&mut pending)), naive.root());
            }
        }
        prop_assert_eq!(tree.commit(pending), naive.root());
        let probes: Vec<[u8; 32]> = (0u8..45).map(|k| aldb_naive::path(&[k; 32])).collect();
        check_proofs(&tree, &naive, &probes);
    }
}

/// A bucket as a change set describes it: its hash, its leaf paths and (when recorded) values.
type BucketModel = ([u8; 32], Vec<[u8; 32]>, Vec<[u8; 32]>);

/// The prefix array a change set describes, as maps, for comparing incremental and full captures.
#[derive(Default, PartialEq, Debug)]
struct ArrayModel {
    nodes: std::collections::BTreeMap<(u8, u64), [u8; 32]>,
    buckets: std::collections::BTreeMap<u64, BucketModel>,
}

impl ArrayModel {
    fn apply(&mut self, c: &aldb_core::ChangeSet) {
        for n in c.nodes() {
            if n.hash == [0; 32] {
                self.nodes.remove(&(n.level, n.index));
            } else {
                self.nodes.insert((n.level, n.index), n.hash);
            }
        }
        let mut last = None;
        for b in c.buckets() {
            assert!(last < Some(b.index), "buckets in ascending order");
            last = Some(b.index);
            if b.paths.is_empty() {
                self.buckets.remove(&b.index);
            } else {
                self.buckets.insert(b.index, (b.hash, b.paths.to_vec(), b.values.to_vec()));
            }
        }
    }

    /// What a capture with `options` would keep of this model.
    fn filtered(&self, options: CaptureOptions, bucket_bits: u8) -> Self {
        Self {
            nodes: (self.nodes.iter())
                .filter(|((level, _), _)| options.keeps_level(*level, bucket_bits))
                .map(|(k, v)| (*k, *v))
                .collect(),
            buckets: (self.buckets.iter())
                .map(|(k, (h, p, v))| (*k, (*h, p.clone(), if options.leaf_values { v.clone() } else { Vec::new() })))
                .collect(),
        }
    }
}

#[test]
fn change_sets_rebuild_the_full_capture() {
    // A second tree with the same history records only even levels and no leaf values, into one
    // reused change set: its captures must be exactly the filtered full ones.
    let trimmed = CaptureOptions::ALL.with_level_step(2).without_leaf_values().without_levels_above_buckets(1);
    for (shard_bits, bucket_bits) in [(0, 0), (0, 1), (2, 2), (3, 7), (4, 12)] {
        let config = Config::new(2, shard_bits, bucket_bits).expect("valid");
        let mut tree = Pleiades::new(config).expect("config");
        let mut twin = Pleiades::new(config).expect("config");
        let mut model = ArrayModel::default();
        let mut twin_model = ArrayModel::default();
        let mut changes = aldb_core::ChangeSet::default();
        let mut twin_changes = aldb_core::ChangeSet::new(trimmed);
        for slot in history(31, 10, 250) {
            let root = tree.commit_capture(slot.clone(), &mut changes);
            assert_eq!(twin.commit_capture(slot, &mut twin_changes), root);
            assert_eq!(changes.bucket_bits(), bucket_bits);
            model.apply(&changes);
            twin_model.apply(&twin_changes);
            let mut full = aldb_core::ChangeSet::default();
            tree.capture_all(&mut full);
            let mut expect = ArrayModel::default();
            expect.apply(&full);
            assert_eq!(model, expect, "layout ({shard_bits}, {bucket_bits})");
            assert_eq!(
                twin_model,
                expect.filtered(trimmed, bucket_bits),
                "trimmed, layout ({shard_bits}, {bucket_bits})"
            );
            let mut twin_full = aldb_core::ChangeSet::new(trimmed);
            twin.capture_all(&mut twin_full);
            let mut twin_expect = ArrayModel::default();
            twin_expect.apply(&twin_full);
            assert_eq!(twin_expect, expect.filtered(trimmed, bucket_bits));
            assert_eq!(twin_full.node_count(), twin_expect.nodes.len());
            assert_eq!(twin_full.bucket_count(), twin_expect.buckets.len());
            // The top of the array is the root (or, with no levels above the buckets, bucket 0).
            let top =
                if bucket_bits == 0 { model.buckets.get(&0).map(|b| b.0) } else { model.nodes.get(&(0, 0)).copied() };
            assert_eq!(top.unwrap_or([0; 32]), root);
        }
    }
}

/// A change set filled by hand reads back in the coordinates it was given.
#[test]
fn a_change_set_filled_by_hand_reads_back() {
    let mut c = aldb_core::ChangeSet::by_hand(12, CaptureOptions::ALL.with_level_step(2));
    c.push_node(4, 9, [1; 32]);
    c.push_node(5, 9, [2; 32]);
    c.push_bucket(3, [3; 32], &[[4; 32], [5; 32]], &[[6; 32], [7; 32]]);
    c.push_bucket(4095, [8; 32], &[], &[]);
    let nodes: Vec<_> = c.nodes().map(|n| (n.level, n.index, n.hash)).collect();
    assert_eq!(nodes, vec![(4, 9, [1; 32])]);
    let buckets: Vec<_> = c.buckets().map(|b| (b.index, b.hash, b.paths.to_vec(), b.values.to_vec())).collect();
    assert_eq!(
        buckets,
        vec![(3, [3; 32], vec![[4; 32], [5; 32]], vec![[6; 32], [7; 32]]), (4095, [8; 32], vec![], vec![])]
    );
    assert_eq!((c.node_count(), c.bucket_count(), c.bucket_bits()), (1, 2, 12));
    // Cleared, it is empty and can be filled again.
    c.clear();
    assert_eq!((c.node_count(), c.bucket_count()), (0, 0));
    c.push_bucket(7, [9; 32], &[[1; 32]], &[[2; 32]]);
    assert_eq!(c.buckets().map(|b| b.index).collect::<Vec<_>>(), vec![7]);
    // A set a commit filled ignores hand-made entries (its parts are in shard coordinates).
    let mut tree = Pleiades::new(Config::new(1, 2, 6).expect("valid")).expect("config");
    let mut filled = aldb_core::ChangeSet::default();
    tree.commit_capture(history(3, 1, 20).remove(0), &mut filled);
    let before = (filled.node_count(), filled.bucket_count());
    filled.push_node(4, 1, [1; 32]);
    filled.push_bucket(5, [1; 32], &[[1; 32]], &[[1; 32]]);
    assert_eq!((filled.node_count(), filled.bucket_count()), before);
}
