//! Fault injection: random damage to a snapshot directory (bit flips, truncation, stray and
//! duplicate names, headers and bodies edited with their checksums recomputed), each followed by
//! a resumed writer and a fresh Hyades. Hyades must serve every undamaged slot correctly, refuse
//! every damaged one as corrupt, and never serve a wrong root; the writer must lose nothing that
//! was intact and never reuse a number of a live file. Also: a writer whose directory fails under
//! it holds the slots that follow and publishes again by itself once the directory is back.
//!
//! What counts as damaged is computed from which files the damage touched, never hard-coded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aldb_core::{AccountRef, ChangeSet, Config, Pleiades};
use aldb_format::format::{FOOTER_LEN, HEADER_LEN, Header, file_checksum, file_name, parse_file_name};
use aldb_format::{QueryError, SnapshotReader};
use aldb_snapshot::{AccountBatch, SlotInput, SnapshotWriter, WriterConfig};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Debug, PartialEq)]
struct Acct {
    lamports: u64,
    owner: [u8; 32],
    data: Vec<u8>,
}

type State = BTreeMap<[u8; 32], Acct>;

/// Slots written before the damage.
const SLOTS: u64 = 12;
/// Slots the resumed writer adds after it.
const MORE: u64 = 3;

/// The engine and a model of the accounts, slot by slot.
struct Chain {
    tree: Pleiades,
    rng: ChaCha8Rng,
    keys: Vec<[u8; 32]>,
    state: State,
    /// Root and state after each committed slot.
    history: BTreeMap<u64, ([u8; 32], State)>,
}

impl Chain {
    fn new(seed: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let keys = (0..150).map(|_| rng.random()).collect();
        let tree = Pleiades::new(Config::new(2, 2, 6).unwrap()).unwrap();
        Self { tree, rng, keys, state: State::new(), history: BTreeMap::new() }
    }

    /// Commits one slot of random writes (about one in eight a deletion); returns its input for
    /// the writer, the whole state when `full`.
    fn slot(&mut self, slot: u64, full: bool) -> SlotInput {
        let writes: Vec<([u8; 32], Acct)> = (0..40)
            .map(|_| {
                let pk = self.keys[self.rng.random_range(0..self.keys.len())];
                let lamports = if self.rng.random_range(0..8) == 0 { 0 } else { self.rng.random_range(1..1_000_000) };
                let len = self.rng.random_range(0..100);
                (pk, Acct { lamports, owner: self.rng.random(), data: (0..len).map(|_| self.rng.random()).collect() })
            })
            .collect();
        let refs: Vec<AccountRef<'_>> = writes
            .iter()
            .map(|(pk, a)| AccountRef {
                pubkey: pk,
                lamports: a.lamports,
                owner: &a.owner,
                executable: false,
                data: &a.data,
            })
            .collect();
        let updates = self.tree.hash_accounts(&refs);
        let mut accounts = AccountBatch::from_updates(&updates, &refs);
        let mut changes = ChangeSet::new(aldb_snapshot::CAPTURE_OPTIONS);
        let root = self.tree.commit_capture(updates, &mut changes);
        for (pk, a) in &writes {
            if a.lamports == 0 {
                self.state.remove(pk);
            } else {
                self.state.insert(*pk, a.clone());
            }
        }
        if full {
            self.tree.capture_all(&mut changes);
            accounts = AccountBatch::default();
            for (pk, a) in &self.state {
                let r =
                    AccountRef { pubkey: pk, lamports: a.lamports, owner: &a.owner, executable: false, data: &a.data };
                accounts.push(aldb_verify::spec::key_path(pk), &r);
            }
        }
        self.history.insert(slot, (root, self.state.clone()));
        SlotInput { slot, parent: slot.checked_sub(1), root, changes, accounts, full }
    }
}

fn writer(dir: &Path) -> SnapshotWriter {
    SnapshotWriter::start(WriterConfig { refresh_slots: 4, direct_io: false, ..WriterConfig::new(dir) }, None).unwrap()
}

/// Published files by name, with their bytes.
fn snapshot_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    all_files(dir).into_iter().filter(|(n, _)| parse_file_name(n).is_some()).collect()
}

/// Every file of the directory (set-aside ones too), by name, with their bytes.
fn all_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| (e.file_name().into_string().unwrap(), std::fs::read(e.path()).unwrap()))
        .collect()
}

/// Rewrites a file's footer checksum over its (edited) header and body, as a tool that
/// "repairs" checksums, or a careful attacker, would.
fn reseal(bytes: &mut [u8]) {
    if bytes.len() < HEADER_LEN + FOOTER_LEN {
        return;
    }
    let end = bytes.len() - FOOTER_LEN;
    let sum = file_checksum(&bytes[..HEADER_LEN], &bytes[HEADER_LEN..end]);
    bytes[end..end + 16].copy_from_slice(&sum.to_le_bytes());
}

/// One kind of damage, and what a reader may do about it.
#[derive(Debug)]
enum Damage {
    /// The named files changed in ways a reader must notice at the slot level (checksum, size,
    /// header against name): every slot that needs them must answer `Corrupt`.
    Files(Vec<String>),
    /// The named file changed with its checksum recomputed in a field or record a reader may
    /// only notice when it reads it: answers may be refused as `Corrupt`, and whatever is
    /// served must still be right.
    Subtle(String),
    /// The named file's header root was edited, checksum recomputed: that file's own slot must
    /// answer `Corrupt`; its records are intact, so slots reaching into them are served.
    Root(String),
    /// A file added under a name of its own (a stray, or a copy under another name): the files
    /// that were there are untouched; the added name's slot is not served from it.
    Added(String),
}

fn damage(dir: &Path, rng: &mut ChaCha8Rng) -> Damage {
    let files = snapshot_files(dir);
    let names: Vec<&String> = files.keys().collect();
    let name = names[rng.random_range(0..names.len())].clone();
    let path = dir.join(&name);
    let mut bytes = files[&name].clone();
    let (seq, slot) = parse_file_name(&name).unwrap();
    match rng.random_range(0..8) {
        0 => {
            // A flipped bit anywhere.
            let at = rng.random_range(0..bytes.len());
            bytes[at] ^= 1 << rng.random_range(0..8);
            std::fs::write(&path, &bytes).unwrap();
            Damage::Files(vec![name])
        }
        1 => {
            // Truncated, to anything from nothing to one byte short.
            let len = rng.random_range(0..bytes.len());
            std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(len as u64).unwrap();
            Damage::Files(vec![name])
        }
        2 => {
            // A stray name: the largest sequence number, or any other, holding garbage or a
            // copy of a real file.
            let stray_seq = if rng.random_bool(0.5) { u32::MAX } else { rng.random_range(1..u32::MAX) };
            let stray_slot = rng.random_range(0..SLOTS * 2);
            let stray = file_name(stray_seq, stray_slot);
            if files.contains_key(&stray) {
                return Damage::Files(Vec::new());
            }
            let body: Vec<u8> = if rng.random_bool(0.5) {
                (0..rng.random_range(0..4096)).map(|_| rng.random()).collect()
            } else {
                bytes
            };
            std::fs::write(dir.join(&stray), body).unwrap();
            Damage::Added(stray)
        }
        3 => {
            // A real file copied under another file's name (a restore gone wrong): the name it
            // replaces is damaged.
            let other = names[rng.random_range(0..names.len())].clone();
            if other == name {
                return Damage::Files(Vec::new());
            }
            std::fs::write(dir.join(&other), &bytes).unwrap();
            Damage::Files(vec![other])
        }
        4 => {
            // A header field naming another slot or sequence number, checksum recomputed.
            if rng.random_bool(0.5) {
                bytes[24..32].copy_from_slice(&(slot + rng.random_range(1..5)).to_le_bytes());
            } else {
                bytes[16..20].copy_from_slice(&(seq + rng.random_range(1..5)).to_le_bytes());
            }
            reseal(&mut bytes);
            std::fs::write(&path, &bytes).unwrap();
            Damage::Files(vec![name])
        }
        5 => {
            // Another root in the header, checksum recomputed: the records no longer lead to it.
            let mut root = [0u8; 32];
            rng.fill(&mut root[..]);
            bytes[40..72].copy_from_slice(&root);
            reseal(&mut bytes);
            std::fs::write(&path, &bytes).unwrap();
            Damage::Root(name)
        }
        6 => {
            // Any other header byte, checksum recomputed.
            let at = rng.random_range(0..HEADER_LEN);
            bytes[at] ^= 1 << rng.random_range(0..8);
            reseal(&mut bytes);
            std::fs::write(&path, &bytes).unwrap();
            Damage::Subtle(name)
        }
        _ => {
            // A byte of the body, checksum recomputed.
            if bytes.len() <= HEADER_LEN + FOOTER_LEN {
                return Damage::Files(Vec::new());
            }
            let at = rng.random_range(HEADER_LEN..bytes.len() - FOOTER_LEN);
            bytes[at] ^= 1 << rng.random_range(0..8);
            reseal(&mut bytes);
            std::fs::write(&path, &bytes).unwrap();
            Damage::Subtle(name)
        }
    }
}

/// Sequence numbers `[oldest_seq, seq]` each pristine slot's records may reach.
fn reach(pristine: &BTreeMap<String, Vec<u8>>) -> BTreeMap<u64, (u32, u32)> {
    pristine
        .values()
        .map(|b| {
            let h = Header::decode(b).unwrap();
            (h.slot, (h.oldest_seq, h.seq))
        })
        .collect()
}

/// Checks a served proof of `key` at `slot` against the model.
fn check_answer(h: &SnapshotReader, chain: &Chain, slot: u64, key: &[u8; 32], strict: bool, what: &str) {
    let (root, state) = &chain.history[&slot];
    match h.prove(key, Some(slot)) {
        Ok(p) => {
            assert_eq!(p.root, *root, "{what}: slot {slot} served with a wrong root");
            p.proof
                .verify(root, key)
                .unwrap_or_else(|e| panic!("{what}: slot {slot}: served proof does not verify: {e}"));
            let got = p.account.map(|a| Acct { lamports: a.lamports, owner: a.owner, data: a.data });
            assert_eq!(got.as_ref(), state.get(key), "{what}: slot {slot}: wrong account");
        }
        Err(QueryError::Corrupt { .. } | QueryError::Damaged { .. }) if !strict => {}
        Err(e) => panic!("{what}: slot {slot}: {e}"),
    }
}

#[test]
fn random_damage_never_serves_a_wrong_answer_and_loses_nothing_intact() {
    let base = tempfile::tempdir().unwrap();
    let pristine_dir = base.path().join("pristine");
    {
        let mut chain = Chain::new(1);
        let w = writer(&pristine_dir);
        for slot in 0..SLOTS {
            w.submit(chain.slot(slot, slot == 0)).unwrap();
        }
        w.shutdown().unwrap();
    }
    let pristine = snapshot_files(&pristine_dir);
    let reach = reach(&pristine);
    let mut rng = ChaCha8Rng::seed_from_u64(0xfa17);
    let mut kinds = BTreeMap::<&'static str, usize>::new();
    let cases = 160;
    for case in 0..cases {
        let dir = base.path().join(format!("case-{case}"));
        std::fs::create_dir(&dir).unwrap();
        for (name, bytes) in &pristine {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        let d = damage(&dir, &mut rng);
        let what = format!("case {case} ({d:?})");
        *kinds
            .entry(match d {
                Damage::Files(_) => "files",
                Damage::Subtle(_) => "subtle",
                Damage::Root(_) => "root",
                Damage::Added(_) => "added",
            })
            .or_default() += 1;
        // The files the damage touched, by sequence number, and so the slots that need them.
        let touched: BTreeSet<u32> = match &d {
            Damage::Files(n) => n.iter().map(|n| parse_file_name(n).unwrap().0).collect(),
            Damage::Subtle(n) | Damage::Root(n) => [parse_file_name(n).unwrap().0].into(),
            Damage::Added(_) => BTreeSet::new(),
        };
        let strict_damage = matches!(d, Damage::Files(_) | Damage::Root(_));
        let damaged_slot = |slot: u64| match &d {
            Damage::Root(n) => parse_file_name(n).unwrap().1 == slot,
            _ => reach.get(&slot).is_some_and(|&(lo, hi)| touched.range(lo..=hi).next().is_some()),
        };

        // A resumed writer: the engine goes on from the same state, the writer starts with a
        // full snapshot, as after a validator restart.
        let mut chain = Chain::new(1);
        for slot in 0..SLOTS {
            chain.slot(slot, slot == 0);
        }
        let before = all_files(&dir);
        let w = writer(&dir);
        for slot in SLOTS..SLOTS + MORE {
            w.submit(chain.slot(slot, slot == SLOTS)).unwrap();
        }
        w.shutdown().unwrap_or_else(|e| panic!("{what}: resumed writer: {e}"));
        let after = all_files(&dir);
        // Nothing is lost: every file is still there with its bytes, or (a damaged one numbered
        // above the valid files) set aside under a name no reader serves.
        for (name, bytes) in &before {
            let kept = after.get(name).or_else(|| after.get(&format!("{name}.damaged")));
            assert_eq!(kept, Some(bytes), "{what}: the resumed writer changed or removed {name}");
        }
        let new: Vec<(u32, u64)> = after
            .keys()
            .filter(|n| !before.contains_key(*n) && !n.ends_with(".damaged"))
            .map(|n| parse_file_name(n).unwrap())
            .collect();
        assert_eq!(new.len() as u64, MORE, "{what}: {new:?}");
        let live: Vec<u32> = after
            .keys()
            .filter_map(|n| parse_file_name(n))
            .map(|(q, _)| q)
            .filter(|q| !new.iter().any(|(s, _)| s == q))
            .collect();
        for (seq, _) in &new {
            assert!(*seq > 0 && !live.contains(seq), "{what}: the resumed writer reused sequence {seq} of a live name");
        }

        let h = SnapshotReader::open(&dir).unwrap();
        for slot in 0..SLOTS + MORE {
            let (root, _) = chain.history[&slot];
            let damaged = slot < SLOTS && damaged_slot(slot);
            match h.slot(Some(slot)) {
                Ok(info) => {
                    assert_eq!(info.root, root, "{what}: slot {slot} served with a wrong root");
                    assert!(!(damaged && strict_damage), "{what}: damaged slot {slot} is served");
                }
                Err(QueryError::Corrupt { .. }) if damaged => {}
                Err(e) => panic!("{what}: slot {slot} (damaged: {damaged}): {e}"),
            }
            if h.slot(Some(slot)).is_ok() {
                let keys: Vec<[u8; 32]> = chain.keys.iter().step_by(7).copied().collect();
                for key in &keys {
                    check_answer(&h, &chain, slot, key, !damaged, &what);
                }
            }
        }
        // A stray's own slot is not served from it: any slot served is served right (checked
        // above), and one not committed is not served at all.
        if let Damage::Added(n) = &d {
            let (_, slot) = parse_file_name(n).unwrap();
            if slot >= SLOTS + MORE {
                assert!(h.slot(Some(slot)).is_err(), "{what}: a stray file's slot is served");
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
    // The seed must exercise every kind of damage.
    assert_eq!(kinds.len(), 4, "{kinds:?}");
}

/// A writer whose directory fails under it (here: replaced by a file, as when a volume goes
/// away) holds the slots that follow, and once the directory is back publishes again by itself,
/// marking the gap; Hyades serves every slot written, answers `NotWritten` for the lost ones,
/// and the writer goes on with deltas built on the files from before the failure.
#[test]
fn a_failing_writer_resumes_by_itself_and_the_gap_is_visible() {
    let base = tempfile::tempdir().unwrap();
    let dir = base.path().join("snap");
    let away = base.path().join("away");
    let mut chain = Chain::new(9);
    let w = writer(&dir);
    for slot in 0..6 {
        w.submit(chain.slot(slot, slot == 0)).unwrap();
    }
    w.flush().unwrap();

    std::fs::rename(&dir, &away).unwrap();
    std::fs::write(&dir, b"not a directory").unwrap();
    for slot in 6..10 {
        w.submit(chain.slot(slot, false)).unwrap();
    }
    assert!(w.flush().is_err(), "flush reports the failure");
    assert_eq!(w.stats().failing.load(Ordering::Relaxed), 1);

    std::fs::remove_file(&dir).unwrap();
    std::fs::rename(&away, &dir).unwrap();
    let mut slot = 10;
    let deadline = Instant::now() + Duration::from_secs(60);
    while w.stats().recoveries.load(Ordering::Relaxed) == 0 {
        assert!(Instant::now() < deadline, "the writer did not recover");
        w.submit(chain.slot(slot, false)).unwrap();
        slot += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    // Deltas after the recovery, through a whole refresh cycle and more.
    for s in slot..slot + 12 {
        w.submit(chain.slot(s, false)).unwrap();
    }
    let last = slot + 11;
    w.flush().unwrap();
    assert_eq!(w.stats().failing.load(Ordering::Relaxed), 0);
    let gap_slots = w.stats().gap_slots.load(Ordering::Relaxed);
    w.shutdown().unwrap();
    // The retry runs on the writer's own clock, so the slot it recovered at is read back.
    let h = SnapshotReader::open(&dir).unwrap();
    let recovered_at = (6..=last).find(|&s| h.slot(Some(s)).is_ok()).unwrap();
    assert!(recovered_at >= 9, "recovered at {recovered_at}, before the slots held during the fault");
    assert_eq!(gap_slots, recovered_at - 6);
    for s in 0..=last {
        match h.slot(Some(s)) {
            Ok(info) => {
                assert!(s < 6 || s >= recovered_at, "slot {s} lost in the gap is served");
                assert_eq!(info.root, chain.history[&s].0, "slot {s}");
                for key in chain.keys.iter().step_by(5) {
                    check_answer(&h, &chain, s, key, true, "recovery");
                }
            }
            Err(QueryError::NotWritten { slot, after, until }) => {
                assert!((6..recovered_at).contains(&s), "slot {s} answers NotWritten");
                assert_eq!((slot, after, until), (s, Some(5), recovered_at));
            }
            Err(e) => panic!("slot {s}: {e}"),
        }
    }
}

/// The largest sequence number in a stray name does not make the writer wrap (it would reuse the
/// numbers of live files); a writer whose own files really reach the last number refuses to go on.
#[test]
fn sequence_numbers_never_wrap() {
    let base = tempfile::tempdir().unwrap();
    let dir: PathBuf = base.path().join("snap");
    let mut chain = Chain::new(3);
    let w = writer(&dir);
    for slot in 0..3 {
        w.submit(chain.slot(slot, slot == 0)).unwrap();
    }
    w.shutdown().unwrap();
    std::fs::write(dir.join(file_name(u32::MAX, 99)), b"stray").unwrap();
    let w = writer(&dir);
    w.submit(chain.slot(3, true)).unwrap();
    w.shutdown().unwrap();
    assert!(dir.join(file_name(4, 3)).exists(), "numbering goes on after the last valid file");
    let h = SnapshotReader::open(&dir).unwrap();
    for slot in 0..4 {
        assert_eq!(h.slot(Some(slot)).unwrap().root, chain.history[&slot].0);
    }

    // A genuine file at the last number: nothing after it can be numbered.
    let src = snapshot_files(&dir).remove(&file_name(4, 3)).unwrap();
    let mut last = src.clone();
    last[16..20].copy_from_slice(&u32::MAX.to_le_bytes());
    // A full file: oldest_seq and first_seq are its own number.
    last[80..84].copy_from_slice(&u32::MAX.to_le_bytes());
    last[84..88].copy_from_slice(&u32::MAX.to_le_bytes());
    reseal(&mut last);
    std::fs::remove_file(dir.join(format!("{}.damaged", file_name(u32::MAX, 99)))).unwrap();
    std::fs::write(dir.join(file_name(u32::MAX, 3)), &last).unwrap();
    let w = writer(&dir);
    w.submit(chain.slot(4, true)).unwrap();
    let err = w.flush().unwrap_err().to_string();
    assert!(err.contains("exhausted"), "{err}");
    drop(w);
    assert!(snapshot_files(&dir).keys().all(|n| parse_file_name(n).unwrap().0 != 0), "no file numbered 0");
}
