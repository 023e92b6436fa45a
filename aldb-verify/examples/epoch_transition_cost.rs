//! What an epoch transition (`docs/SPEC.md` §11.4) costs a client: its bytes and the time to
//! check it, for sets of 1,000 and 4,000 validators that all vote.
//!
//! ```text
//! cargo run --release -p aldb-verify --example epoch_transition_cost [-- N...]
//! ```
//!
//! Each validator votes as agave's vote client does when the authorized voter is the node
//! identity (one signature, §10.3); a separate voter adds a second signature and 64 bytes per
//! vote. The time is the median of five runs of the checks a client makes on a transition: the
//! set's decoding and hash, and the votes' tally (every vote parsed, every signature verified).
//!
//! Anchor, same process: ed25519-dalek's `verify_strict` over the same votes' signatures and
//! messages and nothing else, so `ratio_vs_signatures` (check time ÷ anchor time) is the figure
//! that survives a slower or busier host: 1.0 would mean a transition costs only its signatures.
//! Ends with one JSON line.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::time::Instant;

use aldb_verify::epochs::{EpochSet, SlotEvidence};
use aldb_verify::votes::{VOTE_PROGRAM_ID, Validator};
use ed25519_dalek::{Signature, Signer, SigningKey};
use sha2::{Digest, Sha256};

fn key(label: &str, i: u32) -> SigningKey {
    let seed: [u8; 32] = Sha256::digest(format!("{label} {i}")).into();
    SigningKey::from_bytes(&seed)
}

fn varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// A one-signature TowerSync vote for `slot` and `hash` (keys: voter, vote account, vote program).
fn vote(voter: &SigningKey, vote_account: &[u8; 32], slot: u64, hash: &[u8; 32]) -> Vec<u8> {
    let mut data = 14u32.to_le_bytes().to_vec();
    data.extend_from_slice(&u64::MAX.to_le_bytes()); // no root
    data.push(1); // one lockout: the slot itself, confirmation count 1
    varint(slot, &mut data);
    data.push(1);
    data.extend_from_slice(hash);
    data.push(1);
    data.extend_from_slice(&1_760_000_000i64.to_le_bytes());
    data.extend_from_slice(&[7u8; 32]); // block id
    let mut msg = vec![1, 0, 1, 3];
    msg.extend_from_slice(voter.verifying_key().as_bytes());
    msg.extend_from_slice(vote_account);
    msg.extend_from_slice(&VOTE_PROGRAM_ID);
    msg.extend_from_slice(&[9u8; 32]); // recent blockhash
    msg.extend_from_slice(&[1, 2, 2, 1, 0]);
    msg.push(data.len() as u8); // < 128 bytes: a one-byte short_vec
    msg.extend_from_slice(&data);
    let mut tx = vec![1];
    tx.extend_from_slice(&voter.sign(&msg).to_bytes());
    tx.extend_from_slice(&msg);
    tx
}

fn main() {
    let sizes: Vec<u32> = std::env::args().skip(1).map(|a| a.parse().expect("a validator count")).collect();
    let sizes = if sizes.is_empty() { vec![1000, 4000] } else { sizes };
    println!(
        "validators set_bytes vote_bytes transition_json_bytes check_ms(median of 5) set_decode_hash_ms \
         signatures_ms(anchor) ratio_vs_signatures"
    );
    let mut rows = Vec::new();
    for n in sizes {
        let voters: Vec<SigningKey> = (0..n).map(|i| key("voter", i)).collect();
        let members: Vec<Validator> = voters
            .iter()
            .enumerate()
            .map(|(i, k)| Validator {
                vote_account: Sha256::digest(format!("vote account {i}")).into(),
                authorized_voter: *k.verifying_key().as_bytes(),
                stake: 1_000_000 + i as u64,
            })
            .collect();
        let total = members.iter().map(|m| m.stake).sum();
        let next = EpochSet::new(8, total, &members).expect("next set");
        let current = EpochSet::new(7, total, &members).expect("current set");
        let slot = 3_000_000u64;
        let mut ev = SlotEvidence {
            slot,
            h: [1; 32],
            root: [2; 32],
            hard_forks: None,
            next_set_hash: next.hash(),
            votes: Vec::new(),
        };
        let bank_hash = ev.bank_hash();
        ev.votes = voters.iter().zip(&members).map(|(k, m)| vote(k, &m.vote_account, slot, &bank_hash)).collect();
        let set_bytes = next.encode();
        let vote_bytes: usize = ev.votes.iter().map(Vec::len).sum();
        // JSON: the set's members as base58 (~44 characters a key) and the votes as base64.
        let json_bytes =
            60 * members.len() + 60 + ev.votes.iter().map(|v| v.len().div_ceil(3) * 4 + 3).sum::<usize>() + 300;
        let signed: Vec<(ed25519_dalek::VerifyingKey, Signature, &[u8])> = voters
            .iter()
            .zip(&ev.votes)
            .map(|(k, tx)| (k.verifying_key(), Signature::from_slice(&tx[1..65]).expect("64 bytes"), &tx[65..]))
            .collect();
        let mut times = Vec::new();
        let mut set_times = Vec::new();
        let mut anchor_times = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            for (vk, sig, msg) in &signed {
                vk.verify_strict(msg, sig).expect("a valid signature");
            }
            anchor_times.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let decoded = EpochSet::decode(&set_bytes).expect("decodes");
            assert_eq!(decoded.hash(), ev.next_set_hash);
            set_times.push(t.elapsed().as_secs_f64() * 1e3);
            let vouched = ev.vouch(&current).expect("vouched");
            times.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(vouched.voters, n as usize);
        }
        for t in [&mut times, &mut set_times, &mut anchor_times] {
            t.sort_by(f64::total_cmp);
        }
        let ratio = times[2] / anchor_times[2];
        println!(
            "{n} {} {vote_bytes} {json_bytes} {:.1} {:.2} {:.1} {ratio:.3}",
            set_bytes.len(),
            times[2],
            set_times[2],
            anchor_times[2]
        );
        rows.push(format!(
            "{{\"validators\":{n},\"set_bytes\":{},\"vote_bytes\":{vote_bytes},\"json_bytes\":{json_bytes},\
             \"check_ms\":{:.3},\"set_decode_hash_ms\":{:.3},\"signatures_ms\":{:.3},\"ratio_vs_signatures\":{ratio:.3}}}",
            set_bytes.len(),
            times[2],
            set_times[2],
            anchor_times[2]
        ));
    }
    println!("{{\"bench\":\"epoch-transition\",\"runs\":5,\"results\":[{}]}}", rows.join(","));
}
