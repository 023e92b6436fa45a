//! Slots that outgrow one file: the writer is made to cut files at a few KiB (the real bound is
//! 32 GiB, the most a reference addresses), so a small state spans dozens of part files. A full
//! state, the deltas after it, the refresh, pruning, a restart and a failed write that leaves
//! parts behind are each read back through `SnapshotReader` and checked against the naive model:
//! every account present where the model has it, absent where it does not, in every part.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aldb_core::{ChangeSet, Claim, Config, Pleiades};
use aldb_format::format::{FileKind, Ref, node_arity, parse_published_name, published_name};
use aldb_format::store::{Files, MappedFile};
use aldb_format::{QueryError, SnapshotReader};
use aldb_snapshot::{AccountBatch, SlotInput, SnapshotWriter, WriterConfig};
use aldb_testkit::{Acct, State, account_ref, apply, naive_root, refs};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The engine and the model, slot by slot.
struct Chain {
    tree: Pleiades,
    rng: ChaCha8Rng,
    /// Every key ever written.
    keys: Vec<[u8; 32]>,
    state: State,
    /// The model's state after each committed slot.
    history: BTreeMap<u64, State>,
}

impl Chain {
    fn new(seed: u64) -> Self {
        let tree = Pleiades::new(Config::new(2, 2, 7).unwrap()).unwrap();
        Self {
            tree,
            rng: ChaCha8Rng::seed_from_u64(seed),
            keys: Vec::new(),
            state: State::new(),
            history: BTreeMap::new(),
        }
    }

    /// Commits `n` random writes (new accounts, updates and about one in eight a deletion; only
    /// new accounts in the first slot);
    /// returns the writer's input, the whole state when `full`. `bad_root` hands the writer a
    /// root the changes do not produce.
    fn slot(&mut self, slot: u64, n: usize, full: bool, bad_root: bool) -> SlotInput {
        // The first slot creates `n` accounts.
        let fresh = self.state.is_empty();
        let writes: Vec<([u8; 32], Acct)> = (0..n)
            .map(|_| {
                let pk = if fresh || self.rng.random_range(0..3) == 0 {
                    let k: [u8; 32] = self.rng.random();
                    self.keys.push(k);
                    k
                } else {
                    self.keys[self.rng.random_range(0..self.keys.len())]
                };
                let deleted = !fresh && self.rng.random_range(0..8) == 0;
                let lamports = if deleted { 0 } else { self.rng.random_range(1..1_000_000) };
                let len = self.rng.random_range(0..300);
                let acct = Acct {
                    lamports,
                    owner: self.rng.random(),
                    executable: self.rng.random_bool(0.1),
                    data: (0..len).map(|_| self.rng.random()).collect(),
                };
                (pk, acct)
            })
            .collect();
        let refs = refs(&writes);
        let updates = self.tree.hash_accounts(&refs);
        let mut accounts = AccountBatch::from_updates(&updates, &refs);
        let mut changes = ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS);
        let mut root = self.tree.commit_capture(updates, &mut changes);
        apply(&mut self.state, &writes);
        if full {
            self.tree.capture_all(&mut changes);
            accounts = AccountBatch::default();
            for (pk, a) in &self.state {
                accounts.push(aldb_verify::spec::key_path(pk), &account_ref(pk, a));
            }
        }
        assert_eq!(root, naive_root(&self.state), "the engine agrees with the model at slot {slot}");
        if bad_root {
            root[0] ^= 1;
        }
        self.history.insert(slot, self.state.clone());
        SlotInput { slot, parent: slot.checked_sub(1), root, changes, accounts, full }
    }

    /// Keys to prove: every one ever written (present or deleted) and some never written.
    fn probes(&self) -> Vec<[u8; 32]> {
        let mut p = self.keys.clone();
        p.extend((0..64u8).map(|i| [i.wrapping_mul(37) | 1; 32]));
        p
    }
}

fn config(dir: &Path, part_bytes: u64, keep_slots: u64) -> WriterConfig {
    WriterConfig { part_bytes, keep_slots, refresh_slots: 4, direct_io: false, ..WriterConfig::new(dir) }
}

/// Proves every probe at `slot` against the model's root: present accounts served with their
/// state, absent ones (deleted, never written) proved absent.
fn check_slot(h: &SnapshotReader, chain: &Chain, slot: u64, probes: &[[u8; 32]]) {
    let state = &chain.history[&slot];
    let root = naive_root(state);
    let info = h.slot(Some(slot)).unwrap_or_else(|e| panic!("slot {slot}: {e}"));
    assert_eq!(info.root, root, "slot {slot}");
    for pk in probes {
        let p = h.prove(pk, Some(slot)).unwrap_or_else(|e| panic!("slot {slot}: {e}"));
        let claim = p.proof.verify(&root, pk).unwrap_or_else(|e| panic!("slot {slot}: {e}"));
        match state.get(pk) {
            Some(a) => {
                let got = p.account.as_ref().expect("a present account is served");
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
                assert!(p.account.is_none(), "slot {slot}: an absent account is served");
                assert_eq!(claim, Claim::Absent, "slot {slot}");
            }
        }
    }
}

/// Published files by sequence number: `(slot, kind)`.
fn listing(dir: &Path) -> BTreeMap<u32, (u64, FileKind)> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| parse_published_name(e.unwrap().file_name().to_str()?))
        .map(|(seq, slot, kind)| (seq, (slot, kind)))
        .collect()
}

/// Walks `slot`'s whole tree from its file's root through the files' records, and counts the
/// records it reaches in each file: `seq -> [accounts, nodes, buckets]`.
fn reached(dir: &Path, seq: u32, slot: u64) -> BTreeMap<u32, [u64; 3]> {
    let mut files = Files::default();
    for (q, (s, kind)) in listing(dir) {
        files.insert(Arc::new(MappedFile::open(&dir.join(published_name(q, s, kind)), true).unwrap()));
    }
    let top = files.get(seq).unwrap().header;
    assert_eq!((top.slot, top.is_part()), (slot, false));
    let l = usize::from(top.bucket_bits);
    let mut out: BTreeMap<u32, [u64; 3]> = BTreeMap::new();
    let mut stack: Vec<(Ref, usize)> = vec![(top.root_ref, 0)];
    let mut leaves = Vec::new();
    while let Some((r, d)) = stack.pop() {
        if r.is_null() {
            continue;
        }
        if d < l {
            let arity = node_arity(d, l);
            out.entry(r.seq()).or_default()[1] += 1;
            let n = files.node(r, arity).unwrap();
            stack.extend(n.refs[..arity].iter().map(|&c| (c, d + arity.trailing_zeros() as usize)));
        } else {
            out.entry(r.seq()).or_default()[2] += 1;
            files.bucket(r, &mut leaves).unwrap();
            for &a in &leaves {
                files.account(a).unwrap();
                out.entry(a.seq()).or_default()[0] += 1;
            }
        }
    }
    out
}

/// A full state of 3,000 accounts cut into dozens of parts: the full flag and `oldest_seq` on
/// every file of it, each part reached by the tree with exactly the records its header counts,
/// every account (present, deleted, never written) proved against the model. Then deltas that
/// span parts too, through refresh cycles, and a restarted writer's new full state beside them.
#[test]
fn a_full_state_past_the_file_bound_is_proved_in_every_part() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut chain = Chain::new(1);
    let w = SnapshotWriter::start(config(dir, 16 << 10, 1000), None).unwrap();
    w.submit(chain.slot(0, 3000, true, false)).unwrap();
    w.flush().unwrap();
    let files = listing(dir);
    let slot_seq = *files.keys().next_back().unwrap();
    assert!(files.iter().all(|(&q, &(slot, kind))| slot == 0 && (kind == FileKind::Part) == (q != slot_seq)));
    assert!(files.len() >= 30, "{} files", files.len());
    for (&q, &(_, kind)) in &files {
        let h = MappedFile::open(&dir.join(published_name(q, 0, kind)), true).unwrap().header;
        assert_eq!((h.first_seq, h.oldest_seq, h.flags & aldb_format::format::FLAG_FULL), (1, 1, 1), "file {q}");
        assert!(std::fs::metadata(dir.join(published_name(q, 0, kind))).unwrap().len() <= 16 << 10);
        if kind == FileKind::Slot {
            assert!(h.root != [0; 32] && !h.root_ref.is_null());
        }
    }
    let counts = reached(dir, slot_seq, 0);
    assert_eq!(
        counts.keys().copied().collect::<Vec<_>>(),
        files.keys().copied().collect::<Vec<_>>(),
        "every file is reached"
    );
    for (&q, c) in &counts {
        let (_, kind) = files[&q];
        let h = MappedFile::open(&dir.join(published_name(q, 0, kind)), true).unwrap().header;
        assert_eq!(*c, [h.accounts, h.nodes, h.buckets], "file {q}: what the tree reaches is what the header counts");
    }
    let with_accounts = counts.values().filter(|c| c[0] > 0).count();
    assert!(with_accounts >= files.len() - 3, "accounts in {with_accounts} of {} files", files.len());
    assert_eq!(counts.values().map(|c| c[0]).sum::<u64>(), chain.state.len() as u64);
    let h = SnapshotReader::open(dir).unwrap();
    assert_eq!(h.slots(0, u64::MAX).len(), 1, "parts are not slots");
    check_slot(&h, &chain, 0, &chain.probes());

    // Deltas of 300 writes span parts of their own, and the refresh copies under them.
    for slot in 1..=12 {
        w.submit(chain.slot(slot, 300, false, false)).unwrap();
    }
    w.shutdown().unwrap();
    let parts_of = |slot: u64| listing(dir).values().filter(|&&(s, k)| s == slot && k == FileKind::Part).count();
    assert!((1..=12).all(|s| parts_of(s) >= 2), "every delta spans parts");
    // A restarted writer numbers after every part and starts with a full state.
    let before = *listing(dir).keys().next_back().unwrap();
    let w = SnapshotWriter::start(config(dir, 16 << 10, 1000), None).unwrap();
    w.submit(chain.slot(13, 100, true, false)).unwrap();
    w.submit(chain.slot(14, 100, false, false)).unwrap();
    w.shutdown().unwrap();
    assert_eq!(listing(dir).range(before + 1..).next().map(|(q, _)| *q), Some(before + 1));
    let h = SnapshotReader::open(dir).unwrap();
    assert!(h.damaged_files().is_empty(), "{:?}", h.damaged_files());
    assert_eq!(h.slots(0, u64::MAX).len(), 15);
    let probes = chain.probes();
    for slot in 0..=14 {
        check_slot(&h, &chain, slot, &probes);
    }
}

/// With a window of 3 slots the pruner deletes parts as it deletes slot files, only once no
/// kept slot reaches them; every kept slot stays provable.
#[test]
fn pruning_deletes_parts_no_kept_slot_reaches() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut chain = Chain::new(2);
    let w = SnapshotWriter::start(config(dir, 8 << 10, 3), None).unwrap();
    w.submit(chain.slot(0, 800, true, false)).unwrap();
    for slot in 1..=30 {
        w.submit(chain.slot(slot, 120, false, false)).unwrap();
    }
    let stats = w.stats().clone();
    w.shutdown().unwrap();
    assert!(stats.pruned_files.load(Ordering::Relaxed) > 0);
    let files = listing(dir);
    assert!(files.values().all(|&(slot, _)| slot > 0), "the full state's parts are gone");
    let h = SnapshotReader::open(dir).unwrap();
    let served: Vec<u64> = h.slots(0, u64::MAX).iter().map(|s| s.slot).collect();
    assert!(served.ends_with(&[28, 29, 30]), "{served:?}");
    for &slot in &served {
        check_slot(&h, &chain, slot, &chain.probes());
    }
    assert!(matches!(h.slot(Some(0)), Err(QueryError::Pruned { .. })));
    // Nothing is left that no served slot reaches, beyond what the pruner's window allows.
    let oldest = served.iter().map(|&s| h.slot(Some(s)).unwrap().seq).min().unwrap();
    let reach_from = served
        .iter()
        .map(|&s| {
            let seq = h.slot(Some(s)).unwrap().seq;
            let (_, kind) = files[&seq];
            MappedFile::open(&dir.join(published_name(seq, s, kind)), false).unwrap().header.oldest_seq
        })
        .min()
        .unwrap();
    assert!(files.keys().all(|&q| q >= reach_from), "a file below every served slot's oldest is left");
    assert!(reach_from <= oldest);
}

/// A write that fails after publishing parts (here: its change set does not produce the root it
/// was given) leaves them behind: the writer holds the slot, recovers by itself with the next
/// one, numbers its files after the parts left behind, and marks the gap. The lost slot answers
/// `NotWritten`, every other slot is proved against the model, and a new reader is not misled by
/// the parts of a slot that has no file.
#[test]
fn parts_left_by_a_failed_write_are_numbered_around_and_the_gap_is_visible() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let mut chain = Chain::new(3);
    let w = SnapshotWriter::start(config(dir, 8 << 10, 1000), None).unwrap();
    w.submit(chain.slot(0, 600, true, false)).unwrap();
    for slot in 1..=3 {
        w.submit(chain.slot(slot, 150, false, false)).unwrap();
    }
    w.submit(chain.slot(4, 150, false, true)).unwrap();
    assert!(w.flush().is_err(), "the failed write is reported");
    let left: BTreeSet<u32> =
        listing(dir).into_iter().filter(|&(_, (s, k))| s == 4 && k == FileKind::Part).map(|(q, _)| q).collect();
    assert!(!left.is_empty(), "the failed write published parts before it failed");
    assert!(listing(dir).values().all(|&(s, k)| s != 4 || k == FileKind::Part));
    let h = SnapshotReader::open(dir).unwrap();
    assert!(h.damaged_files().is_empty());
    assert_eq!(h.slot(Some(4)), Err(QueryError::NotYetCommitted { slot: 4, newest: 3 }));
    let mut slot = 5;
    let deadline = Instant::now() + Duration::from_secs(60);
    while w.stats().recoveries.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "the writer did not recover");
        w.submit(chain.slot(slot, 150, false, false)).unwrap();
        slot += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    for s in slot..slot + 6 {
        w.submit(chain.slot(s, 150, false, false)).unwrap();
    }
    let last = slot + 5;
    w.shutdown().unwrap();
    let files = listing(dir);
    let after: Vec<u32> = files.keys().copied().filter(|q| q > left.last().unwrap()).collect();
    assert!(!after.is_empty() && files.keys().all(|q| !left.contains(q) || files[q].0 == 4), "no number reused");
    let h = SnapshotReader::open(dir).unwrap();
    assert!(h.damaged_files().is_empty(), "{:?}", h.damaged_files());
    let recovered_at = (5..=last).find(|&s| h.slot(Some(s)).is_ok()).unwrap();
    let probes = chain.probes();
    for s in 0..=last {
        match h.slot(Some(s)) {
            Ok(_) => check_slot(&h, &chain, s, &probes),
            Err(QueryError::NotWritten { slot, after, until }) => {
                assert!((4..recovered_at).contains(&s), "slot {s}");
                assert_eq!((slot, after, until), (s, Some(3), recovered_at));
            }
            Err(e) => panic!("slot {s}: {e}"),
        }
    }
}

/// A damaged part makes the slots that reach it corrupt, never a wrong answer; a part under a
/// slot file's name (or a slot file under a part's) is refused as damaged; a missing part leaves
/// its slot unserved. The slot files around them still serve.
#[test]
fn a_damaged_renamed_or_missing_part_is_never_served() {
    let base = tempfile::tempdir().unwrap();
    let pristine = base.path().join("pristine");
    let mut chain = Chain::new(4);
    let w = SnapshotWriter::start(config(&pristine, 8 << 10, 1000), None).unwrap();
    w.submit(chain.slot(0, 500, true, false)).unwrap();
    for slot in 1..=3 {
        w.submit(chain.slot(slot, 150, false, false)).unwrap();
    }
    w.shutdown().unwrap();
    let files = listing(&pristine);
    let part_of_2 = files.iter().find(|(_, v)| **v == (2, FileKind::Part)).map(|(q, _)| *q).unwrap();
    let probes = chain.probes();
    for case in 0..3 {
        let dir = base.path().join(format!("case{case}"));
        std::fs::create_dir(&dir).unwrap();
        for (&q, &(s, k)) in &files {
            std::fs::copy(pristine.join(published_name(q, s, k)), dir.join(published_name(q, s, k))).unwrap();
        }
        let part = dir.join(published_name(part_of_2, 2, FileKind::Part));
        match case {
            0 => {
                let mut b = std::fs::read(&part).unwrap();
                b[200] ^= 1;
                std::fs::write(&part, b).unwrap();
            }
            1 => std::fs::rename(&part, dir.join(published_name(part_of_2, 2, FileKind::Slot))).unwrap(),
            _ => std::fs::remove_file(&part).unwrap(),
        }
        let h = SnapshotReader::open(&dir).unwrap();
        assert_eq!(h.damaged_files().len(), usize::from(case < 2), "case {case}");
        for slot in 0..=3 {
            match h.slot(Some(slot)) {
                Ok(_) => {
                    assert!(slot < 2, "case {case}: slot {slot} is served without its part");
                    check_slot(&h, &chain, slot, &probes);
                }
                Err(QueryError::Corrupt { .. }) if case < 2 => assert!(slot >= 2, "case {case}: slot {slot}"),
                // A slot whose own file is there but a part of its chain is gone names that part:
                // it was published, so it is not "skipped".
                Err(QueryError::MissingFile { .. }) if case == 2 => assert!(slot >= 2, "case {case}: slot {slot}"),
                Err(e) => panic!("case {case}: slot {slot}: {e}"),
            }
        }
    }
}
