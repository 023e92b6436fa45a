//! Writing answers as JSON text directly, without building `serde_json::Value` trees.
//!
//! A proof answer holds about twenty base58 hashes. Generic base58 encoders treat the input as an
//! arbitrary-length number and spend a couple of microseconds per 32-byte hash, which profiling
//! showed to be a quarter of the server's time; [`base58_32`] divides fixed 32-bit limbs by
//! `58^5` instead. Building a `Value` per answer cost another large share in allocation, so
//! answers are written straight into one string. Every string written here is base58, base64 or
//! a fixed key, none of which needs JSON escaping. The tests check the output against
//! [`aldb_verify`]'s JSON form and the `bs58` crate.

use std::fmt::Write as _;

use aldb_format::{Account, AccountProof, SlotInfo};
use aldb_verify::{Proof, Terminal};
use base64::Engine as _;

use crate::levels::Level;

const ALPHABET: &[u8; 58] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
/// 58^5, the largest power of 58 below 2^32: one division step yields five digits.
const FIVE_DIGITS: u64 = 58 * 58 * 58 * 58 * 58;

/// Appends the base58 text of 32 bytes (the same text as `bs58` and [`aldb_verify::hash_to_base58`]).
pub(crate) fn base58_32(out: &mut String, bytes: &[u8; 32]) {
    let mut limbs = [0u32; 8];
    for (limb, chunk) in limbs.iter_mut().zip(bytes.chunks_exact(4)) {
        *limb = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    // 2^256 < 58^44, so 45 digits (nine steps of five) always suffice. Filled from the end, most
    // significant digit first once done.
    let mut text = [0u8; 45];
    let mut at = text.len();
    let mut first = limbs.iter().position(|l| *l != 0).unwrap_or(limbs.len());
    while first < limbs.len() && at >= 5 {
        let mut rem = 0u64;
        for limb in &mut limbs[first..] {
            let cur = (rem << 32) | u64::from(*limb);
            // cur < 58^5 * 2^32, so the quotient fits in 32 bits.
            *limb = (cur / FIVE_DIGITS) as u32;
            rem = cur % FIVE_DIGITS;
        }
        // rem < 58^5 < 2^32: the five digits come out with cheap 32-bit divisions.
        let mut r = rem as u32;
        for _ in 0..5 {
            at -= 1;
            text[at] = ALPHABET[(r % 58) as usize];
            r /= 58;
        }
        while first < limbs.len() && limbs[first] == 0 {
            first += 1;
        }
    }
    // Drop the high zero digits of the last step; then each leading zero byte of the input is a
    // leading '1', as in every base58 encoder.
    while at < text.len() && text[at] == b'1' {
        at += 1;
    }
    let zeros = bytes.iter().take_while(|b| **b == 0).count();
    for _ in 0..zeros {
        out.push('1');
    }
    // Only alphabet bytes were written, so this is always valid UTF-8.
    out.push_str(std::str::from_utf8(&text[at..]).unwrap_or_default());
}

/// Value of each base58 character, 0xff for bytes outside the alphabet.
const DECODE: [u8; 256] = {
    let mut t = [0xffu8; 256];
    let mut i = 0;
    while i < ALPHABET.len() {
        t[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// Decodes base58 text of exactly 32 bytes, or `None` if it is anything else (callers then ask
/// [`aldb_verify::hash_from_base58`] for the precise error). A table lookup per character and
/// 32-bit limbs, for the same reason as [`base58_32`]: this runs for every key of every request.
pub(crate) fn base58_32_decode(text: &str) -> Option<[u8; 32]> {
    let bytes = text.as_bytes();
    if bytes.len() > aldb_verify::json::MAX_BASE58_HASH_LEN {
        return None;
    }
    let ones = bytes.iter().take_while(|b| **b == b'1').count();
    // 58^44 < 2^264: nine 32-bit limbs hold any accepted text and show when it exceeds 32 bytes.
    let mut limbs = [0u32; 9];
    for b in &bytes[ones..] {
        let d = DECODE[usize::from(*b)];
        if d == 0xff {
            return None;
        }
        let mut carry = u64::from(d);
        for limb in limbs.iter_mut().rev() {
            let x = u64::from(*limb) * 58 + carry;
            *limb = x as u32;
            carry = x >> 32;
        }
    }
    if limbs[0] != 0 {
        return None;
    }
    let mut out = [0u8; 32];
    for (chunk, limb) in out.chunks_exact_mut(4).zip(&limbs[1..]) {
        chunk.copy_from_slice(&limb.to_be_bytes());
    }
    // The number's own leading zero bytes must be exactly the text's leading ones.
    let zeros = out.iter().take_while(|b| **b == 0).count();
    (zeros == ones).then_some(out)
}

pub(crate) fn quoted_base58(out: &mut String, bytes: &[u8; 32]) {
    out.push('"');
    base58_32(out, bytes);
    out.push('"');
}

/// Appends `,"commitment":"<level>"` when the level is known.
fn commitment_field(out: &mut String, level: Option<Level>) {
    if let Some(l) = level {
        let _ = write!(out, r#","commitment":"{}""#, l.name());
    }
}

/// Appends `{"slot","parent","root"}`, with `"commitment"` when the level is known.
pub(crate) fn slot_json(out: &mut String, info: &SlotInfo, level: Option<Level>) {
    let _ = write!(out, r#"{{"slot":{},"parent":"#, info.slot);
    match info.parent {
        Some(p) => {
            let _ = write!(out, "{p}");
        }
        None => out.push_str("null"),
    }
    out.push_str(r#","root":"#);
    quoted_base58(out, &info.root);
    commitment_field(out, level);
    out.push('}');
}

/// Appends the notice that an announced root was abandoned: its `{"slot","parent","root",
/// "commitment"}` as last announced, with `"abandoned":true`.
pub(crate) fn abandoned_json(out: &mut String, info: &SlotInfo, level: Option<Level>) {
    slot_json(out, info, level);
    out.pop();
    out.push_str(r#","abandoned":true}"#);
}

/// Appends an account in Solana's RPC form.
pub(crate) fn account_json(out: &mut String, a: &Account) {
    let _ = write!(out, r#"{{"lamports":{},"owner":"#, a.lamports);
    quoted_base58(out, &a.owner);
    let _ = write!(out, r#","executable":{},"data":[""#, a.executable);
    base64::engine::general_purpose::STANDARD.encode_string(&a.data, out);
    let _ = write!(out, r#"","base64"],"space":{}}}"#, a.data.len());
}

/// Appends a proof in exactly [`Proof::to_json_value`]'s form.
pub(crate) fn proof_json(out: &mut String, p: &Proof) {
    out.push_str(r#"{"version":"#);
    let _ = write!(out, "{}", aldb_verify::JSON_VERSION);
    out.push_str(r#","siblings":["#);
    for (i, s) in p.siblings.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, r#"{{"depth":{},"hash":"#, s.depth);
        quoted_base58(out, &s.hash);
        out.push('}');
    }
    out.push_str(r#"],"terminal":"#);
    match &p.terminal {
        Terminal::Empty => out.push_str(r#"{"kind":"empty"}"#),
        Terminal::Leaf { path, value } => {
            out.push_str(r#"{"kind":"leaf","path":"#);
            quoted_base58(out, path);
            out.push_str(r#","value":"#);
            quoted_base58(out, value);
            out.push('}');
        }
    }
    out.push('}');
}

/// Appends the value of `getAccountProof`: `{"slot","root","account"|null,"proof"}`, with
/// `"commitment"` when the slot's level is known.
pub(crate) fn account_proof_json(out: &mut String, p: &AccountProof, level: Option<Level>) {
    let _ = write!(out, r#"{{"slot":{},"root":"#, p.slot);
    quoted_base58(out, &p.root);
    out.push_str(r#","account":"#);
    match &p.account {
        Some(a) => account_json(out, a),
        None => out.push_str("null"),
    }
    out.push_str(r#","proof":"#);
    proof_json(out, &p.proof);
    commitment_field(out, level);
    out.push('}');
}

/// Wraps a value in the `{"context":{"slot":S},"value":...}` envelope.
pub(crate) fn envelope(slot: u64, value: impl FnOnce(&mut String)) -> String {
    let mut out = String::with_capacity(2048);
    let _ = write!(out, r#"{{"context":{{"slot":{slot}}},"value":"#);
    value(&mut out);
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use aldb_verify::Sibling;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use serde_json::{Value, json};

    fn b58(bytes: &[u8; 32]) -> String {
        let mut s = String::new();
        base58_32(&mut s, bytes);
        s
    }

    #[test]
    fn base58_matches_the_reference_encoder() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut cases: Vec<[u8; 32]> = vec![[0; 32], [0xff; 32], [1; 32]];
        for zeros in 0..=32 {
            let mut b: [u8; 32] = rng.random();
            b[..zeros].fill(0);
            cases.push(b);
            let mut one = [0u8; 32];
            one[31] = 1;
            one[..zeros].fill(0);
            cases.push(one);
        }
        for _ in 0..20_000 {
            let mut b: [u8; 32] = rng.random();
            // Small numbers and runs of zero limbs too.
            let k = rng.random_range(0..32);
            if rng.random_bool(0.3) {
                b[..k].fill(0);
            }
            if rng.random_bool(0.2) {
                b[k..].fill(0);
            }
            cases.push(b);
        }
        for b in cases {
            let fast = b58(&b);
            assert_eq!(fast, bs58::encode(b).into_string(), "{b:?}");
            assert_eq!(aldb_verify::hash_from_base58(&fast).unwrap(), b);
        }
    }

    #[test]
    fn base58_decoding_agrees_with_the_verifier() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for _ in 0..20_000 {
            let mut b: [u8; 32] = rng.random();
            if rng.random_bool(0.3) {
                b[..rng.random_range(0..32)].fill(0);
            }
            let text = bs58::encode(b).into_string();
            assert_eq!(base58_32_decode(&text), Some(b));
            // Damaged text: whatever the verifier's strict decoder says, this one agrees.
            let mut damaged = text.clone().into_bytes();
            let i = rng.random_range(0..damaged.len());
            match rng.random_range(0..4) {
                0 => damaged[i] = b"0OIl+/ z"[rng.random_range(0..8)],
                1 => {
                    damaged.remove(i);
                }
                2 => damaged.insert(i, ALPHABET[rng.random_range(0..58)]),
                _ => damaged.insert(0, b'1'),
            }
            let damaged = String::from_utf8(damaged).unwrap();
            assert_eq!(base58_32_decode(&damaged), aldb_verify::hash_from_base58(&damaged).ok(), "{damaged}");
        }
        for text in ["", "1", &"1".repeat(31), &"1".repeat(33), &"z".repeat(44), &"z".repeat(45), "é"] {
            assert_eq!(base58_32_decode(text), aldb_verify::hash_from_base58(text).ok(), "{text}");
        }
    }

    #[test]
    fn proof_json_is_exactly_the_verifier_form() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for n in 0..60 {
            let siblings: Vec<Sibling> =
                (0..n % 30).map(|i| Sibling { depth: (i * 8) as u8, hash: rng.random() }).collect();
            let terminal =
                if n == 0 { Terminal::Empty } else { Terminal::Leaf { path: rng.random(), value: rng.random() } };
            let p = Proof { siblings, terminal };
            let mut s = String::new();
            proof_json(&mut s, &p);
            let ours: Value = serde_json::from_str(&s).unwrap();
            assert_eq!(ours, p.to_json_value());
            assert_eq!(Proof::from_json_value(&ours).unwrap(), p);
        }
    }

    #[test]
    fn answers_are_the_documented_json() {
        let a =
            Account { pubkey: [1; 32], lamports: u64::MAX, owner: [0; 32], executable: true, data: b"hi!".to_vec() };
        let p = AccountProof {
            slot: 9,
            root: [5; 32],
            account: Some(a.clone()),
            proof: Proof { siblings: vec![], terminal: Terminal::Leaf { path: [2; 32], value: [3; 32] } },
        };
        let text = envelope(9, |o| account_proof_json(o, &p, None));
        let v: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            v,
            json!({"context": {"slot": 9}, "value": {
                "slot": 9,
                "root": bs58::encode([5; 32]).into_string(),
                "account": {"lamports": u64::MAX, "owner": "1".repeat(32), "executable": true, "data": ["aGkh", "base64"], "space": 3},
                "proof": p.proof.to_json_value(),
            }})
        );
        let absent = AccountProof { account: None, ..p };
        let mut s = String::new();
        account_proof_json(&mut s, &absent, Some(Level::Confirmed));
        let v = serde_json::from_str::<Value>(&s).unwrap();
        assert_eq!(v["account"], Value::Null);
        assert_eq!(v["commitment"], "confirmed");
        for parent in [None, Some(7)] {
            let mut s = String::new();
            slot_json(&mut s, &SlotInfo { slot: 8, parent, root: [9; 32], seq: 1 }, None);
            assert_eq!(
                serde_json::from_str::<Value>(&s).unwrap(),
                json!({"slot": 8, "parent": parent, "root": bs58::encode([9; 32]).into_string()})
            );
        }
        let mut s = String::new();
        slot_json(&mut s, &SlotInfo { slot: 8, parent: Some(7), root: [9; 32], seq: 1 }, Some(Level::Processed));
        assert_eq!(
            serde_json::from_str::<Value>(&s).unwrap(),
            json!({"slot": 8, "parent": 7, "root": bs58::encode([9; 32]).into_string(), "commitment": "processed"})
        );
    }
}
