//! `aldb simulate` against the commitment's definition: every root a run publishes, fresh and
//! resumed, is the root `docs/SPEC.md` §5 defines for the workload's account set at that slot,
//! computed here from `aldb_verify::spec`'s hashes alone (no engine, writer or spill); and each
//! full snapshot, written from the startup spill rather than from accounts held in memory, holds
//! exactly the live accounts, each as the workload last set it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use aldb_core::Claim;
use aldb_format::SnapshotReader;
use aldb_format::format::{FLAG_FULL, HEADER_LEN, Header, file_name};
use aldb_verify::json::hash_to_base58;
use aldb_verify::spec::{Hash, account_value, bit, branch_hash, first_difference, key_path, leaf_hash};
use aldb_workload::{OWNER, pubkey};
use common::workload::{State, Workload, published_field};

const WORKLOAD: Workload = Workload { seed: 77, leaves_log2: 9, slot_updates: 150, data_len: 40 };
/// The first run stops here; the resumed one goes on to `LAST`.
const FIRST_RUN: u64 = 9;
const LAST: u64 = 20;

/// `root(S)` of `docs/SPEC.md` §5 over `(path, value)` pairs sorted by path.
fn spec_root(s: &[(Hash, Hash)]) -> Hash {
    match s {
        [] => [0; 32],
        [(p, v)] => leaf_hash(p, v),
        _ => {
            let d = first_difference(&s[0].0, &s[s.len() - 1].0).expect("distinct paths");
            let split = s.partition_point(|(p, _)| bit(p, usize::from(d)) == 0);
            branch_hash(d, &spec_root(&s[..split]), &spec_root(&s[split..]))
        }
    }
}

fn root_of(state: &State) -> String {
    let mut pairs: Vec<(Hash, Hash)> =
        state.iter().map(|(pk, (l, data))| (key_path(pk), account_value(*l, &OWNER, false, data))).collect();
    pairs.sort_unstable();
    hash_to_base58(&spec_root(&pairs))
}

/// `slot -> (root, seq)` of the `published` lines.
fn published(out: &Output) -> BTreeMap<u64, (String, u32)> {
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let field = |k: &str| published_field(line, k);
        if let (Some(s), Some(r), Some(q)) = (field("slot="), field("root="), field("seq=")) {
            m.insert(s.parse().unwrap(), (r, q.parse().unwrap()));
        }
    }
    m
}

fn simulate(dir: &Path, slots: u64, resume: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_aldb"));
    cmd.arg("simulate").arg("--dir").arg(dir);
    cmd.args(WORKLOAD.args());
    // A short refresh, so later slots copy records forward from the spilled full snapshots.
    cmd.args(["--slots", &slots.to_string(), "--refresh-slots", "4", "--threads", "2"]);
    if resume {
        cmd.arg("--resume");
    }
    let out = cmd.output().expect("run aldb simulate");
    assert!(out.status.success(), "aldb simulate: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn header(dir: &Path, seq: u32, slot: u64) -> Header {
    let bytes = std::fs::read(dir.join(file_name(seq, slot))).unwrap();
    Header::decode(&bytes[..HEADER_LEN]).unwrap()
}

#[test]
fn published_roots_are_the_specs_roots_and_full_snapshots_hold_the_live_accounts() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("snaps");
    let mut runs = published(&simulate(&dir, FIRST_RUN, false));
    let resumed = published(&simulate(&dir, LAST, true));
    assert_eq!(resumed.keys().next(), Some(&(FIRST_RUN + 1)), "the resumed run starts after the first");
    runs.extend(resumed);
    assert_eq!(runs.keys().copied().collect::<Vec<_>>(), (0..=LAST).collect::<Vec<_>>());
    assert!(!dir.join(aldb_snapshot::SPILL_DIR).exists(), "the startup spill is removed");

    let states = WORKLOAD.model(LAST);
    for (slot, (root, _)) in &runs {
        assert_eq!(root, &root_of(&states[*slot as usize].0), "slot {slot}");
    }

    // The run's first snapshot and the resumed run's first are full, written from the spill:
    // exactly the live accounts, with the workload's latest lamports and data; deleted and
    // never-created keys are absent.
    let reader = SnapshotReader::open(&dir).unwrap();
    for slot in [0, FIRST_RUN + 1] {
        let (root, seq) = &runs[&slot];
        let h = header(&dir, *seq, slot);
        let (state, hi) = &states[slot as usize];
        assert_ne!(h.flags & FLAG_FULL, 0, "slot {slot} is full");
        assert_eq!(h.accounts, state.len() as u64, "slot {slot}: one record per live account");
        let info = reader.slot(Some(slot)).unwrap();
        assert_eq!(&hash_to_base58(&info.root), root);
        let gone = state.len() as u64 != *hi;
        assert!(slot == 0 || gone, "by slot {slot} some accounts were deleted");
        for i in 0..hi + 3 {
            let pk = pubkey(WORKLOAD.seed, i);
            let p = reader.prove(&pk, Some(slot)).unwrap();
            let claim = p.proof.verify(&info.root, &pk).unwrap();
            match state.get(&pk) {
                Some((lamports, data)) => {
                    let a = p.account.unwrap_or_else(|| panic!("slot {slot}: key {i} missing"));
                    assert_eq!((a.lamports, &a.data, a.owner), (*lamports, data, OWNER), "slot {slot}, key {i}");
                    assert!(matches!(claim, Claim::Present { .. }));
                }
                None => assert_eq!((p.account, claim), (None, Claim::Absent), "slot {slot}, key {i}"),
            }
        }
    }
}

#[test]
fn a_resumed_run_of_another_workload_is_refused_and_leaves_no_spill() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("snaps");
    simulate(&dir, 3, false);
    let another = Workload { seed: 78, ..WORKLOAD };
    let out = Command::new(env!("CARGO_BIN_EXE_aldb"))
        .arg("simulate")
        .arg("--dir")
        .arg(&dir)
        .args(another.args())
        .args(["--slots", "6", "--resume"])
        .output()
        .unwrap();
    assert!(!out.status.success(), "another seed must be refused");
    assert!(String::from_utf8_lossy(&out.stderr).contains("holds a different workload"));
    assert!(!dir.join(aldb_snapshot::SPILL_DIR).exists(), "the refused run's spill is removed");
}
