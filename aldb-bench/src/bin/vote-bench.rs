//! Light-client cost of the vote chain (`docs/SPEC.md` §10): accepting a slot's root from the
//! votes of a validator set, on one core. Prints its configuration, readable lines, then one JSON
//! line.
//!
//! Each validator votes as agave 4.2.0 does: a legacy transaction paid by its node identity and
//! signed by its authorized voter (two signatures), one `TowerSync` for the slot. A chain's
//! verification decodes every vote and checks both signatures of each, so the anchor measured in
//! the same run is the raw rate of strict ed25519 verifications: `2 × validators` of them bound a
//! chain from above.

use std::hint::black_box;
use std::time::Instant;

use aldb_verify::votes::{
    TAG_TOWER_SYNC, VOTE_PROGRAM_ID, Validator, ValidatorSet, VoteTransaction, VoteVerifier, bank_hash,
};
use anyhow::{Context, bail};
use ed25519_dalek::{Signer as _, SigningKey};
use rand::{Rng, SeedableRng};
use serde_json::json;

struct Opts {
    validators: usize,
    rounds: usize,
    seed: u64,
}

fn parse() -> anyhow::Result<Opts> {
    let mut o = Opts { validators: 100, rounds: 20, seed: 20251115 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut v = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--validators" => o.validators = v()?.parse()?,
            "--rounds" => o.rounds = v()?.parse()?,
            "--seed" => o.seed = v()?.parse()?,
            "-h" | "--help" => {
                println!("vote-bench [--validators 100] [--rounds 20] [--seed S]");
                std::process::exit(0);
            }
            other => bail!("unknown flag {other}"),
        }
    }
    if o.validators == 0 || o.validators > 4096 || o.rounds == 0 {
        bail!("--validators must be in 1..=4096, --rounds positive");
    }
    Ok(o)
}

fn short_vec(n: usize, out: &mut Vec<u8>) {
    let mut n = n;
    loop {
        let b = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

/// A TowerSync vote for `slot` with `hash`, built as agave's vote client builds it.
fn vote_tx(node: &SigningKey, voter: &SigningKey, vote_account: &[u8; 32], slot: u64, hash: &[u8; 32]) -> Vec<u8> {
    let mut data = TAG_TOWER_SYNC.to_le_bytes().to_vec();
    data.extend_from_slice(&(slot - 40).to_le_bytes()); // root
    short_vec(5, &mut data);
    data.extend_from_slice(&[36, 5, 1, 4, 1, 3, 1, 2, 1, 1]); // offsets from the root, counts
    data.extend_from_slice(hash);
    data.push(1);
    data.extend_from_slice(&1_760_000_000i64.to_le_bytes());
    data.extend_from_slice(&[9; 32]); // block id
    let mut msg = vec![2, 1, 1];
    short_vec(4, &mut msg);
    for k in [node.verifying_key().to_bytes(), voter.verifying_key().to_bytes(), *vote_account, VOTE_PROGRAM_ID] {
        msg.extend_from_slice(&k);
    }
    msg.extend_from_slice(&[7; 32]); // recent blockhash
    msg.extend_from_slice(&[1, 3, 2, 2, 1]);
    short_vec(data.len(), &mut msg);
    msg.extend_from_slice(&data);
    let mut tx = vec![2];
    tx.extend_from_slice(&node.sign(&msg).to_bytes());
    tx.extend_from_slice(&voter.sign(&msg).to_bytes());
    tx.extend_from_slice(&msg);
    tx
}

fn main() -> anyhow::Result<()> {
    let o = parse()?;
    println!("vote-bench: validators={} rounds={} seed={} threads=1", o.validators, o.rounds, o.seed);
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(o.seed);
    let slot = 312_456_789u64;
    let (h, root): ([u8; 32], [u8; 32]) = (rng.random(), rng.random());
    let hash = bank_hash(&h, &root, None);
    let mut members = Vec::new();
    let mut votes = Vec::new();
    for _ in 0..o.validators {
        let node = SigningKey::from_bytes(&rng.random());
        let voter = SigningKey::from_bytes(&rng.random());
        let vote_account: [u8; 32] = rng.random();
        members.push(Validator {
            vote_account,
            authorized_voter: voter.verifying_key().to_bytes(),
            stake: rng.random_range(1..1_000_000_000_000_000),
        });
        votes.push(vote_tx(&node, &voter, &vote_account, slot, &hash));
    }
    let set = ValidatorSet::new(&members).map_err(|e| anyhow::anyhow!("{e}"))?;
    let verifier = VoteVerifier::new(&set);
    let bytes = votes.iter().map(Vec::len).sum::<usize>() / votes.len();

    let t = Instant::now();
    for _ in 0..o.rounds {
        let accepted = verifier
            .verify_root(black_box(slot), &h, &root, None, black_box(&votes))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        if accepted.voters != o.validators {
            bail!("{} of {} votes counted", accepted.voters, o.validators);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let chains_per_sec = o.rounds as f64 / secs;
    let votes_per_sec = (o.rounds * o.validators) as f64 / secs;

    // Decoding alone, no signatures.
    let decodes = 200_000usize;
    let t = Instant::now();
    for i in 0..decodes {
        let tx = VoteTransaction::parse(black_box(&votes[i % votes.len()])).map_err(|e| anyhow::anyhow!("{e}"))?;
        black_box(tx.tower.slot());
    }
    let decodes_per_sec = decodes as f64 / t.elapsed().as_secs_f64();

    // Anchor: the strict signature checks alone, two per vote.
    let parsed: Vec<VoteTransaction> = votes.iter().filter_map(|v| VoteTransaction::parse(v).ok()).collect();
    let sig_rounds = (o.rounds / 4).max(1);
    let t = Instant::now();
    for _ in 0..sig_rounds {
        for tx in &parsed {
            tx.verify_signatures().map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    let sigs_per_sec = (sig_rounds * parsed.len() * 2) as f64 / t.elapsed().as_secs_f64();
    let ceiling = sigs_per_sec / 2.0;

    println!("votes: {} bytes each, 2 signatures each; all {} counted", bytes, o.validators);
    println!(
        "vote chain: {chains_per_sec:.1} slots/s = {votes_per_sec:.0} votes/s on one core ({:.2} ms per slot)",
        1e3 / chains_per_sec
    );
    println!("decode only: {decodes_per_sec:.0} votes/s");
    println!(
        "anchor strict ed25519: {sigs_per_sec:.0} signatures/s -> ceiling {ceiling:.0} votes/s (ratio {:.2})",
        votes_per_sec / ceiling
    );
    println!(
        "{}",
        json!({
            "validators": o.validators,
            "rounds": o.rounds,
            "vote_bytes": bytes,
            "slots_per_sec": (chains_per_sec * 10.0).round() / 10.0,
            "votes_per_sec": votes_per_sec.round(),
            "decodes_per_sec": decodes_per_sec.round(),
            "ed25519_per_sec": sigs_per_sec.round(),
            "signature_efficiency": votes_per_sec / ceiling,
        })
    );
    Ok(())
}
