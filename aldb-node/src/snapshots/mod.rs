//! A committed or frozen bank → the snapshot writer: files, the slot-status journal, and what
//! becomes of a write that fails ([`WritePolicy`]).
//!
//! The writer runs on a thread of its own ([`aldb_snapshot::SnapshotWriter`]) and keeps only its
//! tables of where records live on disk (and, in fork mode, per-bank undo lists), never a tree:
//! the tree data comes from the front end's engine, as change sets captured at commit or freeze.
//! Nothing here changes a root. A bank the writer refuses is logged and counted, its buffers
//! recycled ([`crate::Spares`]).

mod retry;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use aldb_snapshot::{SlotInput, SlotMark, SnapshotError, SnapshotWriter, StartupSpill, WriterStats};

use crate::config::{NodeConfig, WritePolicy};
use crate::error::NodeError;
use crate::spares::Spares;
use crate::stats::NodeStats;
pub(crate) use retry::{HeldWake, Hold};

/// The pipeline's side of the snapshot writer; see the [module documentation](self).
pub struct Snapshots {
    name: &'static str,
    writer: SnapshotWriter,
    /// The snapshot directory, looked at to tell a failure that can pass from one that cannot.
    dir: PathBuf,
    policy: WritePolicy,
    stats: Arc<NodeStats>,
    spares: Arc<Spares>,
    /// Whether a full snapshot went in: the writer refuses deltas before one.
    started: bool,
    /// [`WritePolicy::HandOff`]: snapshots stopped for good (the writer stopped, or a bank came
    /// that cannot be written).
    failed: bool,
    /// Whether the writer's refusal was logged (once per run of refusals).
    writer_failing: bool,
    /// [`WritePolicy::HoldAndRetry`]: what a held bank waits on.
    holder: Option<Arc<dyn Hold>>,
}

impl std::fmt::Debug for Snapshots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshots").field("dir", &self.dir).field("policy", &self.policy).finish_non_exhaustive()
    }
}

impl Snapshots {
    /// Starts the writer as `config` says.
    pub fn start(config: &NodeConfig, stats: Arc<NodeStats>, spares: Arc<Spares>) -> Result<Self, NodeError> {
        let dir = config.writer.dir.clone();
        let writer = SnapshotWriter::start(config.writer_config(), None)
            .map_err(|source| NodeError::SnapshotWriter { dir: dir.clone(), source })?;
        Ok(Self {
            name: config.name,
            writer,
            dir,
            policy: config.writes,
            stats,
            spares,
            started: false,
            failed: false,
            writer_failing: false,
            holder: None,
        })
    }

    /// The writer's own counters (files published, bytes, fork tables).
    pub fn writer_stats(&self) -> &Arc<WriterStats> {
        self.writer.stats()
    }

    /// What a bank held for a retry waits on ([`WritePolicy::HoldAndRetry`]).
    pub(crate) fn set_holder(&mut self, holder: Arc<dyn Hold>) {
        self.holder = Some(holder);
    }

    /// A spill for a streaming startup's accounts in the snapshot directory
    /// ([`crate::StartupAccounts`]).
    pub(crate) fn startup_spill(&self, bits: u8) -> Result<StartupSpill, SnapshotError> {
        self.writer.startup_spill(bits)
    }

    /// Whether a bank of `slot` can be written now ([`WritePolicy::HandOff`]): not after
    /// snapshots stopped, and not a delta before any full state (only possible if the base was
    /// lost: it is always the first). A bank that cannot is counted as skipped.
    pub fn ready(&self, slot: u64, full: bool) -> bool {
        if self.failed {
            self.skip();
            return false;
        }
        if !full && !self.started {
            log::error!("{}: slot {slot} committed before any base state; snapshots cannot start", self.name);
            self.skip();
            return false;
        }
        true
    }

    /// Snapshots stop until restart: a bank came that cannot be written (`why`).
    pub fn stop(&mut self, why: &str) {
        log::error!("{}: {why}", self.name);
        self.failed = true;
        self.skip();
    }

    fn skip(&self) {
        NodeStats::add(&self.stats.snapshot_skipped, 1);
    }

    /// Writes a bank (a full state, or a delta on its parent) as the [`WritePolicy`] says.
    pub fn write(&mut self, input: SlotInput) {
        match self.policy {
            WritePolicy::HandOff => self.hand_off(input),
            WritePolicy::HoldAndRetry => self.write_or_hold(input),
        }
    }

    /// Hands a bank to the writer's queue (waiting while it is full). A failing writer holds
    /// slots and retries by itself; it refuses them only once stopped for good, and then
    /// snapshots stop here too. Roots are still committed and counted.
    fn hand_off(&mut self, input: SlotInput) {
        let (slot, full) = (input.slot, input.full);
        if !self.ready(slot, full) {
            return;
        }
        let t = Instant::now();
        let result = self.writer.submit(input);
        self.stats.submit_latency.observe(t.elapsed());
        match result {
            Ok(()) => {
                self.started |= full;
                NodeStats::add(&self.stats.snapshot_submitted, 1);
            }
            Err(e) => self.stop(&format!("snapshots stopped at slot {slot} until restart: {e}")),
        }
    }

    /// Journals what became of a bank beside the files (and, on forks, releases or drops the
    /// bank's tables).
    pub fn mark(&mut self, slot: u64, mark: SlotMark) {
        if self.policy == WritePolicy::HandOff && (self.failed || !self.started) {
            return;
        }
        if let Err(e) = self.writer.mark(slot, mark) {
            self.writer_error(slot, "mark", &e);
        }
    }

    /// The writer refused a submission or a mark: it stopped for good.
    fn writer_error(&mut self, slot: u64, what: &str, e: &SnapshotError) {
        NodeStats::add(&self.stats.writer_errors, 1);
        if self.policy == WritePolicy::HandOff {
            self.failed = true;
        }
        if !self.writer_failing {
            log::error!("{}: snapshot writer refused to {what} slot {slot} (files stop until restart): {e}", self.name);
            self.writer_failing = true;
        }
    }

    /// Keeps the buffers the writer is done with, and logs and counts the banks it refused
    /// (their roots stand, their files and those of their descendants are not served).
    pub fn collect(&mut self) {
        self.spares.collect(&self.writer);
        for r in self.writer.take_refused() {
            self.refused(r.slot, &r.error);
            if let Some(input) = r.input {
                self.spares.recycle(input);
            }
        }
    }

    /// A bank the writer did not write and that is not tried again.
    fn refused(&self, slot: u64, error: &dyn std::fmt::Display) {
        NodeStats::add(&self.stats.banks_refused, 1);
        log::warn!("{}: snapshot of slot {slot} not written: {error}", self.name);
    }

    /// Waits until everything handed over so far is written (or refused).
    pub fn flush(&self) {
        if let Err(e) = self.writer.flush() {
            log::debug!("{}: flush: {e}", self.name);
        }
    }

    /// Waits for every submitted bank to be written and shuts the writer down; the writer's
    /// error, if it had one.
    pub fn finish(self) -> Result<(), NodeError> {
        let flushed = self.writer.flush();
        let shut = self.writer.shutdown();
        Ok(flushed.and(shut)?)
    }
}
