//! Checks the Rust commitment against `tests/vectors/v1.json`, which an independent, naive
//! implementation (`tools/vectors/gen_vectors.py`) computed from the spec alone.
//!
//! The JSON is decoded here by hand rather than through the crate's `json` feature, so that a
//! bug in that decoder cannot make the vectors and the crate agree by accident.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use aldb_verify::spec::{account_value, branch_hash, key_path, leaf_hash};
use aldb_verify::{Claim, EMPTY_ROOT, Hash, Proof, Sibling, Terminal, VerifyError};
use base64::Engine as _;
use serde::Deserialize;

// `deny_unknown_fields` throughout: a field the generator adds must be checked here too, or at
// least consciously ignored, rather than silently skipped.

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Vectors {
    version: u32,
    #[serde(rename = "description")]
    _description: String,
    primitives: Vec<Primitive>,
    cases: Vec<Case>,
    invalid_proofs: Vec<Invalid>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Primitive {
    function: String,
    input: HashMap<String, serde_json::Value>,
    output: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Op {
    pubkey: String,
    lamports: u64,
    owner: String,
    executable: bool,
    data: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    name: String,
    #[serde(rename = "description")]
    _description: String,
    ops: Vec<Op>,
    leaves: usize,
    root: String,
    proofs: Vec<CaseProof>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseProof {
    pubkey: String,
    path: String,
    present: bool,
    value: Option<String>,
    proof: JsonProof,
    wire: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Invalid {
    name: String,
    #[serde(rename = "description")]
    _description: String,
    root: String,
    pubkey: String,
    proof: JsonProof,
    wire: String,
    error: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonProof {
    version: u32,
    siblings: Vec<JsonSibling>,
    terminal: JsonTerminal,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonSibling {
    depth: u8,
    hash: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonTerminal {
    kind: String,
    path: Option<String>,
    value: Option<String>,
}

fn load() -> Vectors {
    let file = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/v1.json");
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {file}: {e}"));
    let v: Vectors = serde_json::from_str(&text).unwrap();
    assert_eq!(v.version, 1);
    v
}

fn h32(s: &str) -> Hash {
    let v = bs58::decode(s).into_vec().unwrap_or_else(|e| panic!("base58 {s:?}: {e}"));
    v.try_into().unwrap_or_else(|v: Vec<u8>| panic!("{s:?} decodes to {} bytes, not 32", v.len()))
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode(s).unwrap()
}

fn input_str<'a>(p: &'a Primitive, k: &str) -> &'a str {
    p.input[k].as_str().unwrap_or_else(|| panic!("{}: input {k} is not a string", p.function))
}

fn proof_of(j: &JsonProof) -> Proof {
    assert_eq!(j.version, 1);
    let siblings = j.siblings.iter().map(|s| Sibling { depth: s.depth, hash: h32(&s.hash) }).collect();
    let terminal = match j.terminal.kind.as_str() {
        "empty" => {
            assert!(j.terminal.path.is_none() && j.terminal.value.is_none());
            Terminal::Empty
        }
        "leaf" => Terminal::Leaf {
            path: h32(j.terminal.path.as_deref().unwrap()),
            value: h32(j.terminal.value.as_deref().unwrap()),
        },
        k => panic!("unknown terminal kind {k:?}"),
    };
    Proof { siblings, terminal }
}

/// The binary form from docs/SPEC.md, written out here so the vectors' `wire` fields are checked
/// against the same proof their JSON describes.
fn encode_wire(p: &Proof) -> Vec<u8> {
    let mut out = vec![0x01];
    match &p.terminal {
        Terminal::Empty => out.push(0x00),
        Terminal::Leaf { path, value } => {
            out.push(0x01);
            out.extend_from_slice(path);
            out.extend_from_slice(value);
        }
    }
    out.extend_from_slice(&u16::try_from(p.siblings.len()).unwrap().to_le_bytes());
    for s in &p.siblings {
        out.push(s.depth);
        out.extend_from_slice(&s.hash);
    }
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn flip(h: &Hash) -> Hash {
    let mut h = *h;
    h[31] ^= 1;
    h
}

#[test]
fn primitives() {
    let v = load();
    let mut seen = HashMap::<&str, usize>::new();
    for p in &v.primitives {
        let got = match p.function.as_str() {
            "key_path" => key_path(&h32(input_str(p, "pubkey"))),
            "account_value" => account_value(
                p.input["lamports"].as_u64().unwrap(),
                &h32(input_str(p, "owner")),
                p.input["executable"].as_bool().unwrap(),
                &b64(input_str(p, "data")),
            ),
            "leaf" => leaf_hash(&h32(input_str(p, "path")), &h32(input_str(p, "value"))),
            "branch" => branch_hash(
                u8::try_from(p.input["depth"].as_u64().unwrap()).unwrap(),
                &h32(input_str(p, "left")),
                &h32(input_str(p, "right")),
            ),
            f => panic!("unknown primitive {f:?}"),
        };
        assert_eq!(got, h32(&p.output), "{} {:?}", p.function, p.input);
        *seen.entry(p.function.as_str()).or_default() += 1;
    }
    for f in ["key_path", "account_value", "leaf", "branch"] {
        assert!(seen.get(f).copied().unwrap_or(0) > 0, "no {f} vectors");
    }
}

#[test]
fn case_proofs() {
    let v = load();
    assert!(!v.cases.is_empty());
    let mut proofs = 0;
    for case in &v.cases {
        let root = h32(&case.root);

        // Replay the ops to get the final account set, so each proof's claim is checked against
        // the accounts themselves and not only against the generator's own `present` field.
        let mut state = HashMap::<Hash, Hash>::new();
        for op in &case.ops {
            let pk = h32(&op.pubkey);
            if op.lamports == 0 {
                state.remove(&pk);
            } else {
                let value = account_value(op.lamports, &h32(&op.owner), op.executable, &b64(&op.data));
                state.insert(pk, value);
            }
        }
        assert_eq!(state.len(), case.leaves, "{}: leaf count", case.name);
        if case.leaves == 0 {
            assert_eq!(root, EMPTY_ROOT, "{}: empty tree root", case.name);
        }

        for cp in &case.proofs {
            let what = format!("{} / {}", case.name, cp.pubkey);
            let pk = h32(&cp.pubkey);
            let path = key_path(&pk);
            assert_eq!(path, h32(&cp.path), "{what}: key path");
            let proof = proof_of(&cp.proof);
            assert_eq!(hex(&encode_wire(&proof)), cp.wire, "{what}: wire form");

            let claim = proof.verify(&root, &pk).unwrap_or_else(|e| panic!("{what}: rejected: {e}"));
            let expected = match (cp.present, &cp.value) {
                (true, Some(v)) => Claim::Present { value: h32(v) },
                (false, None) => Claim::Absent,
                _ => panic!("{what}: present and value disagree"),
            };
            assert_eq!(claim, expected, "{what}: claim");
            let replayed = state.get(&pk).map_or(Claim::Absent, |v| Claim::Present { value: *v });
            assert_eq!(claim, replayed, "{what}: claim against replayed ops");
            assert_eq!(proof.verify_path(&root, &path), Ok(claim), "{what}: verify_path");

            assert_eq!(proof.verify(&flip(&root), &pk), Err(VerifyError::RootMismatch), "{what}: wrong root");
            if root != EMPTY_ROOT {
                assert_eq!(proof.verify(&EMPTY_ROOT, &pk), Err(VerifyError::RootMismatch), "{what}: empty root");
            }
            proofs += 1;
        }
    }
    assert!(proofs > 0);
}

#[test]
fn invalid_proofs() {
    let v = load();
    assert!(!v.invalid_proofs.is_empty());
    for inv in &v.invalid_proofs {
        let proof = proof_of(&inv.proof);
        assert_eq!(hex(&encode_wire(&proof)), inv.wire, "{}: wire form", inv.name);
        let got = proof.verify(&h32(&inv.root), &h32(&inv.pubkey));
        // Each vector breaks at most one of the shape rules (the generator checks this), so the
        // expected error is unambiguous for any verifier that checks shape before comparing roots.
        let ok = matches!(
            (inv.error.as_str(), got),
            ("depths_not_increasing", Err(VerifyError::DepthsNotIncreasing))
                | ("empty_with_siblings", Err(VerifyError::EmptyWithSiblings))
                | ("terminal_off_path", Err(VerifyError::TerminalOffPath { .. }))
                | ("root_mismatch", Err(VerifyError::RootMismatch))
        );
        assert!(ok, "{}: expected {}, got {got:?}", inv.name, inv.error);
    }
}
