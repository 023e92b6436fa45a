//! Bad and odd sequences: each is ignored or handled, counted, and never panics; memory stays
//! within the configured bound.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;

use common::{Acct, COMMITMENTS, acct};
use geyser_adapter::{
    Adapter, AdapterConfig, Commitment, Committed, IgnoreReason, Irregularity, SlotEvent, SlotStatus, SlotStatus::*,
    StatusChange, StatusKind,
};
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, RngAlgorithm, RngSeed};

fn adapter_with(commitment: Commitment, max_pending: usize) -> Adapter {
    let mut config = AdapterConfig::new(commitment, aldb_core::Config::new(1, 1, 3).expect("valid layout"));
    config.stripes = 4;
    config.max_pending_slots = max_pending;
    Adapter::new(config).expect("adapter")
}

fn st(a: &Adapter, slot: u64, parent: Option<u64>, s: SlotStatus) -> Result<(), IgnoreReason> {
    a.update_slot_status(SlotEvent::new(slot, parent, s)).map_err(|e| e.reason)
}

fn up(a: &Adapter, x: &Acct) -> Result<(), IgnoreReason> {
    a.update_account(&x.update()).map_err(|e| e.reason)
}

/// A genesis start whose base is slot 0, with no commits pending.
fn genesis(commitment: Commitment, max_pending: usize) -> Adapter {
    let a = adapter_with(commitment, max_pending);
    assert_eq!(up(&a, &acct(0, 1, 10, 1)), Ok(()));
    assert_eq!(st(&a, 1, Some(0), CreatedBank), Ok(()));
    assert_eq!(a.commit_ready().len(), 1);
    a
}

fn slots(c: &[Committed]) -> Vec<u64> {
    c.iter().map(|c| c.slot).collect()
}

#[test]
fn bad_statuses_are_ignored_with_a_reason() {
    let a = genesis(Commitment::Confirmed, 64);
    // A parent at or above its slot (the only way to write a cycle).
    assert_eq!(st(&a, 5, Some(5), CreatedBank), Err(IgnoreReason::InvalidParent));
    assert_eq!(st(&a, 5, Some(9), Processed), Err(IgnoreReason::InvalidParent));
    assert_eq!(st(&a, 5, None, CreatedBank), Err(IgnoreReason::InvalidParent));
    // Processed twice.
    assert_eq!(st(&a, 1, Some(0), Processed), Ok(()));
    assert_eq!(st(&a, 1, Some(0), Processed), Err(IgnoreReason::RepeatedProcessed));
    // A status for a slot nobody created is handled (it may be a replayed slot) and counted.
    assert_eq!(st(&a, 40, Some(39), Processed), Ok(()));
    assert_eq!(a.stats().irregular(Irregularity::UnknownSlot), 1);
    // Statuses at or below the base: routine, ignored.
    assert_eq!(st(&a, 0, None, Rooted), Err(IgnoreReason::StatusBelowBase));
    assert!(IgnoreReason::StatusBelowBase.is_routine());
    // Completed and FirstShredReceived carry nothing.
    assert_eq!(st(&a, 1, None, Completed), Ok(()));
    assert_eq!(st(&a, 99, None, FirstShredReceived), Ok(()));
    let s = a.stats();
    assert_eq!(s.ignored(IgnoreReason::InvalidParent), 3);
    assert_eq!(s.ignored(IgnoreReason::RepeatedProcessed), 1);
    assert_eq!(s.statuses_received, 10);
}

#[test]
fn updates_for_committed_and_dead_slots_are_refused_until_a_restart() {
    let a = genesis(Commitment::Confirmed, 64);
    assert_eq!(up(&a, &acct(1, 2, 5, 1)), Ok(()));
    assert_eq!(st(&a, 1, Some(0), Processed), Ok(()));
    assert_eq!(st(&a, 1, None, Confirmed), Ok(()));
    assert_eq!(slots(&a.commit_ready()), [1]);
    assert_eq!(up(&a, &acct(1, 2, 6, 2)), Err(IgnoreReason::UpdateBelowBase));
    assert_eq!(st(&a, 1, Some(0), CreatedBank), Err(IgnoreReason::StatusBelowBase));

    // Slot 2 dies after partial updates; its updates vanish and later ones are refused.
    assert_eq!(st(&a, 2, Some(1), CreatedBank), Ok(()));
    assert_eq!(up(&a, &acct(2, 3, 5, 3)), Ok(()));
    assert_eq!(st(&a, 2, Some(1), Dead), Ok(()));
    assert_eq!(up(&a, &acct(2, 3, 6, 4)), Err(IgnoreReason::UpdateForDroppedSlot));
    assert_eq!(st(&a, 2, Some(1), Processed), Err(IgnoreReason::StatusForDroppedSlot));
    assert_eq!(st(&a, 2, Some(1), Dead), Err(IgnoreReason::StatusForDroppedSlot));
    // Re-created, it starts over empty.
    assert_eq!(st(&a, 2, Some(1), CreatedBank), Ok(()));
    let v2 = acct(2, 4, 8, 5);
    assert_eq!(up(&a, &v2), Ok(()));
    assert_eq!(st(&a, 2, Some(1), Processed), Ok(()));
    assert_eq!(st(&a, 2, None, Confirmed), Ok(()));
    let c = a.commit_ready();
    let mut model = aldb_naive::NaiveState::default();
    for w in [acct(0, 1, 10, 1), acct(1, 2, 5, 1), v2] {
        w.apply(&mut model);
    }
    assert_eq!(slots(&c), [2]);
    assert_eq!(c[0].root, model.root());
    let s = a.stats();
    assert_eq!((s.slots_dropped_dead, s.slots_restarted, s.updates_discarded), (1, 1, 1));
}

#[test]
fn a_restart_voids_the_slot_and_the_children_of_its_old_version() {
    let a = genesis(Commitment::Confirmed, 64);
    assert_eq!(up(&a, &acct(1, 1, 50, 10)), Ok(()));
    assert_eq!(st(&a, 1, Some(0), Processed), Ok(()));
    // Slot 2 (old version) gets a child 3 and a grandchild 4.
    assert_eq!(st(&a, 2, Some(1), CreatedBank), Ok(()));
    assert_eq!(up(&a, &acct(2, 2, 20, 11)), Ok(()));
    assert_eq!(st(&a, 2, Some(1), Processed), Ok(()));
    assert_eq!(st(&a, 3, Some(2), CreatedBank), Ok(()));
    assert_eq!(up(&a, &acct(3, 3, 30, 12)), Ok(()));
    assert_eq!(st(&a, 3, Some(2), Processed), Ok(()));
    assert_eq!(st(&a, 4, Some(3), CreatedBank), Ok(()));
    assert_eq!(up(&a, &acct(4, 3, 40, 13)), Ok(()));
    // Slot 2 is rebuilt: its old updates and its descendants go.
    assert_eq!(st(&a, 2, Some(1), CreatedBank), Ok(()));
    let s = a.stats();
    assert_eq!((s.slots_restarted, s.slots_dropped_abandoned, s.updates_discarded), (1, 2, 3));
    assert_eq!(s.pending_slots, 2);
    assert_eq!(up(&a, &acct(3, 3, 31, 14)), Err(IgnoreReason::UpdateForDroppedSlot));
    assert_eq!(up(&a, &acct(4, 3, 41, 15)), Err(IgnoreReason::UpdateForDroppedSlot));
    // Confirming the new version commits 1 and 2 with the new contents only.
    assert_eq!(up(&a, &acct(2, 5, 21, 16)), Ok(()));
    assert_eq!(st(&a, 2, Some(1), Processed), Ok(()));
    assert_eq!(st(&a, 2, None, Confirmed), Ok(()));
    let c = a.commit_ready();
    let mut model = aldb_naive::NaiveState::default();
    for w in [acct(0, 1, 10, 1), acct(1, 1, 50, 10), acct(2, 5, 21, 16)] {
        w.apply(&mut model);
    }
    assert_eq!(slots(&c), [1, 2]);
    assert_eq!(c[1].root, model.root());
}

#[test]
fn a_dead_slot_takes_its_descendants_along() {
    let a = genesis(Commitment::Finalized, 64);
    assert_eq!(st(&a, 2, Some(1), CreatedBank), Ok(()));
    assert_eq!(st(&a, 3, Some(2), CreatedBank), Ok(()));
    assert_eq!(st(&a, 5, Some(3), CreatedBank), Ok(()));
    assert_eq!(st(&a, 2, Some(1), Dead), Ok(()));
    let s = a.stats();
    assert_eq!((s.slots_dropped_dead, s.slots_dropped_abandoned, s.pending_slots), (1, 2, 1));
    assert_eq!(up(&a, &acct(5, 1, 1, 1)), Err(IgnoreReason::UpdateForDroppedSlot));
}

#[test]
fn forks_the_chain_passes_are_dropped() {
    let a = genesis(Commitment::Confirmed, 64);
    // 1 -> {2, 3}; 3 -> 4. Confirming 2 abandons 3 and 4.
    for (slot, parent) in [(2, 1), (3, 1), (4, 3)] {
        assert_eq!(st(&a, slot, Some(parent), CreatedBank), Ok(()));
        assert_eq!(up(&a, &acct(slot, slot as u8, 1, slot)), Ok(()));
        assert_eq!(st(&a, slot, Some(parent), Processed), Ok(()));
    }
    assert_eq!(st(&a, 1, Some(0), Processed), Ok(()));
    assert_eq!(st(&a, 2, None, Confirmed), Ok(()));
    assert_eq!(slots(&a.commit_ready()), [1, 2]);
    let s = a.stats();
    assert_eq!((s.slots_dropped_abandoned, s.pending_slots, s.updates_discarded), (2, 0, 2));
    // Late events of the abandoned fork.
    assert_eq!(up(&a, &acct(3, 9, 1, 9)), Err(IgnoreReason::UpdateForDroppedSlot));
    assert_eq!(up(&a, &acct(2, 9, 1, 9)), Err(IgnoreReason::UpdateBelowBase));
    assert_eq!(st(&a, 5, Some(4), CreatedBank), Ok(()));
    assert_eq!(up(&a, &acct(5, 9, 1, 9)), Err(IgnoreReason::UpdateForDroppedSlot));
}

#[test]
fn conflicting_confirmations_commit_one_fork_and_count_it() {
    let a = genesis(Commitment::Confirmed, 64);
    assert_eq!(st(&a, 1, Some(0), Processed), Ok(()));
    // Two frozen, confirmed slots whose parents are not known yet...
    for slot in [2, 3] {
        assert_eq!(st(&a, slot, None, Confirmed), Ok(()));
        assert_eq!(st(&a, slot, None, Processed), Ok(()));
    }
    // ...until their SlotHashes writes name slot 1 for both: both become ready at once.
    for (slot, wv) in [(2, 5), (3, 6)] {
        assert_eq!(up(&a, &common::slot_hashes(slot, 1, wv)), Ok(()));
    }
    assert_eq!(slots(&a.commit_ready()), [1, 2]);
    assert_eq!(a.stats().irregular(Irregularity::ConflictingForks), 1);
    assert_eq!(a.stats().slots_dropped_abandoned, 1);
    // The cluster roots a slot off the committed chain: counted, and the slot is dropped.
    assert_eq!(st(&a, 6, Some(1), Rooted), Ok(()));
    assert_eq!(a.stats().irregular(Irregularity::RootedOffChain), 1);
    assert_eq!(a.stats().pending_slots, 0);
}

#[test]
fn confirmation_before_the_bank_exists_is_remembered() {
    let a = genesis(Commitment::Confirmed, 64);
    assert_eq!(st(&a, 3, None, Confirmed), Ok(()));
    assert!(a.commit_ready().is_empty());
    // The bank appears: its parent 1 is confirmed through it, and complete since it has a child.
    assert_eq!(st(&a, 3, Some(1), CreatedBank), Ok(()));
    assert_eq!(slots(&a.commit_ready()), [1]);
    assert_eq!(up(&a, &acct(3, 2, 3, 1)), Ok(()));
    // Slot 1's own Processed comes later through agave's notification thread: routine.
    assert_eq!(st(&a, 1, Some(0), Processed), Err(IgnoreReason::StatusBelowBase));
    assert!(a.commit_ready().is_empty(), "3 is not frozen yet");
    assert_eq!(st(&a, 3, Some(1), Processed), Ok(()));
    assert_eq!(slots(&a.commit_ready()), [3]);
}

#[test]
fn pending_slots_stay_within_the_bound_when_nothing_commits() {
    let max = 8;
    let a = genesis(Commitment::Confirmed, max);
    // A long chain that is processed but never confirmed.
    for slot in 2..60u64 {
        assert_eq!(st(&a, slot, Some(slot - 1), CreatedBank), Ok(()));
        let _ = up(&a, &acct(slot, 1, slot, slot));
        let _ = st(&a, slot, Some(slot - 1), Processed);
        assert!(a.stats().pending_slots <= max as u64);
    }
    let s = a.stats();
    assert!(s.slots_dropped_overflow > 0);
    assert!(a.commit_ready().is_empty());
    // Once the lowest were dropped, their descendants can never commit: the stall is visible.
    assert_eq!(st(&a, 59, None, Confirmed), Err(IgnoreReason::StatusForDroppedSlot));
    assert!(a.commit_ready().is_empty());
    assert_eq!(a.stats().base_slot, Some(0));
}

#[test]
fn slots_with_updates_but_no_status_count_toward_the_bound() {
    let a = genesis(Commitment::Confirmed, 8);
    // Updates for many slots nobody announces (a replay that never links up).
    for slot in 10..40u64 {
        assert_eq!(up(&a, &acct(slot, 1, slot, slot)), Ok(()));
    }
    assert!(a.commit_ready().is_empty());
    let s = a.stats();
    assert!(s.pending_slots <= 8, "{s:?}");
    assert!(s.slots_dropped_overflow >= 22 && s.updates_discarded >= 22, "{s:?}");
}

#[test]
fn statuses_before_any_base_do_not_commit() {
    // No genesis accounts, no startup: a validator that is neither. Nothing is committed and
    // memory stays bounded.
    let a = adapter_with(Commitment::Confirmed, 4);
    for slot in 10..30u64 {
        let _ = st(&a, slot, Some(slot - 1), CreatedBank);
        let _ = up(&a, &acct(slot, 1, 1, slot));
        let _ = st(&a, slot, Some(slot - 1), Processed);
        let _ = st(&a, slot, None, Confirmed);
    }
    assert!(a.commit_ready().is_empty());
    assert!(a.stats().pending_slots <= 4);
}

#[derive(Clone, Debug)]
enum Op {
    Account { slot: u64, key: u8, lamports: u64, wv: u64, startup: bool },
    Status { slot: u64, parent: Option<u64>, status: u8 },
    EndOfStartup,
    Commit,
    Block { slot: u64, height: Option<u64> },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..24, 0u8..6, 0u64..3, 0u64..20, prop::bool::weighted(0.05))
            .prop_map(|(slot, key, lamports, wv, startup)| Op::Account { slot, key, lamports, wv, startup }),
        // Mostly plausible parents (one or two below), sometimes none or anything at all.
        4 => (0u64..24, 0u8..10, 0u64..26, 0u8..7).prop_map(|(slot, how, any, status)| {
            let parent = match how {
                0..=6 => Some(slot.saturating_sub(1 + u64::from(how % 2))),
                7 => None,
                _ => Some(any),
            };
            Op::Status { slot, parent, status }
        }),
        1 => Just(Op::EndOfStartup),
        1 => Just(Op::Commit),
        1 => (0u64..24, prop::option::weighted(0.9, 0u64..50)).prop_map(|(slot, height)| Op::Block { slot, height }),
    ]
}

const STATUSES: [SlotStatus; 7] = [CreatedBank, Processed, Confirmed, Rooted, Dead, Completed, FirstShredReceived];

proptest! {
    #![proptest_config(PtConfig {
        cases: 200,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        rng_seed: RngSeed::Fixed(0xbad5e9),
        ..PtConfig::default()
    })]

    /// Arbitrary event soup: no panic, the bound holds, and whatever commits forms one chain.
    #[test]
    fn arbitrary_sequences_never_panic(ops in prop::collection::vec(op(), 0..160), which in 0usize..3) {
        let commitment = COMMITMENTS[which];
        let a = adapter_with(commitment, 6);
        let mut committed = Vec::new();
        let mut changes = Vec::new();
        for o in &ops {
            match *o {
                Op::Account { slot, key, lamports, wv, startup } => {
                    let x = Acct { is_startup: startup, ..acct(slot, key, lamports, wv) };
                    let _ = a.update_account(&x.update());
                }
                Op::Status { slot, parent, status } => {
                    let s = STATUSES[usize::from(status) % STATUSES.len()];
                    let _ = a.update_slot_status(SlotEvent::new(slot, parent, s));
                }
                Op::EndOfStartup => {
                    let _ = a.end_of_startup();
                }
                Op::Commit => {
                    committed.extend(a.commit_ready());
                    changes.extend(a.take_status_changes());
                }
                Op::Block { slot, height } => {
                    let _ = a.block_metadata(slot, [slot as u8; 32], height);
                }
            }
            prop_assert!(a.stats().pending_slots <= 6);
        }
        loop {
            let c = a.commit_ready();
            let s = a.take_status_changes();
            if c.is_empty() && s.is_empty() {
                break;
            }
            committed.extend(c);
            changes.extend(s);
        }
        if commitment == Commitment::Processed {
            // Forks: every freeze is on a parent frozen before it, and the confirmed and
            // finalized changes each form one chain.
            for c in committed.iter().skip(1) {
                let p = c.parent.expect("a parent");
                prop_assert!(p < c.slot && committed.iter().any(|x| x.slot == p));
            }
            for kind in [StatusKind::Confirmed, StatusKind::Finalized] {
                let chain: Vec<&StatusChange> = changes.iter().filter(|c| c.kind == kind).collect();
                for w in chain.windows(2) {
                    prop_assert_eq!(w[1].parent, Some(w[0].slot));
                }
            }
            let s = a.stats();
            prop_assert!(s.forks.banks_held <= 6, "{:?}", s.forks);
            prop_assert_eq!(s.queued_commits, 0);
        } else {
            prop_assert!(changes.is_empty());
            for w in committed.windows(2) {
                prop_assert_eq!(w[1].parent, Some(w[0].slot));
                prop_assert!(w[1].slot > w[0].slot);
            }
        }
        prop_assert!(committed.iter().skip(1).all(|c| c.parent.is_some()));
        // A commit only ever carries its own slot's block metadata.
        prop_assert!(committed.iter().all(|c| c.block.is_none_or(|b| b.blockhash == [c.slot as u8; 32])));
        prop_assert_eq!(a.stats().slots_committed, committed.len() as u64);
    }
}

/// Under Processed, frozen banks are taken back when they die, restart or are passed by a root,
/// each reported abandoned with the root it was frozen with, before anything replaces it.
#[test]
fn processed_banks_are_taken_back_and_reported() {
    let a = genesis(Commitment::Processed, 64);
    let _ = a.take_status_changes();
    let freeze = |slot: u64, parent: u64, key: u8| {
        assert_eq!(st(&a, slot, Some(parent), CreatedBank), Ok(()));
        assert_eq!(up(&a, &acct(slot, key, slot, slot)), Ok(()));
        assert_eq!(st(&a, slot, Some(parent), Processed), Ok(()));
    };
    let drain = || {
        let (mut c, mut s) = (Vec::new(), Vec::new());
        loop {
            let (x, y) = (a.commit_ready(), a.take_status_changes());
            if x.is_empty() && y.is_empty() {
                return (c, s);
            }
            c.extend(x);
            s.extend(y);
        }
    };
    let kinds = |s: &[StatusChange]| s.iter().map(|c| (c.slot, c.kind)).collect::<Vec<_>>();
    // Two forks on slot 1 (1 has no bank of its own here: 2 and 3 hang from the base).
    freeze(2, 0, 2);
    freeze(3, 0, 3);
    freeze(4, 2, 4);
    freeze(5, 3, 5);
    let (c, s) = drain();
    assert_eq!(slots(&c), [2, 3, 4, 5]);
    assert!(s.is_empty());
    let roots: BTreeMap<u64, [u8; 32]> = c.iter().map(|c| (c.slot, c.root)).collect();
    assert_ne!(roots[&4], roots[&5]);
    // An update after the freeze is refused.
    assert_eq!(up(&a, &acct(4, 9, 1, 99)), Err(IgnoreReason::UpdateForFrozenSlot));
    // 5 dies: abandoned with its root; updates for it are refused.
    assert_eq!(st(&a, 5, Some(3), Dead), Ok(()));
    let (c, s) = drain();
    assert!(c.is_empty());
    assert_eq!(kinds(&s), [(5, StatusKind::Abandoned)]);
    assert_eq!(s[0].root, roots[&5]);
    // 4 restarts: the old version (and nothing else) is abandoned before the new one freezes.
    assert_eq!(st(&a, 4, Some(2), CreatedBank), Ok(()));
    assert_eq!(up(&a, &acct(4, 7, 40, 100)), Ok(()));
    assert_eq!(st(&a, 4, Some(2), Processed), Ok(()));
    let (c, s) = drain();
    assert_eq!(kinds(&s), [(4, StatusKind::Abandoned)]);
    assert_eq!(s[0].root, roots[&4]);
    assert_eq!(slots(&c), [4]);
    assert_ne!(c[0].root, roots[&4]);
    let new4 = c[0].root;
    // 4 is confirmed (and so 2), then rooted: 3 is left behind.
    assert_eq!(st(&a, 4, None, Confirmed), Ok(()));
    let (_, s) = drain();
    assert_eq!(kinds(&s), [(2, StatusKind::Confirmed), (4, StatusKind::Confirmed)]);
    assert_eq!(s[1].root, new4);
    assert_eq!(st(&a, 4, Some(2), Rooted), Ok(()));
    let (_, s) = drain();
    assert_eq!(kinds(&s), [(2, StatusKind::Finalized), (4, StatusKind::Finalized), (3, StatusKind::Abandoned)]);
    let st_ = a.stats();
    assert_eq!((st_.banks_confirmed, st_.banks_finalized, st_.banks_abandoned), (3, 3, 3));
    assert_eq!((st_.last_confirmed_slot, st_.last_finalized_slot), (Some(4), Some(4)));
    assert_eq!(st_.forks.banks_held, 0);
    assert!(st_.forks.switches > 0 && st_.forks.slots_rolled_back > 0, "{:?}", st_.forks);
    assert_eq!(st(&a, 3, Some(0), Processed), Err(IgnoreReason::StatusBelowBase));
}

/// Under Processed with no root for too long, the pending bound drops the lowest banks and the
/// engine takes them back: memory stays bounded and the stall is visible.
#[test]
fn processed_banks_stay_within_the_bound_when_nothing_roots() {
    let max = 8;
    let a = genesis(Commitment::Processed, max);
    for slot in 2..60u64 {
        assert_eq!(st(&a, slot, Some(slot - 1), CreatedBank), Ok(()));
        let _ = up(&a, &acct(slot, 1, slot, slot));
        let _ = st(&a, slot, Some(slot - 1), Processed);
        while !(a.commit_ready().is_empty() && a.take_status_changes().is_empty()) {}
        let s = a.stats();
        assert!(s.pending_slots <= max as u64 && s.forks.banks_held <= max as u64, "{s:?}");
    }
    let s = a.stats();
    assert!(s.slots_dropped_overflow > 0 && s.banks_abandoned > 0, "{s:?}");
    assert_eq!(s.queued_status_changes, 0);
}
