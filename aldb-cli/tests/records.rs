//! `aldb keygen` and `aldb simulate --keypair`: signed, chained root records, resumable.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use aldb_format::records::RecordLogReader;
use aldb_verify::json::hash_to_base58;
use aldb_verify::record::{Commitment, Quorum};
use common::workload::published_field;

fn aldb(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_aldb")).args(args).output().expect("run aldb");
    assert!(out.status.success(), "aldb {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// `slot -> root` of the `published` lines.
fn published(out: &Output) -> BTreeMap<u64, String> {
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let field = |k: &str| published_field(line, k);
        if let (Some(s), Some(r)) = (field("slot="), field("root=")) {
            m.insert(s.parse().unwrap(), r);
        }
    }
    m
}

fn simulate(dir: &Path, slots: u64, extra: &[&str]) -> Output {
    let mut args = vec![
        "simulate",
        "--dir",
        dir.to_str().unwrap(),
        "--leaves-log2",
        "8",
        "--slot-updates",
        "40",
        "--threads",
        "1",
    ];
    let slots = slots.to_string();
    args.extend(["--slots", &slots]);
    args.extend(extra);
    aldb(&args)
}

#[test]
fn simulate_with_a_keypair_logs_signed_chained_records_and_resumes_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("id.json");
    let seed = "07".repeat(32);
    let out = aldb(&["keygen", "--seed-hex", &seed, key.to_str().unwrap()]);
    let identity = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // Deterministic from the seed.
    let again = dir.path().join("again.json");
    aldb(&["keygen", "--seed-hex", &seed, again.to_str().unwrap()]);
    assert_eq!(std::fs::read(&key).unwrap(), std::fs::read(&again).unwrap());
    let bytes: Vec<u8> = serde_json::from_slice(&std::fs::read(&key).unwrap()).unwrap();
    assert_eq!(bytes.len(), 64);
    assert_eq!(hash_to_base58(&bytes[32..].try_into().unwrap()), identity);
    // An existing file is not overwritten.
    let out = Command::new(env!("CARGO_BIN_EXE_aldb")).args(["keygen", key.to_str().unwrap()]).output().unwrap();
    assert!(!out.status.success());

    let snaps = dir.path().join("snaps");
    let key = key.to_str().unwrap();
    let mut roots = published(&simulate(&snaps, 12, &["--keypair", key, "--commitment", "confirmed"]));
    roots.extend(published(&simulate(&snaps, 25, &["--keypair", key, "--commitment", "confirmed", "--resume"])));
    assert_eq!(roots.keys().copied().collect::<Vec<_>>(), (0..=25).collect::<Vec<_>>());

    let mut reader = RecordLogReader::new(&snaps);
    let records = reader.refresh().unwrap();
    assert_eq!(records.iter().map(|r| r.record.slot).collect::<Vec<_>>(), (0..=25).collect::<Vec<_>>());
    let identity: [u8; 32] = bs58::decode(&identity).into_vec().unwrap().try_into().unwrap();
    let quorum = Quorum::new(&[identity], 1).unwrap();
    for (i, r) in records.iter().enumerate() {
        assert!(quorum.is_attested(&r.record_hash, &r.attestations), "slot {}", r.record.slot);
        assert_eq!(hash_to_base58(&r.record.state_root), roots[&r.record.slot]);
        assert_eq!(r.record.commitment, Commitment::Confirmed);
        assert_eq!(hash_to_base58(&r.record.genesis_hash), "51ikJEpcxZMWLST5nSVjLqawCdqDNWBH93RVWHdLnZPB");
        assert_eq!(r.record.block, None);
        match i {
            0 => assert_eq!(r.record.parent, None),
            _ => assert!(
                r.record.extends(&records[i - 1].record, &records[i - 1].record_hash),
                "slot {} is not chained",
                r.record.slot
            ),
        }
    }

    // Without a keypair: unsigned records, finalized by default, with the genesis asked for.
    let plain = dir.path().join("plain");
    let genesis = hash_to_base58(&[3; 32]);
    simulate(&plain, 3, &["--genesis-hash", &genesis]);
    let records = RecordLogReader::new(&plain).refresh().unwrap();
    assert_eq!(records.len(), 4);
    assert!(records.iter().all(|r| r.attestations.is_empty() && r.record.commitment == Commitment::Finalized));
    assert!(records.iter().all(|r| r.record.genesis_hash == [3; 32]));
    // A fresh run into a directory with records is refused; a resumed one for another cluster too.
    let out = Command::new(env!("CARGO_BIN_EXE_aldb"))
        .args([
            "simulate",
            "--dir",
            plain.to_str().unwrap(),
            "--leaves-log2",
            "8",
            "--slot-updates",
            "40",
            "--slots",
            "5",
            "--resume",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success(), "another genesis must be refused");
}
