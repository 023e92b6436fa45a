//! Fork mode: the banks the writer has written and not yet seen finalized, and moving the
//! writer's tables between them.
//!
//! With every frozen bank submitted, a bank's change set is relative to its parent, so its file
//! must be written against the parent's tables, not the last file's. Every unrooted written bank
//! keeps the [`TableLog`] of its write: the table entries it replaced (undo) and those it set
//! (redo). Moving the tables from the bank they hold (the head) to another rolls back to the
//! common ancestor and re-applies down the other branch, as `aldb_core::ForkEngine` does with the
//! tree: the cost is the entries those banks touched, never the tables' size. The base (the
//! newest finalized bank, or the state the writer started from) holds no log: nothing goes below
//! it.

use std::collections::{BTreeMap, BTreeSet};

use crate::serializer::{Serializer, TableLog};
use aldb_format::SnapshotError;

/// One written bank.
#[derive(Debug)]
struct Bank {
    /// `None` for the base.
    parent: Option<u64>,
    /// The oldest file its records may point into.
    oldest_seq: u32,
    /// How its write changed the tables; `None` for the base.
    log: Option<TableLog>,
}

/// What a move of the tables cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Moved {
    /// Banks whose undo list was applied.
    pub(crate) rolled_back: u64,
    /// Banks whose redo list was applied.
    pub(crate) reapplied: u64,
}

/// What finalizing a bank did.
#[derive(Debug, Default)]
pub(crate) struct Finalized {
    /// Unrooted ancestors that became final with it, oldest first.
    pub(crate) ancestors: Vec<u64>,
    /// Banks dropped because they do not descend from it.
    pub(crate) abandoned: Vec<u64>,
}

/// The written banks above the base, by slot (a parent's slot is below its children's).
#[derive(Debug, Default)]
pub(crate) struct Banks {
    banks: BTreeMap<u64, Bank>,
    base: Option<u64>,
    /// The bank the serializer's tables hold.
    head: Option<u64>,
    held_bytes: usize,
}

fn broken(what: String) -> SnapshotError {
    SnapshotError::Input(format!("fork table inconsistent: {what}"))
}

impl Banks {
    /// Forgets every bank: the tables no longer hold any of them.
    pub(crate) fn clear(&mut self) {
        *self = Self::default();
    }

    /// After a full write or a resume: `slot` is the base and the head, the only bank.
    pub(crate) fn reset_to(&mut self, slot: u64, oldest_seq: u32) {
        self.clear();
        self.banks.insert(slot, Bank { parent: None, oldest_seq, log: None });
        self.base = Some(slot);
        self.head = Some(slot);
    }

    /// Whether `slot` has a written bank.
    pub(crate) fn contains(&self, slot: u64) -> bool {
        self.banks.contains_key(&slot)
    }

    /// The base: the newest finalized bank, or where the writer started.
    pub(crate) fn base(&self) -> Option<u64> {
        self.base
    }

    /// The parent of a held bank.
    pub(crate) fn parent_of(&self, slot: u64) -> Option<u64> {
        self.banks.get(&slot).and_then(|b| b.parent)
    }

    /// Banks held, the base included.
    pub(crate) fn len(&self) -> usize {
        self.banks.len()
    }

    /// Bytes of undo and redo lists held.
    pub(crate) fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// The oldest file any held bank's records may point into: nothing at or above it may be
    /// pruned.
    pub(crate) fn pin(&self) -> Option<u32> {
        self.banks.values().map(|b| b.oldest_seq).min()
    }

    /// Records a bank just written on top of the head (its parent).
    pub(crate) fn insert(&mut self, slot: u64, parent: u64, oldest_seq: u32, log: TableLog) {
        self.held_bytes += log.bytes();
        self.banks.insert(slot, Bank { parent: Some(parent), oldest_seq, log: Some(log) });
        self.head = Some(slot);
    }

    /// The held parent of `slot`, or an error naming it: only unrooted banks are walked through.
    fn step(&self, slot: u64) -> Result<u64, SnapshotError> {
        self.parent_of(slot).ok_or_else(|| broken(format!("bank {slot} has no held parent")))
    }

    /// Whether `slot` is `ancestor` or descends from it.
    pub(crate) fn descends(&self, mut slot: u64, ancestor: u64) -> bool {
        while slot > ancestor {
            match self.parent_of(slot) {
                Some(p) => slot = p,
                None => return false,
            }
        }
        slot == ancestor
    }

    /// Moves the tables to `target`'s state.
    pub(crate) fn switch(&mut self, ser: &mut Serializer, target: u64) -> Result<Moved, SnapshotError> {
        let head = self.head.ok_or_else(|| broken("no head".into()))?;
        if head == target {
            return Ok(Moved::default());
        }
        if !self.contains(target) {
            return Err(broken(format!("bank {target} is not held")));
        }
        // Parents are below their children, so the higher of the two steps down until they meet.
        let (mut a, mut b) = (head, target);
        let (mut down, mut up) = (Vec::new(), Vec::new());
        while a != b {
            if a > b {
                down.push(a);
                a = self.step(a)?;
            } else {
                up.push(b);
                b = self.step(b)?;
            }
        }
        for s in &down {
            let log =
                self.banks.get(s).and_then(|b| b.log.as_ref()).ok_or_else(|| broken(format!("{s} has no log")))?;
            ser.apply_log(log, true);
        }
        for s in up.iter().rev() {
            let log =
                self.banks.get(s).and_then(|b| b.log.as_ref()).ok_or_else(|| broken(format!("{s} has no log")))?;
            ser.apply_log(log, false);
        }
        self.head = Some(target);
        Ok(Moved { rolled_back: down.len() as u64, reapplied: up.len() as u64 })
    }

    /// `slot` and every held bank descending from it, in slot order.
    fn subtree(&self, slot: u64) -> Vec<u64> {
        let mut set = BTreeSet::from([slot]);
        for (s, b) in self.banks.range(slot + 1..) {
            if b.parent.is_some_and(|p| set.contains(&p)) {
                set.insert(*s);
            }
        }
        set.into_iter().collect()
    }

    fn remove(&mut self, slot: u64) {
        if let Some(b) = self.banks.remove(&slot) {
            self.held_bytes -= b.log.as_ref().map_or(0, TableLog::bytes);
        }
    }

    /// Drops a bank and its descendants (dead, abandoned or replaced), moving the tables to its
    /// parent first if they hold one of them. Returns the dropped slots; the base is never
    /// dropped (an error), an unknown slot drops nothing.
    pub(crate) fn drop_subtree(&mut self, ser: &mut Serializer, slot: u64) -> Result<Vec<u64>, SnapshotError> {
        if !self.contains(slot) {
            return Ok(Vec::new());
        }
        let parent = self.parent_of(slot).ok_or(SnapshotError::FinalBank { slot })?;
        if self.head.is_some_and(|h| self.descends(h, slot)) {
            self.switch(ser, parent)?;
        }
        let dropped = self.subtree(slot);
        for &s in &dropped {
            self.remove(s);
        }
        Ok(dropped)
    }

    /// Makes `slot` the base: it and its ancestors release their lists, banks not descending
    /// from it are dropped. `None` if the slot is not held (nothing changes).
    pub(crate) fn finalize(&mut self, ser: &mut Serializer, slot: u64) -> Result<Option<Finalized>, SnapshotError> {
        if !self.contains(slot) {
            return Ok(None);
        }
        let mut out = Finalized::default();
        if self.base == Some(slot) {
            return Ok(Some(out));
        }
        if !self.head.is_some_and(|h| self.descends(h, slot)) {
            self.switch(ser, slot)?;
        }
        let mut chain = BTreeSet::new();
        let mut s = slot;
        while let Some(p) = self.parent_of(s) {
            chain.insert(p);
            s = p;
        }
        let keep: BTreeSet<u64> = self.subtree(slot).into_iter().collect();
        let doomed: Vec<u64> = self.banks.keys().filter(|s| !keep.contains(s)).copied().collect();
        for s in doomed {
            if chain.contains(&s) {
                if self.base != Some(s) {
                    out.ancestors.push(s);
                }
            } else {
                out.abandoned.push(s);
            }
            self.remove(s);
        }
        if let Some(b) = self.banks.get_mut(&slot) {
            self.held_bytes -= b.log.take().map_or(0, |l| l.bytes());
            b.parent = None;
        }
        self.base = Some(slot);
        Ok(Some(out))
    }
}
