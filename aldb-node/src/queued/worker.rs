//! The pipeline's thread behind the queue: takes it in order, hands banks and marks to the
//! snapshot writer (which may make it wait for the disk; the front end never does) and makes
//! the root records.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use aldb_snapshot::SlotMark;
use aldb_verify::Commitment;

use super::queue::{Item, Queue};
use crate::bank_hashes::BankHashes;
use crate::records::{BankRecord, Records};
use crate::snapshots::Snapshots;
use crate::stats::NodeStats;

pub(super) struct Worker {
    pub(super) name: &'static str,
    pub(super) queue: Arc<Queue>,
    pub(super) snapshots: Snapshots,
    pub(super) records: Option<Records>,
    /// What the validator said of each held bank, for its records.
    pub(super) bank_hashes: Arc<BankHashes>,
    pub(super) stats: Arc<NodeStats>,
    /// A base whose records wait for its metadata (which follows the build when the base is
    /// genesis), or for the next status message.
    pub(super) base_records: Option<BankRecord>,
}

impl Worker {
    /// Runs until the queue is closed and drained, then flushes and shuts the writer down.
    pub(super) fn run(mut self) {
        self.stats.running.store(1, Ordering::Relaxed);
        let stopping =
            format!("{}: the snapshot writer thread panicked, no more files or records until restart", self.name);
        while let Some(item) = self.queue.pop() {
            let stats = self.stats.clone();
            if crate::panic::step(&stats, &stopping, || self.handle(item)).is_err() {
                break;
            }
        }
        self.queue.discard();
        self.stats.running.store(0, Ordering::Relaxed);
        if let Err(e) = self.snapshots.finish() {
            log::error!("{}: snapshot writer stopped with an error: {e}", self.name);
        }
    }

    fn handle(&mut self, item: Item) {
        match item {
            Item::Base(input) => {
                let base = BankRecord { slot: input.slot, parent: None, root: input.root, ..BankRecord::default() };
                self.bank_hashes.clear();
                self.snapshots.write(input);
                // The base is final and confirmed as built (the journal says so at once).
                self.snapshots.mark(base.slot, SlotMark::Confirmed);
                self.snapshots.mark(base.slot, SlotMark::Finalized);
                self.base_records = Some(base);
            }
            Item::Bank(input) => self.snapshots.write(input),
            Item::Meta(slot, frozen) => {
                self.bank_hashes.frozen(slot, frozen);
                if self.base_records.is_some_and(|b| b.slot == slot) {
                    self.base_records();
                }
            }
            Item::Confirmed(banks) => {
                self.base_records();
                for b in &banks {
                    self.snapshots.mark(b.slot, SlotMark::Confirmed);
                    self.record(b, Commitment::Confirmed);
                }
            }
            Item::Finalized(slot, banks, _) => {
                self.base_records();
                self.snapshots.mark(slot, SlotMark::Finalized);
                for b in &banks {
                    self.record(b, Commitment::Finalized);
                }
                // Banks below the root are final or gone: what was said of them is no longer
                // asked for.
                self.bank_hashes.forget_below(slot);
            }
            Item::Dead(slot, _) => self.snapshots.mark(slot, SlotMark::Abandoned),
            Item::Flush(done) => {
                self.snapshots.flush();
                let _ = done.send(());
            }
        }
        self.snapshots.collect();
    }

    fn record(&mut self, bank: &BankRecord, level: Commitment) {
        if let Some(r) = self.records.as_mut() {
            r.reached(bank, level, &self.stats);
        }
    }

    /// The base's own records, once: confirmed and finalized as built.
    fn base_records(&mut self) {
        let Some(base) = self.base_records.take() else { return };
        self.record(&base, Commitment::Confirmed);
        self.record(&base, Commitment::Finalized);
    }
}
