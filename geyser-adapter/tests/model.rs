//! Model-based test: random validator runs (fork trees of banks with random account updates,
//! delivered in the orders agave may use) must commit exactly the canonical chain, each slot
//! with the `aldb_naive` root of the full account state along it, under both commitments; under
//! `Commitment::Processed` every frozen bank, forks included, must have the naive root of its
//! chain, and the confirmed and finalized changes must give exactly what the other two commit.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{Knobs, adapter, check, check_processed, generate, run, run_log};
use geyser_adapter::{CommitKind, Commitment, StatusKind};
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, RngAlgorithm, RngSeed};

fn knobs() -> impl Strategy<Value = Knobs> {
    (
        (any::<bool>(), prop::bool::weighted(0.85), 0usize..6, any::<bool>()),
        (1usize..24, 3u8..14),
        (0u32..40, 0u32..40, 0u32..25, 20u32..90, 0u32..60),
    )
        .prop_map(
            |((genesis, end_of_startup, replay, hints), (live, keys), (fork, dead, restart, confirm, inter))| Knobs {
                genesis,
                end_of_startup,
                replay: if genesis { 0 } else { replay },
                hints,
                live,
                keys,
                fork_pct: fork,
                dead_pct: dead,
                restart_pct: restart,
                confirm_pct: confirm,
                interleave_pct: inter,
            },
        )
}

proptest! {
    #![proptest_config(PtConfig {
        cases: 400,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(0x9e75e2),
        ..PtConfig::default()
    })]

    #[test]
    fn commits_follow_the_canonical_chain_with_naive_roots(seed in any::<u64>(), k in knobs(), threads in 1usize..4) {
        let sc = generate(seed, &k);
        for commitment in [Commitment::Confirmed, Commitment::Finalized] {
            let a = adapter(commitment);
            let committed = run(&a, &sc.events, threads, seed);
            if let Err(e) = check(&sc, commitment, &committed) {
                return Err(TestCaseError::fail(format!("{e}\nknobs {k:?}\nchain {:?}", sc.chain)));
            }
            let stats = a.stats();
            prop_assert_eq!(stats.slots_committed, committed.len() as u64);
            prop_assert_eq!(stats.last_committed_slot, committed.last().map(|c| c.slot));
            prop_assert_eq!(stats.queued_commits, 0);
        }
        let a = adapter(Commitment::Processed);
        let r = run_log(&a, &sc.events, threads, seed);
        if let Err(e) = check_processed(&sc, &r) {
            return Err(TestCaseError::fail(format!("Processed: {e}\nknobs {k:?}\nchain {:?}", sc.chain)));
        }
        let stats = a.stats();
        prop_assert_eq!(stats.slots_committed, r.committed.len() as u64);
        prop_assert_eq!(stats.queued_commits, 0);
        prop_assert_eq!(stats.queued_status_changes, 0);
        prop_assert_eq!(stats.forks.freezes + 1, r.committed.len() as u64, "the base is not a freeze");
        prop_assert_eq!(stats.freezes_refused, 0);
    }
}

/// A few long runs with many forks, on fixed seeds.
#[test]
fn long_runs_on_fixed_seeds() {
    for seed in 0..10u64 {
        let k = Knobs {
            genesis: seed % 2 == 0,
            end_of_startup: true,
            replay: if seed % 2 == 0 { 0 } else { 8 },
            hints: seed % 3 != 0,
            live: 120,
            keys: 24,
            fork_pct: 30,
            dead_pct: 30,
            restart_pct: 10,
            confirm_pct: 50,
            interleave_pct: 40,
        };
        let sc = generate(seed, &k);
        for commitment in [Commitment::Confirmed, Commitment::Finalized] {
            let a = adapter(commitment);
            let committed = run(&a, &sc.events, 1 + (seed as usize % 3), seed);
            if let Err(e) = check(&sc, commitment, &committed) {
                panic!("seed {seed}: {e}");
            }
            // `run` checked each commit's block metadata; both outcomes occur, and are counted.
            let slots = committed.iter().filter(|c| c.kind == CommitKind::Slot);
            let without = slots.clone().filter(|c| c.block.is_none()).count() as u64;
            assert!(slots.clone().any(|c| c.block.is_some()), "seed {seed}: no commit carried block metadata");
            assert!(without > 0, "seed {seed}: every commit carried block metadata");
            assert_eq!(a.stats().slots_without_block, without);
        }
        let a = adapter(Commitment::Processed);
        let r = run_log(&a, &sc.events, 1 + (seed as usize % 3), seed);
        if let Err(e) = check_processed(&sc, &r) {
            panic!("seed {seed}, Processed: {e}");
        }
        // Forks were frozen and taken back, and the engine rolled back to reach them.
        let stats = a.stats();
        assert!(stats.banks_abandoned > 0, "seed {seed}: no bank abandoned");
        assert!(stats.forks.slots_rolled_back > 0 && stats.forks.switches > 0, "seed {seed}: {:?}", stats.forks);
        assert_eq!(stats.banks_confirmed, r.changes.iter().filter(|c| c.kind == StatusKind::Confirmed).count() as u64);
    }
}
