//! The validator's word on each frozen bank (its bank hash, and what else it said of the bank)
//! beside the root the pipeline was given for the slot, from two threads: the front end reports
//! the bank when the validator describes it, the pipeline asks when it makes the slot's records,
//! in either order. Records then carry the bank hash.
//!
//! When the validator also said which aldb root it mixed into the bank hash (the geyser plugin
//! reading block metadata V0_0_5), whichever comes second compares it with the root the
//! pipeline committed. A mismatch means the two trees disagree about the slot's state: an error
//! line and a metric, never a panic, and the committed root stays what it is.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};

use aldb_verify::record::BlockInfo;
use aldb_verify::spec::Hash;

use crate::evidence::EvidenceCounters;

/// What the validator said of a frozen bank.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Frozen {
    /// The slot's own bank hash.
    pub bank_hash: Hash,
    /// The aldb root mixed into it, when the validator said (and so it is checked).
    pub aldb_root: Option<Hash>,
    /// The bank's block, when the validator said.
    pub block: Option<BlockInfo>,
    /// The parent bank's hash, when the validator said.
    pub parent_bank_hash: Option<Hash>,
}

#[derive(Default)]
struct Sides {
    /// Frozen banks, and whether their root was compared yet. Kept after the comparison: a slot
    /// gets several records (`confirmed`, then `finalized`), each with the bank hash.
    frozen: BTreeMap<u64, (Frozen, bool)>,
    /// Roots committed before the validator's word on the slot came.
    committed: BTreeMap<u64, Hash>,
}

/// Shared by the front end and the pipeline; see the [module documentation](self).
pub struct BankHashes {
    sides: Mutex<Sides>,
    /// Slots remembered on either side until the other comes.
    max_slots: usize,
    counters: Arc<EvidenceCounters>,
    /// The front end's name, for log lines.
    name: &'static str,
}

impl std::fmt::Debug for BankHashes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BankHashes").field("max_slots", &self.max_slots).finish_non_exhaustive()
    }
}

fn bound<V>(m: &mut BTreeMap<u64, V>, max: usize) {
    while m.len() > max {
        m.pop_first();
    }
}

impl BankHashes {
    /// Remembers at most `max_slots` slots on either side (a slot that never commits, on a dead
    /// fork, ages out); counts comparisons in `counters`.
    pub fn new(max_slots: usize, counters: Arc<EvidenceCounters>, name: &'static str) -> Self {
        Self { sides: Mutex::new(Sides::default()), max_slots, counters, name }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sides> {
        self.sides.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The validator froze `slot` (one short lock: callable from a validator callback). A bank
    /// frozen again (a replaced block) replaces what was known of it.
    pub fn frozen(&self, slot: u64, f: Frozen) {
        let mut s = self.lock();
        let checked = match s.committed.remove(&slot) {
            Some(root) => {
                self.compare(slot, &f, &root);
                true
            }
            None => false,
        };
        s.frozen.insert(slot, (f, checked));
        bound(&mut s.frozen, self.max_slots);
    }

    /// The pipeline committed `slot` with `root` (asked for every record it makes). Returns what
    /// the validator said of the bank, when it said it first.
    pub fn committed(&self, slot: u64, root: &Hash) -> Option<Frozen> {
        let mut s = self.lock();
        match s.frozen.get_mut(&slot) {
            Some((f, checked)) => {
                let f = *f;
                if !std::mem::replace(checked, true) {
                    self.compare(slot, &f, root);
                }
                Some(f)
            }
            None => {
                s.committed.insert(slot, *root);
                bound(&mut s.committed, self.max_slots);
                None
            }
        }
    }

    /// Forgets the banks below `slot`: a new root, under which nothing is asked for again.
    pub fn forget_below(&self, slot: u64) {
        let mut s = self.lock();
        s.frozen = s.frozen.split_off(&slot);
        s.committed = s.committed.split_off(&slot);
    }

    /// Forgets everything: a new base.
    pub fn clear(&self) {
        *self.lock() = Sides::default();
    }

    fn compare(&self, slot: u64, f: &Frozen, root: &Hash) {
        let Some(theirs) = f.aldb_root else { return };
        self.counters.roots_checked.fetch_add(1, Relaxed);
        if theirs != *root {
            self.counters.root_mismatches.fetch_add(1, Relaxed);
            log::error!(
                "{}: slot {slot}: the validator mixed root {} into bank hash {}, the plugin committed root {}",
                self.name,
                base58(&theirs),
                base58(&f.bank_hash),
                base58(root),
            );
        }
    }
}

/// A hash as base58, for log lines.
pub(crate) fn base58(h: &Hash) -> String {
    bs58::encode(h).into_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plugin's bound.
    const MAX_SLOTS: usize = 4096;

    #[test]
    fn roots_are_compared_whichever_side_comes_first() {
        let counters = Arc::new(EvidenceCounters::default());
        let b = BankHashes::new(MAX_SLOTS, counters.clone(), "test");
        let f = |root: u8| Frozen { bank_hash: [root ^ 0xff; 32], aldb_root: Some([root; 32]), ..Frozen::default() };
        let hash = |f: Option<Frozen>| f.map(|f| f.bank_hash);
        b.frozen(1, f(1));
        assert_eq!(hash(b.committed(1, &[1; 32])), Some([0xfe; 32]));
        assert_eq!(hash(b.committed(2, &[2; 32])), None);
        b.frozen(2, f(9));
        b.frozen(3, Frozen { bank_hash: [3; 32], ..Frozen::default() });
        assert_eq!(hash(b.committed(3, &[7; 32])), Some([3; 32]));
        assert_eq!(counters.roots_checked.load(Relaxed), 2);
        assert_eq!(counters.root_mismatches.load(Relaxed), 1);
        // A second record of a slot gets the bank hash again, compared once.
        assert_eq!(hash(b.committed(1, &[1; 32])), Some([0xfe; 32]));
        assert_eq!(counters.roots_checked.load(Relaxed), 2);
        // Slots that never meet their other side age out.
        for slot in 10..10 + MAX_SLOTS as u64 + 5 {
            b.frozen(slot, f(0));
        }
        assert_eq!(hash(b.committed(10, &[0; 32])), None);
        assert_eq!(counters.roots_checked.load(Relaxed), 2);
    }
}
