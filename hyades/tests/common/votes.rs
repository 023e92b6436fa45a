//! Vote evidence in the tests: four validators with real keys and the bank entries they vote on.

use aldb_fixture::votes::Voter;
use aldb_format::votes::{AldbCommitment, BankEntry};
use aldb_verify::votes::bank_hash;

/// Four validators: two vote with their node identity, two with keys of their own.
pub fn voters() -> Vec<Voter> {
    (0..4u8)
        .map(|i| {
            let voter = (i % 2 == 1).then_some([60 + i; 32]);
            Voter::new([40 + i; 32], voter, [80 + i; 32])
        })
        .collect()
}

/// A slot's `h`: any 32 bytes serve, as long as the votes carry the hash made from it.
pub fn h_of(slot: u64) -> [u8; 32] {
    let mut h = [0xAB; 32];
    h[..8].copy_from_slice(&slot.to_le_bytes());
    h
}

/// Slot `slot`'s bank entry, child of the slot before, its hash committing to `root`.
pub fn bank(slot: u64, root: [u8; 32], hard_forks: Option<u64>) -> BankEntry {
    let h = h_of(slot);
    BankEntry {
        slot,
        parent: slot.saturating_sub(1),
        bank_hash: bank_hash(&h, &root, hard_forks),
        aldb: Some(AldbCommitment { h, root }),
        hard_forks,
        next_set_hash: None,
    }
}
