//! Crash torture: a writer process is killed with SIGKILL at random moments, restarted with
//! `--resume` each time, and every slot it ever reported published must still be served, with its
//! reported root and with proofs that verify and agree with a model of the workload; and the root
//! records it signed form one unbroken chain, one record per slot.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use aldb_core::Claim;
use aldb_format::SnapshotReader;
use aldb_verify::json::hash_to_base58;
use aldb_workload::pubkey;
use common::workload::{Workload, published_field};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const WORKLOAD: Workload = Workload { seed: 20240611, leaves_log2: 10, slot_updates: 300, data_len: 165 };
const LAST_SLOT: u64 = 240;

fn simulate(dir: &std::path::Path, keypair: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_aldb"))
        .args(["simulate", "--dir"])
        .arg(dir)
        .arg("--keypair")
        .arg(keypair)
        .args(WORKLOAD.args())
        .args([
            "--slots",
            &LAST_SLOT.to_string(),
            "--refresh-slots",
            "8",
            "--slot-ms",
            "4",
            "--threads",
            "2",
            "--resume",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn aldb simulate")
}

#[test]
fn sigkill_never_loses_a_published_slot() {
    let dir = tempfile::tempdir().unwrap();
    let key_dir = tempfile::tempdir().unwrap();
    let keypair = key_dir.path().join("id.json");
    let out = Command::new(env!("CARGO_BIN_EXE_aldb")).arg("keygen").arg(&keypair).output().unwrap();
    assert!(out.status.success());
    let mut rng = ChaCha8Rng::seed_from_u64(0x5161_c111);
    let mut reported: BTreeMap<u64, String> = BTreeMap::new();
    let mut kills = 0;
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        assert!(Instant::now() < deadline, "torture did not finish in time");
        let mut child = simulate(dir.path(), &keypair);
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        // Kill at a random moment, unless the run has already finished by then.
        let kill_after = Duration::from_millis(rng.random_range(5..150));
        let started = Instant::now();
        let finished = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if kills < 30 && started.elapsed() >= kill_after {
                child.kill().unwrap();
                child.wait().unwrap();
                kills += 1;
                break None;
            }
            std::thread::sleep(Duration::from_millis(1));
        };
        reader.join().unwrap();
        for line in rx.try_iter() {
            let slot = published_field(&line, "slot=").and_then(|v| v.parse::<u64>().ok());
            if let (Some(s), Some(r)) = (slot, published_field(&line, "root=")) {
                // A slot published twice (by a run and by its restart) must have one root.
                if let Some(prev) = reported.insert(s, r.clone()) {
                    assert_eq!(prev, r, "slot {s} published with two roots");
                }
            }
        }
        if let Some(status) = finished {
            assert!(status.success(), "simulate failed after {kills} kills");
            break;
        }
    }
    assert!(kills >= 10, "too few kills to mean anything: {kills}");
    assert!(reported.contains_key(&LAST_SLOT));

    // No partial file is ever visible: every name a reader would open is a complete file.
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        assert!(name.ends_with(".snap") || name.starts_with('.') || name == "records", "unexpected file {name}");
    }
    // The records: every slot exactly once, each chained to the previous one and signed,
    // each naming the root the run reported.
    let records = aldb_format::records::RecordLogReader::new(dir.path()).refresh().unwrap();
    assert_eq!(records.iter().map(|r| r.record.slot).collect::<Vec<_>>(), (0..=LAST_SLOT).collect::<Vec<_>>());
    for (i, r) in records.iter().enumerate() {
        assert_eq!(r.attestations.len(), 1);
        assert_eq!(r.attestations[0].verify(&r.record_hash), Ok(()));
        assert_eq!(r.attestations[0].identity, records[0].attestations[0].identity);
        if i > 0 {
            assert!(
                r.record.extends(&records[i - 1].record, &records[i - 1].record_hash),
                "slot {} not chained",
                r.record.slot
            );
        }
        if let Some(root) = reported.get(&r.record.slot) {
            assert_eq!(&hash_to_base58(&r.record.state_root), root, "record of slot {}", r.record.slot);
        }
    }
    let h = SnapshotReader::open(dir.path()).unwrap();
    let states = WORKLOAD.model(LAST_SLOT);
    let probes: Vec<[u8; 32]> =
        (0..1200u64).step_by(7).map(|i| pubkey(WORKLOAD.seed, i)).chain([[0u8; 32], [9u8; 32]]).collect();
    for (slot, root) in &reported {
        let info = h.slot(Some(*slot)).unwrap_or_else(|e| panic!("reported slot {slot} not served: {e}"));
        assert_eq!(&hash_to_base58(&info.root), root, "slot {slot}");
        let (state, _) = &states[*slot as usize];
        for pk in &probes {
            let p = h.prove(pk, Some(*slot)).unwrap();
            let claim = p.proof.verify(&info.root, pk).unwrap();
            match state.get(pk) {
                Some((lamports, data)) => {
                    let a = p.account.expect("present");
                    assert_eq!((a.lamports, &a.data), (*lamports, data), "slot {slot}");
                    assert!(matches!(claim, Claim::Present { .. }));
                }
                None => assert_eq!((p.account, claim), (None, Claim::Absent), "slot {slot}"),
            }
        }
    }
    eprintln!("{kills} kills, {} published slots checked", reported.len());
}
