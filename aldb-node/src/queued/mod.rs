//! The pipeline on a thread of its own behind a bounded queue, for a front end that must never
//! wait (the in-process module, called on the validator's replay thread).
//!
//! The front end captures each frozen bank's change set as it freezes it and copies the bank's
//! accounts into a batch; both go through the bounded [`queue`] to the pipeline's thread
//! ([`worker`]), which hands them to the snapshot writer, journals statuses and makes the
//! records. Pushing never waits: a full queue merges or gives up a bank (counted in
//! [`NodeStats`]), and a failing disk only delays files and records
//! ([`WritePolicy::HoldAndRetry`](crate::WritePolicy::HoldAndRetry)). No root depends on any of it.

pub(crate) mod queue;
mod worker;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;

use aldb_core::ChangeSet;
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput, WriterStats};

use crate::bank_hashes::{BankHashes, Frozen};
use crate::config::NodeConfig;
use crate::error::NodeError;
use crate::records::{BankRecord, Records};
use crate::snapshots::Snapshots;
use crate::spares::Spares;
use crate::stats::NodeStats;
use queue::{Item, Pushed, Queue};
use worker::Worker;

/// Lost banks remembered, so their descendants are known lost too.
const MAX_LOST: usize = 1 << 14;

/// How much may wait for the pipeline's thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueBounds {
    /// Frozen banks that may wait before the queue merges or drops them.
    pub banks: usize,
    /// Bytes of change sets and account data that may wait.
    pub bytes: usize,
}

/// The running pipeline (the front end's side of it); see the [module documentation](self).
pub struct Queued {
    name: &'static str,
    queue: Arc<Queue>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<NodeStats>,
    writer_stats: Arc<WriterStats>,
    spares: Arc<Spares>,
    /// Banks not written (and so neither their descendants) since the last base.
    lost: BTreeSet<u64>,
}

impl std::fmt::Debug for Queued {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Queued").field("stats", &self.stats).finish_non_exhaustive()
    }
}

impl Queued {
    /// Starts the snapshot writer and opens the record log as `config` says, and the thread
    /// that feeds them.
    pub fn start(config: &NodeConfig, bounds: QueueBounds) -> Result<Self, NodeError> {
        let stats = Arc::new(NodeStats::default());
        let spares = Arc::new(Spares::default());
        let mut records = Records::start(config)?;
        let bank_hashes = Arc::new(BankHashes::new(config.bank_hash_slots, stats.evidence.clone(), config.name));
        if let Some(r) = records.as_mut() {
            r.set_bank_hashes(bank_hashes.clone());
        }
        let mut snapshots = Snapshots::start(config, stats.clone(), spares.clone())?;
        let writer_stats = snapshots.writer_stats().clone();
        let queue = Arc::new(Queue::new(bounds.banks, bounds.bytes, stats.clone()));
        snapshots.set_holder(queue.clone());
        let worker = Worker {
            name: config.name,
            queue: queue.clone(),
            snapshots,
            records,
            bank_hashes,
            stats: stats.clone(),
            base_records: None,
        };
        let thread = std::thread::Builder::new()
            .name("aldb-bank-sink".into())
            .spawn(move || worker.run())
            .map_err(|source| NodeError::Thread { thread: "writer", source })?;
        log::info!("{}: snapshot files and records in {}", config.name, config.writer.dir.display());
        Ok(Self { name: config.name, queue, thread: Some(thread), stats, writer_stats, spares, lost: BTreeSet::new() })
    }

    /// The pipeline's counters.
    pub fn stats(&self) -> &Arc<NodeStats> {
        &self.stats
    }

    /// The snapshot writer's own counters (files published, bytes, fork tables).
    pub fn writer_stats(&self) -> &Arc<WriterStats> {
        &self.writer_stats
    }

    /// A change set to capture a freeze into, and a batch for its accounts: emptied ones back
    /// from the writer when there are, so a slot's buffers are not allocated anew each time.
    pub fn buffers(&self) -> (ChangeSet, AccountBatch) {
        self.spares.take().unwrap_or_else(|| (ChangeSet::new(CAPTURE_OPTIONS), AccountBatch::default()))
    }

    /// A whole state built by the front end: written as a full file, every later bank on top;
    /// journaled confirmed and finalized as built, with both records.
    pub fn base(&mut self, input: SlotInput) {
        self.lost.clear();
        if self.queue.push_base(input) {
            NodeStats::add(&self.stats.banks_queued, 1);
        } else {
            NodeStats::add(&self.stats.banks_lost, 1);
        }
    }

    /// A frozen bank (`input.parent` set). A new version of a slot replaces the old one.
    pub fn bank(&mut self, input: SlotInput) {
        let slot = input.slot;
        self.lost.remove(&slot);
        if input.parent.is_some_and(|p| self.lost.contains(&p)) {
            self.lose(slot, "its parent was not written");
            return;
        }
        match self.queue.push_bank(input) {
            Pushed::Queued => NodeStats::add(&self.stats.banks_queued, 1),
            Pushed::Merged => NodeStats::add(&self.stats.banks_merged, 1),
            Pushed::Lost => self.lose(slot, "the writer queue is full"),
        }
    }

    fn lose(&mut self, slot: u64, why: &str) {
        NodeStats::add(&self.stats.banks_lost, 1);
        if self.lost.is_empty() {
            log::error!(
                "{}: slot {slot} not written ({why}); its fork has no files until a new base (counted in banks_lost)",
                self.name
            );
        }
        if self.lost.len() >= MAX_LOST {
            self.lost.pop_first();
        }
        self.lost.insert(slot);
    }

    /// What the validator said of a frozen bank, for its records.
    pub fn meta(&self, slot: u64, frozen: Frozen) {
        self.queue.push(Item::Meta(slot, frozen));
    }

    /// Banks newly confirmed, oldest first: journaled `confirmed`, with their `confirmed`
    /// records.
    pub fn confirmed(&self, banks: Vec<BankRecord>) {
        if !banks.is_empty() {
            self.queue.push(Item::Confirmed(banks));
        }
    }

    /// `slot` is the new root; `banks` the unrooted banks it finalized, oldest first, and
    /// `abandoned` those it dropped.
    pub fn finalized(&mut self, slot: u64, banks: Vec<BankRecord>, abandoned: Vec<u64>) {
        // Below the root nothing is frozen again; a lost root keeps every later bank lost.
        self.lost = self.lost.split_off(&slot);
        self.queue.push(Item::Finalized(slot, banks, abandoned));
    }

    /// Banks dropped (a dead one and its descendants).
    pub fn dead(&mut self, slot: u64, dropped: &[u64]) {
        for s in dropped {
            self.lost.remove(s);
        }
        self.queue.push(Item::Dead(slot, dropped.to_vec()));
    }

    /// Waits until everything queued so far is written (or refused) by the writer.
    pub fn flush(&self) {
        let (tx, rx) = mpsc::channel();
        if self.queue.push(Item::Flush(tx)) {
            let _ = rx.recv();
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        // What is queued is still written: the thread drains the queue before it stops.
        self.queue.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
