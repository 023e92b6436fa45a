//! `aldb proof --url` checks the proof against a root it trusts, against a real Hyades on
//! loopback serving snapshot files and a record log written here: `--root`, a record signed by a
//! quorum of `--identities` (`docs/SPEC.md` §9.4), or an explicit `--trust-server`. A wrong root,
//! a record signed below the threshold, a quorum-signed record of another root or cluster, and no
//! trust flag at all each fail with the reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use aldb_fixture::History;
use aldb_format::Account;
use aldb_snapshot::WriterConfig;
use aldb_snapshot::records::{LoggedRecord, RecordLogWriter, Signer};
use aldb_verify::hash_to_base58;
use aldb_verify::record::{Commitment, ParentLink, RootRecord};
use common::service::Hyades;
use common::{aldb, text};

const GENESIS: [u8; 32] = [0x47; 32];

fn account(i: u8, lamports: u64) -> Account {
    Account { pubkey: [i; 32], lamports, owner: [200; 32], executable: false, data: vec![i; usize::from(i)] }
}

fn signer(i: u8) -> Signer {
    Signer::from_seed(&[i; 32])
}

/// The record of `slot` with `root`, chained to `parent`, signed by `signers`.
fn record(slot: u64, root: [u8; 32], genesis: [u8; 32], parent: Option<&LoggedRecord>, signers: &[u8]) -> LoggedRecord {
    let record = RootRecord {
        genesis_hash: genesis,
        slot,
        parent: parent.map(|p| ParentLink { slot: p.record.slot, record_hash: Some(p.record_hash), bank_hash: None }),
        commitment: Commitment::Finalized,
        state_root: root,
        block: None,
        bank_hash: None,
    };
    let record_hash = record.hash();
    LoggedRecord {
        record,
        record_hash,
        attestations: signers.iter().map(|&i| signer(i).attest(&record_hash)).collect(),
    }
}

#[test]
fn proof_is_checked_against_a_trusted_root_a_quorum_signed_record_or_explicitly_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut history = History::start(WriterConfig::new(dir.path()), 64).unwrap();
    history.commit(0, None, &(1..20).map(|i| account(i, 1000 + u64::from(i))).collect::<Vec<_>>()).unwrap();
    for slot in 1..=3u8 {
        history.commit(u64::from(slot), Some(u64::from(slot) - 1), &[account(3, 10 + u64::from(slot))]).unwrap();
    }
    let roots = history.finish().unwrap();

    // Slot 0: signed by identities 1 and 2. Slot 1: by 1 validly, by 2 with a broken signature
    // (many times over) and by outsider 9. Slot 2: by all three, but over another root. Slot 3:
    // by all three, for another cluster, and only confirmed.
    let (mut log, _) = RecordLogWriter::open(dir.path()).unwrap();
    let r0 = record(0, roots[&0], GENESIS, None, &[1, 2]);
    let mut r1 = record(1, roots[&1], GENESIS, Some(&r0), &[1, 9]);
    let mut forged = signer(2).attest(&r1.record_hash);
    forged.signature[40] ^= 1;
    r1.attestations.extend(std::iter::repeat_n(forged, 1000));
    let r2 = record(2, [0x99; 32], GENESIS, Some(&r1), &[1, 2, 3]);
    let mut r3 = record(3, roots[&3], [0x48; 32], Some(&r2), &[1, 2, 3]);
    r3.record.commitment = Commitment::Confirmed;
    r3.record_hash = r3.record.hash();
    r3.attestations = (1..=3).map(|i| signer(i).attest(&r3.record_hash)).collect();
    for r in [&r0, &r1, &r2, &r3] {
        log.append(r).unwrap();
    }
    drop(log);

    // The identities as a JSON array, and the same as lines with a comment.
    let ids: Vec<String> = (1..=3).map(|i| hash_to_base58(&signer(i).identity())).collect();
    let json_ids = dir.path().join("identities.json");
    std::fs::write(&json_ids, serde_json::to_string(&ids).unwrap()).unwrap();
    let line_ids = dir.path().join("identities.txt");
    std::fs::write(&line_ids, format!("# the cluster's validators\n{}\n", ids.join("\n"))).unwrap();
    let (json_ids, line_ids) = (json_ids.to_str().unwrap(), line_ids.to_str().unwrap());

    let hyades = Hyades::start(dir.path());
    let url = hyades.url.clone();
    let url = url.as_str();
    let key = hash_to_base58(&[3; 32]);
    let key = key.as_str();
    let genesis = hash_to_base58(&GENESIS);
    let ok = |args: &[&str]| {
        let out = aldb(args);
        assert!(out.status.success(), "aldb {args:?}: {}", text(&out.stderr));
        out
    };
    let fails = |args: &[&str], want: &str| {
        let out = aldb(args);
        assert!(!out.status.success(), "aldb {args:?} was believed: {}", text(&out.stdout));
        assert!(!text(&out.stdout).contains("verified"), "{}", text(&out.stdout));
        assert!(text(&out.stderr).contains(want), "aldb {args:?}: {}", text(&out.stderr));
    };

    // Each mode verifies.
    let root0 = hash_to_base58(&roots[&0]);
    let out = ok(&["proof", "--url", url, key, "--slot", "0", "--root", &root0]);
    assert!(
        text(&out.stdout)
            .contains(&format!("root trusted: given with --root\nverified against root {root0} at slot 0"))
    );
    for ids in [json_ids, line_ids] {
        let out = ok(&[
            "proof",
            "--url",
            url,
            key,
            "--slot",
            "0",
            "--identities",
            ids,
            "--threshold",
            "2",
            "--genesis-hash",
            &genesis,
        ]);
        let stdout = text(&out.stdout);
        assert!(stdout.contains("lamports: 1003"), "{stdout}");
        let basis = format!(
            "root trusted: record {} (finalized, genesis {genesis}) signed by 2 of 3 identities (need 2)\nverified against root {root0} at slot 0",
            hash_to_base58(&r0.record_hash)
        );
        assert!(stdout.contains(&basis), "{stdout}");
        assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
    }
    let out = ok(&["proof", "--url", url, key, "--slot", "1", "--identities", json_ids, "--threshold", "1"]);
    assert!(text(&out.stdout).contains("signed by 1 of 3 identities (need 1)"), "{}", text(&out.stdout));
    let out = ok(&["proof", "--url", url, key, "--slot", "3", "--identities", json_ids, "--threshold", "3"]);
    assert!(text(&out.stdout).contains("lamports: 13"), "{}", text(&out.stdout));
    let out = ok(&["proof", "--url", url, key, "--trust-server"]);
    assert!(text(&out.stdout).contains(&format!("verified against root {} at slot 3", hash_to_base58(&roots[&3]))));
    assert!(text(&out.stderr).contains("warning: --trust-server"), "{}", text(&out.stderr));

    // Each failure says why.
    fails(&["proof", "--url", url, key, "--slot", "1", "--root", &root0], "is not the trusted root");
    fails(
        &["proof", "--url", url, key, "--slot", "1", "--identities", json_ids, "--threshold", "2"],
        "is signed by 1 of the 3 identities, below the threshold 2",
    );
    fails(
        &["proof", "--url", url, key, "--slot", "2", "--identities", line_ids, "--threshold", "3"],
        "is not the root of the quorum-signed record",
    );
    fails(
        &[
            "proof",
            "--url",
            url,
            key,
            "--slot",
            "3",
            "--identities",
            json_ids,
            "--threshold",
            "2",
            "--genesis-hash",
            &genesis,
        ],
        "is for genesis",
    );
    fails(
        &[
            "proof",
            "--url",
            url,
            key,
            "--slot",
            "3",
            "--identities",
            json_ids,
            "--threshold",
            "2",
            "--commitment",
            "finalized",
        ],
        "the record of slot 3 is confirmed, not finalized",
    );
    ok(&[
        "proof",
        "--url",
        url,
        key,
        "--slot",
        "0",
        "--identities",
        json_ids,
        "--threshold",
        "2",
        "--commitment",
        "finalized",
    ]);
    fails(
        &["proof", "--url", url, key, "--identities", json_ids, "--threshold", "2", "--commitment", "processed"],
        "expected confirmed or finalized",
    );
    fails(&["proof", "--url", url, key], "--root R");
    fails(&["proof", "--url", url, key], "--identities FILE --threshold K");
    fails(&["proof", "--url", url, key], "--trust-server");
    fails(&["proof", "--url", url, key, "--root", &root0, "--trust-server"], "cannot be used with");
    fails(&["proof", "--url", url, key, "--threshold", "2"], "--identities");
    fails(
        &["proof", "--url", url, key, "--identities", json_ids, "--threshold", "4"],
        "threshold 4 must be between 1 and the 3",
    );
    fails(
        &["proof", "--url", url, key, "--identities", "/nonexistent/ids", "--threshold", "1"],
        "cannot read the identities file",
    );
}
