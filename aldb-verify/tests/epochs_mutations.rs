//! The epoch chain under random input: set encodings and members, schedules, mutated
//! transitions and random sequences of the vectors' steps. Nothing panics, a changed set never
//! keeps its hash, a mutated transition never moves the client to another set, and a refusal
//! never changes the client.

#![cfg(feature = "json")]
#![allow(clippy::expect_used)]

use aldb_verify::epochs::{Checkpoint, EpochError, EpochSchedule, EpochSet, LightClient, SlotEvidence, Transition};
use aldb_verify::votes::Validator;
use proptest::prelude::*;
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/epochs-v1.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("vector file")).expect("vector JSON")
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}

fn set_encodings() -> Vec<Vec<u8>> {
    vectors()["sets"].as_array().expect("sets").iter().map(|c| hex(c["encoding"].as_str().expect("hex"))).collect()
}

fn scenario(name: &str) -> Value {
    vectors()["scenarios"].as_array().expect("scenarios").iter().find(|s| s["name"] == name).expect("scenario").clone()
}

fn member() -> impl Strategy<Value = Validator> {
    // Few distinct first bytes, so duplicates and ties are common.
    (0u8..6, any::<[u8; 32]>(), prop_oneof![Just(0u64), 1u64..1000, Just(u64::MAX / 3), Just(u64::MAX)]).prop_map(
        |(first, mut key, stake)| {
            key[0] = first;
            Validator { vote_account: key, authorized_voter: key, stake }
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, rng_seed: proptest::test_runner::RngSeed::Fixed(11), ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        if let Ok(set) = EpochSet::decode(&bytes) {
            prop_assert_eq!(set.encode(), bytes);
        }
    }

    #[test]
    fn sets_are_one_encoding(members in proptest::collection::vec(member(), 0..8), epoch in any::<u64>(), extra in 0u64..3, seed in any::<u64>()) {
        let sum: u128 = members.iter().map(|m| u128::from(m.stake)).sum();
        let total = u64::try_from(sum + u128::from(extra)).unwrap_or(u64::MAX);
        match EpochSet::new(epoch, total, &members) {
            Ok(set) => {
                let again = EpochSet::decode(&set.encode()).expect("its own encoding decodes");
                prop_assert_eq!(&again, &set);
                // Any order of the same members is the same set.
                let mut shuffled = members.clone();
                let n = shuffled.len();
                for i in 0..n {
                    shuffled.swap(i, (seed as usize).wrapping_mul(i + 7) % n);
                }
                prop_assert_eq!(EpochSet::new(epoch, total, &shuffled).expect("same members"), set);
            }
            Err(e) => {
                // Each refusal is for a reason the members really have.
                let dup = members.iter().enumerate().any(|(i, a)| members[..i].iter().any(|b| b.vote_account == a.vote_account));
                let ok = match e.name() {
                    "empty" => members.is_empty(),
                    "duplicate_vote_account" => dup,
                    "zero_stake" => members.iter().any(|m| m.stake == 0),
                    "stake_exceeds_total" => sum > u128::from(total),
                    _ => false,
                };
                prop_assert!(ok, "{:?} for {:?}", e, members);
            }
        }
    }

    #[test]
    fn a_changed_encoding_is_another_set(pick in any::<usize>(), at in any::<usize>(), flip in 1u8..) {
        let sets = set_encodings();
        let original = &sets[pick % sets.len()];
        let mut bytes = original.clone();
        let i = at % bytes.len();
        bytes[i] ^= flip;
        if let Ok(set) = EpochSet::decode(&bytes) {
            prop_assert_ne!(set.hash(), EpochSet::decode(original).expect("vector set").hash());
            prop_assert_eq!(set.encode(), bytes);
        }
    }

    #[test]
    fn schedule_epochs_tile_the_slots(spe in 32u64..2_000_000, warmup in any::<bool>(), epoch in 0u64..100_000) {
        let s = EpochSchedule::new(spe, spe, warmup).expect("schedule");
        let first = s.first_slot(epoch).expect("first slot");
        let next = s.first_slot(epoch + 1).expect("next first slot");
        prop_assert!(first < next);
        prop_assert_eq!(s.epoch(first), epoch);
        prop_assert_eq!(s.epoch(next - 1), epoch);
        // With the default offset every bank binds the next set from the epoch's first slot.
        prop_assert_eq!(s.next_set_from(epoch), Some(first));
        prop_assert_eq!(s.leader_schedule_epoch(first), epoch + 1);
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Stake(usize, u64),
    H(usize),
    Root(usize),
    Slot(u64),
    HardForks(u64),
    NextSetHash(usize),
    VoteByte(usize, usize, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1u64..1000).prop_map(|(i, d)| Mutation::Stake(i, d)),
        any::<usize>().prop_map(Mutation::H),
        any::<usize>().prop_map(Mutation::Root),
        (1u64..200).prop_map(Mutation::Slot),
        (1u64..4).prop_map(Mutation::HardForks),
        any::<usize>().prop_map(Mutation::NextSetHash),
        (any::<usize>(), any::<usize>(), 1u8..).prop_map(|(v, i, m)| Mutation::VoteByte(v, i, m)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, rng_seed: proptest::test_runner::RngSeed::Fixed(27), ..ProptestConfig::default() })]

    #[test]
    fn a_mutated_transition_never_moves_to_another_set(m in mutation()) {
        let sc = scenario("follow");
        let step = sc["steps"].as_array().expect("steps").iter().find(|s| s["name"] == "to_epoch_1").expect("step").clone();
        let genuine = Transition::from_json_value(&step["transition"]).expect("transition");
        let mut t = genuine.clone();
        match m {
            Mutation::Stake(i, d) => {
                let mut members = t.set.members().to_vec();
                let n = members.len();
                members[i % n].stake += d;
                t.set = EpochSet::new(t.set.epoch(), t.set.total_stake() + 2000, &members).expect("a bigger set");
            }
            Mutation::H(i) => t.evidence.h[i % 32] ^= 1,
            Mutation::Root(i) => t.evidence.root[i % 32] ^= 0x80,
            Mutation::Slot(d) => t.evidence.slot += d,
            Mutation::HardForks(n) => t.evidence.hard_forks = Some(n),
            Mutation::NextSetHash(i) => t.evidence.next_set_hash[i % 32] ^= 1,
            Mutation::VoteByte(v, i, x) => {
                let n = t.evidence.votes.len();
                let vote = &mut t.evidence.votes[v % n];
                let len = vote.len();
                vote[i % len] ^= x;
            }
        }
        let mut client = LightClient::new(Checkpoint::from_json_value(&sc["checkpoint"]).expect("checkpoint")).expect("client");
        let before = client.clone();
        match client.advance(&t, step["now"].as_i64().expect("now")) {
            Ok(_) => prop_assert_eq!(client.newest().set.hash(), genuine.set.hash()),
            Err(e) => {
                prop_assert!(!matches!(e, EpochError::Misbehaviour(_)));
                prop_assert_eq!(client, before);
            }
        }
    }
}

enum Op {
    Advance(Transition),
    Root(SlotEvidence),
}

fn all_ops() -> Vec<Op> {
    let v = vectors();
    let mut out = Vec::new();
    for sc in v["scenarios"].as_array().expect("scenarios") {
        for step in sc["steps"].as_array().expect("steps") {
            match step["op"].as_str() {
                // The transition of 4097 votes is refused as it is read; the rest are ops.
                Some("advance") => out.extend(Transition::from_json_value(&step["transition"]).ok().map(Op::Advance)),
                Some("accept_root") => out.push(Op::Root(SlotEvidence::from_json_value(&step["evidence"]).expect("e"))),
                _ => {}
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, rng_seed: proptest::test_runner::RngSeed::Fixed(33), ..ProptestConfig::default() })]

    #[test]
    fn refusals_change_nothing_and_a_frozen_client_stays_frozen(
        order in proptest::collection::vec((any::<usize>(), 0i64..1_000_000), 1..40)
    ) {
        let ops = all_ops();
        let sc = scenario("follow");
        let mut client = LightClient::new(Checkpoint::from_json_value(&sc["checkpoint"]).expect("checkpoint")).expect("client");
        let t0 = 1_760_000_000i64;
        for (pick, dt) in order {
            let before = client.clone();
            let now = t0 + dt;
            let result = match &ops[pick % ops.len()] {
                Op::Advance(t) => client.advance(t, now).map(|_| ()),
                Op::Root(e) => client.accept_root(e, now).map(|_| ()),
            };
            match result {
                Ok(()) => prop_assert!(before.misbehaviour().is_none()),
                Err(EpochError::Misbehaviour(kind)) => {
                    let m = client.misbehaviour().expect("frozen");
                    prop_assert_eq!(m.kind, kind);
                    prop_assert_eq!(aldb_verify::epochs::verify_misbehaviour(m, Some(&m.set.hash())), Ok(kind));
                }
                Err(e) => {
                    prop_assert_eq!(&client, &before, "{:?} changed the client", e);
                    if before.misbehaviour().is_some() {
                        prop_assert_eq!(e, EpochError::Frozen);
                    }
                }
            }
            // Whatever happened, the state is one a caller can store and restore.
            prop_assert_eq!(LightClient::from_state(client.state().clone()).expect("restores"), client.clone());
        }
    }
}
