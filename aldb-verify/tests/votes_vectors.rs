//! The vote chain against `tests/vectors/votes-v1.json`, written by the independent Python
//! implementation of `docs/SPEC.md` §10 (`tools/vectors/gen_votes.py`).

#![allow(clippy::expect_used, clippy::panic)]

use aldb_verify::json::hash_from_base58;
use aldb_verify::votes::{
    self, MAX_EVIDENCE_VOTES, MAX_LOCKOUTS, PACKET_DATA_SIZE, VOTE_PROGRAM_ID, ValidatorSet, VoteEvidence,
    VoteTransaction, VoteVerifier, validator_set_from_json_value, verify_account_by_votes,
};
use base64::Engine as _;
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/votes-v1.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("vector file")).expect("vector JSON")
}

fn b64(v: &Value) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(v.as_str().expect("base64 string")).expect("base64")
}

fn hash(v: &Value) -> [u8; 32] {
    hash_from_base58(v.as_str().expect("base58 string")).expect("base58")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn sha256(parts: &[&[u8]]) -> [u8; 32] {
    use sha2::Digest;
    let mut s = sha2::Sha256::new();
    for p in parts {
        s.update(p);
    }
    s.finalize().into()
}

#[test]
fn constants_match() {
    let v = vectors();
    let c = &v["constants"];
    assert_eq!(hash(&c["vote_program"]), VOTE_PROGRAM_ID);
    assert_eq!(c["packet_data_size"].as_u64(), Some(PACKET_DATA_SIZE as u64));
    assert_eq!(c["max_lockouts"].as_u64(), Some(MAX_LOCKOUTS as u64));
    assert_eq!(c["tower_sync_tag"].as_u64(), Some(u64::from(votes::TAG_TOWER_SYNC)));
    assert_eq!(c["tower_sync_switch_tag"].as_u64(), Some(u64::from(votes::TAG_TOWER_SYNC_SWITCH)));
    assert_eq!(c["max_evidence_votes"].as_u64(), Some(MAX_EVIDENCE_VOTES as u64));
}

#[test]
fn bank_hash_rule() {
    let v = vectors();
    let cases = v["bank_hash"].as_array().expect("bank_hash");
    assert!(cases.len() >= 5);
    for c in cases {
        let name = c["name"].as_str().expect("name");
        let (h, root) = (hash(&c["h"]), hash(&c["root"]));
        let forks = c["hard_forks"].as_u64();
        // h itself, from the 4.2.0 parts, where the case gives them.
        if !c["parent_hash"].is_null() {
            let count = c["signature_count"].as_u64().expect("count").to_le_bytes();
            let inner = sha256(&[&hash(&c["parent_hash"]), &count, &hash(&c["last_blockhash"])]);
            let lt = hex(c["accounts_lt_hash"].as_str().expect("lt hash"));
            assert_eq!(lt.len(), 2048, "{name}");
            assert_eq!(sha256(&[&inner, &lt]), h, "{name}: h");
        }
        assert_eq!(votes::mix_root(&h, &root), hash(&c["mixed"]), "{name}: mixed");
        assert_eq!(votes::bank_hash(&h, &root, forks), hash(&c["bank_hash"]), "{name}: bank hash");
        let without = match forks {
            None => h,
            Some(n) => sha256(&[&h, &n.to_le_bytes()]),
        };
        assert_eq!(without, hash(&c["bank_hash_without_feature"]), "{name}");
    }
}

#[test]
fn transactions_decode() {
    let v = vectors();
    let cases = v["transactions"].as_array().expect("transactions");
    assert!(cases.len() >= 6);
    for c in cases {
        let name = c["name"].as_str().expect("name");
        let bytes = b64(&c["bytes"]);
        let tx = VoteTransaction::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(tx.fee_payer(), hash(&c["fee_payer"]), "{name}");
        let signers: Vec<[u8; 32]> = c["signers"].as_array().expect("signers").iter().map(hash).collect();
        assert_eq!(tx.signers, signers, "{name}");
        assert_eq!(tx.vote_account, hash(&c["vote_account"]), "{name}");
        assert_eq!(tx.recent_blockhash, hash(&c["recent_blockhash"]), "{name}");
        let t = &tx.tower;
        assert_eq!(t.switch_hash.is_some(), c["instruction"] == "tower_sync_switch", "{name}");
        assert_eq!(t.switch_hash, c["switch_hash"].as_str().map(|_| hash(&c["switch_hash"])), "{name}");
        assert_eq!(t.root, c["root"].as_u64(), "{name}");
        let lockouts: Vec<(u64, u8)> = t.lockouts.iter().map(|l| (l.slot, l.confirmation_count)).collect();
        let want: Vec<(u64, u8)> = c["lockouts"]
            .as_array()
            .expect("lockouts")
            .iter()
            .map(|p| (p[0].as_u64().expect("slot"), p[1].as_u64().expect("count") as u8))
            .collect();
        assert_eq!(lockouts, want, "{name}");
        assert_eq!(t.slot(), c["slot"].as_u64().expect("slot"), "{name}");
        assert_eq!(t.hash, hash(&c["hash"]), "{name}");
        assert_eq!(t.timestamp, c["timestamp"].as_i64(), "{name}");
        assert_eq!(t.block_id, hash(&c["block_id"]), "{name}");
        assert_eq!(tx.verify_signatures().is_ok(), c["signatures_valid"].as_bool().expect("bool"), "{name}");
    }
}

#[test]
fn invalid_transactions_are_rejected_with_their_error() {
    let v = vectors();
    let cases = v["invalid_transactions"].as_array().expect("invalid_transactions");
    assert!(cases.len() >= 25);
    for c in cases {
        let name = c["name"].as_str().expect("name");
        let err = VoteTransaction::parse(&b64(&c["bytes"])).expect_err(name);
        assert_eq!(err.name(), c["error"].as_str().expect("error"), "{name}: {err}");
    }
}

fn sets(v: &Value, name: &str) -> ValidatorSet {
    validator_set_from_json_value(&v["sets"][name]).expect("set")
}

#[test]
fn evidence_cases() {
    let v = vectors();
    let cases = v["evidence"].as_array().expect("evidence");
    assert!(cases.len() >= 20);
    for c in cases {
        let name = c["name"].as_str().expect("name");
        let set = sets(&v, c["set"].as_str().expect("set"));
        let ev = VoteEvidence::from_json_value(&c["evidence"]).unwrap_or_else(|e| panic!("{name}: {e}"));
        let bank_hash = votes::bank_hash(&ev.h, &ev.root, ev.hard_forks);
        assert_eq!(bank_hash, hash(&c["bank_hash"]), "{name}");

        let tally = VoteVerifier::new(&set).tally(ev.slot, &bank_hash, &ev.votes);
        let names: Vec<&str> =
            tally.outcomes.iter().map(|o| o.as_ref().map_or_else(|e| e.name(), |_| "counted")).collect();
        let want: Vec<&str> =
            c["outcomes"].as_array().expect("outcomes").iter().map(|o| o.as_str().expect("o")).collect();
        assert_eq!(names, want, "{name}");
        let stake: u128 = c["stake"].as_str().expect("stake").parse().expect("stake");
        let total: u128 = c["total_stake"].as_str().expect("total").parse().expect("total");
        assert_eq!((tally.stake, tally.total_stake), (stake, total), "{name}");

        let got = verify_account_by_votes(&ev, &set);
        match c["error"].as_str() {
            None => {
                let got = got.unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(c["accepted"].as_bool().expect("accepted"), "{name}");
                assert_eq!(got.accepted.stake, stake, "{name}");
                assert_eq!(got.accepted.root, ev.root, "{name}");
                assert_eq!(got.accepted.bank_hash, bank_hash, "{name}");
                let present = c["account"]["present"].as_bool().expect("present");
                assert_eq!(got.account.is_some(), present, "{name}");
                assert_eq!(got.accepted.vouched_time, c["vouched_time"].as_i64(), "{name}");
                // The freshness bound against the vouched time: at the bound, one second past it,
                // and refused outright without one.
                match got.accepted.vouched_time {
                    Some(t) => {
                        assert_eq!(got.accepted.check_age(t + 60, 60), Ok(()), "{name}");
                        let e = got.accepted.check_age(t + 61, 60).expect_err(name);
                        assert_eq!(e.name(), "too_old", "{name}");
                        assert!(e.to_string().contains("cast 61 s ago"), "{name}: {e}");
                        assert_eq!(got.accepted.check_age(t - 3600, 0), Ok(()), "{name}: a clock behind");
                    }
                    None => {
                        let e = got.accepted.check_age(0, u64::MAX).expect_err(name);
                        assert_eq!(e.name(), "unstamped", "{name}");
                    }
                }
            }
            Some(error) => {
                let e = got.expect_err(name);
                assert_eq!(e.name(), error, "{name}: {e}");
                assert!(!c["accepted"].as_bool().expect("accepted"), "{name}");
            }
        }
    }
}

#[test]
fn evidence_limits() {
    let v = vectors();
    let set = sets(&v, "main");
    let mut doc = v["evidence"][0]["evidence"].clone();
    let one = doc["votes"][0].clone();
    doc["votes"] = Value::Array(vec![one; MAX_EVIDENCE_VOTES + 1]);
    assert!(VoteEvidence::from_json_value(&doc).is_err());
    let ev = VoteEvidence::from_json_value(&v["evidence"][0]["evidence"]).expect("evidence");
    let many = vec![ev.votes[0].clone(); MAX_EVIDENCE_VOTES + 1];
    let err = VoteVerifier::new(&set).verify_root(ev.slot, &ev.h, &ev.root, None, &many).expect_err("too many");
    assert_eq!(err.name(), "too_many_votes");
    // A second copy of one vote counts once: its second outcome is a duplicate, no signature
    // check needed.
    let twice = vec![ev.votes[0].clone(), ev.votes[0].clone()];
    let tally = VoteVerifier::new(&set).tally(ev.slot, &votes::bank_hash(&ev.h, &ev.root, None), &twice);
    assert_eq!(tally.outcomes[1].map_err(|e| e.name()), Err("duplicate"));
    let mut bad = doc.clone();
    bad["hardForks"] = Value::from(0);
    bad["votes"] = Value::Array(vec![]);
    assert!(VoteEvidence::from_json_value(&bad).is_err(), "a hard-fork count of 0 is written null");
}

#[test]
fn a_repeated_vote_account_is_named() {
    use aldb_verify::json::hash_to_base58;
    use aldb_verify::votes::{SetError, Validator};
    // Leading zero bytes, a high first byte, all ones: the base58 forms that differ most.
    let mut lead = [0u8; 32];
    lead[3] = 9;
    for key in [[0u8; 32], lead, [255; 32], [1; 32]] {
        let m = |voter: u8| Validator { vote_account: key, authorized_voter: [voter; 32], stake: 1 };
        let e = ValidatorSet::new(&[m(7), Validator { vote_account: [5; 32], ..m(8) }, m(9)]).expect_err("a repeat");
        assert_eq!(e, SetError::DuplicateVoteAccount { vote_account: key });
        assert_eq!(e.to_string(), format!("vote account {} is listed twice", hash_to_base58(&key)));
    }
}
