//! Tampered proofs are rejected, and both encodings round-trip exactly.
//!
//! Trees and proofs here come from a deliberately naive model of the commitment, written from
//! the spec (`tree_root`, `prove`): recursion over a sorted set of leaves, splitting at the first
//! bit where the smallest and largest path differ. It shares only the primitive hash functions
//! with the crate, so a proof the verifier accepts really is a proof about that set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use aldb_verify::spec::{account_value, bit, branch_hash, first_difference, key_path, leaf_hash};
use aldb_verify::{Claim, DecodeError, EMPTY_ROOT, Hash, Proof, Sibling, Terminal, VerifyError};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// A tree as the model sees it: (path, value) pairs sorted by path, paths distinct.
type Leaves = Vec<(Hash, Hash)>;

/// The account with this pubkey in the test trees: pubkey = [i as bytes, 0...].
fn pubkey(i: u32) -> [u8; 32] {
    let mut k = [0u8; 32];
    k[..4].copy_from_slice(&i.to_le_bytes());
    k
}

/// A tree of the accounts `0..n` (every `stride`-th one), with deterministic values.
fn tree(n: u32, stride: u32) -> Leaves {
    let mut leaves: Leaves = (0..n)
        .step_by(stride as usize)
        .map(|i| (key_path(&pubkey(i)), account_value(u64::from(i) + 1, &[7; 32], i % 3 == 0, &i.to_be_bytes())))
        .collect();
    leaves.sort();
    leaves
}

/// Index of the first leaf that goes right at the crit bit of `leaves` (two or more leaves).
fn split(leaves: &[(Hash, Hash)]) -> (u8, usize) {
    let d = first_difference(&leaves[0].0, &leaves[leaves.len() - 1].0).unwrap();
    let at = leaves.iter().position(|(p, _)| bit(p, usize::from(d)) == 1).unwrap();
    (d, at)
}

fn tree_root(leaves: &[(Hash, Hash)]) -> Hash {
    match leaves {
        [] => EMPTY_ROOT,
        [(p, v)] => leaf_hash(p, v),
        _ => {
            let (d, at) = split(leaves);
            branch_hash(d, &tree_root(&leaves[..at]), &tree_root(&leaves[at..]))
        }
    }
}

/// Walks the key's bits down the tree, collecting the side not taken at each branch.
fn prove(leaves: &[(Hash, Hash)], key: &Hash) -> Proof {
    let mut siblings = Vec::new();
    let mut cur = leaves;
    loop {
        match cur {
            [] => return Proof { siblings, terminal: Terminal::Empty },
            [(path, value)] => return Proof { siblings, terminal: Terminal::Leaf { path: *path, value: *value } },
            _ => {
                let (d, at) = split(cur);
                let (left, right) = cur.split_at(at);
                if bit(key, usize::from(d)) == 0 {
                    siblings.push(Sibling { depth: d, hash: tree_root(right) });
                    cur = left;
                } else {
                    siblings.push(Sibling { depth: d, hash: tree_root(left) });
                    cur = right;
                }
            }
        }
    }
}

/// What the model says is true of a key.
fn truth(leaves: &[(Hash, Hash)], key: &Hash) -> Claim {
    match leaves.iter().find(|(p, _)| p == key) {
        Some((_, value)) => Claim::Present { value: *value },
        None => Claim::Absent,
    }
}

/// A present key whose proof has at least `min` siblings.
fn deep_present(leaves: &[(Hash, Hash)], min: usize) -> Hash {
    leaves.iter().map(|(p, _)| *p).find(|p| prove(leaves, p).siblings.len() >= min).unwrap()
}

/// An absent key (a pubkey outside the tree) whose proof has at least `min` siblings.
fn deep_absent(leaves: &[(Hash, Hash)], min: usize) -> Hash {
    (1_000_000..)
        .map(|i| key_path(&pubkey(i)))
        .find(|p| truth(leaves, p) == Claim::Absent && prove(leaves, p).siblings.len() >= min)
        .unwrap()
}

fn trees() -> Vec<Leaves> {
    vec![tree(0, 1), tree(1, 1), tree(2, 1), tree(5, 1), tree(64, 1), tree(1000, 3)]
}

#[test]
fn honest_proofs_verify_and_tell_the_truth() {
    for leaves in trees() {
        let root = tree_root(&leaves);
        for (path, value) in &leaves {
            assert_eq!(prove(&leaves, path).verify_path(&root, path), Ok(Claim::Present { value: *value }));
        }
        for i in 0..50 {
            let key = key_path(&pubkey(2_000_000 + i));
            assert_eq!(prove(&leaves, &key).verify_path(&root, &key), Ok(Claim::Absent));
        }
    }
    // Through the pubkey, not just the path.
    let leaves = tree(64, 1);
    let claim = prove(&leaves, &key_path(&pubkey(9))).verify(&tree_root(&leaves), &pubkey(9));
    assert!(matches!(claim, Ok(Claim::Present { .. })));
}

/// Every single flipped bit of an encoded proof is caught, by the decoder or by verification.
fn assert_every_bit_flip_fails(proof: &Proof, root: &Hash, key: &Hash) {
    let bytes = proof.to_bytes();
    assert!(proof.verify_path(root, key).is_ok());
    for i in 0..bytes.len() * 8 {
        let mut b = bytes.clone();
        b[i / 8] ^= 1 << (i % 8);
        if let Ok(p) = Proof::from_bytes(&b) {
            let verdict = p.verify_path(root, key);
            assert!(verdict.is_err(), "flipping bit {i} still verifies: {verdict:?}");
        }
    }
}

#[test]
fn every_bit_flip_is_rejected() {
    let leaves = tree(1000, 3);
    let root = tree_root(&leaves);
    let present = deep_present(&leaves, 10);
    assert_every_bit_flip_fails(&prove(&leaves, &present), &root, &present);
    let absent = deep_absent(&leaves, 10);
    let exclusion = prove(&leaves, &absent);
    assert!(matches!(exclusion.terminal, Terminal::Leaf { .. }));
    assert_every_bit_flip_fails(&exclusion, &root, &absent);

    // The empty tree's proof too: any flip breaks the format or claims a leaf with a wrong root.
    assert_every_bit_flip_fails(&prove(&[], &absent), &EMPTY_ROOT, &absent);
}

#[test]
fn a_proof_says_nothing_false_about_another_key() {
    let leaves = tree(64, 1);
    let root = tree_root(&leaves);
    let others: Vec<Hash> = (0..64).map(|i| key_path(&pubkey(3_000_000 + i))).collect();
    for (a, _) in &leaves {
        let proof = prove(&leaves, a);
        for (b, _) in leaves.iter().filter(|(b, _)| b != a) {
            assert!(proof.verify_path(&root, b).is_err(), "a present key's proof accepted for another present key");
        }
        // An inclusion proof is also the exclusion proof of every absent key whose walk ends at
        // that leaf; for any other absent key it must fail. It must never claim presence.
        for b in &others {
            match proof.verify_path(&root, b) {
                Ok(claim) => {
                    assert_eq!(claim, Claim::Absent);
                    assert_eq!(prove(&leaves, b), proof);
                }
                Err(e) => assert!(matches!(e, VerifyError::TerminalOffPath { .. } | VerifyError::RootMismatch)),
            }
        }
    }
}

#[test]
fn a_proof_fails_against_another_root() {
    let leaves = tree(64, 1);
    let root = tree_root(&leaves);
    // Same keys with one value changed; one more key; one key fewer.
    let mut changed = leaves.clone();
    changed[17].1[0] ^= 1;
    let mut grown = leaves.clone();
    grown.push((key_path(&pubkey(4_000_000)), [1; 32]));
    grown.sort();
    let shrunk: Leaves = leaves.iter().copied().filter(|l| *l != leaves[30]).collect();
    for other in [tree_root(&changed), tree_root(&grown), tree_root(&shrunk), EMPTY_ROOT, [0xab; 32]] {
        assert_ne!(other, root);
        for (path, _) in &leaves {
            assert_eq!(prove(&leaves, path).verify_path(&other, path), Err(VerifyError::RootMismatch));
        }
    }
}

#[test]
fn dropping_reordering_or_redepthing_siblings_is_rejected() {
    let leaves = tree(1000, 3);
    let root = tree_root(&leaves);
    for key in [deep_present(&leaves, 8), deep_absent(&leaves, 8)] {
        let proof = prove(&leaves, &key);
        let n = proof.siblings.len();

        for i in 0..n {
            let mut p = proof.clone();
            p.siblings.remove(i);
            assert!(p.verify_path(&root, &key).is_err(), "dropping sibling {i} still verifies");
            // A shorter proof is still well-formed, so only verification can catch it.
            assert_eq!(Proof::from_bytes(&p.to_bytes()), Ok(p));
        }
        let mut p = proof.clone();
        p.siblings.clear();
        assert_eq!(p.verify_path(&root, &key), Err(VerifyError::RootMismatch));

        for i in 0..n - 1 {
            let mut p = proof.clone();
            p.siblings.swap(i, i + 1);
            assert_eq!(p.verify_path(&root, &key), Err(VerifyError::DepthsNotIncreasing));
            assert_eq!(Proof::from_bytes(&p.to_bytes()), Err(DecodeError::DepthsNotIncreasing { index: i + 1 }));
            // Swapping only the hashes keeps the depths in order; the hashes then disagree.
            let mut p = proof.clone();
            let (a, b) = (p.siblings[i].hash, p.siblings[i + 1].hash);
            p.siblings[i].hash = b;
            p.siblings[i + 1].hash = a;
            assert_eq!(p.verify_path(&root, &key), Err(VerifyError::RootMismatch));
        }
        let mut p = proof.clone();
        p.siblings.reverse();
        assert_eq!(p.verify_path(&root, &key), Err(VerifyError::DepthsNotIncreasing));

        for i in 1..n {
            let mut p = proof.clone();
            p.siblings[i].depth = p.siblings[i - 1].depth;
            assert_eq!(p.verify_path(&root, &key), Err(VerifyError::DepthsNotIncreasing));
            assert_eq!(Proof::from_bytes(&p.to_bytes()), Err(DecodeError::DepthsNotIncreasing { index: i }));
        }
        // Any other depth, in order or not, changes a branch hash (the depth is in the salt) or
        // sends a sibling to the wrong side.
        for i in 0..n {
            for depth in 0..=255u8 {
                if depth == proof.siblings[i].depth {
                    continue;
                }
                let mut p = proof.clone();
                p.siblings[i].depth = depth;
                assert!(p.verify_path(&root, &key).is_err(), "sibling {i} at depth {depth} still verifies");
            }
        }
    }
}

#[test]
fn an_exclusion_cannot_use_a_leaf_off_the_keys_path() {
    let leaves = tree(64, 1);
    let root = tree_root(&leaves);
    let mut off_path_seen = 0;
    for i in 0..200 {
        let key = key_path(&pubkey(5_000_000 + i));
        let honest = prove(&leaves, &key);
        let Terminal::Leaf { path: end, .. } = honest.terminal else { panic!("non-empty tree") };
        // Each other leaf's own proof hashes to the root, but its path leaves the key's path at
        // one of its branches, so it is no evidence that the key is absent.
        for (other, _) in leaves.iter().filter(|(p, _)| *p != end) {
            let forged = prove(&leaves, other);
            assert!(matches!(forged.verify_path(&root, &key), Err(VerifyError::TerminalOffPath { .. })));
            off_path_seen += 1;
        }
        // Swapping in another leaf as the terminal of the honest path fails too.
        for (other, value) in leaves.iter().filter(|(p, _)| *p != end) {
            let mut forged = honest.clone();
            forged.terminal = Terminal::Leaf { path: *other, value: *value };
            assert!(forged.verify_path(&root, &key).is_err());
        }
    }
    assert!(off_path_seen > 0);

    // Nor can a present key be shown absent by putting another leaf at the end of its path.
    for (key, _) in &leaves {
        for (other, value) in leaves.iter().filter(|(p, _)| p != key) {
            let mut forged = prove(&leaves, key);
            forged.terminal = Terminal::Leaf { path: *other, value: *value };
            assert!(forged.verify_path(&root, key).is_err());
        }
    }
}

#[test]
fn an_empty_terminal_with_siblings_is_rejected() {
    let leaves = tree(64, 1);
    let root = tree_root(&leaves);
    let key = deep_absent(&leaves, 3);
    let mut p = prove(&leaves, &key);
    p.terminal = Terminal::Empty;
    assert_eq!(p.verify_path(&root, &key), Err(VerifyError::EmptyWithSiblings));
    assert_eq!(Proof::from_bytes(&p.to_bytes()), Err(DecodeError::EmptyWithSiblings));
    #[cfg(feature = "json")]
    assert_eq!(Proof::from_json_str(&p.to_json_string()), Err(aldb_verify::JsonError::EmptyWithSiblings));

    // The empty tree's honest proof proves nothing about a non-empty tree.
    let empty = prove(&[], &key);
    assert_eq!(empty.verify_path(&EMPTY_ROOT, &key), Ok(Claim::Absent));
    assert_eq!(empty.verify_path(&root, &key), Err(VerifyError::RootMismatch));
}

#[test]
fn round_trips_are_exact() {
    for leaves in trees() {
        let keys = leaves.iter().map(|(p, _)| *p).chain((0..20).map(|i| key_path(&pubkey(6_000_000 + i))));
        for key in keys {
            let proof = prove(&leaves, &key);
            let bytes = proof.to_bytes();
            assert_eq!(bytes.len(), proof.encoded_len());
            let decoded = Proof::from_bytes(&bytes).unwrap();
            assert_eq!(decoded, proof);
            assert_eq!(decoded.to_bytes(), bytes);

            #[cfg(feature = "json")]
            {
                let value = proof.to_json_value();
                let parsed = Proof::from_json_value(&value).unwrap();
                assert_eq!(parsed, proof);
                assert_eq!(parsed.to_json_value(), value);
                let text = proof.to_json_string();
                assert_eq!(Proof::from_json_str(&text).unwrap(), proof);
                assert_eq!(Proof::from_json_str(&text).unwrap().to_json_string(), text);
                let pretty = serde_json::to_string_pretty(&value).unwrap();
                assert_eq!(Proof::from_json_str(&pretty).unwrap(), proof);
            }
        }
    }
}

/// A runner that draws the same cases on every run and machine, and writes no files.
fn runner(cases: u32, seed: u8) -> TestRunner {
    let config = Config { cases, rng_algorithm: RngAlgorithm::ChaCha, failure_persistence: None, ..Config::default() };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &[seed; 32]))
}

/// Encodings of real proofs: the starting points for mutations that get past the header.
fn real_encodings() -> Vec<Vec<u8>> {
    let leaves = tree(1000, 3);
    let mut out = vec![prove(&[], &[0; 32]).to_bytes()];
    out.push(prove(&leaves, &deep_present(&leaves, 8)).to_bytes());
    out.push(prove(&leaves, &deep_absent(&leaves, 8)).to_bytes());
    out
}

fn check_bytes(bytes: &[u8]) -> Result<(), TestCaseError> {
    if let Ok(p) = Proof::from_bytes(bytes) {
        prop_assert_eq!(p.to_bytes(), bytes.to_vec());
        // Verification must not panic on anything the decoder lets through either.
        let _ = p.verify_path(&[0; 32], &[0; 32]);
    }
    Ok(())
}

#[test]
fn arbitrary_bytes_never_panic_the_decoder() {
    runner(512, 1).run(&proptest::collection::vec(any::<u8>(), 0..600), |b| check_bytes(&b)).unwrap();
    // Mostly-valid inputs: a real encoding with a few bytes overwritten, and cut or extended.
    let seeds = real_encodings();
    let mutated =
        (0..seeds.len(), proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4), any::<usize>(), 0..3u8);
    runner(512, 2)
        .run(&mutated, |(which, edits, cut, mode)| {
            let mut b = seeds[which].clone();
            for (at, byte) in edits {
                let at = at % b.len();
                b[at] = byte;
            }
            match mode {
                0 => b.truncate(cut % (b.len() + 1)),
                1 => b.extend(std::iter::repeat_n(0u8, cut % 40)),
                _ => {}
            }
            check_bytes(&b)
        })
        .unwrap();
}

#[cfg(feature = "json")]
mod json {
    use super::*;
    use aldb_verify::{hash_from_base58, hash_to_base58};

    fn check_text(text: &str) -> Result<(), TestCaseError> {
        if let Ok(p) = Proof::from_json_str(text) {
            // Whatever is accepted means the same after a trip through its canonical form.
            prop_assert_eq!(Proof::from_json_str(&p.to_json_string()), Ok(p.clone()));
            let _ = p.verify_path(&[0; 32], &[0; 32]);
        }
        Ok(())
    }

    #[test]
    fn arbitrary_strings_never_panic_the_parser() {
        runner(512, 3).run(&any::<String>(), |s| check_text(&s)).unwrap();
        runner(256, 4).run(&"[\\[\\]{}\":,0-9a-zA-Z .-]{0,200}", |s| check_text(&s)).unwrap();
        // Mostly-valid inputs: real JSON proofs with a few characters replaced, cut or repeated.
        let seeds: Vec<String> =
            real_encodings().iter().map(|b| Proof::from_bytes(b).unwrap().to_json_string()).collect();
        let pieces = prop_oneof![
            Just("\"".to_string()),
            Just("1".to_string()),
            Just("256".to_string()),
            Just("-1".to_string()),
            Just("{}".to_string()),
            Just("null".to_string()),
            Just("\"empty\"".to_string()),
            Just(",\"x\":0".to_string()),
            "[0-9a-zA-Z]{1,3}",
        ];
        let mutated = (0..seeds.len(), proptest::collection::vec((any::<usize>(), any::<usize>(), pieces), 1..4));
        runner(1024, 5)
            .run(&mutated, |(which, edits)| {
                let mut s = seeds[which].clone().into_bytes();
                for (at, len, piece) in edits {
                    let at = at % (s.len() + 1);
                    let end = (at + len % 8).min(s.len());
                    s.splice(at..end, piece.into_bytes());
                }
                // The pieces are ASCII and so is the seed, so this is always valid UTF-8.
                check_text(&String::from_utf8(s).unwrap())
            })
            .unwrap();
    }

    #[test]
    fn base58_round_trips_and_agrees_with_the_bs58_crate() {
        runner(512, 6)
            .run(&any::<[u8; 32]>(), |h| {
                let text = hash_to_base58(&h);
                prop_assert_eq!(hash_from_base58(&text), Ok(h));
                Ok(())
            })
            .unwrap();
        runner(1024, 7)
            .run(&"[1-9A-Za-z]{0,46}", |text| {
                let ours = hash_from_base58(&text).ok();
                let theirs = bs58::decode(&text).into_vec().ok().and_then(|v| <Hash>::try_from(v.as_slice()).ok());
                prop_assert_eq!(ours, theirs);
                Ok(())
            })
            .unwrap();
    }

    #[test]
    fn exact_json_shape_of_a_real_proof() {
        let leaves = tree(64, 1);
        let key = deep_present(&leaves, 3);
        let proof = prove(&leaves, &key);
        let Terminal::Leaf { path, value } = proof.terminal else { panic!("inclusion") };
        let siblings: Vec<serde_json::Value> = proof
            .siblings
            .iter()
            .map(|s| serde_json::json!({"depth": s.depth, "hash": hash_to_base58(&s.hash)}))
            .collect();
        let expected = serde_json::json!({
            "version": 1,
            "siblings": siblings,
            "terminal": {"kind": "leaf", "path": hash_to_base58(&path), "value": hash_to_base58(&value)},
        });
        assert_eq!(proof.to_json_value(), expected);
    }
}
