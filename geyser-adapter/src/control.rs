//! The slot and fork state machine: which slots exist, how they link, which are complete,
//! confirmed or rooted, and which slot commits next.
//!
//! It runs under one mutex, but every operation is short: it moves buffers between the stripes
//! and the job queue by handle and never hashes or touches the engine. The engine applies the
//! queued jobs in order, elsewhere (see `Adapter::commit_ready`).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::ops::Bound;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use aldb_core::{BulkBuilder, BulkEntry, Hash};
use aldb_verify::record::BlockInfo;

use crate::CommitKind;
use crate::error::{DropReason, IgnoreReason, Ignored, Irregularity};
use crate::stats::Counters;
use crate::stripe::{SlotUpdates, Stripes, lock};
use crate::types::{Commitment, SlotEvent, SlotStatus};

/// State shared with the account callbacks, which never take the control lock.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Whether startup accounts are still accepted. Cleared before the stripes hand theirs over,
    /// and read under a stripe lock, so no startup account can slip in after the hand-over.
    pub(crate) startup_open: AtomicBool,
    /// Slots the stripes saw a first update for, not yet known to the state machine.
    pub(crate) fresh: Mutex<Vec<u64>>,
}

impl Default for Shared {
    fn default() -> Self {
        Self { startup_open: AtomicBool::new(true), fresh: Mutex::new(Vec::new()) }
    }
}

/// What the state machine works with besides its own state.
pub(crate) struct Cx<'a, Rec> {
    pub(crate) stripes: &'a Stripes<Rec>,
    pub(crate) shared: &'a Shared,
    pub(crate) counters: &'a Counters,
    pub(crate) startup: &'a crate::startup::StartupStream,
}

impl<Rec> Cx<'_, Rec> {
    fn ignored(&self, reason: IgnoreReason, slot: u64) -> Ignored {
        self.counters.ignore(reason);
        Ignored { reason, slot: Some(slot) }
    }

    fn discarded(&self, n: u64) {
        Counters::add(&self.counters.updates_discarded, n);
    }
}

/// Work for the engine, applied strictly in queue order.
pub(crate) enum Job<Rec> {
    /// Build the startup state in bulk.
    Startup { slot: u64, builder: Option<Box<BulkBuilder>>, entries: Vec<Vec<BulkEntry>>, records: Vec<Vec<Rec>> },
    /// Apply one slot's winning updates. `block` is filled in when the job leaves the queue.
    Slot {
        slot: u64,
        parent: Option<u64>,
        kind: CommitKind,
        buffers: Vec<SlotUpdates<Rec>>,
        parent_bank_hash: Option<Hash>,
        block: Option<BlockInfo>,
    },
    /// `Commitment::Processed`: report a frozen bank confirmed. `block` is filled in when the job
    /// leaves the queue.
    Confirm { slot: u64, block: Option<BlockInfo> },
    /// `Commitment::Processed`: root the fork engine at a frozen bank. `blocks` (those of the
    /// slots at or below it) are filled in when the job leaves the queue.
    Root { slot: u64, blocks: BTreeMap<u64, BlockInfo> },
    /// `Commitment::Processed`: drop a frozen bank and its descendants from the fork engine.
    Drop { slot: u64 },
}

impl<Rec> Job<Rec> {
    fn slot(&self) -> u64 {
        match self {
            Self::Startup { slot, .. }
            | Self::Slot { slot, .. }
            | Self::Confirm { slot, .. }
            | Self::Root { slot, .. }
            | Self::Drop { slot } => *slot,
        }
    }

    /// Whether applying the job still reads block metadata of `slot`.
    fn wants_block(&self, slot: u64) -> bool {
        match self {
            Self::Slot { slot: s, .. } | Self::Confirm { slot: s, .. } => *s == slot,
            Self::Root { slot: s, .. } => slot <= *s,
            Self::Startup { .. } | Self::Drop { .. } => false,
        }
    }
}

/// What is known about one slot above the base.
#[derive(Clone, Copy, Debug, Default)]
struct SlotInfo {
    parent: Option<u64>,
    /// Whether the parent came from a status (trusted over a SlotHashes hint).
    parent_from_status: bool,
    /// A `CreatedBank` was seen for the current version of the slot.
    created: bool,
    /// `Processed` was seen for the current version.
    processed: bool,
    /// Some bank names this slot as its parent, so this bank was frozen before that one was
    /// created: all its updates have arrived.
    has_child: bool,
    /// Confirmed, directly or through a descendant.
    confirmed: bool,
    /// Rooted, directly or through a descendant.
    rooted: bool,
    dropped: Option<DropReason>,
    /// `Commitment::Processed`: the current version was queued for a freeze.
    frozen: bool,
    /// `Commitment::Processed`: the bank was queued to be reported confirmed.
    reported: bool,
}

impl SlotInfo {
    /// All the slot's account updates have arrived.
    fn complete(&self) -> bool {
        self.processed || self.rooted || self.has_child
    }
}

#[derive(Clone, Copy)]
enum Flag {
    Confirmed,
    Rooted,
}

pub(crate) struct Control<Rec> {
    commitment: Commitment,
    /// `commitment` is `Processed`: every complete bank is frozen, and the base moves on roots.
    forks: bool,
    max_pending: usize,
    /// The committed base: the last slot decided for commit.
    base: Option<u64>,
    slots: BTreeMap<u64, SlotInfo>,
    pub(crate) jobs: VecDeque<Job<Rec>>,
    /// Block metadata of slots not yet applied: live slots above the base, and decided slots
    /// still in `jobs`. Dropped with their slot; taken when the slot's job leaves the queue.
    blocks: BTreeMap<u64, BlockInfo>,
}

impl<Rec> Control<Rec> {
    pub(crate) fn new(commitment: Commitment, max_pending: usize) -> Self {
        Self {
            commitment,
            forks: commitment == Commitment::Processed,
            max_pending: max_pending.max(1),
            base: None,
            slots: BTreeMap::new(),
            jobs: VecDeque::new(),
            blocks: BTreeMap::new(),
        }
    }

    /// Block metadata for `slot` (its blockhash and height), kept until the slot's job leaves the
    /// queue. A later report for the same slot replaces an earlier one. Never changes readiness.
    pub(crate) fn on_block(&mut self, slot: u64, block: BlockInfo, cx: &Cx<'_, Rec>) -> Result<(), Ignored> {
        if self.below_base(slot) {
            // Decided but not yet applied: still in time for its commit.
            let queued = self.jobs.iter().any(|j| j.wants_block(slot));
            if !queued {
                return Err(cx.ignored(IgnoreReason::BlockBelowBase, slot));
            }
        } else if self.slots.get(&slot).is_some_and(|e| e.dropped.is_some()) {
            return Err(cx.ignored(IgnoreReason::BlockForDroppedSlot, slot));
        }
        self.blocks.insert(slot, block);
        // Metadata for slots the adapter never hears of again must not pile up.
        let limit = self.max_pending.saturating_mul(2);
        while self.blocks.len() > limit {
            self.blocks.pop_first();
        }
        Ok(())
    }

    /// The next decided job, with the block metadata known for its slot by now. Metadata of
    /// slots at or below it (passed forks) is forgotten.
    pub(crate) fn pop_job(&mut self) -> Option<Job<Rec>> {
        let mut job = self.jobs.pop_front()?;
        let slot = job.slot();
        match &mut job {
            // Under `Processed` banks freeze out of slot order (forks), and their metadata is
            // wanted again when they confirm: it is kept until a root passes the slot.
            Job::Slot { block, kind: CommitKind::Slot, .. } | Job::Confirm { block, .. } if self.forks => {
                *block = self.blocks.get(&slot).copied();
            }
            Job::Root { blocks, .. } => {
                let above = self.blocks.split_off(&slot.saturating_add(1));
                *blocks = std::mem::replace(&mut self.blocks, above);
            }
            Job::Drop { .. } | Job::Confirm { .. } => {}
            Job::Slot { block, .. } => {
                *block = self.blocks.remove(&slot);
                self.blocks = self.blocks.split_off(&slot.saturating_add(1));
            }
            Job::Startup { .. } => {
                self.blocks = self.blocks.split_off(&slot.saturating_add(1));
            }
        }
        Some(job)
    }

    /// Whether the next job freezes a bank.
    pub(crate) fn next_is_freeze(&self) -> bool {
        matches!(self.jobs.front(), Some(Job::Slot { .. }))
    }

    fn below_base(&self, slot: u64) -> bool {
        self.base.is_some_and(|b| slot <= b)
    }

    /// Handles one slot status, then commits whatever became ready.
    pub(crate) fn on_status(&mut self, ev: SlotEvent, cx: &Cx<'_, Rec>) -> Result<(), Ignored> {
        let SlotEvent { slot, parent, status } = ev;
        if matches!(status, SlotStatus::Completed | SlotStatus::FirstShredReceived) {
            return Ok(());
        }
        if parent.is_some_and(|p| p >= slot) {
            return Err(cx.ignored(IgnoreReason::InvalidParent, slot));
        }
        if cx.shared.startup_open.load(Ordering::Acquire) && cx.counters.startup_updates.load(Ordering::Relaxed) > 0 {
            // The validator is past startup but never said so: build the startup state now,
            // since every later slot is relative to it.
            cx.counters.irregular(Irregularity::ImplicitEndOfStartup);
            let _ = self.end_of_startup(cx);
        }
        self.absorb_fresh(cx);
        let result = match status {
            SlotStatus::CreatedBank => self.created_bank(slot, parent, cx),
            SlotStatus::Processed => self.processed(slot, parent, cx),
            SlotStatus::Confirmed => self.flagged(slot, None, Flag::Confirmed, cx),
            SlotStatus::Rooted => self.flagged(slot, parent, Flag::Rooted, cx),
            SlotStatus::Dead => self.dead(slot, parent, cx),
            SlotStatus::Completed | SlotStatus::FirstShredReceived => Ok(()),
        };
        self.advance(cx);
        result
    }

    fn created_bank(&mut self, slot: u64, parent: Option<u64>, cx: &Cx<'_, Rec>) -> Result<(), Ignored> {
        if self.below_base(slot) {
            return Err(cx.ignored(IgnoreReason::StatusBelowBase, slot));
        }
        let Some(parent) = parent else {
            return Err(cx.ignored(IgnoreReason::InvalidParent, slot));
        };
        // Updates that came before the first `CreatedBank` (a replayed slot) are kept; a second
        // `CreatedBank` means the bank was rebuilt and everything it had is void.
        let restart = self.slots.get(&slot).is_some_and(|e| e.created || e.dropped.is_some());
        if restart {
            self.restart(slot, cx);
        }
        self.slots.entry(slot).or_default().created = true;
        self.link(slot, parent, true, cx);
        Ok(())
    }

    /// Slot `slot` starts over: its buffered updates and local progress go, and so do the
    /// children of its old version. Cluster facts (confirmed, rooted) are about the slot, so
    /// they stay.
    fn restart(&mut self, slot: u64, cx: &Cx<'_, Rec>) {
        Counters::add(&cx.counters.restarted, 1);
        if self.slots.get(&slot).is_some_and(|e| e.frozen && e.dropped.is_none()) {
            // The old version's root is taken back (with its descendants') before anything of
            // the new version reaches the engine.
            self.jobs.push_back(Job::Drop { slot });
        }
        let mut orphans = Vec::new();
        for (&s, e) in self.slots.range_mut((Bound::Excluded(slot), Bound::Unbounded)) {
            if e.parent == Some(slot) && e.dropped.is_none() {
                e.dropped = Some(DropReason::Abandoned);
                orphans.push(s);
            }
        }
        cx.counters.dropped(DropReason::Abandoned, orphans.len() as u64);
        cx.discarded(cx.stripes.close(&orphans));
        if let Some(e) = self.slots.get_mut(&slot) {
            *e = SlotInfo { confirmed: e.confirmed, rooted: e.rooted, ..SlotInfo::default() };
        }
        // The old version's block is not the one that will be frozen now.
        self.blocks.remove(&slot);
        cx.discarded(cx.stripes.reopen(slot));
    }

    /// The entry for a slot named by a status, counting it when it comes from nowhere.
    fn known(&mut self, slot: u64, cx: &Cx<'_, Rec>) -> &mut SlotInfo {
        if !self.slots.contains_key(&slot) {
            cx.counters.irregular(Irregularity::UnknownSlot);
        }
        self.slots.entry(slot).or_default()
    }

    fn processed(&mut self, slot: u64, parent: Option<u64>, cx: &Cx<'_, Rec>) -> Result<(), Ignored> {
        if self.below_base(slot) {
            return Err(cx.ignored(IgnoreReason::StatusBelowBase, slot));
        }
        let e = self.known(slot, cx);
        if e.dropped.is_some() {
            return Err(cx.ignored(IgnoreReason::StatusForDroppedSlot, slot));
        }
        if e.processed {
            return Err(cx.ignored(IgnoreReason::RepeatedProcessed, slot));
        }
        e.processed = true;
        cx.counters.highest_processed.raise(slot);
        if let Some(p) = parent {
            self.link(slot, p, true, cx);
        }
        Ok(())
    }

    /// `Confirmed` or `Rooted`: marks the slot and its known ancestors.
    fn flagged(&mut self, slot: u64, parent: Option<u64>, flag: Flag, cx: &Cx<'_, Rec>) -> Result<(), Ignored> {
        if self.below_base(slot) {
            return Err(cx.ignored(IgnoreReason::StatusBelowBase, slot));
        }
        if !self.slots.contains_key(&slot) && matches!(flag, Flag::Rooted) {
            cx.counters.irregular(Irregularity::UnknownSlot);
        }
        // `Confirmed` may come before anything else about the slot: remember it.
        let e = self.slots.entry(slot).or_default();
        if e.dropped.is_some() {
            return Err(cx.ignored(IgnoreReason::StatusForDroppedSlot, slot));
        }
        self.mark_up(slot, flag);
        if let Some(p) = parent {
            self.link(slot, p, true, cx);
        }
        Ok(())
    }

    fn dead(&mut self, slot: u64, parent: Option<u64>, cx: &Cx<'_, Rec>) -> Result<(), Ignored> {
        if self.below_base(slot) {
            return Err(cx.ignored(IgnoreReason::StatusBelowBase, slot));
        }
        let e = self.known(slot, cx);
        if e.dropped.is_some() {
            return Err(cx.ignored(IgnoreReason::StatusForDroppedSlot, slot));
        }
        if let Some(p) = parent {
            self.link(slot, p, true, cx);
        }
        if let Some(e) = self.slots.get_mut(&slot) {
            e.dropped = Some(DropReason::Dead);
        }
        cx.counters.dropped(DropReason::Dead, 1);
        cx.discarded(cx.stripes.close(&[slot]));
        Ok(())
    }

    /// Records that `parent` is the parent of `slot`.
    fn link(&mut self, slot: u64, parent: u64, from_status: bool, cx: &Cx<'_, Rec>) {
        if parent >= slot {
            // Only reachable from a hint, which is checked when read; kept as a guard because a
            // parent at or above its slot would make the ancestor walks below loop.
            return;
        }
        let base = self.base;
        let Some(e) = self.slots.get_mut(&slot) else {
            return;
        };
        if let Some(old) = e.parent {
            if old == parent {
                e.parent_from_status |= from_status;
                return;
            }
            // A frozen bank's root was computed on its parent: it cannot move.
            if e.parent_from_status || !from_status || e.frozen {
                cx.counters.irregular(Irregularity::ParentConflict);
                return;
            }
            // A status corrects what a SlotHashes hint said.
            cx.counters.irregular(Irregularity::ParentConflict);
        }
        e.parent = Some(parent);
        e.parent_from_status = from_status;
        let (confirmed, rooted) = (e.confirmed, e.rooted);
        match base {
            // Off the committed chain: the next prune drops it.
            Some(b) if parent < b => {
                if rooted {
                    cx.counters.irregular(Irregularity::RootedOffChain);
                }
                return;
            }
            Some(b) if parent == b => return,
            _ => {}
        }
        self.slots.entry(parent).or_default().has_child = true;
        if confirmed {
            self.mark_up(parent, Flag::Confirmed);
        }
        if rooted {
            self.mark_up(parent, Flag::Rooted);
        }
    }

    /// Sets a flag on a slot and its known ancestors above the base. Invariant: a flagged slot
    /// with a known parent has a flagged parent, so the walk stops at the first flagged slot.
    fn mark_up(&mut self, slot: u64, flag: Flag) {
        let mut cur = slot;
        while !self.below_base(cur) {
            let Some(e) = self.slots.get_mut(&cur) else {
                break;
            };
            let was = match flag {
                Flag::Confirmed => std::mem::replace(&mut e.confirmed, true),
                Flag::Rooted => std::mem::replace(&mut e.rooted, true),
            };
            match (was, e.parent) {
                // Parents are strictly lower, so this ends.
                (false, Some(p)) if p < cur => cur = p,
                _ => break,
            }
        }
    }

    /// Registers slots the stripes saw updates for (replayed or genesis slots have no status).
    fn absorb_fresh(&mut self, cx: &Cx<'_, Rec>) {
        let fresh = std::mem::take(&mut *lock(&cx.shared.fresh));
        for s in fresh {
            if !self.below_base(s) {
                self.slots.entry(s).or_default();
            }
        }
    }

    /// Links slots with no known parent from their SlotHashes writes.
    fn resolve_hints(&mut self, cx: &Cx<'_, Rec>) {
        // A hinted slot has updates and so (once absorbed) an entry: one round links them all.
        // Another round is needed only when a link created a parent entry, which happens at
        // most once per hint, so this ends.
        loop {
            let want: Vec<u64> =
                self.slots.iter().filter(|(_, e)| e.parent.is_none() && e.dropped.is_none()).map(|(s, _)| *s).collect();
            if want.is_empty() {
                return;
            }
            let found = cx.stripes.hints_for(&want);
            if found.is_empty() {
                return;
            }
            let before = self.slots.len();
            for (s, p) in found {
                self.link(s, p, false, cx);
            }
            if self.slots.len() == before {
                return;
            }
        }
    }

    /// The startup state is complete: queue the bulk build and make it the base.
    pub(crate) fn end_of_startup(&mut self, cx: &Cx<'_, Rec>) -> Result<(), Ignored> {
        if !cx.shared.startup_open.swap(false, Ordering::AcqRel) {
            cx.counters.ignore(IgnoreReason::RepeatedEndOfStartup);
            return Err(Ignored { reason: IgnoreReason::RepeatedEndOfStartup, slot: None });
        }
        let parts = cx.stripes.take_startup();
        // Taken after every stripe was visited: no batch is on its way to it any more.
        let builder = cx.startup.take_builder();
        // No startup accounts: a genesis start (or an empty snapshot); the genesis rule applies.
        let Some(slot) = parts.max_slot else {
            return Ok(());
        };
        if self.base.is_some() {
            cx.counters.irregular(Irregularity::StartupAfterBase);
            return Ok(());
        }
        self.set_base(slot, cx);
        cx.discarded(cx.stripes.prune_below(slot));
        self.jobs.push_back(Job::Startup { slot, builder, entries: parts.entries, records: parts.records });
        Ok(())
    }

    fn set_base(&mut self, slot: u64, cx: &Cx<'_, Rec>) {
        self.base = Some(slot);
        // Published before the stripes are visited, so an update that takes a stripe lock after
        // the visit sees the slot as decided.
        cx.counters.base.set(Some(slot));
    }

    /// Decides `slot` for commit on top of the base.
    fn decide(&mut self, slot: u64, kind: CommitKind, cx: &Cx<'_, Rec>) {
        let parent = self.base;
        self.set_base(slot, cx);
        self.slots.remove(&slot);
        let (buffers, hint, gone) = cx.stripes.take_slot(slot);
        cx.discarded(gone);
        // The bank hash belongs to the record only if the SlotHashes write names the parent
        // the slot is committed on.
        let parent_bank_hash = hint.filter(|(p, _)| parent == Some(*p)).and_then(|(_, h)| h);
        self.jobs.push_back(Job::Slot { slot, parent, kind, buffers, parent_bank_hash, block: None });
    }

    /// Genesis start: no startup state ever came, and a bank names slot 0 as its parent. Slot 0
    /// (the genesis accounts, sent as ordinary updates with no status) is then complete and final.
    fn try_genesis(&mut self, cx: &Cx<'_, Rec>) {
        if self.base.is_some() || cx.counters.startup_updates.load(Ordering::Relaxed) > 0 {
            return;
        }
        if !self.slots.get(&0).is_some_and(|e| e.has_child && e.dropped.is_none()) {
            return;
        }
        cx.shared.startup_open.store(false, Ordering::Release);
        self.decide(0, CommitKind::Genesis, cx);
    }

    /// The child of the base to commit next, if one is ready.
    fn next_ready(&self, cx: &Cx<'_, Rec>) -> Option<u64> {
        let base = self.base?;
        let mut pick: Option<(u64, bool)> = None;
        let mut ready = 0;
        for (&s, e) in &self.slots {
            if e.parent != Some(base) || e.dropped.is_some() {
                continue;
            }
            let ok = match self.commitment {
                Commitment::Confirmed => e.complete() && (e.confirmed || e.rooted),
                Commitment::Finalized => e.rooted,
                // Never asked: under `Processed` banks freeze in `advance_forks`.
                Commitment::Processed => e.complete(),
            };
            if !ok {
                continue;
            }
            ready += 1;
            // A rooted child beats a merely confirmed one; otherwise the lowest slot.
            match pick {
                None => pick = Some((s, e.rooted)),
                Some((_, false)) if e.rooted => pick = Some((s, true)),
                Some(_) => {}
            }
        }
        if ready > 1 {
            cx.counters.irregular(Irregularity::ConflictingForks);
        }
        pick.map(|(s, _)| s)
    }

    /// Drops what the committed chain has passed: entries at or below the base, and slots whose
    /// parent is below the base or dropped.
    fn prune(&mut self, cx: &Cx<'_, Rec>) {
        if let Some(b) = self.base {
            let below: Vec<u64> = self.slots.range(..=b).map(|(s, _)| *s).collect();
            let mut passed = 0u64;
            for s in below {
                if self.slots.remove(&s).is_some_and(|e| e.dropped.is_none()) {
                    passed += 1;
                }
            }
            cx.counters.dropped(DropReason::Abandoned, passed);
        }
        let base = self.base;
        let mut dropped = BTreeSet::new();
        let mut newly = Vec::new();
        // Ascending order visits parents before children, so drops cascade in one pass.
        for (&s, e) in self.slots.iter_mut() {
            if e.dropped.is_some() {
                dropped.insert(s);
                continue;
            }
            if let Some(p) = e.parent
                && (base.is_some_and(|b| p < b) || dropped.contains(&p))
            {
                e.dropped = Some(DropReason::Abandoned);
                dropped.insert(s);
                newly.push(s);
            }
        }
        cx.counters.dropped(DropReason::Abandoned, newly.len() as u64);
        cx.discarded(cx.stripes.close(&newly));
    }

    /// Keeps the tracked slots within bounds (see `docs/ADAPTER.md`, "Bounded memory").
    fn enforce_bounds(&mut self, cx: &Cx<'_, Rec>) {
        let live: Vec<u64> = self.slots.iter().filter(|(_, e)| e.dropped.is_none()).map(|(s, _)| *s).collect();
        if live.len() > self.max_pending {
            let victims = &live[..live.len() - self.max_pending];
            for s in victims {
                if let Some(e) = self.slots.get_mut(s) {
                    e.dropped = Some(DropReason::Overflow);
                }
            }
            cx.counters.dropped(DropReason::Overflow, victims.len() as u64);
            cx.discarded(cx.stripes.close(victims));
            self.prune(cx);
        }
        // Dropped markers only refuse late events; past twice the bound the oldest are forgotten.
        let limit = self.max_pending.saturating_mul(2);
        if self.slots.len() > limit {
            let excess = self.slots.len() - limit;
            let old: Vec<u64> = self
                .slots
                .iter()
                .filter(|(_, e)| e.dropped.is_some() && !e.frozen)
                .map(|(s, _)| *s)
                .take(excess)
                .collect();
            for s in &old {
                self.slots.remove(s);
            }
            cx.stripes.forget(&old);
        }
    }

    /// `Commitment::Processed`: queues a freeze for every complete bank whose parent is frozen
    /// (parents first), reports the frozen banks that became confirmed in chain order, and roots
    /// the engine at the highest frozen rooted bank.
    fn advance_forks(&mut self, cx: &Cx<'_, Rec>) {
        let Some(base) = self.base else { return };
        let keys: Vec<u64> = self.slots.keys().copied().collect();
        // Ascending order visits a parent before its children, so one pass freezes a chain.
        for &s in &keys {
            let Some(e) = self.slots.get(&s) else { continue };
            if e.frozen || e.dropped.is_some() || !e.complete() {
                continue;
            }
            let Some(p) = e.parent else { continue };
            if p == base || self.slots.get(&p).is_some_and(|pe| pe.frozen && pe.dropped.is_none()) {
                self.freeze(s, p, cx);
            }
        }
        for &s in &keys {
            let Some(e) = self.slots.get(&s) else { continue };
            if !e.frozen || e.reported || e.dropped.is_some() || !(e.confirmed || e.rooted) {
                continue;
            }
            let Some(p) = e.parent else { continue };
            if p == base || self.slots.get(&p).is_some_and(|pe| pe.reported && pe.dropped.is_none()) {
                if let Some(e) = self.slots.get_mut(&s) {
                    e.reported = true;
                }
                self.jobs.push_back(Job::Confirm { slot: s, block: None });
            }
        }
        // Rooted flags run down to the base, and a reported bank's chain is reported: the
        // highest reported rooted bank is the new root.
        let top = self.slots.iter().rev().find(|(_, e)| e.rooted && e.reported && e.dropped.is_none()).map(|(s, _)| *s);
        if let Some(s) = top {
            self.root_at(s, cx);
        }
    }

    /// Queues the freeze of bank `slot` on `parent`.
    fn freeze(&mut self, slot: u64, parent: u64, cx: &Cx<'_, Rec>) {
        let (buffers, hint) = cx.stripes.take_frozen(slot);
        // As for a commit: the bank hash belongs to the bank only if its SlotHashes write names
        // the parent it is frozen on.
        let parent_bank_hash = hint.filter(|(p, _)| *p == parent).and_then(|(_, h)| h);
        if let Some(e) = self.slots.get_mut(&slot) {
            e.frozen = true;
        }
        self.jobs.push_back(Job::Slot {
            slot,
            parent: Some(parent),
            kind: CommitKind::Slot,
            buffers,
            parent_bank_hash,
            block: None,
        });
    }

    /// Makes the frozen bank `slot` the base: its chain is finalized, and everything not
    /// descending from it is passed.
    fn root_at(&mut self, slot: u64, cx: &Cx<'_, Rec>) {
        let Some(old) = self.base else { return };
        // The chain becomes rooted: taken out first so the prune does not count it abandoned.
        let mut cur = slot;
        while cur > old {
            match self.slots.remove(&cur).and_then(|e| e.parent) {
                Some(p) => cur = p,
                None => break,
            }
        }
        self.set_base(slot, cx);
        cx.discarded(cx.stripes.prune_below(slot));
        self.jobs.push_back(Job::Root { slot, blocks: BTreeMap::new() });
        self.prune(cx);
    }

    /// Queues the drop of every frozen bank the state machine dropped (dead, abandoned, over
    /// the bound), so the engine takes its root back.
    fn flush_drops(&mut self) {
        for (&s, e) in self.slots.iter_mut() {
            if e.frozen && e.dropped.is_some() {
                e.frozen = false;
                self.jobs.push_back(Job::Drop { slot: s });
            }
        }
    }

    /// The fork engine refused to freeze `slot`: it is dropped, and with it every bank built on
    /// it (whose freezes the engine refuses too). Like an overflow, the fork cannot continue
    /// past it; the refusal shows in the metrics.
    pub(crate) fn on_refused(&mut self, slot: u64, cx: &Cx<'_, Rec>) {
        if let Some(e) = self.slots.get_mut(&slot) {
            e.frozen = false;
            if e.dropped.is_none() {
                e.dropped = Some(DropReason::Refused);
                cx.counters.dropped(DropReason::Refused, 1);
                cx.discarded(cx.stripes.close(&[slot]));
            }
        }
        self.advance(cx);
    }

    /// Brings everything up to date and queues every slot that became ready, in chain order.
    pub(crate) fn advance(&mut self, cx: &Cx<'_, Rec>) {
        self.absorb_fresh(cx);
        self.resolve_hints(cx);
        if self.base.is_none() {
            self.try_genesis(cx);
        }
        if self.base.is_some() {
            self.prune(cx);
            if self.forks {
                self.advance_forks(cx);
            } else {
                while let Some(next) = self.next_ready(cx) {
                    self.decide(next, CommitKind::Slot, cx);
                    self.prune(cx);
                }
            }
        }
        self.enforce_bounds(cx);
        if self.forks {
            self.flush_drops();
        }
        // Block metadata goes with its slot when the slot is dropped, unless a queued job still
        // reads it (under `Processed`, a freeze queued before its fork was passed).
        let (slots, jobs) = (&self.slots, &self.jobs);
        self.blocks
            .retain(|s, _| slots.get(s).is_none_or(|e| e.dropped.is_none()) || jobs.iter().any(|j| j.wants_block(*s)));
        let live = self.slots.values().filter(|e| e.dropped.is_none()).count();
        cx.counters.pending_slots.store(live as u64, Ordering::Relaxed);
        cx.counters.queued_commits.store(self.jobs.len() as u64, Ordering::Relaxed);
    }
}
