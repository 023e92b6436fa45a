//! The epoch chain against `tests/vectors/epochs-v1.json`, written by the independent Python
//! implementation of `docs/SPEC.md` §11 (`tools/vectors/gen_epochs.py`): the schedule, the set's
//! encoding and hash, the bank hash with the set, every scenario step by step, and the
//! misbehaviour files.

#![cfg(feature = "json")]
#![allow(clippy::expect_used, clippy::panic)]

use aldb_verify::epochs::{
    Advanced, Checkpoint, ClientState, EpochError, EpochJsonError, EpochSchedule, EpochSet, LightClient,
    MAX_SET_MEMBERS, MINIMUM_SLOTS_PER_EPOCH, Misbehaviour, SET_DOMAIN, SlotEvidence, Transition, bank_hash_with_set,
    mix_root_and_set, set_commitment, verify_misbehaviour,
};
use aldb_verify::json::{hash_from_base58, hash_to_base58};
use aldb_verify::votes::{self, MAX_EVIDENCE_VOTES};
use serde_json::{Value, json};

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/epochs-v1.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("vector file")).expect("vector JSON")
}

fn hash(v: &Value) -> [u8; 32] {
    hash_from_base58(v.as_str().expect("base58 string")).expect("base58")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn name(c: &Value) -> &str {
    c["name"].as_str().expect("name")
}

#[test]
fn constants_match() {
    let v = vectors();
    let c = &v["constants"];
    assert_eq!(hex(c["set_domain"].as_str().expect("domain")), SET_DOMAIN.to_vec());
    assert_eq!(c["max_set_members"].as_u64(), Some(MAX_SET_MEMBERS as u64));
    assert_eq!(c["minimum_slots_per_epoch"].as_u64(), Some(MINIMUM_SLOTS_PER_EPOCH));
    assert_eq!(c["max_evidence_votes"].as_u64(), Some(MAX_EVIDENCE_VOTES as u64));
}

#[test]
fn schedules() {
    let v = vectors();
    for c in v["schedules"].as_array().expect("schedules") {
        let s = EpochSchedule::from_json_value(&c["schedule"]).unwrap_or_else(|e| panic!("{}: {e}", name(c)));
        let made = EpochSchedule::new(s.slots_per_epoch, s.leader_schedule_slot_offset, s.warmup).expect("custom");
        assert_eq!(made, s, "{}", name(c));
        assert_eq!(s.to_json_value(), c["schedule"], "{}", name(c));
        for p in c["slots"].as_array().expect("slots") {
            let slot = p["slot"].as_u64().expect("slot");
            let epoch = s.epoch(slot);
            assert_eq!(Some(epoch), p["epoch"].as_u64(), "{} slot {slot}", name(c));
            assert_eq!(s.first_slot(epoch), p["first_slot"].as_u64(), "{} slot {slot}", name(c));
            if let Some(lse) = p["leader_schedule_epoch"].as_u64() {
                assert_eq!(s.leader_schedule_epoch(slot), lse, "{} slot {slot}", name(c));
            }
            if let Some(from) = p["next_set_from"].as_u64() {
                assert_eq!(s.next_set_from(epoch), Some(from), "{} slot {slot}", name(c));
            }
        }
    }
    for c in v["invalid_schedules"].as_array().expect("invalid schedules") {
        let err = EpochSchedule::from_json_value(&c["schedule"]).expect_err(name(c));
        assert_eq!(err.name(), c["error"].as_str().expect("error"), "{}", name(c));
    }
}

#[test]
fn sets_encode_and_hash() {
    let v = vectors();
    for c in v["sets"].as_array().expect("sets") {
        let set = EpochSet::from_json_value(&c["set"]).unwrap_or_else(|e| panic!("{}: {e}", name(c)));
        let encoding = hex(c["encoding"].as_str().expect("encoding"));
        assert_eq!(set.encode(), encoding, "{}", name(c));
        assert_eq!(set.hash(), hash(&c["hash"]), "{}", name(c));
        assert_eq!(EpochSet::decode(&encoding).expect("decodes"), set, "{}", name(c));
        assert_eq!(set.to_json_value(), c["set"], "{}", name(c));
        // What a node binds (members in the order a hash map gives them) is the same encoding.
        let mut members: Vec<_> = set.members().iter().rev().cloned().collect();
        let half = members.len() / 2;
        members.rotate_left(half);
        let bound = set_commitment(set.epoch(), set.total_stake(), &mut members);
        assert_eq!(bound, (hash(&c["hash"]), encoding), "{}", name(c));
    }
    for c in v["invalid_sets"].as_array().expect("invalid sets") {
        let err = EpochSet::decode(&hex(c["encoding"].as_str().expect("encoding"))).expect_err(name(c));
        assert_eq!(err.name(), c["error"].as_str().expect("error"), "{}", name(c));
    }
    for c in v["invalid_set_json"].as_array().expect("invalid set JSON") {
        let err = EpochSet::from_json_value(&c["set"]).expect_err(name(c));
        assert_eq!(err.name(), c["error"].as_str().expect("error"), "{}", name(c));
    }
}

#[test]
fn bank_hash_with_the_set() {
    let v = vectors();
    for c in v["bank_hash"].as_array().expect("bank_hash") {
        let (h, root, nsh) = (hash(&c["h"]), hash(&c["root"]), hash(&c["next_set_hash"]));
        let forks = c["hard_forks"].as_u64();
        assert_eq!(mix_root_and_set(&h, &root, &nsh), hash(&c["mixed"]), "{}", name(c));
        assert_eq!(bank_hash_with_set(&h, &root, &nsh, forks), hash(&c["bank_hash"]), "{}", name(c));
        assert_eq!(votes::bank_hash(&h, &root, forks), hash(&c["bank_hash_without_set"]), "{}", name(c));
    }
}

/// The step's outcome in the vectors' words.
fn outcome(op: &str, step: &Value, client: &mut LightClient) -> Value {
    let now = step["now"].as_i64().expect("now");
    let result = match op {
        "advance" => {
            // The reader refuses what the client would (more than 4096 votes) as early.
            let t = match Transition::from_json_value(&step["transition"]) {
                Ok(t) => t,
                Err(EpochJsonError::Rule(e)) => return json!({"error": e.name()}),
                Err(e) => panic!("transition: {e}"),
            };
            client.advance(&t, now).map(|a| match a {
                Advanced::Advanced { epoch, set_hash, time, vouched } => json!({
                    "ok": "advanced", "epoch": epoch, "set_hash": hash_to_base58(&set_hash), "time": time,
                    "stake": vouched.stake.to_string(), "total_stake": vouched.total_stake.to_string(),
                }),
                Advanced::AlreadyVerified { epoch, vouched } => json!({
                    "ok": "already_verified", "epoch": epoch,
                    "stake": vouched.stake.to_string(), "total_stake": vouched.total_stake.to_string(),
                }),
            })
        }
        "accept_root" => {
            let ev = SlotEvidence::from_json_value(&step["evidence"]).expect("evidence parses");
            client.accept_root(&ev, now).map(|r| {
                json!({
                    "ok": "accepted", "slot": r.slot, "epoch": r.epoch, "bank_hash": hash_to_base58(&r.bank_hash),
                    "root": hash_to_base58(&r.root), "next_set_hash": hash_to_base58(&r.next_set_hash),
                    "stake": r.vouched.stake.to_string(), "total_stake": r.vouched.total_stake.to_string(),
                })
            })
        }
        "misbehaviour" => {
            let a = SlotEvidence::from_json_value(&step["first"]).expect("first parses");
            let b = SlotEvidence::from_json_value(&step["second"]).expect("second parses");
            client.submit_misbehaviour(&a, &b, now).and_then(|kind| Err(EpochError::Misbehaviour(kind)))
        }
        other => panic!("unknown op {other}"),
    };
    match result {
        Ok(v) => v,
        Err(e @ EpochError::Misbehaviour(kind)) => json!({
            "error": e.name(), "kind": kind.name(),
            "misbehaviour": client.misbehaviour().expect("frozen").to_json_value(),
        }),
        Err(e) => json!({"error": e.name()}),
    }
}

fn summary(c: &LightClient) -> Value {
    let s = c.state();
    json!({
        "epoch": c.epoch(),
        "set_hash": hash_to_base58(&c.newest().set.hash()),
        "time": c.newest().time,
        "held_epochs": s.held.iter().map(|e| e.set.epoch()).collect::<Vec<_>>(),
        "last_verified_slot": c.last_verified_slot(),
        "frozen": s.frozen.as_ref().map(|m| m.kind.name()),
    })
}

#[test]
fn scenarios() {
    let v = vectors();
    let scenarios = v["scenarios"].as_array().expect("scenarios");
    assert!(scenarios.len() >= 7);
    for sc in scenarios {
        let cp = Checkpoint::from_json_value(&sc["checkpoint"]).expect("checkpoint");
        assert_eq!(cp.to_json_value(), sc["checkpoint"]);
        let mut client = LightClient::new(cp).expect("client");
        for step in sc["steps"].as_array().expect("steps") {
            let before = client.clone();
            let got = outcome(step["op"].as_str().expect("op"), step, &mut client);
            let label = format!("{} / {}", name(sc), name(step));
            assert_eq!(got, step["expect"], "{label}");
            assert_eq!(summary(&client), step["state"], "{label}");
            if got.get("error").is_some() && got["error"] != "misbehaviour" {
                assert_eq!(client, before, "{label}: a refusal changes nothing");
            }
            // The state a caller stores is accepted back as it is.
            let restored = LightClient::from_state(client.state().clone()).expect("state restores");
            assert_eq!(restored, client, "{label}");
        }
        // The state file: as the independent implementation writes it, and read back.
        assert_eq!(client.state().to_json_value(), sc["final_state"], "{}", name(sc));
        let text = serde_json::to_string(&sc["final_state"]).expect("text");
        assert_eq!(LightClient::from_state_json_str(&text).expect("state file"), client, "{}", name(sc));
    }
}

#[test]
fn misbehaviour_files() {
    let v = vectors();
    for c in v["misbehaviour_files"].as_array().expect("files") {
        let m = Misbehaviour::from_json_value(&c["file"]).unwrap_or_else(|e| panic!("{}: {e}", name(c)));
        // setHash is for people and not read; a tampered file's is stale.
        let (mut written, mut given) = (m.to_json_value(), c["file"].clone());
        for v in [&mut written, &mut given] {
            v.as_object_mut().expect("object").remove("setHash");
        }
        assert_eq!(written, given, "{}", name(c));
        let trusted = c["trusted_set_hash"].as_str().map(|s| hash_from_base58(s).expect("hash"));
        let got = verify_misbehaviour(&m, trusted.as_ref());
        if c["valid"].as_bool().expect("valid") {
            assert_eq!(got.map(|k| k.name()), Ok(c["kind"].as_str().expect("kind")), "{}", name(c));
        } else {
            assert_eq!(got.map_err(|e| e.name()), Err(c["error"].as_str().expect("error")), "{}", name(c));
        }
    }
}

#[test]
fn invalid_states() {
    let v = vectors();
    for c in v["invalid_states"].as_array().expect("invalid states") {
        let err = ClientState::from_json_value(&c["state"])
            .map_err(|e| e.name())
            .and_then(|s| LightClient::from_state(s).map_err(|e| e.name()))
            .expect_err(name(c));
        assert_eq!(err, c["error"].as_str().expect("error"), "{}", name(c));
    }
}
