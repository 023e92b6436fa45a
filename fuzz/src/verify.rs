//! The aldb-verify decoders: proofs and root records, in their wire and JSON forms.
//!
//! Each `fn(&[u8])` here is one fuzz target's body: it must not panic on any input. The fuzz
//! targets call them, and aldb-verify's `fuzz_regressions` test replays the checked-in inputs
//! through them.

use aldb_verify::record::{Attestation, Quorum, RECORD_LEN, RECORD_LEN_WITH_BANK_HASH, RootRecord, record_hash};
use aldb_verify::record_json::{attested_record_from_json_value, attested_record_to_json_value};
use aldb_verify::{Proof, hash_from_base58, hash_to_base58};
use serde_json::Value;

/// `Proof::from_bytes`: whatever it accepts encodes back to exactly the same bytes (the wire
/// format is canonical), and verifying it does not panic.
pub fn proof_wire(data: &[u8]) {
    if let Ok(proof) = Proof::from_bytes(data) {
        assert_eq!(proof.to_bytes(), data, "accepted bytes do not re-encode to themselves");
        assert_eq!(proof.encoded_len(), data.len());
        let _ = proof.verify_path(&[0; 32], &[0; 32]);
    }
}

/// `Proof::from_json_str`: whatever it accepts survives a trip through its canonical JSON and
/// through the wire format unchanged; base58 that decodes encodes back to the same text.
pub fn proof_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(proof) = Proof::from_json_str(text) {
        let canonical = proof.to_json_string();
        assert_eq!(Proof::from_json_str(&canonical).as_ref(), Ok(&proof));
        assert_eq!(Proof::from_bytes(&proof.to_bytes()).as_ref(), Ok(&proof));
        let _ = proof.verify_path(&[0; 32], &[0; 32]);
    }
    if let Ok(hash) = hash_from_base58(text) {
        assert_eq!(hash_to_base58(&hash), text);
    }
}

/// `RootRecord::decode` on the first 187 bytes, on the first 219 (a record with
/// `SLOT_BANK_HASH`) and on the whole input: an accepted record is as long as its flags say,
/// encodes back to its bytes and reads back unchanged through its §9.5 document. The bytes after
/// the record (after 187 when none decodes), 96 at a time, are attestations (identity,
/// signature) as the record log stores them: verifying arbitrary keys and signatures, alone and
/// in a quorum, must not panic.
pub fn record_wire(data: &[u8]) {
    let mut head: Option<RootRecord> = None;
    for len in [RECORD_LEN, RECORD_LEN_WITH_BANK_HASH, data.len()] {
        let bytes = &data[..data.len().min(len)];
        let Ok(record) = RootRecord::decode(bytes) else { continue };
        let encoded = record.encode();
        assert_eq!(&encoded[..], bytes, "accepted record bytes do not re-encode to themselves");
        assert_eq!(record.encoded_len(), bytes.len());
        assert_eq!(record.bank_hash.is_some(), bytes.len() == RECORD_LEN_WITH_BANK_HASH, "length and flag disagree");
        assert_eq!(record.hash(), record_hash(&encoded));
        let _ = record.extends(&record, &record.hash());
        let doc = attested_record_to_json_value(&record, &[]);
        let back = attested_record_from_json_value(&doc).expect("the JSON form of a valid record reads back");
        assert_eq!(back.record, record);
        assert_eq!(back.record_hash, record.hash());
        head = head.or(Some(record));
    }
    let record_len = head.as_ref().map_or(RECORD_LEN, RootRecord::encoded_len);
    if data.len() > record_len {
        // The record's own hash when it decodes, so a real attestation verifies.
        let hash = head.as_ref().map_or_else(
            || {
                let mut h = [0u8; 32];
                h.copy_from_slice(&data[..32]);
                h
            },
            RootRecord::hash,
        );
        let attestations: Vec<Attestation> = data[record_len..]
            .chunks_exact(96)
            .take(8)
            .map(|c| {
                let mut identity = [0u8; 32];
                let mut signature = [0u8; 64];
                identity.copy_from_slice(&c[..32]);
                signature.copy_from_slice(&c[32..]);
                Attestation { identity, signature }
            })
            .collect();
        for a in &attestations {
            let _ = a.verify(&hash);
        }
        let ids: Vec<[u8; 32]> = attestations.iter().map(|a| a.identity).collect();
        if let Ok(q) = Quorum::new(&ids, ids.len().max(1)) {
            let valid = q.count_valid(&hash, &attestations);
            assert!(valid <= ids.len());
            assert_eq!(q.is_attested(&hash, &attestations), valid >= q.threshold());
        }
    }
}

/// `attested_record_from_json_value` on JSON text: a document it accepts says what its bytes
/// say, so writing the decoded record back gives the same fields, and reading that again gives
/// the same record and attestations.
pub fn record_json(data: &[u8]) {
    let Ok(value) = serde_json::from_slice::<Value>(data) else { return };
    record_document(&value);
}

fn record_document(value: &Value) {
    let Ok(doc) = attested_record_from_json_value(value) else { return };
    assert_eq!(doc.record_hash, doc.record.hash());
    let written = attested_record_to_json_value(&doc.record, &doc.attestations);
    let (Value::Object(out), Value::Object(input)) = (&written, value) else { panic!("documents are objects") };
    for (name, v) in out {
        if name != "attestations" {
            assert_eq!(input.get(name), Some(v), "accepted document disagrees with its bytes on {name}");
        }
    }
    let again = attested_record_from_json_value(&written).expect("a written document reads back");
    assert_eq!(again, doc);
}
