//! Which file serves a slot, or why none does: the one answer to a slot query, for every reader
//! of published slots (a directory's [`SnapshotReader`](crate::SnapshotReader), and a replica
//! that serves the slots of a bucket).

use std::collections::BTreeMap;

use crate::error::QueryError;
use crate::reader::SlotInfo;

/// The slots a reader serves, and what it knows of the committed slots it does not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SlotIndex {
    slots: BTreeMap<u64, SlotInfo>,
    gaps: Vec<(Option<u64>, u64)>,
    newest_named: Option<u64>,
}

impl SlotIndex {
    /// The served `slots`, by slot; the `gaps` a failing writer left, each `(after, until)`: the
    /// slots strictly between were committed but never written (`after` is `None` when nothing
    /// was published before the failure); and `newest_named`, the newest slot any published file
    /// names, served or not (a slot at or below it was committed).
    pub fn new(slots: BTreeMap<u64, SlotInfo>, gaps: Vec<(Option<u64>, u64)>, newest_named: Option<u64>) -> Self {
        Self { slots, gaps, newest_named }
    }

    /// The served slot `slot`.
    pub fn get(&self, slot: u64) -> Option<&SlotInfo> {
        self.slots.get(&slot)
    }

    /// The newest served slot.
    pub fn latest(&self) -> Option<SlotInfo> {
        self.slots.values().next_back().copied()
    }

    /// The oldest served slot.
    pub fn oldest(&self) -> Option<SlotInfo> {
        self.slots.values().next().copied()
    }

    /// Served slots in `[start, end]`, oldest first.
    pub fn range(&self, start: u64, end: u64) -> Vec<SlotInfo> {
        if start > end {
            return Vec::new();
        }
        self.slots.range(start..=end).map(|(_, s)| *s).collect()
    }

    /// The slot's info (the newest served slot when `None`), or why it cannot be served.
    /// `corrupt` says why a committed slot's files are known damaged, if they are.
    ///
    /// Why a committed slot is not served comes before where it lies: "corrupt" or "not written"
    /// tells an operator to act, "pruned" or "skipped" does not. A slot `corrupt` names is
    /// corrupt even when served: a reader may find a file damaged after indexing it.
    pub fn lookup(
        &self,
        slot: Option<u64>,
        corrupt: impl FnOnce(u64) -> Option<String>,
    ) -> Result<SlotInfo, QueryError> {
        if let Some(slot) = slot {
            if let Some(reason) = corrupt(slot) {
                return Err(QueryError::Corrupt { slot, reason });
            }
            if let Some(info) = self.slots.get(&slot) {
                return Ok(*info);
            }
            if let Some(&(after, until)) = self.gaps.iter().find(|(a, u)| a.is_none_or(|a| a < slot) && slot < *u) {
                return Err(QueryError::NotWritten { slot, after, until });
            }
        }
        let (Some(oldest), Some(newest)) = (self.slots.values().next(), self.slots.values().next_back()) else {
            return Err(QueryError::NothingPublished);
        };
        let Some(slot) = slot else { return Ok(*newest) };
        if slot > newest.slot && slot > self.newest_named.unwrap_or(0) {
            return Err(QueryError::NotYetCommitted { slot, newest: newest.slot });
        }
        if slot < oldest.slot {
            return Err(QueryError::Pruned { slot, oldest: oldest.slot });
        }
        Err(QueryError::NoSnapshot { slot })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(slot: u64, seq: u32) -> SlotInfo {
        SlotInfo { slot, parent: slot.checked_sub(1), root: [slot as u8; 32], seq }
    }

    fn index() -> SlotIndex {
        let slots = [(10, 1), (12, 2), (20, 3)].into_iter().map(|(s, q)| (s, info(s, q))).collect();
        SlotIndex::new(slots, vec![(Some(12), 20)], Some(22))
    }

    #[test]
    fn every_answer_in_its_order() {
        let ix = index();
        let none = |_| None;
        assert_eq!(ix.lookup(None, none), Ok(info(20, 3)));
        assert_eq!(ix.lookup(Some(12), none), Ok(info(12, 2)));
        assert_eq!(ix.lookup(Some(11), none), Err(QueryError::NoSnapshot { slot: 11 }));
        assert_eq!(ix.lookup(Some(15), none), Err(QueryError::NotWritten { slot: 15, after: Some(12), until: 20 }));
        assert_eq!(ix.lookup(Some(9), none), Err(QueryError::Pruned { slot: 9, oldest: 10 }));
        // Named by a file (damaged or incomplete) yet not served: committed, not "not yet".
        assert_eq!(ix.lookup(Some(22), none), Err(QueryError::NoSnapshot { slot: 22 }));
        assert_eq!(ix.lookup(Some(23), none), Err(QueryError::NotYetCommitted { slot: 23, newest: 20 }));
        // A known damage comes first, even for a served slot and inside a gap.
        for slot in [12, 15, 9] {
            let reason = "file #2 is damaged".to_string();
            assert_eq!(
                ix.lookup(Some(slot), |s| (s == slot).then(|| reason.clone())),
                Err(QueryError::Corrupt { slot, reason: reason.clone() })
            );
        }
        let empty = SlotIndex::default();
        assert_eq!(empty.lookup(Some(3), none), Err(QueryError::NothingPublished));
        assert_eq!(empty.lookup(None, none), Err(QueryError::NothingPublished));
    }

    #[test]
    fn ranges_and_ends() {
        let ix = index();
        assert_eq!(ix.latest(), Some(info(20, 3)));
        assert_eq!(ix.oldest(), Some(info(10, 1)));
        assert_eq!(ix.range(11, 20), vec![info(12, 2), info(20, 3)]);
        assert_eq!(ix.range(20, 11), Vec::new());
        assert_eq!(ix.get(12), Some(&info(12, 2)));
        assert_eq!(ix.get(11), None);
    }
}
