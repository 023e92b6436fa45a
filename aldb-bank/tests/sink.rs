//! The module's sink on a real directory: seeded fork trees driven through `BankRoots` the way a
//! patched validator drives it, then read the way Hyades reads the directory (its reader, the
//! slot-status journal, the record log) and checked against a naive model of every bank.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use aldb_bank::{BankMeta, BankRoots, RecordLevel, RecordsConfig, SinkConfig};
use aldb_format::SnapshotReader;
use aldb_format::records::LoggedRecord;
use aldb_format::records::RecordLogReader;
use aldb_format::status::{SlotStatusKind, StatusJournal};
use aldb_snapshot::records::Signer;
use aldb_testkit::{State, apply, naive_root, random::bank_writes, refs};
use aldb_verify::Claim;
use aldb_verify::record::{BlockInfo, Commitment};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const SEED: [u8; 32] = [7; 32];
const GENESIS: [u8; 32] = [9; 32];

/// A deterministic, distinct metadata per slot.
fn meta(slot: u64, parent_bank_hash: [u8; 32]) -> BankMeta {
    let tag = |t: u8| {
        let mut b = [t; 32];
        b[..8].copy_from_slice(&slot.to_le_bytes());
        b
    };
    BankMeta { bank_hash: tag(1), h: tag(2), blockhash: tag(3), block_height: slot * 2 + 1, parent_bank_hash }
}

fn keypair_file(dir: &Path) -> std::path::PathBuf {
    let mut full = SEED.to_vec();
    full.extend_from_slice(&Signer::from_seed(&SEED).identity());
    let path = dir.join("id.json");
    std::fs::write(&path, serde_json::to_string(&full).unwrap()).unwrap();
    path
}

fn sink_config(dir: &Path, key: &Path) -> SinkConfig {
    SinkConfig {
        records: Some(RecordsConfig {
            keypair: Some(key.to_path_buf()),
            levels: vec![RecordLevel::Confirmed, RecordLevel::Finalized],
            keep_slots: 1 << 20,
        }),
        genesis_hash: Some(GENESIS),
        threads: Some(2),
        // Room for every bank of a test run: nothing here depends on how fast the disk is.
        queue_bound: 4096,
        direct_io: false,
        ..SinkConfig::new(dir)
    }
}

/// One frozen bank of the model.
struct Bank {
    parent: Option<u64>,
    state: State,
    root: [u8; 32],
}

/// The model of what the module was told, and what each status must be.
struct Model {
    rng: ChaCha8Rng,
    roots: BankRoots,
    /// Every bank frozen (and the base), by slot.
    banks: BTreeMap<u64, Bank>,
    /// The base and the unrooted banks the module holds.
    held: BTreeSet<u64>,
    base: u64,
    finalized: BTreeSet<u64>,
    confirmed: BTreeSet<u64>,
    abandoned: BTreeSet<u64>,
    next: u64,
}

impl Model {
    fn start(seed: u64, roots: BankRoots) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let genesis = bank_writes(&mut rng, &State::new(), 300);
        let mut state = State::new();
        apply(&mut state, &genesis);
        let mut roots = roots;
        let root = roots.build_base(0, &refs(&genesis)).unwrap();
        assert_eq!(root, naive_root(&state));
        roots.bank_hash(0, meta(0, [0; 32])).unwrap();
        Self {
            rng,
            roots,
            banks: BTreeMap::from([(0, Bank { parent: None, state, root })]),
            held: BTreeSet::from([0]),
            base: 0,
            finalized: BTreeSet::from([0]),
            confirmed: BTreeSet::from([0]),
            abandoned: BTreeSet::new(),
            next: 1,
        }
    }

    fn descends(&self, mut slot: u64, ancestor: u64) -> bool {
        while slot > ancestor {
            match self.banks.get(&slot).and_then(|b| b.parent) {
                Some(p) => slot = p,
                None => return false,
            }
        }
        slot == ancestor
    }

    fn freeze(&mut self) {
        let held: Vec<u64> = self.held.iter().copied().collect();
        let newest = *held.last().unwrap();
        let parent = if self.rng.random_bool(0.7) { newest } else { held[self.rng.random_range(0..held.len())] };
        let slot = self.next;
        self.next += self.rng.random_range(1..3);
        let mut state = self.banks[&parent].state.clone();
        let n = self.rng.random_range(0..30);
        let w = bank_writes(&mut self.rng, &state, n);
        apply(&mut state, &w);
        let root = self.roots.freeze(slot, parent, &refs(&w)).unwrap();
        assert_eq!(root, naive_root(&state), "slot {slot} on {parent}");
        let parent_hash = meta(parent, [0; 32]).bank_hash;
        self.roots.bank_hash(slot, meta(slot, parent_hash)).unwrap();
        self.banks.insert(slot, Bank { parent: Some(parent), state, root });
        self.held.insert(slot);
    }

    /// Confirms a bank on the confirmed chain's extension, as the cluster would.
    fn confirm(&mut self) {
        let tip = *self.confirmed.iter().filter(|s| self.held.contains(s)).max().unwrap_or(&self.base);
        let candidates: Vec<u64> = self.held.iter().copied().filter(|&s| s > tip && self.descends(s, tip)).collect();
        if candidates.is_empty() {
            return;
        }
        let slot = candidates[self.rng.random_range(0..candidates.len())];
        self.roots.confirmed(slot).unwrap();
        let mut s = slot;
        while self.confirmed.insert(s) {
            s = self.banks[&s].parent.unwrap();
        }
    }

    /// Roots a confirmed bank.
    fn root(&mut self) {
        let candidates: Vec<u64> =
            self.confirmed.iter().copied().filter(|s| self.held.contains(s) && *s != self.base).collect();
        if candidates.is_empty() {
            return;
        }
        let slot = candidates[self.rng.random_range(0..candidates.len())];
        assert!(self.roots.root(slot).unwrap());
        let mut s = slot;
        while s != self.base {
            self.finalized.insert(s);
            s = self.banks[&s].parent.unwrap();
        }
        let gone: Vec<u64> = self.held.iter().copied().filter(|&h| !self.descends(h, slot)).collect();
        for g in gone {
            self.held.remove(&g);
            if !self.finalized.contains(&g) {
                self.abandoned.insert(g);
            }
        }
        self.base = slot;
    }

    /// Kills an unconfirmed bank and its descendants.
    fn dead(&mut self) {
        let candidates: Vec<u64> =
            self.held.iter().copied().filter(|s| *s != self.base && !self.confirmed.contains(s)).collect();
        if candidates.is_empty() {
            return;
        }
        let slot = candidates[self.rng.random_range(0..candidates.len())];
        let dropped = self.roots.dead(slot).unwrap();
        let expect: Vec<u64> = self.held.iter().copied().filter(|&h| self.descends(h, slot)).collect();
        assert_eq!(dropped, expect);
        for d in dropped {
            self.held.remove(&d);
            self.abandoned.insert(d);
        }
    }

    fn step(&mut self) {
        self.freeze();
        let r: f64 = self.rng.random();
        if r < 0.3 {
            self.confirm();
        } else if r < 0.45 {
            self.root();
        } else if r < 0.52 {
            self.dead();
        }
    }
}

/// Every bank's file answers the model's accounts with proofs against the module's root.
fn check_files(dir: &Path, model: &Model, ctx: &str) {
    let reader = SnapshotReader::open(dir).unwrap();
    assert!(reader.damaged_files().is_empty(), "{ctx}: {:?}", reader.damaged_files());
    let mut probes: BTreeSet<[u8; 32]> = model.banks.values().flat_map(|b| b.state.keys().copied()).collect();
    probes.extend((0..4u8).map(|i| [i; 32]));
    let probes: Vec<[u8; 32]> = probes.into_iter().step_by(3).collect();
    for (&slot, bank) in &model.banks {
        let info = reader.slot(Some(slot)).unwrap_or_else(|e| panic!("{ctx}: slot {slot} not served: {e}"));
        assert_eq!(info.root, bank.root, "{ctx}: slot {slot}");
        assert_eq!(info.parent, bank.parent, "{ctx}: slot {slot}");
        for pk in &probes {
            let p = reader.prove(pk, Some(slot)).unwrap_or_else(|e| panic!("{ctx}: slot {slot}: {e}"));
            let claim = p.proof.verify(&bank.root, pk).unwrap_or_else(|e| panic!("{ctx}: slot {slot}: {e}"));
            match bank.state.get(pk) {
                Some(a) => {
                    let got = p.account.as_ref().expect("a present account is served");
                    assert_eq!(
                        (got.lamports, got.owner, got.executable, &got.data),
                        (a.lamports, a.owner, a.executable, &a.data)
                    );
                    let value = aldb_naive::value(a.lamports, &a.owner, a.executable, &a.data);
                    assert_eq!(claim, Claim::Present { value }, "{ctx}: slot {slot}");
                }
                None => assert_eq!(claim, Claim::Absent, "{ctx}: slot {slot}"),
            }
        }
    }
}

/// The journal says what the module was told of every bank.
fn check_statuses(dir: &Path, model: &Model, ctx: &str) {
    let statuses = StatusJournal::read(dir).unwrap();
    for &slot in model.banks.keys() {
        let expect = if model.finalized.contains(&slot) {
            SlotStatusKind::Finalized
        } else if model.abandoned.contains(&slot) {
            SlotStatusKind::Abandoned
        } else if model.confirmed.contains(&slot) {
            SlotStatusKind::Confirmed
        } else {
            SlotStatusKind::Processed
        };
        assert_eq!(statuses.status(slot), Some(expect), "{ctx}: slot {slot}");
    }
}

/// One record per confirmed and per finalized bank, each with the module's root, the bank's block
/// and its parent's bank hash, signed, and chained to its parent's record of the same level.
fn check_records(dir: &Path, model: &Model, ctx: &str) {
    let records = RecordLogReader::new(dir).refresh().unwrap();
    let identity = Signer::from_seed(&SEED).identity();
    let mut by_level: BTreeMap<(u64, bool), LoggedRecord> = BTreeMap::new();
    for r in records {
        assert_eq!(r.record.hash(), r.record_hash);
        assert_eq!(r.attestations.len(), 1);
        assert_eq!(r.attestations[0].identity, identity);
        r.attestations[0].verify(&r.record_hash).unwrap();
        assert_eq!(r.record.genesis_hash, GENESIS);
        let fin = r.record.commitment == Commitment::Finalized;
        assert!(by_level.insert((r.record.slot, fin), r).is_none(), "{ctx}: a slot signed twice at one level");
    }
    for (level, slots) in [(false, &model.confirmed), (true, &model.finalized)] {
        let got: BTreeSet<u64> = by_level.keys().filter(|(_, f)| *f == level).map(|(s, _)| *s).collect();
        assert_eq!(&got, slots, "{ctx}: finalized level {level}");
        for &slot in slots {
            let r = &by_level[&(slot, level)];
            let bank = &model.banks[&slot];
            assert_eq!(r.record.state_root, bank.root, "{ctx}: slot {slot}");
            let m = meta(slot, [0; 32]);
            assert_eq!(r.record.block, Some(BlockInfo { blockhash: m.blockhash, block_height: m.block_height }));
            assert_eq!(r.record.bank_hash, Some(m.bank_hash), "{ctx}: slot {slot}: the record carries the bank hash");
            match bank.parent {
                None => assert!(r.record.parent.is_none()),
                Some(p) => {
                    let link = r.record.parent.expect("a frozen bank's record names its parent");
                    assert_eq!(link.slot, p);
                    assert_eq!(link.bank_hash, Some(meta(p, [0; 32]).bank_hash));
                    let pr = &by_level[&(p, level)];
                    assert!(r.record.extends(&pr.record, &pr.record_hash), "{ctx}: slot {slot} chains to {p}");
                }
            }
        }
    }
}

#[test]
fn fork_trees_through_the_module_are_served_journaled_and_recorded() {
    for seed in 0..3u64 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("snapshots");
        let key = keypair_file(tmp.path());
        let roots = BankRoots::with_sink(&sink_config(&dir, &key)).unwrap();
        let mut model = Model::start(seed, roots);
        for _ in 0..80 {
            model.step();
        }
        model.roots.flush_sink();
        let ctx = format!("seed {seed}");
        let stats = model.roots.sink_stats().unwrap();
        assert_eq!(aldb_bank::SinkStats::get(&stats.banks_lost), 0, "{ctx}");
        assert_eq!(aldb_bank::SinkStats::get(&stats.writer_errors), 0, "{ctx}");
        assert_eq!(aldb_bank::SinkStats::get(&stats.record_errors), 0, "{ctx}");
        check_files(&dir, &model, &ctx);
        check_statuses(&dir, &model, &ctx);
        check_records(&dir, &model, &ctx);
        assert!(model.finalized.len() > 5 && model.abandoned.len() > 2, "{ctx}: the tree exercised roots and forks");
    }
}

/// With a queue of one bank the writer thread falls behind at once: banks are merged or given
/// up, never waited for. Whatever the timing, every bank is accounted for, nothing served is
/// wrong, and the statuses and records are complete (they do not depend on files).
#[test]
fn a_full_queue_never_waits_and_serves_nothing_wrong() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("snapshots");
    let key = keypair_file(tmp.path());
    let config = SinkConfig { queue_bound: 1, ..sink_config(&dir, &key) };
    let mut model = Model::start(11, BankRoots::with_sink(&config).unwrap());
    let mut frozen = 1;
    for _ in 0..80 {
        model.step();
        frozen += 1;
    }
    model.roots.flush_sink();
    let stats = model.roots.sink_stats().unwrap();
    let (queued, merged, lost) = (
        aldb_bank::SinkStats::get(&stats.banks_queued),
        aldb_bank::SinkStats::get(&stats.banks_merged),
        aldb_bank::SinkStats::get(&stats.banks_lost),
    );
    assert_eq!(queued + merged + lost, frozen, "every bank queued, merged or lost");
    let reader = SnapshotReader::open(&dir).unwrap();
    let served: Vec<u64> = reader.slots(0, u64::MAX).iter().map(|i| i.slot).collect();
    assert!(served.contains(&0), "the base is always written");
    for slot in served {
        let bank = &model.banks[&slot];
        let info = reader.slot(Some(slot)).unwrap();
        assert_eq!(info.root, bank.root, "slot {slot}");
        for (pk, a) in bank.state.iter().step_by(7) {
            let p = reader.prove(pk, Some(slot)).unwrap();
            let value = aldb_naive::value(a.lamports, &a.owner, a.executable, &a.data);
            assert_eq!(p.proof.verify(&bank.root, pk).unwrap(), Claim::Present { value }, "slot {slot}");
        }
    }
    check_records(&dir, &model, "full queue");
}

/// A slot confirmed before it froze here is reported when it freezes; a slot frozen again (a
/// repeated `CreatedBank`) is served with its new state and its old version's child is abandoned.
#[test]
fn early_confirmations_and_refrozen_slots() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("snapshots");
    let key = keypair_file(tmp.path());
    let mut m = Model::start(5, BankRoots::with_sink(&sink_config(&dir, &key)).unwrap());
    let freeze = |m: &mut Model, slot: u64, parent: u64| {
        let mut state = m.banks[&parent].state.clone();
        let w = bank_writes(&mut m.rng, &state, 12);
        apply(&mut state, &w);
        let root = m.roots.freeze(slot, parent, &refs(&w)).unwrap();
        assert_eq!(root, naive_root(&state));
        m.roots.bank_hash(slot, meta(slot, meta(parent, [0; 32]).bank_hash)).unwrap();
        m.banks.insert(slot, Bank { parent: Some(parent), state, root });
    };
    freeze(&mut m, 1, 0);
    freeze(&mut m, 2, 1);
    freeze(&mut m, 3, 2);
    // Slot 2 again, on 1: its old version and the old version's child 3 go.
    freeze(&mut m, 2, 1);
    m.banks.remove(&3);
    m.roots.confirmed(4).unwrap();
    freeze(&mut m, 4, 2);
    m.roots.flush_sink();

    let reader = SnapshotReader::open(&dir).unwrap();
    assert_eq!(reader.slot(Some(2)).unwrap().root, m.banks[&2].root, "the new version is served");
    let statuses = StatusJournal::read(&dir).unwrap();
    assert_eq!(statuses.status(3), Some(SlotStatusKind::Abandoned));
    for slot in [1, 2, 4] {
        assert_eq!(statuses.status(slot), Some(SlotStatusKind::Confirmed), "slot {slot}");
    }
    let records = RecordLogReader::new(&dir).refresh().unwrap();
    let confirmed: Vec<(u64, [u8; 32])> = records
        .iter()
        .filter(|r| r.record.commitment == Commitment::Confirmed)
        .map(|r| (r.record.slot, r.record.state_root))
        .collect();
    let expect: Vec<(u64, [u8; 32])> = [0, 1, 2, 4].iter().map(|s| (*s, m.banks[s].root)).collect();
    assert_eq!(confirmed, expect);
}
