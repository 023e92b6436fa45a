//! Vote-evidence logs for the tests: banks that commit to a root and segments of a few slots.

use aldb_format::votes::{AldbCommitment, BankEntry, VoteLogOptions};

/// Segments of a few slots, so a short history spans several.
pub fn log_options() -> VoteLogOptions {
    VoteLogOptions { segment_bytes: 64 << 20, segment_slots: 4 }
}

/// Slot `slot`'s bank, committing to a root derived from the slot.
pub fn bank(slot: u64) -> BankEntry {
    let mut h = [0xAB; 32];
    h[..8].copy_from_slice(&slot.to_le_bytes());
    let root = [slot as u8 ^ 0x55; 32];
    BankEntry {
        slot,
        parent: slot.saturating_sub(1),
        bank_hash: aldb_verify::votes::bank_hash(&h, &root, None),
        aldb: Some(AldbCommitment { h, root }),
        hard_forks: None,
        next_set_hash: None,
    }
}
