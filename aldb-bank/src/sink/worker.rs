//! The writer thread: takes the queue in order, hands banks and marks to the fork-mode snapshot
//! writer (which may make it wait for the disk; replay never does) and makes the root records.
//! A bank whose write fails for a reason that can pass is held and tried again (`retry`).

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::SyncSender;

use aldb_core::ChangeSet;
use aldb_snapshot::{AccountBatch, SlotInput, SlotMark, SnapshotWriter};

use super::queue::{BankId, Item, Queue};
use super::records::Records;
use super::stats::SinkStats;
use crate::meta::BankMeta;

/// Emptied buffers holding more than this are dropped, not handed back: a base's capture of the
/// whole tree would otherwise stay allocated for the rest of the run.
const MAX_SPARE_BYTES: usize = 64 << 20;
/// Bank metadata kept at most: far more banks than are ever unrooted at once.
const MAX_METAS: usize = 1 << 14;

pub(crate) struct Worker {
    pub(crate) queue: Arc<Queue>,
    pub(crate) writer: SnapshotWriter,
    pub(crate) records: Option<Records>,
    pub(crate) stats: Arc<SinkStats>,
    /// Where emptied buffers go back to the module, for the next freezes to fill.
    pub(crate) spares: SyncSender<(ChangeSet, AccountBatch)>,
    /// Each held bank's metadata, for its records.
    pub(crate) metas: BTreeMap<u64, BankMeta>,
    /// A base whose records wait for its metadata (which follows the build when the base is
    /// genesis), or for the next status message.
    pub(crate) base_records: Option<BankId>,
    /// Whether the writer's refusal was logged (once per run of refusals).
    pub(crate) writer_failing: bool,
    /// The snapshot directory, looked at to tell a failure that can pass from one that cannot.
    pub(crate) dir: PathBuf,
}

impl Worker {
    /// Runs until the queue is closed and drained, then flushes and shuts the writer down.
    pub(crate) fn run(mut self) {
        self.stats.running.store(1, Ordering::Relaxed);
        while let Some(item) = self.queue.pop() {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| self.handle(item))) {
                // The writer's tables may be half-moved: writing on could serve a wrong file.
                let what = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                log::error!(
                    "aldb-bank: the snapshot writer thread panicked, no more files or records until restart: {what}"
                );
                break;
            }
        }
        self.queue.discard();
        self.stats.running.store(0, Ordering::Relaxed);
        let Self { writer, .. } = self;
        if let Err(e) = writer.flush().and_then(|()| writer.shutdown()) {
            log::error!("aldb-bank: snapshot writer stopped with an error: {e}");
        }
    }

    fn handle(&mut self, item: Item) {
        match item {
            Item::Base(input) => {
                let base = BankId { slot: input.slot, parent: None, root: input.root };
                self.metas.clear();
                self.write(input);
                // The base is final and confirmed as built (the journal says so at once).
                self.mark(base.slot, SlotMark::Confirmed);
                self.mark(base.slot, SlotMark::Finalized);
                self.base_records = Some(base);
            }
            Item::Bank(input) => self.write(input),
            Item::Meta(slot, meta) => {
                if self.metas.len() >= MAX_METAS {
                    self.metas.pop_first();
                }
                self.metas.insert(slot, meta);
                if self.base_records.is_some_and(|b| b.slot == slot) {
                    self.base_records();
                }
            }
            Item::Confirmed(banks) => {
                self.base_records();
                for b in &banks {
                    self.mark(b.slot, SlotMark::Confirmed);
                    if let Some(r) = self.records.as_mut() {
                        r.confirmed(b, self.metas.get(&b.slot), &self.stats);
                    }
                }
            }
            Item::Finalized(slot, banks, _) => {
                self.base_records();
                self.mark(slot, SlotMark::Finalized);
                for b in &banks {
                    if let Some(r) = self.records.as_mut() {
                        r.finalized(b, self.metas.get(&b.slot), &self.stats);
                    }
                }
                // Banks below the root are final or gone: their metadata is no longer asked for.
                self.metas = self.metas.split_off(&slot);
            }
            Item::Dead(slot, _) => self.mark(slot, SlotMark::Abandoned),
            Item::Flush(done) => {
                if let Err(e) = self.writer.flush() {
                    log::debug!("aldb-bank: flush: {e}");
                }
                let _ = done.send(());
            }
        }
        self.collect();
    }

    /// The base's own records, once: confirmed and finalized as built.
    fn base_records(&mut self) {
        let Some(base) = self.base_records.take() else { return };
        if let Some(r) = self.records.as_mut() {
            let meta = self.metas.get(&base.slot);
            r.confirmed(&base, meta, &self.stats);
            r.finalized(&base, meta, &self.stats);
        }
    }

    fn mark(&mut self, slot: u64, mark: SlotMark) {
        if let Err(e) = self.writer.mark(slot, mark) {
            self.writer_error(slot, "mark", &e);
        }
    }

    pub(crate) fn writer_error(&mut self, slot: u64, what: &str, e: &aldb_snapshot::SnapshotError) {
        SinkStats::add(&self.stats.writer_errors, 1);
        if !self.writer_failing {
            log::error!("aldb-bank: snapshot writer refused to {what} slot {slot} (files stop until restart): {e}");
            self.writer_failing = true;
        }
    }

    /// Hands emptied buffers back and counts the banks the writer refused.
    fn collect(&mut self) {
        while let Some(spare) = self.writer.take_spare() {
            if spare.0.heap_bytes() + spare.1.heap_bytes() > MAX_SPARE_BYTES {
                continue;
            }
            if self.spares.try_send(spare).is_err() {
                break;
            }
        }
        for r in self.writer.take_refused() {
            self.refused(r.slot, &r.error);
            if let Some(input) = r.input {
                self.recycle(input);
            }
        }
    }

    /// Gives back the buffers of an input the writer no longer needs, emptied, for the next
    /// freezes to fill.
    pub(crate) fn recycle(&self, input: SlotInput) {
        let SlotInput { mut changes, mut accounts, .. } = input;
        if changes.heap_bytes() + accounts.heap_bytes() > MAX_SPARE_BYTES {
            return;
        }
        changes.clear();
        accounts.clear();
        let _ = self.spares.try_send((changes, accounts));
    }

    /// A bank the writer did not write and that is not tried again.
    pub(crate) fn refused(&self, slot: u64, error: &dyn std::fmt::Display) {
        SinkStats::add(&self.stats.banks_refused, 1);
        log::warn!("aldb-bank: snapshot of slot {slot} not written: {error}");
    }
}
