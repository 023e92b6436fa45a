//! The sink: the module's own tree feeds the fork-mode snapshot writer and the root records, so
//! a patched node keeps one tree, not two (the geyser plugin's is not needed).
//!
//! The module captures each frozen bank's change set as it freezes it
//! ([`aldb_core::ForkEngine::freeze_capture`]) and copies the bank's accounts into a batch; both
//! go through a bounded [`queue`] to a writer thread, which hands them to an
//! [`aldb_snapshot::SnapshotWriter`] in fork mode and makes the records. The writer keeps only
//! its tables of where records live on disk and per-bank undo lists, never a second tree. The
//! module never waits for the writer thread: a full queue merges or gives up a bank (counted in
//! [`SinkStats`]), and a failing disk only delays files and records ([`retry`]: a write that
//! fails for a reason that can pass is tried again while the queue absorbs what follows). No root
//! depends on any of it.

mod queue;
mod records;
mod retry;
mod stats;
#[cfg(test)]
mod test_support;
mod worker;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;

use aldb_core::ChangeSet;
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput, SnapshotWriter, WriterConfig, WriterStats};

pub(crate) use queue::BankId;
use queue::{Item, Pushed, Queue};
use records::Records;
pub use stats::SinkStats;
use worker::Worker;

use crate::config::SinkConfig;
use crate::meta::BankMeta;

/// Emptied buffers waiting to be filled again.
const SPARES: usize = 4;
/// Lost banks remembered, so their descendants are known lost too.
const MAX_LOST: usize = 1 << 14;

/// The running sink (the module's side of it).
pub(crate) struct Sink {
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<SinkStats>,
    writer_stats: Arc<WriterStats>,
    spares: Receiver<(ChangeSet, AccountBatch)>,
    /// Banks not written (and so neither their descendants) since the last base.
    lost: BTreeSet<u64>,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink").field("stats", &self.stats).finish_non_exhaustive()
    }
}

impl Sink {
    /// Starts the writer (on the config's directory, in fork mode) and opens the record log.
    pub(crate) fn start(config: &SinkConfig) -> Result<Self, String> {
        let wc = WriterConfig {
            forks: true,
            // A failed write is tried again with the input the writer hands back (`retry`).
            return_refused: true,
            keep_slots: config.keep_slots,
            refresh_slots: config.refresh_slots,
            direct_io: config.direct_io,
            hold_for_shipper: config.hold_for_shipper,
            ..WriterConfig::new(&config.snapshot_dir)
        };
        let records = match (&config.records, config.genesis_hash) {
            (Some(r), Some(genesis)) => {
                Some(Records::open(config.snapshot_dir.clone(), genesis, r, config.hold_for_shipper)?)
            }
            _ => None,
        };
        let writer = SnapshotWriter::start(wc, None)
            .map_err(|e| format!("cannot start the snapshot writer in {}: {e}", config.snapshot_dir.display()))?;
        let stats = Arc::new(SinkStats::default());
        let writer_stats = writer.stats().clone();
        let queue = Arc::new(Queue::new(config.queue_bound, config.queue_bytes, stats.clone()));
        let (spare_tx, spares) = mpsc::sync_channel(SPARES);
        let worker = Worker {
            queue: queue.clone(),
            writer,
            records,
            stats: stats.clone(),
            spares: spare_tx,
            metas: Default::default(),
            base_records: None,
            writer_failing: false,
            dir: config.snapshot_dir.clone(),
        };
        let thread = std::thread::Builder::new()
            .name("aldb-bank-sink".into())
            .spawn(move || worker.run())
            .map_err(|e| format!("cannot start the writer thread: {e}"))?;
        log::info!("aldb-bank: snapshot files and records in {}", config.snapshot_dir.display());
        Ok(Self { queue, thread: Some(thread), stats, writer_stats, spares, lost: BTreeSet::new() })
    }

    pub(crate) fn stats(&self) -> &Arc<SinkStats> {
        &self.stats
    }

    /// The snapshot writer's own counters (files published, bytes, fork tables).
    pub(crate) fn writer_stats(&self) -> &Arc<WriterStats> {
        &self.writer_stats
    }

    /// A change set to capture a freeze into, and a batch for its accounts: emptied ones back
    /// from the writer when there are, so a slot's buffers are not allocated anew each time.
    pub(crate) fn buffers(&self) -> (ChangeSet, AccountBatch) {
        self.spares.try_recv().unwrap_or_else(|_| (ChangeSet::new(CAPTURE_OPTIONS), AccountBatch::default()))
    }

    /// A whole state built by the module: written as a full file, every later bank on top.
    pub(crate) fn base(&mut self, input: SlotInput) {
        self.lost.clear();
        if self.queue.push_base(input) {
            SinkStats::add(&self.stats.banks_queued, 1);
        } else {
            SinkStats::add(&self.stats.banks_lost, 1);
        }
    }

    /// A frozen bank (`input.parent` set). A new version of a slot replaces the old one.
    pub(crate) fn bank(&mut self, input: SlotInput) {
        let slot = input.slot;
        self.lost.remove(&slot);
        if input.parent.is_some_and(|p| self.lost.contains(&p)) {
            self.lose(slot, "its parent was not written");
            return;
        }
        match self.queue.push_bank(input) {
            Pushed::Queued => SinkStats::add(&self.stats.banks_queued, 1),
            Pushed::Merged => SinkStats::add(&self.stats.banks_merged, 1),
            Pushed::Lost => self.lose(slot, "the writer queue is full"),
        }
    }

    fn lose(&mut self, slot: u64, why: &str) {
        SinkStats::add(&self.stats.banks_lost, 1);
        if self.lost.is_empty() {
            log::error!(
                "aldb-bank: slot {slot} not written ({why}); its fork has no files until a new base (counted in \
                 banks_lost)"
            );
        }
        if self.lost.len() >= MAX_LOST {
            self.lost.pop_first();
        }
        self.lost.insert(slot);
    }

    pub(crate) fn meta(&self, slot: u64, meta: BankMeta) {
        self.queue.push(Item::Meta(slot, meta));
    }

    pub(crate) fn confirmed(&self, banks: Vec<BankId>) {
        if !banks.is_empty() {
            self.queue.push(Item::Confirmed(banks));
        }
    }

    /// `slot` is the new root; `banks` the unrooted banks it finalized, oldest first, and
    /// `abandoned` those it dropped.
    pub(crate) fn finalized(&mut self, slot: u64, banks: Vec<BankId>, abandoned: Vec<u64>) {
        // Below the root nothing is frozen again; a lost root keeps every later bank lost.
        self.lost = self.lost.split_off(&slot);
        self.queue.push(Item::Finalized(slot, banks, abandoned));
    }

    /// Banks dropped (a dead one and its descendants).
    pub(crate) fn dead(&mut self, slot: u64, dropped: &[u64]) {
        for s in dropped {
            self.lost.remove(s);
        }
        self.queue.push(Item::Dead(slot, dropped.to_vec()));
    }

    /// Waits until everything queued so far is written (or refused) by the writer.
    pub(crate) fn flush(&self) {
        let (tx, rx) = mpsc::channel();
        if self.queue.push(Item::Flush(tx)) {
            let _ = rx.recv();
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        // What is queued is still written: the thread drains the queue before it stops.
        self.queue.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
