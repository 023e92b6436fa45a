//! The fork-mode writer against the naive model: random fork trees driven through
//! `aldb_core::ForkEngine::freeze_capture`, every bank submitted in freeze order (forks, switches
//! of 1 to 32 slots, repeated banks, dead banks, roots at random points); then every kept bank's
//! file is opened with `SnapshotReader` and its root and the proofs of present and absent
//! accounts are checked against the model's state on that bank's chain, and the slot-status
//! journal against what the banks became.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use aldb_core::{ChangeSet, Claim, Config, ForkEngine, ForkLimits, Pleiades};
use aldb_format::SnapshotReader;
use aldb_format::status::{SlotStatusKind, StatusJournal};
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput, SlotMark, SnapshotError, SnapshotWriter, WriterConfig};
use aldb_testkit::random::{Mix, history_writes};
use aldb_testkit::{State, account_ref, naive_root, refs};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Deletions from 85 of 100, data under 60 bytes.
const MIX: Mix = Mix { delete_from: 85, max_data: 60 };

/// The model: every bank's full state (the base's too), and what became of every slot.
struct Model {
    base: u64,
    banks: BTreeMap<u64, (u64, State)>,
    base_state: State,
    /// Final status each slot must have in the journal.
    expect: BTreeMap<u64, SlotStatusKind>,
}

impl Model {
    fn state(&self, slot: u64) -> &State {
        if slot == self.base { &self.base_state } else { &self.banks[&slot].1 }
    }

    fn descends(&self, mut slot: u64, ancestor: u64) -> bool {
        while slot > ancestor {
            slot = self.banks[&slot].0;
        }
        slot == ancestor
    }

    fn drop_subtree(&mut self, slot: u64) {
        if !self.banks.contains_key(&slot) {
            return;
        }
        let gone: Vec<u64> = self.banks.keys().copied().filter(|&s| s >= slot && self.descends(s, slot)).collect();
        for s in gone {
            self.banks.remove(&s);
            self.expect.insert(s, SlotStatusKind::Abandoned);
        }
    }

    fn root(&mut self, slot: u64) {
        let keep: BTreeSet<u64> = self.banks.keys().copied().filter(|&s| s > slot && self.descends(s, slot)).collect();
        let mut chain = BTreeSet::new();
        let mut s = slot;
        while s != self.base {
            chain.insert(s);
            s = self.banks[&s].0;
        }
        for (&s, _) in self.banks.iter() {
            if chain.contains(&s) {
                self.expect.insert(s, SlotStatusKind::Finalized);
            } else if !keep.contains(&s) {
                self.expect.insert(s, SlotStatusKind::Abandoned);
            }
        }
        self.base_state = self.banks[&slot].1.clone();
        self.base = slot;
        self.banks.retain(|s, _| keep.contains(s));
    }

    fn kept(&self) -> Vec<u64> {
        std::iter::once(self.base).chain(self.banks.keys().copied()).collect()
    }
}

struct Harness {
    rng: ChaCha8Rng,
    keys: Vec<[u8; 32]>,
    engine: ForkEngine,
    writer: Option<SnapshotWriter>,
    dir: std::path::PathBuf,
    model: Model,
    next: u64,
    per_bank: usize,
}

impl Harness {
    fn start(seed: u64, config: Config, wc: WriterConfig, per_bank: usize) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut keys = Vec::new();
        let mut tree = Pleiades::new(config).unwrap();
        let accts = history_writes(&mut rng, &mut keys, 4 * per_bank, MIX);
        let r = refs(&accts);
        let updates = tree.hash_accounts(&r);
        let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
        let root = tree.commit_capture(updates.clone(), &mut changes);
        tree.capture_all(&mut changes);
        let mut state = State::new();
        for (pk, a) in &accts {
            if a.lamports == 0 {
                state.remove(pk);
            } else {
                state.insert(*pk, a.clone());
            }
        }
        let mut accounts = AccountBatch::default();
        for (pk, a) in &state {
            accounts.push(aldb_verify::spec::key_path(pk), &account_ref(pk, a));
        }
        let dir = wc.dir.clone();
        let writer = SnapshotWriter::start(wc, None).unwrap();
        writer.submit(SlotInput { slot: 0, parent: None, root, changes, accounts, full: true }).unwrap();
        let engine = ForkEngine::new(tree, 0, ForkLimits::default());
        let model = Model {
            base: 0,
            banks: BTreeMap::new(),
            base_state: state,
            expect: BTreeMap::from([(0, SlotStatusKind::Processed)]),
        };
        Self { rng, keys, engine, writer: Some(writer), dir, model, next: 1, per_bank }
    }

    fn w(&self) -> &SnapshotWriter {
        self.writer.as_ref().unwrap()
    }

    /// Shuts the writer down (its pruner finished) and returns its counters.
    fn shutdown(&mut self) -> std::sync::Arc<aldb_snapshot::WriterStats> {
        let w = self.writer.take().unwrap();
        let stats = w.stats().clone();
        w.shutdown().unwrap();
        stats
    }

    /// Freezes `slot` on `parent` in the engine and the model, and submits it.
    fn freeze(&mut self, slot: u64, parent: u64) {
        let n = self.rng.random_range(0..=self.per_bank);
        let accts = history_writes(&mut self.rng, &mut self.keys, n, MIX);
        let r = refs(&accts);
        let updates = self.engine.tree().hash_accounts(&r);
        let accounts = AccountBatch::from_updates(&updates, &r);
        let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
        let root = self.engine.freeze_capture(slot, parent, updates, &mut changes).unwrap();
        self.model.drop_subtree(slot);
        let mut state = self.model.state(parent).clone();
        for (pk, a) in &accts {
            if a.lamports == 0 {
                state.remove(pk);
            } else {
                state.insert(*pk, a.clone());
            }
        }
        assert_eq!(root, naive_root(&state), "slot {slot}: engine and model disagree");
        self.model.banks.insert(slot, (parent, state));
        self.model.expect.insert(slot, SlotStatusKind::Processed);
        self.w().submit(SlotInput { slot, parent: Some(parent), root, changes, accounts, full: false }).unwrap();
    }

    /// A parent for the next bank: mostly the newest bank (a steady chain), else a bank or the
    /// base reached by stepping 1 to 32 parents down from a random bank (a switch).
    fn pick_parent(&mut self) -> u64 {
        let kept = self.model.kept();
        let newest = *kept.last().unwrap();
        if self.rng.random_bool(0.6) {
            return newest;
        }
        let mut s = kept[self.rng.random_range(0..kept.len())];
        for _ in 0..self.rng.random_range(1..=32) {
            if s == self.model.base {
                break;
            }
            s = self.model.banks[&s].0;
        }
        s
    }

    fn step(&mut self) {
        let roll = self.rng.random_range(0..100);
        let unrooted: Vec<u64> = self.model.banks.keys().copied().collect();
        if roll < 70 || unrooted.is_empty() {
            let parent = self.pick_parent();
            let slot = self.next.max(parent + 1);
            self.next = slot + self.rng.random_range(1..=2);
            self.freeze(slot, parent);
        } else if roll < 76 {
            // A repeated CreatedBank: the slot is frozen again, possibly on another parent.
            let slot = unrooted[self.rng.random_range(0..unrooted.len())];
            let candidates: Vec<u64> = self.model.kept().into_iter().filter(|&p| p < slot).collect();
            let parent = candidates[self.rng.random_range(0..candidates.len())];
            self.freeze(slot, parent);
        } else if roll < 83 {
            let slot = unrooted[self.rng.random_range(0..unrooted.len())];
            self.engine.dead(slot).unwrap();
            self.model.drop_subtree(slot);
            self.w().mark(slot, SlotMark::Abandoned).unwrap();
        } else if roll < 90 {
            let slot = unrooted[self.rng.random_range(0..unrooted.len())];
            self.w().mark(slot, SlotMark::Confirmed).unwrap();
            if self.model.expect.get(&slot) == Some(&SlotStatusKind::Processed) {
                self.model.expect.insert(slot, SlotStatusKind::Confirmed);
            }
        } else {
            // Root a bank of the older half, as consensus roots a slot some way behind the tip.
            let slot = unrooted[self.rng.random_range(0..unrooted.len().div_ceil(2))];
            self.engine.root(slot).unwrap();
            self.model.root(slot);
            self.w().mark(slot, SlotMark::Finalized).unwrap();
        }
    }

    /// Every kept bank proves what the model holds on its chain; the journal says what became
    /// of every slot.
    fn check(&mut self, ctx: &str) {
        if let Some(w) = self.writer.as_ref() {
            w.flush().unwrap();
            let refused = w.take_refused();
            assert!(refused.is_empty(), "{ctx}: refused {refused:?}");
        }
        check_banks(self.writer_dir(), &self.model, &self.keys, ctx);
        let statuses = StatusJournal::read(self.writer_dir()).unwrap();
        for (slot, kind) in &self.model.expect {
            assert_eq!(statuses.status(*slot), Some(*kind), "{ctx}: status of slot {slot}");
        }
        assert_eq!(statuses.damaged_entries(), 0);
    }

    fn writer_dir(&self) -> &std::path::Path {
        self.dir.as_path()
    }
}

fn check_banks(dir: &std::path::Path, model: &Model, keys: &[[u8; 32]], ctx: &str) {
    let h = SnapshotReader::open(dir).unwrap();
    let mut probes: Vec<[u8; 32]> = keys.iter().step_by(2).copied().collect();
    probes.extend((0..6u8).map(|i| [i; 32]));
    for slot in model.kept() {
        let state = model.state(slot);
        let root = naive_root(state);
        let info = h.slot(Some(slot)).unwrap_or_else(|e| panic!("{ctx}: slot {slot}: {e}"));
        assert_eq!(info.root, root, "{ctx}: root of slot {slot}");
        for pk in &probes {
            let p = h.prove(pk, Some(slot)).unwrap_or_else(|e| panic!("{ctx}: slot {slot}: {e}"));
            assert_eq!(p.root, root);
            let claim = p.proof.verify(&root, pk).unwrap_or_else(|e| panic!("{ctx}: slot {slot}: {e}"));
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
                    assert!(p.account.is_none(), "{ctx}: slot {slot}: absent account served");
                    assert_eq!(claim, Claim::Absent);
                }
            }
        }
    }
}

fn fork_config(dir: &std::path::Path, keep_slots: u64, refresh_slots: u64) -> WriterConfig {
    WriterConfig { forks: true, keep_slots, refresh_slots, ..WriterConfig::new(dir) }
}

#[test]
fn every_kept_bank_on_every_fork_proves_its_chain() {
    // Odd and even bucket levels, several seeds; refresh cycles of 4 slots run on every fork.
    for (seed, (shard_bits, bucket_bits)) in [(0, 0), (1, 3), (2, 5), (3, 8)].into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::new(2, shard_bits, bucket_bits).unwrap();
        let mut h = Harness::start(10 + seed as u64, config, fork_config(dir.path(), 1000, 4), 24);
        for round in 0..3 {
            for _ in 0..50 {
                h.step();
            }
            h.check(&format!("bucket_bits {bucket_bits}, round {round}"));
        }
        let stats = h.shutdown();
        use std::sync::atomic::Ordering::Relaxed;
        assert!(stats.fork_switches.load(Relaxed) > 0, "the run switched forks");
        assert!(stats.fork_dropped.load(Relaxed) > 0, "the run dropped banks");
        assert_eq!(stats.fork_refused.load(Relaxed), 0);
        h.check("after shutdown");
    }
}

#[test]
fn pruning_with_a_small_window_keeps_every_live_bank() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new(2, 2, 6).unwrap();
    let mut h = Harness::start(21, config, fork_config(dir.path(), 3, 2), 30);
    for round in 0..4 {
        for _ in 0..60 {
            h.step();
        }
        h.check(&format!("round {round}"));
    }
    let stats = h.shutdown();
    assert!(stats.pruned_files.load(std::sync::atomic::Ordering::Relaxed) > 0, "old files were pruned");
    h.check("after pruning");
}

#[test]
fn a_bank_on_an_unwritten_parent_is_refused_and_later_banks_publish() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new(2, 2, 5).unwrap();
    let mut h = Harness::start(31, config, fork_config(dir.path(), 1000, 4), 16);
    for _ in 0..20 {
        h.step();
    }
    let orphan = h.next + 1000;
    let input = SlotInput {
        slot: orphan,
        parent: Some(orphan - 1),
        root: [7; 32],
        changes: ChangeSet::new(CAPTURE_OPTIONS),
        accounts: AccountBatch::default(),
        full: false,
    };
    h.w().submit(input).unwrap();
    h.w().flush().unwrap();
    let refused = h.w().take_refused();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].slot, orphan);
    assert!(
        matches!(refused[0].error, SnapshotError::ParentNotWritten { slot, parent: Some(p) } if slot == orphan && p == orphan - 1)
    );
    for _ in 0..30 {
        h.step();
    }
    h.check("after the refusal");
    assert_eq!(StatusJournal::read(dir.path()).unwrap().status(orphan), None, "a refused bank is never journaled");
}

#[test]
fn a_restarted_writer_resumes_from_the_newest_finalized_bank() {
    restart_resumes(WriterConfig::new("").part_bytes);
}

/// The same with banks cut into parts of 2 KiB: the resumed tables read the finalized bank's
/// tree across its parts, and numbering goes on after them.
#[test]
fn a_restarted_writer_resumes_across_parts() {
    restart_resumes(2048);
}

fn restart_resumes(part_bytes: u64) {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new(2, 2, 6).unwrap();
    let fork_config =
        |dir: &std::path::Path, keep, refresh| WriterConfig { part_bytes, ..fork_config(dir, keep, refresh) };
    let mut h = Harness::start(41, config, fork_config(dir.path(), 1000, 4), 20);
    for _ in 0..60 {
        h.step();
    }
    // Root the newest bank: every other unrooted bank is abandoned, so the finalized bank is
    // all that is left to build on.
    let newest = *h.model.banks.keys().last().unwrap_or(&h.model.base);
    if newest != h.model.base {
        h.engine.root(newest).unwrap();
        h.model.root(newest);
        h.w().mark(newest, SlotMark::Finalized).unwrap();
    }
    h.check("before the restart");
    h.shutdown();
    h.writer = Some(SnapshotWriter::start(fork_config(dir.path(), 1000, 4), None).unwrap());
    // No full state is submitted: the writer rebuilds its tables from the finalized bank's files.
    for _ in 0..60 {
        h.step();
    }
    h.check("after the restart");
    assert_eq!(StatusJournal::read(dir.path()).unwrap().status(newest), Some(SlotStatusKind::Finalized));
}

/// Banks cut into part files of 2 KiB: moves between forks, the refresh on each chain, pruning
/// with a window of 3 and the journal all work across parts, and every kept bank proves its
/// chain.
#[test]
fn banks_cut_into_parts_prove_their_chains() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new(2, 2, 6).unwrap();
    let wc = WriterConfig { part_bytes: 2048, direct_io: false, ..fork_config(dir.path(), 3, 2) };
    let mut h = Harness::start(51, config, wc, 30);
    for round in 0..3 {
        for _ in 0..60 {
            h.step();
        }
        h.check(&format!("parts, round {round}"));
    }
    let parts = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| aldb_format::format::parse_part_name(e.as_ref().unwrap().file_name().to_str().unwrap()).is_some())
        .count();
    assert!(parts > 10, "{parts} part files");
    let stats = h.shutdown();
    use std::sync::atomic::Ordering::Relaxed;
    assert!(stats.fork_switches.load(Relaxed) > 0, "the run switched forks");
    assert!(stats.pruned_files.load(Relaxed) > 0, "old files were pruned");
    assert_eq!(stats.fork_refused.load(Relaxed), 0);
    h.check("parts, after shutdown");
}
