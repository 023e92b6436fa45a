//! The fork-aware engine: a root for every frozen bank, forks included, taken back when the fork
//! dies.
//!
//! # Model
//!
//! A [`ForkEngine`] owns one [`Pleiades`] tree and knows a **rooted slot** (the base: its state
//! can never be taken back) and the **unrooted banks** above it, each known by `(slot, parent)`
//! and forming a tree whose root is the base. The Pleiades tree holds the state of exactly one of
//! them, the **head**. Every unrooted bank keeps two sorted lists:
//!
//! - its **updates** as applied (one per path, the last given wins), to apply it again;
//! - its **undo record**: the old state (value, or absent) of every path it changed, written by the
//!   shard workers while they merge the bank's updates in, so it costs no extra walk of the tree.
//!   Committing it restores the parent's state.
//!
//! [`ForkEngine::freeze`] of a bank whose parent is the head is one commit, exactly as
//! [`Pleiades::commit`] is, plus the undo record. A freeze on another fork first **switches** the
//! head: from the head down to the common ancestor the banks' undo records, then from there up to
//! the new parent the banks' updates, all concatenated in that order into one commit in which the
//! last write of a path wins. The deepest undo of a path is its state at the ancestor, and a
//! re-applied update is newer than any undo, so the commit leaves the parent's state; and as one
//! commit it rehashes each touched path once however many slots it crosses.
//!
//! [`ForkEngine::root`] makes a bank the base: the bank and its ancestors release their lists,
//! and every bank not descending from it is dropped (abandoned). [`ForkEngine::dead`] drops a bank
//! and its descendants; a freeze of a slot already frozen (a repeated `CreatedBank`) does the same
//! to the slot's old version first. Dropping a bank off the head's chain never touches the tree;
//! dropping one on it moves the head back to the dropped bank's parent.
//!
//! # Costs
//!
//! With `B` updates per bank over `N` leaves: a freeze on the head costs one commit of `B`
//! updates; a switch crossing `k` banks costs one commit of their `≤ k·B` undo entries and
//! updates; roots and drops cost `O(banks held)` bookkeeping. None of it depends on `N` beyond
//! what one commit of that many updates costs.
//!
//! # Memory
//!
//! Only unrooted banks hold lists: about `2 · B · 65` bytes each (an update is 65 bytes). A
//! freeze is refused with a [`ForkError`] before it touches the tree when holding the bank could
//! pass [`ForkLimits::max_banks`] or [`ForkLimits::max_bytes`] (checked against `2 · B` entries, an
//! upper bound). Besides, the engine keeps the largest list of the banks it last dropped, to
//! hold the next undo record (at most one bank's list, not counted in the gauges): a fresh
//! buffer of that size would be faulted in page by page inside the freeze. [`ForkStats`] carries the gauges (banks held, bytes held, undo bytes) and the
//! counters (freezes, switches, slots rolled back and re-applied, banks rooted, dead, abandoned,
//! refused freezes).

mod bounds;
mod error;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use aldb_verify::spec::Hash;

pub use bounds::{ForkCounters, ForkLimits, ForkStats};
pub use error::ForkError;

use crate::account::Update;
use crate::changes::ChangeSet;
use crate::pleiades::Pleiades;

/// Bytes one held update or undo entry takes.
const ENTRY: usize = size_of::<Update>();

/// An unrooted frozen bank.
#[derive(Debug)]
struct Bank {
    parent: u64,
    root: Hash,
    /// The updates as applied: sorted by path, one per path.
    updates: Vec<Update>,
    /// The parent's state of every path this bank changed, sorted by path.
    undo: Vec<Update>,
}

impl Bank {
    fn bytes(&self) -> usize {
        (self.updates.capacity() + self.undo.capacity()) * ENTRY + size_of::<Self>()
    }

    fn undo_bytes(&self) -> usize {
        self.undo.capacity() * ENTRY
    }
}

/// What a root released: the slots that became rooted and those abandoned.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rooted {
    /// The banks that became rooted, the new base last, in ascending order.
    pub rooted: Vec<u64>,
    /// The banks dropped because they do not descend from the new base, in ascending order.
    pub abandoned: Vec<u64>,
}

/// A Pleiades tree with a rooted base and unrooted banks above it: a root for every frozen bank,
/// and rollback on a fork switch. See the [module documentation](self).
#[derive(Debug)]
pub struct ForkEngine {
    tree: Pleiades,
    base: u64,
    base_root: Hash,
    head: u64,
    banks: BTreeMap<u64, Bank>,
    limits: ForkLimits,
    stats: Arc<ForkStats>,
    held_bytes: usize,
    undo_bytes: usize,
    /// The largest list a dropped bank released, kept to hold the next freeze's undo record:
    /// its pages stay mapped, where a fresh allocation of tens of megabytes would be faulted in
    /// page by page inside the freeze. Not counted in `held_bytes`; at most one bank's list.
    spare: Vec<Update>,
}

impl ForkEngine {
    /// An engine whose rooted slot `base` has the state `tree` holds (a genesis commit or a
    /// startup build), with no unrooted bank.
    pub fn new(tree: Pleiades, base: u64, limits: ForkLimits) -> Self {
        let base_root = tree.root();
        Self {
            tree,
            base,
            base_root,
            head: base,
            banks: BTreeMap::new(),
            limits,
            stats: Arc::new(ForkStats::default()),
            held_bytes: 0,
            undo_bytes: 0,
            spare: Vec::new(),
        }
    }

    /// Freezes bank `slot` on `parent` (the rooted slot or a frozen bank): applies its updates
    /// on the parent's state and returns its root. Later updates of the same path win.
    ///
    /// When `parent` is the head this is one commit; otherwise the head first switches to
    /// `parent` (see the [module documentation](self)). If `slot` is already frozen, its old
    /// version and their descendants are dropped first, as [`ForkEngine::dead`] does: a repeated
    /// `CreatedBank` means the old version is dead, so this holds even when the new one is
    /// refused. A refusal over [`ForkLimits`] leaves the tree untouched otherwise.
    pub fn freeze(&mut self, slot: u64, parent: u64, updates: Vec<Update>) -> Result<Hash, ForkError> {
        self.freeze_inner(slot, parent, updates, None)
    }

    /// Like [`ForkEngine::freeze`], and records in `changes` (cleared first) every prefix and
    /// bucket the bank changed **relative to its parent's state**, as
    /// [`Pleiades::commit_capture`] does. When the parent was the head (the steady chain), this
    /// is exactly the change set a commit of the bank gives; after a switch, the nodes the switch
    /// itself rewrote are not in it, so a writer must base the bank on its parent's files.
    pub fn freeze_capture(
        &mut self,
        slot: u64,
        parent: u64,
        updates: Vec<Update>,
        changes: &mut ChangeSet,
    ) -> Result<Hash, ForkError> {
        self.freeze_inner(slot, parent, updates, Some(changes))
    }

    fn freeze_inner(
        &mut self,
        slot: u64,
        parent: u64,
        updates: Vec<Update>,
        changes: Option<&mut ChangeSet>,
    ) -> Result<Hash, ForkError> {
        if slot <= self.base {
            return Err(ForkError::AtOrBelowBase { slot, base: self.base });
        }
        if parent >= slot {
            return Err(ForkError::ParentNotBelow { slot, parent });
        }
        if parent != self.base && !self.banks.contains_key(&parent) {
            return Err(ForkError::UnknownParent { slot, parent });
        }
        if self.banks.contains_key(&slot) {
            self.dead(slot)?;
        }
        if self.banks.len() >= self.limits.max_banks {
            self.stats.refused();
            return Err(ForkError::TooManyBanks { slot, max: self.limits.max_banks });
        }
        // The applied updates reuse `updates`' allocation and the undo record has at most one
        // entry per update, so this bounds what the bank will hold.
        let needed = (updates.capacity() + updates.len()) * ENTRY + size_of::<Bank>();
        if self.held_bytes.saturating_add(needed) > self.limits.max_bytes {
            self.stats.refused();
            return Err(ForkError::TooManyBytes { slot, needed, held: self.held_bytes, max: self.limits.max_bytes });
        }
        self.switch(parent)?;
        let rec = self.tree.commit_recorded(updates, std::mem::take(&mut self.spare), changes);
        let mut applied = rec.applied;
        if applied.capacity() > applied.len() + applied.len() / 8 {
            applied.shrink_to_fit();
        }
        let bank = Bank { parent, root: rec.root, updates: applied, undo: rec.undo };
        self.held_bytes += bank.bytes();
        self.undo_bytes += bank.undo_bytes();
        self.banks.insert(slot, bank);
        self.head = slot;
        self.stats.frozen();
        self.publish();
        Ok(rec.root)
    }

    /// Makes `slot` the rooted slot: it and its ancestors release their undo records and
    /// updates, and every bank not descending from it is dropped. If the head does not descend
    /// from `slot`, it switches to `slot` first. Rooting the rooted slot again does nothing.
    pub fn root(&mut self, slot: u64) -> Result<Rooted, ForkError> {
        if slot == self.base {
            return Ok(Rooted::default());
        }
        if slot < self.base {
            return Err(ForkError::AtOrBelowBase { slot, base: self.base });
        }
        let Some(root) = self.banks.get(&slot).map(|b| b.root) else {
            return Err(ForkError::UnknownSlot { slot });
        };
        if !self.descends(self.head, slot) {
            self.switch(slot)?;
        }
        let mut rooted: Vec<u64> = self.chain(slot).take_while(|&s| s != self.base).collect();
        rooted.reverse();
        let mut keep = BTreeSet::from([slot]);
        for (&s, b) in self.banks.range(slot + 1..) {
            if keep.contains(&b.parent) {
                keep.insert(s);
            }
        }
        keep.remove(&slot);
        let abandoned: Vec<u64> =
            self.banks.keys().copied().filter(|s| !keep.contains(s) && rooted.binary_search(s).is_err()).collect();
        let dropped: Vec<u64> = self.banks.keys().copied().filter(|s| !keep.contains(s)).collect();
        for s in dropped {
            self.release(s);
        }
        self.base = slot;
        self.base_root = root;
        self.recount();
        self.stats.dropped(rooted.len(), 0, abandoned.len());
        self.publish();
        Ok(Rooted { rooted, abandoned })
    }

    /// Drops bank `slot` and every bank descending from it (a `Dead` status, or the old version
    /// of a restarted slot), and returns their slots in ascending order. If the head was among
    /// them it moves back to `slot`'s parent; otherwise the tree is not touched. A slot with no
    /// frozen bank drops nothing.
    pub fn dead(&mut self, slot: u64) -> Result<Vec<u64>, ForkError> {
        if slot <= self.base {
            return Err(ForkError::AtOrBelowBase { slot, base: self.base });
        }
        let Some(parent) = self.banks.get(&slot).map(|b| b.parent) else {
            return Ok(Vec::new());
        };
        let mut gone = vec![slot];
        for (&s, b) in self.banks.range(slot + 1..) {
            if gone.binary_search(&b.parent).is_ok() {
                gone.push(s);
            }
        }
        if gone.binary_search(&self.head).is_ok() {
            self.switch(parent)?;
        }
        for &s in &gone {
            self.release(s);
        }
        self.recount();
        self.stats.dropped(0, gone.len(), 0);
        self.publish();
        Ok(gone)
    }

    /// Moves the head to `slot` (the rooted slot or a frozen bank), so [`ForkEngine::tree`]
    /// holds its state, and returns its root.
    pub fn switch_to(&mut self, slot: u64) -> Result<Hash, ForkError> {
        if slot != self.base && !self.banks.contains_key(&slot) {
            return Err(if slot < self.base {
                ForkError::AtOrBelowBase { slot, base: self.base }
            } else {
                ForkError::UnknownSlot { slot }
            });
        }
        self.switch(slot)?;
        self.publish();
        Ok(self.tree.root())
    }

    /// Rolls the head back to its common ancestor with `target` and forward to `target`, in one
    /// commit; `target` must be the base or a held bank.
    fn switch(&mut self, target: u64) -> Result<(), ForkError> {
        if self.head == target {
            return Ok(());
        }
        let (mut a, mut b) = (self.head, target);
        let (mut down, mut up) = (Vec::new(), Vec::new());
        // Parents are below their slots, so the higher side steps down until the two meet.
        while a != b {
            if a > b {
                down.push(a);
                a = self.parent(a)?;
            } else {
                up.push(b);
                b = self.parent(b)?;
            }
        }
        let bank = |s: &u64| self.banks.get(s).ok_or(ForkError::UnknownSlot { slot: *s });
        let mut total = 0;
        for s in &down {
            total += bank(s)?.undo.len();
        }
        for s in &up {
            total += bank(s)?.updates.len();
        }
        let mut batch = Vec::with_capacity(total);
        for s in &down {
            batch.extend_from_slice(&bank(s)?.undo);
        }
        for s in up.iter().rev() {
            batch.extend_from_slice(&bank(s)?.updates);
        }
        let root = self.tree.commit(batch);
        self.head = target;
        self.stats.switched(down.len(), up.len());
        let expected = if target == self.base { self.base_root } else { bank(&target)?.root };
        if root != expected {
            return Err(ForkError::Diverged { slot: target });
        }
        Ok(())
    }

    fn parent(&self, slot: u64) -> Result<u64, ForkError> {
        self.banks.get(&slot).map(|b| b.parent).ok_or(ForkError::UnknownSlot { slot })
    }

    /// `slot`, its parent, and so on down to the rooted slot (included); empty for an unknown
    /// slot.
    pub fn chain(&self, slot: u64) -> impl Iterator<Item = u64> + '_ {
        let start = (slot == self.base || self.banks.contains_key(&slot)).then_some(slot);
        std::iter::successors(start, move |&s| if s == self.base { None } else { self.banks.get(&s).map(|b| b.parent) })
    }

    /// The head's chain, head first, down to the rooted slot (included): the banks whose state
    /// the tree holds.
    pub fn head_chain(&self) -> impl Iterator<Item = u64> + '_ {
        self.chain(self.head)
    }

    /// Whether `slot` is on the head's chain (the rooted slot always is).
    pub fn on_head_chain(&self, slot: u64) -> bool {
        (slot == self.base || self.banks.contains_key(&slot)) && self.descends(self.head, slot)
    }

    /// Whether `slot` is `ancestor` or descends from it (both known).
    fn descends(&self, mut slot: u64, ancestor: u64) -> bool {
        while slot > ancestor {
            match self.banks.get(&slot) {
                Some(b) => slot = b.parent,
                None => return false,
            }
        }
        slot == ancestor
    }

    /// The slot whose state the tree holds.
    pub fn head(&self) -> u64 {
        self.head
    }

    /// The rooted slot.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The rooted slot's root.
    pub fn base_root(&self) -> Hash {
        self.base_root
    }

    /// The root of the rooted slot or of a frozen unrooted bank.
    pub fn bank_root(&self, slot: u64) -> Option<Hash> {
        if slot == self.base { Some(self.base_root) } else { self.banks.get(&slot).map(|b| b.root) }
    }

    /// The parent of a frozen unrooted bank.
    pub fn parent_of(&self, slot: u64) -> Option<u64> {
        self.banks.get(&slot).map(|b| b.parent)
    }

    /// The frozen unrooted banks in ascending slot order.
    pub fn banks(&self) -> impl Iterator<Item = u64> + '_ {
        self.banks.keys().copied()
    }

    /// Number of frozen unrooted banks.
    pub fn bank_count(&self) -> usize {
        self.banks.len()
    }

    /// Bytes the unrooted banks hold (updates and undo records), as the bound counts them.
    pub fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// The bounds in force.
    pub fn limits(&self) -> ForkLimits {
        self.limits
    }

    /// The tree, holding the head's state: for proofs and reads at the head.
    pub fn tree(&self) -> &Pleiades {
        &self.tree
    }

    /// The metrics, shared: a metrics thread can read them without the engine.
    pub fn stats(&self) -> Arc<ForkStats> {
        Arc::clone(&self.stats)
    }

    /// The tree, holding the head's state; the unrooted banks' lists are dropped.
    pub fn into_tree(self) -> Pleiades {
        self.tree
    }

    /// Drops bank `slot`, keeping the larger of its lists as the spare if it beats the one held.
    fn release(&mut self, slot: u64) {
        let Some(bank) = self.banks.remove(&slot) else { return };
        for list in [bank.updates, bank.undo] {
            if list.capacity() > self.spare.capacity() {
                self.spare = list;
            }
        }
    }

    fn recount(&mut self) {
        self.held_bytes = self.banks.values().map(Bank::bytes).sum();
        self.undo_bytes = self.banks.values().map(Bank::undo_bytes).sum();
    }

    fn publish(&self) {
        self.stats.set_held(self.banks.len(), self.held_bytes, self.undo_bytes);
    }
}
