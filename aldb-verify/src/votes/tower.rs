//! `TowerSync` in the compact form the vote program reads (`solana-vote-interface` 6.0
//! `serde_tower_sync`, `docs/SPEC.md` §10.2).

use alloc::vec::Vec;

use super::reader::Reader;
use super::{MAX_LOCKOUTS, TAG_TOWER_SYNC, TAG_TOWER_SYNC_SWITCH, VoteError};
use crate::Hash;

/// One slot of a tower and its confirmation count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lockout {
    /// The slot voted for.
    pub slot: u64,
    /// How many votes stacked on it, as the compact form carries it (a byte).
    pub confirmation_count: u8,
}

/// A decoded `TowerSync` or `TowerSyncSwitch` instruction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TowerSync {
    /// The tower's root slot, if it has one.
    pub root: Option<u64>,
    /// The lockouts, slots strictly increasing and above the root; never empty.
    pub lockouts: Vec<Lockout>,
    /// The bank hash of the last lockout's slot.
    pub hash: Hash,
    /// The voter's clock when it voted.
    pub timestamp: Option<i64>,
    /// The block id of the last lockout's slot.
    pub block_id: Hash,
    /// `TowerSyncSwitch`'s switching proof hash.
    pub switch_hash: Option<Hash>,
}

fn bad(reason: &'static str) -> VoteError {
    VoteError::MalformedVote { reason }
}

impl TowerSync {
    /// The slot this vote is for: its last lockout's.
    pub fn slot(&self) -> u64 {
        self.lockouts.last().map_or(0, |l| l.slot)
    }

    /// Decodes a vote instruction's data. [`VoteError::NotTowerSync`] when it is another
    /// instruction; [`VoteError::MalformedVote`] when it is one but does not decode exactly.
    pub fn decode_instruction(data: &[u8]) -> Result<TowerSync, VoteError> {
        let mut r = Reader::new(data);
        let switch = match r.u32().ok_or(VoteError::NotTowerSync)? {
            TAG_TOWER_SYNC => false,
            TAG_TOWER_SYNC_SWITCH => true,
            _ => return Err(VoteError::NotTowerSync),
        };
        let root = match r.u64().ok_or(bad("truncated root"))? {
            u64::MAX => None,
            slot => Some(slot),
        };
        let n = r.short_vec().ok_or(bad("bad lockout count"))?;
        if n == 0 {
            return Err(bad("no lockouts"));
        }
        if n > MAX_LOCKOUTS {
            return Err(bad("more than 31 lockouts"));
        }
        let mut lockouts = Vec::with_capacity(n);
        let mut slot = root.unwrap_or(0);
        for i in 0..n {
            let offset = r.varint().ok_or(bad("bad lockout offset"))?;
            let confirmation_count = r.u8().ok_or(bad("truncated lockout"))?;
            // Slots strictly increase and lie above the root; only a rootless tower's first
            // offset, which is the slot itself, may be zero.
            if offset == 0 && (i > 0 || root.is_some()) {
                return Err(bad("lockout slots do not increase"));
            }
            slot = slot.checked_add(offset).ok_or(bad("lockout slot overflows"))?;
            lockouts.push(Lockout { slot, confirmation_count });
        }
        let hash = r.array().ok_or(bad("truncated hash"))?;
        let timestamp = match r.u8().ok_or(bad("truncated timestamp"))? {
            0 => None,
            1 => Some(i64::from_le_bytes(r.array().ok_or(bad("truncated timestamp"))?)),
            _ => return Err(bad("timestamp option tag is neither 0 nor 1")),
        };
        let block_id = r.array().ok_or(bad("truncated block id"))?;
        let switch_hash = if switch { Some(r.array().ok_or(bad("truncated switch proof hash"))?) } else { None };
        if !r.is_done() {
            return Err(bad("bytes after the instruction"));
        }
        Ok(TowerSync { root, lockouts, hash, timestamp, block_id, switch_hash })
    }
}
