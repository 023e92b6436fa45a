//! The validator's word on each bank (block metadata V0_0_5: its bank hash and the aldb root it
//! mixed in) beside the plugin's own root for the slot, from two threads: the callback reports
//! the bank when it is frozen, the commit worker the root when it commits the slot, in either
//! order. Whichever comes second compares them. A mismatch means the plugin's tree and the
//! validator's disagree about the slot's state: an error line and a metric, never a panic, and
//! the plugin's root stays what it computed.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, PoisonError};

use aldb_verify::Hash;

use crate::evidence::EvidenceCounters;

/// Slots remembered on either side until the other comes (rooting lags freezing by some 32
/// slots, confirmation by a few; a slot that never commits, on a dead fork, ages out).
const MAX_SLOTS: usize = 4096;

/// What the validator said of a frozen bank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Frozen {
    /// The slot's own bank hash.
    pub(crate) bank_hash: Hash,
    /// The aldb root mixed into it, when the bank committed to one.
    pub(crate) aldb_root: Option<Hash>,
}

#[derive(Default)]
struct Sides {
    /// Frozen banks, and whether their root was compared yet. Kept after the comparison: a slot
    /// gets several records (`confirmed`, then `finalized`), each with the bank hash.
    frozen: BTreeMap<u64, (Frozen, bool)>,
    /// Roots the plugin committed before the validator's word on the slot came.
    committed: BTreeMap<u64, Hash>,
}

/// Shared by the callbacks and the commit worker.
pub(crate) struct BankRoots {
    sides: Mutex<Sides>,
    counters: Arc<EvidenceCounters>,
}

fn bound<V>(m: &mut BTreeMap<u64, V>) {
    while m.len() > MAX_SLOTS {
        m.pop_first();
    }
}

impl BankRoots {
    pub(crate) fn new(counters: Arc<EvidenceCounters>) -> Self {
        Self { sides: Mutex::new(Sides::default()), counters }
    }

    /// The validator froze `slot` (called from `notify_block_metadata`: one short lock). A bank
    /// frozen again (a replaced block) replaces what was known of it.
    pub(crate) fn frozen(&self, slot: u64, f: Frozen) {
        let mut s = self.sides.lock().unwrap_or_else(PoisonError::into_inner);
        let checked = match s.committed.remove(&slot) {
            Some(root) => {
                self.compare(slot, &f, &root);
                true
            }
            None => false,
        };
        s.frozen.insert(slot, (f, checked));
        bound(&mut s.frozen);
    }

    /// The plugin committed `slot` with `root` (called on the commit worker, for every record it
    /// makes). Returns the slot's bank hash when the validator reported it first.
    pub(crate) fn committed(&self, slot: u64, root: &Hash) -> Option<Hash> {
        let mut s = self.sides.lock().unwrap_or_else(PoisonError::into_inner);
        match s.frozen.get_mut(&slot) {
            Some((f, checked)) => {
                let f = *f;
                if !std::mem::replace(checked, true) {
                    self.compare(slot, &f, root);
                }
                Some(f.bank_hash)
            }
            None => {
                s.committed.insert(slot, *root);
                bound(&mut s.committed);
                None
            }
        }
    }

    fn compare(&self, slot: u64, f: &Frozen, root: &Hash) {
        let Some(theirs) = f.aldb_root else { return };
        self.counters.roots_checked.fetch_add(1, Relaxed);
        if theirs != *root {
            self.counters.root_mismatches.fetch_add(1, Relaxed);
            log::error!(
                "aldb-plugin: slot {slot}: the validator mixed root {} into bank hash {}, the plugin committed root {}",
                aldb_verify::hash_to_base58(&theirs),
                aldb_verify::hash_to_base58(&f.bank_hash),
                aldb_verify::hash_to_base58(root),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_compared_whichever_side_comes_first() {
        let counters = Arc::new(EvidenceCounters::default());
        let b = BankRoots::new(counters.clone());
        let f = |root: u8| Frozen { bank_hash: [root ^ 0xff; 32], aldb_root: Some([root; 32]) };
        b.frozen(1, f(1));
        assert_eq!(b.committed(1, &[1; 32]), Some([0xfe; 32]));
        assert_eq!(b.committed(2, &[2; 32]), None);
        b.frozen(2, f(9));
        b.frozen(3, Frozen { bank_hash: [3; 32], aldb_root: None });
        assert_eq!(b.committed(3, &[7; 32]), Some([3; 32]));
        assert_eq!(counters.roots_checked.load(Relaxed), 2);
        assert_eq!(counters.root_mismatches.load(Relaxed), 1);
        // A second record of a slot gets the bank hash again, compared once.
        assert_eq!(b.committed(1, &[1; 32]), Some([0xfe; 32]));
        assert_eq!(counters.roots_checked.load(Relaxed), 2);
        // Slots that never meet their other side age out.
        for slot in 10..10 + MAX_SLOTS as u64 + 5 {
            b.frozen(slot, f(0));
        }
        assert_eq!(b.committed(10, &[0; 32]), None);
        assert_eq!(counters.roots_checked.load(Relaxed), 2);
    }
}
