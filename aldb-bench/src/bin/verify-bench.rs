//! Light-client cost: decoding and verifying account proofs on one core, and verifying record
//! attestations. Prints its configuration, readable lines, then one JSON line.
//!
//! The anchor, measured in the same run, is the raw rate of one-block BLAKE2s hashes on the same
//! core: a proof over N leaves costs about log2(N) + 3 of them, so `proofs_per_sec ×
//! hashes_per_proof / blake2s_per_sec` shows how much of the time is the hash itself.

use std::hint::black_box;
use std::time::Instant;

use aldb_core::{BulkBuilder, Config};
use aldb_snapshot::records::Signer;
use aldb_verify::record::{BlockInfo, Commitment, ParentLink, RootRecord};
use aldb_verify::{Claim, Proof};
use aldb_workload::{SlotAccounts, pubkey};
use anyhow::{Context, bail};
use rand::{Rng, SeedableRng};
use serde_json::json;

struct Opts {
    leaves_log2: u32,
    proofs: usize,
    rounds: usize,
    seed: u64,
}

fn parse() -> anyhow::Result<Opts> {
    let mut o = Opts { leaves_log2: 20, proofs: 20_000, rounds: 5, seed: 20240611 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut v = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--leaves-log2" => o.leaves_log2 = v()?.parse()?,
            "--proofs" => o.proofs = v()?.parse()?,
            "--rounds" => o.rounds = v()?.parse()?,
            "--seed" => o.seed = v()?.parse()?,
            "-h" | "--help" => {
                println!("verify-bench [--leaves-log2 20] [--proofs 20000] [--rounds 5] [--seed S]");
                std::process::exit(0);
            }
            other => bail!("unknown flag {other}"),
        }
    }
    if o.leaves_log2 > 26 || o.proofs == 0 || o.rounds == 0 {
        bail!("--leaves-log2 must be at most 26, --proofs and --rounds positive");
    }
    Ok(o)
}

fn main() -> anyhow::Result<()> {
    let o = parse()?;
    let n = 1u64 << o.leaves_log2;
    println!(
        "verify-bench: leaves=2^{} proofs={} rounds={} seed={} threads=1 (verification)",
        o.leaves_log2, o.proofs, o.rounds, o.seed
    );

    let mut builder =
        BulkBuilder::new(Config::for_leaves(n, std::thread::available_parallelism().map_or(1, |t| t.get())))?;
    let mut first = 0;
    while first < n {
        let count = (n - first).min(65_536) as usize;
        let chunk = SlotAccounts::prefill(o.seed, first, count, 165);
        builder.push_accounts(&chunk.refs(), (0, 0));
        first += count as u64;
    }
    let tree = builder.finish();
    let root = tree.root();

    // Half the keys present, half never created.
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(o.seed);
    let keys: Vec<[u8; 32]> =
        (0..o.proofs).map(|i| if i % 2 == 0 { pubkey(o.seed, rng.random_range(0..n)) } else { rng.random() }).collect();
    let wires: Vec<Vec<u8>> = keys.iter().map(|k| tree.prove_pubkey(k).to_bytes()).collect();
    let siblings: usize = keys.iter().map(|k| tree.prove_pubkey(k).siblings.len()).sum();
    let avg_siblings = siblings as f64 / o.proofs as f64;
    drop(tree);

    // Decode and verify, one thread.
    let mut present = 0usize;
    let t = Instant::now();
    for _ in 0..o.rounds {
        present = 0;
        for (k, w) in keys.iter().zip(&wires) {
            let proof = Proof::from_bytes(black_box(w))?;
            if let Claim::Present { .. } = proof.verify(&root, k)? {
                present += 1;
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let proofs_per_sec = (o.proofs * o.rounds) as f64 / secs;

    // Anchor: one-block BLAKE2s, the hash a proof step costs.
    let hashes = 2_000_000usize;
    let mut acc = [0u8; 32];
    let t = Instant::now();
    for i in 0..hashes {
        acc[0] = i as u8;
        acc = aldb_verify::spec::branch_hash(black_box(7), &acc, &acc);
    }
    black_box(acc);
    let blake_per_sec = hashes as f64 / t.elapsed().as_secs_f64();
    // Per proof: the key path, the leaf (inclusion or exclusion), one branch per sibling.
    let hashes_per_proof = avg_siblings + 2.0;

    // Attestations: strict ed25519 verification of a record signature.
    let signer = Signer::from_seed(&[7; 32]);
    let record = RootRecord {
        genesis_hash: [1; 32],
        slot: 1000,
        parent: Some(ParentLink { slot: 999, record_hash: Some([2; 32]), bank_hash: Some([3; 32]) }),
        commitment: Commitment::Finalized,
        state_root: root,
        block: Some(BlockInfo { blockhash: [4; 32], block_height: 900 }),
        bank_hash: None,
    };
    let att = signer.attest(&record.hash());
    let sigs = 20_000usize;
    let t = Instant::now();
    for _ in 0..sigs {
        let h = record.hash();
        att.verify(black_box(&h)).map_err(|e| anyhow::anyhow!("attestation: {e}"))?;
    }
    let records_per_sec = sigs as f64 / t.elapsed().as_secs_f64();

    println!("proofs: {present} of {} keys present, {avg_siblings:.1} siblings on average", o.proofs);
    println!("decode+verify: {proofs_per_sec:.0} proofs/s on one core");
    println!(
        "anchor blake2s one-block: {blake_per_sec:.0} hashes/s; {hashes_per_proof:.1} hashes per proof -> hash-bound ceiling {:.0} proofs/s (ratio {:.2})",
        blake_per_sec / hashes_per_proof,
        proofs_per_sec * hashes_per_proof / blake_per_sec
    );
    println!("record hash + attestation verify: {records_per_sec:.0} records/s on one core");
    println!(
        "{}",
        json!({
            "leaves": n,
            "proofs": o.proofs,
            "rounds": o.rounds,
            "avg_siblings": avg_siblings,
            "proofs_per_sec": proofs_per_sec.round(),
            "blake2s_per_sec": blake_per_sec.round(),
            "hash_efficiency": proofs_per_sec * hashes_per_proof / blake_per_sec,
            "attested_records_per_sec": records_per_sec.round(),
        })
    );
    Ok(())
}
