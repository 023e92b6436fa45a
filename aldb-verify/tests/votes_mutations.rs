//! No byte string makes the vote chain panic: random mutations of the vectors' real vote
//! transactions (flips, insertions, deletions, truncations, splices) and random bytes are
//! decoded and tallied, and each ends in a vote or a typed error.

#![allow(clippy::expect_used)]

use aldb_verify::votes::{Validator, ValidatorSet, VoteTransaction, VoteVerifier};
use base64::Engine as _;
use proptest::prelude::*;
use serde_json::Value;

fn real_votes() -> Vec<Vec<u8>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/votes-v1.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).expect("vector file")).expect("JSON");
    v["transactions"]
        .as_array()
        .expect("transactions")
        .iter()
        .map(|t| base64::engine::general_purpose::STANDARD.decode(t["bytes"].as_str().expect("bytes")).expect("b64"))
        .collect()
}

fn set_of(votes: &[Vec<u8>]) -> ValidatorSet {
    // Every vector vote's account, with its instruction signer as voter, so mutated votes get
    // past membership and reach the later checks.
    let members: Vec<Validator> = votes
        .iter()
        .filter_map(|b| VoteTransaction::parse(b).ok())
        .map(|t| {
            let v = Validator { vote_account: t.vote_account, authorized_voter: t.instruction_signers[0], stake: 1 };
            (t.vote_account, v)
        })
        .collect::<std::collections::BTreeMap<_, _>>()
        .into_values()
        .collect();
    ValidatorSet::new(&members).expect("set")
}

#[derive(Debug, Clone)]
enum Edit {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    Truncate(usize),
    Set(usize, u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (any::<usize>(), 1u8..).prop_map(|(i, m)| Edit::Flip(i, m)),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Edit::Insert(i, b)),
        any::<usize>().prop_map(Edit::Delete),
        any::<usize>().prop_map(Edit::Truncate),
        (any::<usize>(), prop_oneof![Just(0u8), Just(0x7f), Just(0x80), Just(0xff)]).prop_map(|(i, b)| Edit::Set(i, b)),
    ]
}

fn apply(mut b: Vec<u8>, edits: &[Edit]) -> Vec<u8> {
    for e in edits {
        let n = b.len().max(1);
        match *e {
            Edit::Flip(i, m) if !b.is_empty() => b[i % n] ^= m,
            Edit::Set(i, v) if !b.is_empty() => b[i % n] = v,
            Edit::Insert(i, v) => b.insert(i % (b.len() + 1), v),
            Edit::Delete(i) if !b.is_empty() => {
                b.remove(i % n);
            }
            Edit::Truncate(i) => b.truncate(i % (b.len() + 1)),
            _ => {}
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, rng_seed: proptest::test_runner::RngSeed::Fixed(15), ..ProptestConfig::default() })]

    #[test]
    fn mutated_votes_never_panic(pick in any::<usize>(), edits in proptest::collection::vec(edit(), 1..6)) {
        let votes = real_votes();
        let set = set_of(&votes);
        let original = &votes[pick % votes.len()];
        let mutated = apply(original.clone(), &edits);
        let parsed = VoteTransaction::parse(&mutated);
        if let Ok(tx) = &parsed {
            // A change to the signed bytes must never leave every signature valid.
            if mutated[..] != original[..] && tx.verify_signatures().is_ok() {
                let orig = VoteTransaction::parse(original).expect("original parses");
                prop_assert!(tx.message == orig.message && tx.signatures == orig.signatures);
            }
        }
        let slot = parsed.as_ref().map_or(0, |t| t.tower.slot());
        let hash = parsed.as_ref().map_or([0; 32], |t| t.tower.hash);
        let tally = VoteVerifier::new(&set).tally(slot, &hash, &[mutated.as_slice(), original.as_slice()]);
        prop_assert_eq!(tally.outcomes.len(), 2);
        prop_assert!(tally.stake <= tally.total_stake);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..1400)) {
        let _ = VoteTransaction::parse(&bytes);
        let _ = aldb_verify::votes::TowerSync::decode_instruction(&bytes);
    }

    #[test]
    fn random_tower_sync_data_never_panics(body in proptest::collection::vec(any::<u8>(), 0..300), switch in any::<bool>()) {
        let mut data = if switch { 15u32 } else { 14u32 }.to_le_bytes().to_vec();
        data.extend_from_slice(&body);
        if let Ok(t) = aldb_verify::votes::TowerSync::decode_instruction(&data) {
            prop_assert!(!t.lockouts.is_empty() && t.lockouts.len() <= 31);
            prop_assert!(t.lockouts.windows(2).all(|w| w[0].slot < w[1].slot));
        }
    }
}
