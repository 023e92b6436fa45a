//! Every frozen bank's root equals the naive root of its chain's state, over seeded fork trees.

use std::collections::BTreeMap;

use aldb_bank::{BankError, BankRoots};
use aldb_testkit::{State, apply, naive_root, random::bank_writes, refs};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[test]
fn every_bank_of_a_fork_tree_has_its_chains_root() -> Result<(), BankError> {
    for seed in 0..4u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut roots = BankRoots::new(1 + seed as usize % 3);
        let genesis = bank_writes(&mut rng, &State::new(), 300);
        let mut base = State::new();
        apply(&mut base, &genesis);
        assert_eq!(roots.build_base(0, &refs(&genesis))?, naive_root(&base));

        // slot -> (parent, state); banks fork from any frozen bank.
        let mut banks: BTreeMap<u64, (u64, State)> = BTreeMap::from([(0, (0, base))]);
        for slot in 1..40u64 {
            let parents: Vec<u64> = banks.keys().copied().collect();
            let parent = if rng.random_bool(0.7) { slot - 1 } else { parents[rng.random_range(0..parents.len())] };
            let Some((_, parent_state)) = banks.get(&parent) else { continue };
            let mut state = parent_state.clone();
            let n = rng.random_range(0..40);
            let w = bank_writes(&mut rng, &state, n);
            apply(&mut state, &w);
            let root = roots.freeze(slot, parent, &refs(&w))?;
            assert_eq!(root, naive_root(&state), "seed {seed} slot {slot} on {parent}");
            assert_eq!(roots.root_of(slot), Some(root));
            banks.insert(slot, (parent, state));
        }
        // Every bank still answers its own root after the others froze.
        for (slot, (_, state)) in &banks {
            assert_eq!(roots.root_of(*slot), Some(naive_root(state)), "seed {seed} slot {slot}");
        }
    }
    Ok(())
}

#[test]
fn rooting_drops_other_forks_and_unknown_parents_are_refused() -> Result<(), BankError> {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut roots = BankRoots::new(2);
    let w1 = bank_writes(&mut rng, &State::new(), 10);
    assert!(matches!(roots.freeze(1, 0, &refs(&w1)), Err(BankError::UnknownParent { slot: 1, parent: 0 })));
    assert!(!roots.root(0)?, "nothing is held before a base");

    let mut state = State::new();
    let g = bank_writes(&mut rng, &state, 50);
    apply(&mut state, &g);
    roots.build_base(0, &refs(&g))?;
    let a = bank_writes(&mut rng, &state, 10);
    let b = bank_writes(&mut rng, &state, 10);
    roots.freeze(1, 0, &refs(&a))?;
    roots.freeze(2, 0, &refs(&b))?;
    let mut s3 = state.clone();
    apply(&mut s3, &a);
    let c = bank_writes(&mut rng, &s3, 10);
    apply(&mut s3, &c);
    roots.freeze(3, 1, &refs(&c))?;
    assert_eq!(roots.bank_count(), 3);

    assert!(roots.root(3)?);
    assert_eq!(roots.base(), Some(3));
    assert_eq!(roots.root_of(3), Some(naive_root(&s3)));
    assert!(!roots.holds(2), "the fork off the new root is dropped");
    assert!(matches!(roots.freeze(4, 2, &refs(&c)), Err(BankError::UnknownParent { slot: 4, parent: 2 })));
    assert!(!roots.root(2)?);

    // A dead bank and its descendants go; its parent's fork carries on.
    let d = bank_writes(&mut rng, &s3, 5);
    roots.freeze(4, 3, &refs(&d))?;
    roots.freeze(5, 4, &refs(&d))?;
    assert_eq!(roots.dead(4)?, vec![4, 5]);
    let e = bank_writes(&mut rng, &s3, 5);
    let mut s6 = s3.clone();
    apply(&mut s6, &e);
    assert_eq!(roots.freeze(6, 3, &refs(&e))?, naive_root(&s6));
    Ok(())
}

#[test]
fn a_rebuilt_base_replaces_everything_and_later_entries_win() -> Result<(), BankError> {
    let mut rng = ChaCha8Rng::seed_from_u64(11);
    let mut roots = BankRoots::new(2);
    let g = bank_writes(&mut rng, &State::new(), 20);
    roots.build_base(0, &refs(&g))?;
    roots.freeze(1, 0, &refs(&g))?;

    // A pubkey listed twice: the later entry (here a deletion) wins.
    let mut dup = bank_writes(&mut rng, &State::new(), 30);
    let (k, mut a) = dup[3].clone();
    a.lamports = 0;
    dup.push((k, a));
    let mut state = State::new();
    apply(&mut state, &dup);
    assert_eq!(roots.build_base(9, &refs(&dup))?, naive_root(&state));
    assert!(!roots.holds(1) && !roots.holds(0) && roots.holds(9));
    Ok(())
}
