//! The JSON form of a root record and its attestations (`docs/SPEC.md` §9.5), as Hyades serves
//! it and relayers read it.
//!
//! Only `bytes` and `attestations` carry meaning: the reader decodes `bytes` strictly and then
//! requires every human-readable field to say exactly what the bytes say, so a server cannot show
//! one thing and sign another.

use alloc::string::{String, ToString};
use alloc::vec::Vec;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::json::hash_to_base58;
use crate::record::{Attestation, MAX_RECORD_LEN, RecordError, RootRecord};
use crate::spec::Hash;

/// A record with the attestations served beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttestedRecord {
    /// The record, decoded from `bytes`.
    pub record: RootRecord,
    /// Its hash, recomputed from the bytes (never taken from the document).
    pub record_hash: Hash,
    /// The attestations as served; not yet verified.
    pub attestations: Vec<Attestation>,
}

/// Why a JSON document is not a well-formed attested record.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordJsonError {
    /// Not JSON, or not an object.
    NotAnObject,
    /// A field is missing or of the wrong type; its name.
    Field(&'static str),
    /// `bytes` is not base64.
    Base64,
    /// `bytes` is not a valid record.
    Record(RecordError),
    /// A readable field disagrees with `bytes`; its name.
    Mismatch(String),
    /// An attestation's identity or signature is not base58 of the right length; its index.
    Attestation(usize),
}

impl core::fmt::Display for RecordJsonError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NotAnObject => f.write_str("record is not a JSON object"),
            Self::Field(name) => write!(f, "record field `{name}` is missing or of the wrong type"),
            Self::Base64 => f.write_str("record `bytes` is not base64"),
            Self::Record(e) => write!(f, "record `bytes`: {e}"),
            Self::Mismatch(name) => write!(f, "record field `{name}` disagrees with `bytes`"),
            Self::Attestation(i) => write!(f, "attestations[{i}] is not an identity and a 64-byte signature in base58"),
        }
    }
}

impl std::error::Error for RecordJsonError {}

fn opt_hash(h: Option<Hash>) -> Value {
    h.map_or(Value::Null, |h| Value::String(hash_to_base58(&h)))
}

/// The name of the slot's own bank hash, present only when the record has `SLOT_BANK_HASH`: the
/// JSON of every other record is what it was before that flag existed.
const BANK_HASH: &str = "bankHash";

/// The readable fields of a record and its hash (everything of §9.5 but `attestations`).
pub fn record_to_json_value(record: &RootRecord) -> Value {
    let bytes = record.encode();
    let mut v = json!({
        "version": 1,
        "genesisHash": hash_to_base58(&record.genesis_hash),
        "slot": record.slot,
        "parentSlot": record.parent_slot(),
        "commitment": record.commitment.name(),
        "stateRoot": hash_to_base58(&record.state_root),
        "parentRecordHash": opt_hash(record.parent_record_hash()),
        "blockhash": opt_hash(record.block.map(|b| b.blockhash)),
        "blockHeight": record.block.map(|b| b.block_height),
        "parentBankHash": opt_hash(record.parent.and_then(|p| p.bank_hash)),
        "recordHash": hash_to_base58(&crate::record::record_hash(&bytes)),
        "bytes": base64::engine::general_purpose::STANDARD.encode(&bytes),
    });
    if let (Some(h), Value::Object(m)) = (record.bank_hash, &mut v) {
        m.insert(BANK_HASH.to_string(), Value::String(hash_to_base58(&h)));
    }
    v
}

/// The JSON form of an attestation.
pub fn attestation_to_json_value(a: &Attestation) -> Value {
    json!({
        "identity": hash_to_base58(&a.identity),
        "signature": bs58::encode(a.signature).into_string(),
    })
}

/// The full §9.5 document: the record's fields and its attestations.
pub fn attested_record_to_json_value(record: &RootRecord, attestations: &[Attestation]) -> Value {
    let mut v = record_to_json_value(record);
    if let Value::Object(m) = &mut v {
        m.insert(
            "attestations".to_string(),
            Value::Array(attestations.iter().map(attestation_to_json_value).collect()),
        );
    }
    v
}

/// Reads a §9.5 document: decodes `bytes`, checks every readable field against it, and parses
/// the attestations (without verifying them).
pub fn attested_record_from_json_value(value: &Value) -> Result<AttestedRecord, RecordJsonError> {
    let obj: &Map<String, Value> = value.as_object().ok_or(RecordJsonError::NotAnObject)?;
    let text = obj.get("bytes").and_then(Value::as_str).ok_or(RecordJsonError::Field("bytes"))?;
    if text.len() > MAX_RECORD_LEN * 2 {
        return Err(RecordJsonError::Record(RecordError::Length { len: text.len() }));
    }
    let bytes = base64::engine::general_purpose::STANDARD.decode(text).map_err(|_| RecordJsonError::Base64)?;
    let record = RootRecord::decode(&bytes).map_err(RecordJsonError::Record)?;
    let expected = record_to_json_value(&record);
    if let Value::Object(exp) = &expected {
        for (name, want) in exp {
            if obj.get(name) != Some(want) {
                return Err(RecordJsonError::Mismatch(name.clone()));
            }
        }
        // A bank hash shown for a record that carries none would be a claim nobody signed.
        if !exp.contains_key(BANK_HASH) && obj.get(BANK_HASH).is_some_and(|v| !v.is_null()) {
            return Err(RecordJsonError::Mismatch(BANK_HASH.to_string()));
        }
    }
    let list = obj.get("attestations").and_then(Value::as_array).ok_or(RecordJsonError::Field("attestations"))?;
    let mut attestations = Vec::with_capacity(list.len());
    for (i, a) in list.iter().enumerate() {
        let identity =
            a.get("identity").and_then(Value::as_str).and_then(|t| crate::base58::decode_fixed::<32>(t).ok());
        let signature =
            a.get("signature").and_then(Value::as_str).and_then(|t| crate::base58::decode_fixed::<64>(t).ok());
        match (identity, signature) {
            (Some(identity), Some(signature)) => attestations.push(Attestation { identity, signature }),
            _ => return Err(RecordJsonError::Attestation(i)),
        }
    }
    Ok(AttestedRecord { record_hash: record.hash(), record, attestations })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{BlockInfo, Commitment, ParentLink};

    #[test]
    fn round_trips_and_rejects_a_field_that_lies() {
        let r = RootRecord {
            genesis_hash: [9; 32],
            slot: 5,
            parent: Some(ParentLink { slot: 4, record_hash: Some([1; 32]), bank_hash: None }),
            commitment: Commitment::Finalized,
            state_root: [2; 32],
            block: Some(BlockInfo { blockhash: [3; 32], block_height: 4 }),
            bank_hash: None,
        };
        let att = Attestation { identity: [5; 32], signature: [6; 64] };
        let v = attested_record_to_json_value(&r, &[att]);
        let back = attested_record_from_json_value(&v).expect("round trip");
        assert_eq!(back.record, r);
        assert_eq!(back.attestations, [att]);
        let mut lie = v.clone();
        lie["stateRoot"] = Value::String(hash_to_base58(&[8; 32]));
        assert_eq!(attested_record_from_json_value(&lie), Err(RecordJsonError::Mismatch("stateRoot".into())));
        // No bank hash in the bytes: none in the JSON, and one shown anyway is a lie.
        assert_eq!(v.get("bankHash"), None);
        let mut lie = v.clone();
        lie["bankHash"] = Value::String(hash_to_base58(&[8; 32]));
        assert_eq!(attested_record_from_json_value(&lie), Err(RecordJsonError::Mismatch("bankHash".into())));
        lie["bankHash"] = Value::Null;
        assert!(attested_record_from_json_value(&lie).is_ok());
        // With the slot's bank hash: shown, and checked against the bytes.
        let with = RootRecord { bank_hash: Some([7; 32]), ..r };
        let wv = attested_record_from_json_value(&attested_record_to_json_value(&with, &[att])).expect("round trip");
        assert_eq!(wv.record, with);
        let mut lie = attested_record_to_json_value(&with, &[]);
        assert_eq!(lie["bankHash"], Value::String(hash_to_base58(&[7; 32])));
        lie["bankHash"] = Value::Null;
        assert_eq!(attested_record_from_json_value(&lie), Err(RecordJsonError::Mismatch("bankHash".into())));
        let mut bad = v;
        bad["attestations"][0]["signature"] = Value::String(hash_to_base58(&[1; 32]));
        assert_eq!(attested_record_from_json_value(&bad), Err(RecordJsonError::Attestation(0)));
        // Digits enough for minutes of generic decoding are refused by length, unread.
        bad["attestations"][0]["signature"] = Value::String("2".repeat(1_000_000));
        assert_eq!(attested_record_from_json_value(&bad), Err(RecordJsonError::Attestation(0)));
        bad["attestations"][0]["signature"] = Value::String(bs58::encode([0xff; 64]).into_string());
        bad["attestations"][0]["identity"] = Value::String("2".repeat(1_000_000));
        assert_eq!(attested_record_from_json_value(&bad), Err(RecordJsonError::Attestation(0)));
    }
}
