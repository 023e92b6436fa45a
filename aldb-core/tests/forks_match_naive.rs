//! The fork engine against the naive model: over seeded random fork trees (branching, dead banks,
//! repeated `CreatedBank`, roots at random points, switches of 1 to 32 slots), every bank's root
//! equals the naive root of the state along its chain, whatever order of freezes, switches and
//! roots led there; for 1, 2 and 8 worker threads.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use aldb_core::{CaptureOptions, ChangeSet, Config, ForkEngine, ForkError, ForkLimits, Pleiades, Update};
use aldb_naive::NaiveState;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

type Hash = [u8; 32];

/// The model: every bank's full state, rebuilt by cloning its parent's. Too simple to share a bug
/// with the engine's undo records.
struct Model {
    base: u64,
    base_state: NaiveState,
    head: u64,
    banks: BTreeMap<u64, (u64, NaiveState)>,
}

impl Model {
    fn state(&self, slot: u64) -> &NaiveState {
        if slot == self.base { &self.base_state } else { &self.banks[&slot].1 }
    }

    fn descends(&self, mut slot: u64, ancestor: u64) -> bool {
        while slot > ancestor {
            slot = self.banks[&slot].0;
        }
        slot == ancestor
    }

    fn subtree(&self, slot: u64) -> Vec<u64> {
        self.banks.keys().copied().filter(|&s| s >= slot && self.descends(s, slot)).collect()
    }

    fn freeze(&mut self, slot: u64, parent: u64, updates: &[Update]) -> Hash {
        self.dead(slot);
        let mut state = self.state(parent).clone();
        for u in updates {
            state.apply(u.path, u.value);
        }
        let root = state.root();
        self.banks.insert(slot, (parent, state));
        self.head = slot;
        root
    }

    fn dead(&mut self, slot: u64) -> Vec<u64> {
        if !self.banks.contains_key(&slot) {
            return Vec::new();
        }
        let gone = self.subtree(slot);
        if gone.contains(&self.head) {
            self.head = self.banks[&slot].0;
        }
        for s in &gone {
            self.banks.remove(s);
        }
        gone
    }

    fn root(&mut self, slot: u64) -> (Vec<u64>, Vec<u64>) {
        let keep: BTreeSet<u64> = self.subtree(slot).into_iter().filter(|&s| s != slot).collect();
        let mut rooted = Vec::new();
        let mut s = slot;
        while s != self.base {
            rooted.push(s);
            s = self.banks[&s].0;
        }
        rooted.reverse();
        let abandoned: Vec<u64> =
            self.banks.keys().copied().filter(|s| !keep.contains(s) && !rooted.contains(s)).collect();
        if !self.descends(self.head, slot) {
            self.head = slot;
        }
        self.base_state = self.banks[&slot].1.clone();
        self.base = slot;
        self.banks.retain(|s, _| keep.contains(s));
        (rooted, abandoned)
    }

    /// The head's chain, head first, down to the base.
    fn head_chain(&self) -> Vec<u64> {
        let mut out = vec![self.head];
        let mut s = self.head;
        while s != self.base {
            s = self.banks[&s].0;
            out.push(s);
        }
        out
    }
}

/// Draws a bank's updates: writes of present and absent paths, deletes (some of absent paths),
/// rewrites of the same value, and paths written twice (the later wins).
fn draw_updates(rng: &mut ChaCha8Rng, pool: &mut Vec<Hash>, state: &NaiveState) -> Vec<Update> {
    let n = rng.random_range(0..=40);
    let mut out: Vec<Update> = Vec::with_capacity(n);
    for _ in 0..n {
        let roll = rng.random_range(0..100);
        let path = if roll < 20 || pool.is_empty() {
            let p = aldb_naive::path(&rng.random::<[u8; 32]>());
            pool.push(p);
            p
        } else if roll < 30 && !out.is_empty() {
            out[rng.random_range(0..out.len())].path
        } else {
            pool[rng.random_range(0..pool.len())]
        };
        let value = match rng.random_range(0..100) {
            0..20 => None,
            20..30 => state.leaves.get(&path).copied(),
            _ => Some(rng.random()),
        };
        out.push(Update { path, value });
    }
    out
}

fn assert_matches(engine: &ForkEngine, model: &Model, ctx: &str, full: bool) {
    assert_eq!(engine.base(), model.base, "{ctx}: base");
    assert_eq!(engine.head(), model.head, "{ctx}: head");
    assert_eq!(engine.banks().collect::<Vec<_>>(), model.banks.keys().copied().collect::<Vec<_>>(), "{ctx}: banks");
    assert_eq!(engine.head_chain().collect::<Vec<_>>(), model.head_chain(), "{ctx}: head chain");
    assert_eq!(engine.tree().root(), model.state(model.head).root(), "{ctx}: head root");
    assert_eq!(engine.bank_root(model.head), Some(engine.tree().root()), "{ctx}: head bank root");
    assert_eq!(engine.stats().snapshot().banks_held, model.banks.len() as u64, "{ctx}: banks gauge");
    if full {
        for (&s, (parent, state)) in &model.banks {
            assert_eq!(engine.bank_root(s), Some(state.root()), "{ctx}: root of bank {s}");
            assert_eq!(engine.parent_of(s), Some(*parent), "{ctx}: parent of bank {s}");
        }
        assert_eq!(engine.base_root(), model.base_state.root(), "{ctx}: base root");
        let leaves: Vec<(Hash, Hash)> = engine.tree().iter().map(|(p, v)| (*p, *v)).collect();
        let want: Vec<(Hash, Hash)> = model.state(model.head).leaves.iter().map(|(p, v)| (*p, *v)).collect();
        assert_eq!(leaves, want, "{ctx}: head leaves");
    }
}

/// A plain tree holding `state`, to compare change sets with.
fn plain_tree(config: Config, state: &NaiveState) -> Pleiades {
    let mut t = Pleiades::new(config).unwrap();
    t.commit(state.leaves.iter().map(|(p, v)| Update { path: *p, value: Some(*v) }).collect());
    t
}

struct Run {
    rng: ChaCha8Rng,
    engine: ForkEngine,
    model: Model,
    pool: Vec<Hash>,
    next_slot: u64,
    config: Config,
    switch_depths: BTreeSet<usize>,
}

impl Run {
    fn new(config: Config, seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut pool = Vec::new();
        let mut base_state = NaiveState::default();
        let start = draw_updates(&mut rng, &mut pool, &base_state);
        for _ in 0..5 {
            for u in draw_updates(&mut rng, &mut pool, &base_state) {
                base_state.apply(u.path, u.value);
            }
        }
        for u in &start {
            base_state.apply(u.path, u.value);
        }
        let tree = plain_tree(config, &base_state);
        let engine = ForkEngine::new(tree, 10, ForkLimits::default());
        let model = Model { base: 10, base_state, head: 10, banks: BTreeMap::new() };
        Self { rng, engine, model, pool, next_slot: 11, config, switch_depths: BTreeSet::new() }
    }

    fn new_slot(&mut self) -> u64 {
        let s = self.next_slot;
        self.next_slot += self.rng.random_range(1..=3);
        s
    }

    fn random_bank(&mut self) -> Option<u64> {
        let n = self.model.banks.len();
        (n > 0).then(|| *self.model.banks.keys().nth(self.rng.random_range(0..n)).unwrap())
    }

    /// Freezes `slot` on `parent` in both, sometimes through the capturing path, and checks the
    /// root (and the change set against a plain commit on the parent's state).
    fn freeze(&mut self, slot: u64, parent: u64, ctx: &str) {
        let updates = draw_updates(&mut self.rng, &mut self.pool, self.model.state(parent));
        let depth = self.switch_depth(parent);
        let capture = self.rng.random_range(0..8) == 0;
        let want_changes = capture.then(|| {
            let mut plain = plain_tree(self.config, self.model.state(parent));
            let mut c = ChangeSet::new(CaptureOptions::ALL);
            plain.commit_capture(updates.clone(), &mut c);
            c
        });
        let got = match &want_changes {
            Some(want) => {
                let mut c = ChangeSet::new(CaptureOptions::ALL);
                let root = self.engine.freeze_capture(slot, parent, updates.clone(), &mut c).unwrap();
                assert!(c == *want, "{ctx}: change set of bank {slot}");
                root
            }
            None => self.engine.freeze(slot, parent, updates.clone()).unwrap(),
        };
        let want = self.model.freeze(slot, parent, &updates);
        assert_eq!(got, want, "{ctx}: freeze {slot} on {parent}");
        self.switch_depths.extend(depth);
    }

    /// How many slots the head would roll back to reach `target`, when it must.
    fn switch_depth(&self, target: u64) -> Option<usize> {
        if !self.model.banks.contains_key(&self.model.head) || self.model.descends(target, self.model.head) {
            return None;
        }
        let chain = self.model.head_chain();
        chain.iter().position(|&s| self.model.descends(target, s))
    }

    fn step(&mut self, i: usize) {
        let ctx = format!("step {i}");
        let head = self.model.head;
        match self.rng.random_range(0..100) {
            // The steady chain.
            0..40 => {
                let s = self.new_slot();
                self.freeze(s, head, &ctx);
            }
            // A fork from any bank (or the base).
            40..52 => {
                let parent = if self.rng.random_range(0..5) == 0 { Some(self.model.base) } else { self.random_bank() };
                if let Some(p) = parent {
                    let s = self.new_slot();
                    self.freeze(s, p, &ctx);
                }
            }
            // A fork of k banks from k below the head, then back to the old head: a switch that
            // rolls back k and re-applies k.
            52..60 => {
                let k = if self.rng.random_range(0..8) == 0 { 32 } else { self.rng.random_range(1..=32usize) };
                // Grow the head's chain to k banks first, if it is shorter.
                while self.model.head_chain().len() <= k {
                    let s = self.new_slot();
                    self.freeze(s, self.model.head, &ctx);
                }
                let head = self.model.head;
                let mut parent = self.model.head_chain()[k];
                for _ in 0..k {
                    let s = self.new_slot();
                    self.freeze(s, parent, &ctx);
                    parent = s;
                }
                self.switch(head, &ctx);
            }
            // A repeated CreatedBank: a held slot frozen again, on a parent below it.
            60..66 => {
                if let Some(s) = self.random_bank() {
                    let below: Vec<u64> = std::iter::once(self.model.base)
                        .chain(self.model.banks.keys().copied().filter(|&b| b < s))
                        .collect();
                    let p = below[self.rng.random_range(0..below.len())];
                    self.freeze(s, p, &ctx);
                }
            }
            // Dead: a held bank, or a slot never frozen.
            66..72 => {
                let s = if self.rng.random_range(0..4) == 0 {
                    self.next_slot + 1000
                } else {
                    self.random_bank().unwrap_or(0)
                };
                if s <= self.model.base {
                    return;
                }
                let rolls_back = self.model.subtree(s).contains(&head);
                let before = self.engine.stats().snapshot();
                let got = self.engine.dead(s).unwrap();
                assert_eq!(got, self.model.dead(s), "{ctx}: dead {s}");
                if !rolls_back {
                    assert_eq!(
                        self.engine.stats().snapshot().switches,
                        before.switches,
                        "{ctx}: dead off the head chain"
                    );
                }
            }
            // Root: an ancestor of the head, or any bank.
            72..80 => {
                let target = if self.rng.random_range(0..4) == 0 {
                    self.random_bank()
                } else {
                    let chain = self.model.head_chain();
                    // Keep most of the chain unrooted so deep switches stay possible.
                    (chain.len() > 34).then(|| chain[self.rng.random_range(33..chain.len() - 1)])
                };
                if let Some(s) = target {
                    let got = self.engine.root(s).unwrap();
                    let (rooted, abandoned) = self.model.root(s);
                    assert_eq!((got.rooted, got.abandoned), (rooted, abandoned), "{ctx}: root {s}");
                }
            }
            // A plain switch to any bank or the base.
            _ => {
                let s = if self.rng.random_range(0..6) == 0 { Some(self.model.base) } else { self.random_bank() };
                if let Some(s) = s {
                    self.switch(s, &ctx);
                }
            }
        }
        assert_matches(&self.engine, &self.model, &ctx, i.is_multiple_of(16));
    }

    fn switch(&mut self, slot: u64, ctx: &str) {
        self.switch_depths.extend(self.switch_depth(slot));
        let root = self.engine.switch_to(slot).unwrap();
        self.model.head = slot;
        assert_eq!(root, self.model.state(slot).root(), "{ctx}: switch to {slot}");
    }
}

fn run(threads: usize, shard_bits: u8, bucket_bits: u8, seed: u64, steps: usize) -> BTreeSet<usize> {
    let config = Config::new(threads, shard_bits, bucket_bits).unwrap();
    let mut r = Run::new(config, seed);
    for i in 0..steps {
        r.step(i);
    }
    assert_matches(&r.engine, &r.model, "end", true);
    let stats = r.engine.stats().snapshot();
    assert!(stats.switches > 0 && stats.slots_rolled_back > 0 && stats.slots_reapplied > 0, "{stats:?}");
    r.switch_depths
}

fn covers_deep_switches(depths: &BTreeSet<usize>) {
    assert!(depths.contains(&1), "{depths:?}");
    assert!(depths.iter().any(|&d| d >= 32), "no switch of 32 slots: {depths:?}");
}

#[test]
fn one_thread_matches_naive() {
    let mut depths = BTreeSet::new();
    for seed in 0..4 {
        depths.extend(run(1, 0, 3, 1000 + seed, 400));
    }
    covers_deep_switches(&depths);
}

#[test]
fn two_threads_match_naive() {
    let mut depths = BTreeSet::new();
    for seed in 0..4 {
        depths.extend(run(2, 2, 6, 2000 + seed, 400));
    }
    covers_deep_switches(&depths);
}

#[test]
fn eight_threads_match_naive() {
    let mut depths = BTreeSet::new();
    for seed in 0..4 {
        depths.extend(run(8, 4, 9, 8000 + seed, 400));
    }
    covers_deep_switches(&depths);
}

fn updates(seed: u8, n: u8) -> Vec<Update> {
    (0..n)
        .map(|i| Update { path: aldb_naive::path(&[seed, i].repeat(16).try_into().unwrap()), value: Some([i; 32]) })
        .collect()
}

fn engine(limits: ForkLimits) -> ForkEngine {
    let mut tree = Pleiades::new(Config::new(2, 2, 4).unwrap()).unwrap();
    tree.commit(updates(0, 50));
    ForkEngine::new(tree, 100, limits)
}

#[test]
fn bad_calls_get_typed_errors_and_leave_the_tree_alone() {
    let mut e = engine(ForkLimits::default());
    let base_root = e.tree().root();
    assert_eq!(e.freeze(100, 99, updates(1, 3)), Err(ForkError::AtOrBelowBase { slot: 100, base: 100 }));
    assert_eq!(e.freeze(105, 105, updates(1, 3)), Err(ForkError::ParentNotBelow { slot: 105, parent: 105 }));
    assert_eq!(e.freeze(105, 101, updates(1, 3)), Err(ForkError::UnknownParent { slot: 105, parent: 101 }));
    assert_eq!(e.root(101), Err(ForkError::UnknownSlot { slot: 101 }));
    assert_eq!(e.root(99), Err(ForkError::AtOrBelowBase { slot: 99, base: 100 }));
    assert_eq!(e.switch_to(101), Err(ForkError::UnknownSlot { slot: 101 }));
    assert_eq!(e.dead(100), Err(ForkError::AtOrBelowBase { slot: 100, base: 100 }));
    assert_eq!(e.dead(101), Ok(Vec::new()));
    assert_eq!(e.root(100), Ok(Default::default()));
    assert_eq!(e.tree().root(), base_root);
    assert_eq!(e.bank_count(), 0);
}

#[test]
fn the_bounds_refuse_a_freeze_before_it_touches_the_tree() {
    let mut e = engine(ForkLimits::new(2, usize::MAX));
    e.freeze(101, 100, updates(1, 10)).unwrap();
    let r102 = e.freeze(102, 101, updates(2, 10)).unwrap();
    assert_eq!(e.freeze(103, 102, updates(3, 10)), Err(ForkError::TooManyBanks { slot: 103, max: 2 }));
    assert_eq!((e.tree().root(), e.head(), e.bank_count()), (r102, 102, 2));
    // A refused freeze on another fork does not switch either.
    assert!(e.freeze(104, 100, updates(4, 10)).is_err());
    assert_eq!((e.tree().root(), e.head()), (r102, 102));
    e.root(101).unwrap();
    e.freeze(103, 102, updates(3, 10)).unwrap();
    assert_eq!(e.stats().snapshot().refused, 2);

    let mut e = engine(ForkLimits::new(100, 6000));
    let r = e.freeze(101, 100, updates(1, 10)).unwrap();
    let held = e.held_bytes();
    assert!(held > 0 && held <= 6000, "{held}");
    assert_eq!(e.stats().snapshot().held_bytes, held as u64);
    match e.freeze(102, 101, updates(2, 40)) {
        Err(ForkError::TooManyBytes { slot: 102, held: h, max: 6000, .. }) => assert_eq!(h, held),
        other => panic!("{other:?}"),
    }
    assert_eq!((e.tree().root(), e.head()), (r, 101));
    e.root(101).unwrap();
    assert_eq!(e.held_bytes(), 0);
    assert_eq!(e.stats().snapshot().undo_bytes, 0);
    e.freeze(102, 101, updates(2, 40)).unwrap();
}

#[test]
fn switches_count_the_slots_they_roll_back_and_reapply() {
    let mut e = engine(ForkLimits::default());
    let r1 = e.freeze(101, 100, updates(1, 8)).unwrap();
    e.freeze(102, 101, updates(2, 8)).unwrap();
    let r3 = e.freeze(103, 102, updates(3, 8)).unwrap();
    let r4 = e.freeze(104, 101, updates(4, 8)).unwrap();
    let s = e.stats().snapshot();
    assert_eq!((s.freezes, s.switches, s.slots_rolled_back, s.slots_reapplied), (4, 1, 2, 0));
    assert_eq!(e.switch_to(103), Ok(r3));
    let s = e.stats().snapshot();
    assert_eq!((s.switches, s.slots_rolled_back, s.slots_reapplied), (2, 3, 2));
    assert!(e.on_head_chain(102) && !e.on_head_chain(104));
    // Dead off the head chain: no switch.
    assert_eq!(e.dead(104), Ok(vec![104]));
    assert_eq!(e.stats().snapshot().switches, 2);
    assert_eq!(e.bank_root(104), None);
    // Dead on the head chain: back to the parent.
    assert_eq!(e.dead(102), Ok(vec![102, 103]));
    assert_eq!((e.head(), e.tree().root()), (101, r1));
    let s = e.stats().snapshot();
    assert_eq!((s.banks_dead, s.banks_held, s.slots_rolled_back), (3, 1, 5));
    let r5 = e.freeze(105, 101, updates(5, 8)).unwrap();
    assert_ne!(r5, r4);
    let rooted = e.root(105).unwrap();
    assert_eq!((rooted.rooted, rooted.abandoned), (vec![101, 105], vec![]));
    assert_eq!((e.base(), e.base_root(), e.bank_count(), e.held_bytes()), (105, r5, 0, 0));
}
