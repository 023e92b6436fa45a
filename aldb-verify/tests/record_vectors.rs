//! The crate against `tests/vectors/records-v1.json`, written by the independent Python
//! implementation of `docs/SPEC.md` §9 (`tools/vectors/gen_records.py`).

#![allow(clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use aldb_verify::json::hash_from_base58;
use aldb_verify::record::{Attestation, Quorum, RecordError, RootRecord, attestation_message};
use aldb_verify::record_json::{attested_record_from_json_value, record_to_json_value};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/records-v1.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("vector file")).expect("vector JSON")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn b58<const N: usize>(s: &str) -> [u8; N] {
    bs58::decode(s).into_vec().expect("base58").try_into().expect("length")
}

fn str_of<'a>(v: &'a Value, k: &str) -> &'a str {
    v[k].as_str().unwrap_or_else(|| panic!("field {k}"))
}

fn records(v: &Value) -> HashMap<String, (RootRecord, [u8; 32])> {
    let mut out = HashMap::new();
    for r in v["records"].as_array().expect("records") {
        let name = str_of(r, "name");
        let bytes = hex(str_of(r, "bytes"));
        let record = RootRecord::decode(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(record.encode().to_vec(), bytes, "{name}: re-encoding");
        let hash = hash_from_base58(str_of(r, "record_hash")).expect("hash");
        assert_eq!(record.hash(), hash, "{name}: record hash");
        let f = &r["fields"];
        assert_eq!(record.slot, f["slot"].as_u64().expect("slot"), "{name}");
        assert_eq!(u64::from(record.flags()), f["flags"].as_u64().expect("flags"), "{name}");
        assert_eq!(record.commitment.name(), str_of(f, "commitment"), "{name}");
        assert_eq!(record.state_root, hash_from_base58(str_of(f, "state_root")).expect("root"), "{name}");
        // The slot's own bank hash: a field of the vector exactly when the record has it.
        let bank_hash = f.get("bank_hash").map(|h| hash_from_base58(h.as_str().expect("bank_hash")).expect("hash"));
        assert_eq!(record.bank_hash, bank_hash, "{name}: bank_hash");
        assert_eq!(bytes.len(), if bank_hash.is_some() { 219 } else { 187 }, "{name}");
        // The JSON form, as Hyades serves it: parsed, and produced field for field.
        let parsed = attested_record_from_json_value(&r["json"]).unwrap_or_else(|e| panic!("{name} json: {e}"));
        assert_eq!(parsed.record, record, "{name}: JSON form");
        let mut served = r["json"].clone();
        served.as_object_mut().expect("object").remove("attestations");
        assert_eq!(record_to_json_value(&record), served, "{name}: JSON form produced");
        out.insert(name.to_string(), (record, hash));
    }
    out
}

#[test]
fn records_decode_hash_and_chain() {
    let v = vectors();
    let recs = records(&v);
    assert!(recs.len() >= 10);
    for c in v["chain"].as_array().expect("chain") {
        let (child, _) = &recs[str_of(c, "child")];
        let (parent, parent_hash) = &recs[str_of(c, "parent")];
        assert_eq!(
            child.extends(parent, parent_hash),
            c["extends"].as_bool().expect("extends"),
            "{}",
            c["description"]
        );
    }
}

#[test]
fn invalid_records_are_rejected() {
    let v = vectors();
    for r in v["invalid_records"].as_array().expect("invalid") {
        let name = str_of(r, "name");
        let got = match RootRecord::decode(&hex(str_of(r, "bytes"))) {
            Ok(_) => panic!("{name} must be rejected"),
            Err(RecordError::Length { .. }) => "length",
            Err(RecordError::Version { .. }) => "version",
            Err(RecordError::Commitment { .. }) => "commitment",
            Err(RecordError::UnknownFlags { .. }) => "unknown_flag",
            Err(RecordError::FlagWithoutParent { .. }) => "flag_without_parent",
            Err(RecordError::ParentNotBelow { .. }) => "parent_slot_not_below_slot",
            Err(RecordError::NonZeroUnsetField { .. }) => "unset_field_not_zero",
            Err(e) => panic!("{name}: unexpected {e}"),
        };
        assert_eq!(got, str_of(r, "error"), "{name}");
    }
}

#[test]
fn attestations_verify_and_invalid_ones_do_not() {
    let v = vectors();
    let recs = records(&v);
    assert_eq!(hex(str_of(&v, "attestation_prefix")), b"aldb-attest-v1");
    for a in v["attestations"].as_array().expect("attestations") {
        let (_, hash) = &recs[str_of(a, "record")];
        assert_eq!(attestation_message(hash).to_vec(), hex(str_of(a, "message")));
        let att = Attestation { identity: b58(str_of(a, "identity")), signature: b58(str_of(a, "signature")) };
        assert_eq!(att.verify(hash), Ok(()), "{a}");
    }
    for a in v["invalid_attestations"].as_array().expect("invalid") {
        let (_, hash) = &recs[str_of(a, "record")];
        let att = Attestation { identity: b58(str_of(a, "identity")), signature: b58(str_of(a, "signature")) };
        assert!(att.verify(hash).is_err(), "{} must be rejected", str_of(a, "name"));
    }
}

#[test]
fn quorum_cases() {
    let v = vectors();
    let recs = records(&v);
    for q in v["quorum"].as_array().expect("quorum") {
        let name = str_of(q, "name");
        let (_, hash) = &recs[str_of(q, "record")];
        let ids: Vec<[u8; 32]> =
            q["identities"].as_array().expect("ids").iter().map(|i| b58(i.as_str().expect("id"))).collect();
        let rule =
            Quorum::new(&ids, q["threshold"].as_u64().expect("k") as usize).unwrap_or_else(|e| panic!("{name}: {e}"));
        let atts: Vec<Attestation> = q["attestations"]
            .as_array()
            .expect("atts")
            .iter()
            .map(|a| Attestation { identity: b58(str_of(a, "identity")), signature: b58(str_of(a, "signature")) })
            .collect();
        assert_eq!(rule.count_valid(hash, &atts) as u64, q["valid_identities"].as_u64().expect("count"), "{name}");
        assert_eq!(rule.is_attested(hash, &atts), q["accepted"].as_bool().expect("accepted"), "{name}");
    }
}
