//! The snapshot writer: its own thread beside the engine, fed through a bounded queue.
//!
//! Policy when the queue is full: the committing thread waits (backpressure). Skipping a slot
//! would leave a gap in the proofs served, and dropping a change set would corrupt every later
//! snapshot; waiting instead slows commits to the disk's pace, and the time spent waiting is
//! counted so operators see it (`full_waits`, `wait_nanos`). Pruning runs on a third thread and
//! only ever deletes files no kept slot can reach, so it never blocks or breaks the writer.
//!
//! Policy on a write error (a full disk, an I/O error): the writer does not stop. The slot that
//! failed and every slot after it are merged, as `every > 1` merges slots, and the writer retries
//! after 1 s, doubling the wait up to 60 s. A retry rebuilds the writer's tables from the newest
//! file on disk (reading its whole tree once) and writes the merged slots as one file, marked in
//! its header as following a gap: the slots between are never served, and Hyades says why. The
//! validator is never restarted for it. The writer gives up, until restarted, only when the held
//! account data passes `max_recovery_bytes` or nothing was ever published to continue from
//! (without a full state in hand); `WriterStats::stopped` says so.
//!
//! On forks (`WriterConfig::forks`): every frozen bank is submitted with its parent, and its file
//! is written against the parent's written state (the `forks` module moves the writer's tables
//! between banks with per-bank undo and redo lists). A bank whose parent was not written is
//! refused with a typed error ([`SnapshotWriter::take_refused`]) and the writer goes on; marks
//! ([`SnapshotWriter::mark`]) release and drop banks and are journaled in `slot-status.log`
//! after the files they follow. A write error in fork mode refuses only that bank (the tables are
//! rolled back to its parent, and with [`WriterConfig::return_refused`] the refusal hands its
//! input back, so a caller may submit it again without having kept a copy); there is no merging
//! of held slots across forks. `docs/FORMAT.md`
//! ("Forks", "Slot-status journal") has the rules.
//!
//! Here: the handle the committing threads hold. Its settings and counters are `config`'s; the
//! writer thread is `run` (with its `failing`, `fork_mode` and `journal` parts), the pruner
//! `prune`; `scan` reads the directory at a start or a recovery, and `pending` merges slots.

mod config;
mod pending;
mod prune;
mod run;
mod scan;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use aldb_core::ChangeSet;
use aldb_format::format::MAX_FILE_BYTES;
use aldb_format::{SnapshotError, WriterStop};

use crate::batch::AccountBatch;
use crate::file_builder::supports_direct;
use crate::serializer::{CAPTURE_OPTIONS, Published, Serializer, SlotInput};

pub use config::{WriterConfig, WriterStats};
use prune::{PruneMsg, prune};
use run::{Outlets, run};
use scan::{Existing, scan};

type Callback = Box<dyn FnMut(&Published) + Send>;

/// What consensus said about a slot, given to [`SnapshotWriter::mark`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SlotMark {
    /// The slot was confirmed.
    Confirmed,
    /// The slot was rooted: its ancestors are final too, and banks not descending from it are
    /// dropped.
    Finalized,
    /// The slot's bank died (or its fork was abandoned): it and its descendants are dropped.
    Abandoned,
}

/// A bank the fork-mode writer did not write, and why.
#[derive(Debug)]
pub struct Refusal {
    /// The slot.
    pub slot: u64,
    /// Why it was not written.
    pub error: SnapshotError,
    /// The bank as it was submitted, unchanged (a failed write rolls the tables back and leaves
    /// its input as it was), when [`WriterConfig::return_refused`] is set; `None` otherwise.
    pub input: Option<SlotInput>,
}

/// Refusals kept for [`SnapshotWriter::take_refused`]; older ones are only counted.
const MAX_REFUSALS: usize = 1024;

/// What goes through the writer's queue, in order.
enum Item {
    Slot(SlotInput),
    Mark(u64, SlotMark),
}

/// The emptied buffers of a slot the writer has finished with.
type Spare = (ChangeSet, AccountBatch);

/// A running writer. Dropping it without [`SnapshotWriter::shutdown`] still drains the queue.
pub struct SnapshotWriter {
    tx: Option<SyncSender<Item>>,
    spare: Mutex<Receiver<Spare>>,
    thread: Option<JoinHandle<()>>,
    pruner: Option<JoinHandle<()>>,
    stats: Arc<WriterStats>,
    done: Arc<(Mutex<u64>, Condvar)>,
    /// The last error while the writer is failing or stopped; `None` once it writes again.
    failure: Arc<Mutex<Option<WriterStop>>>,
    /// Fork mode: banks refused since the last [`SnapshotWriter::take_refused`].
    refused: Arc<Mutex<VecDeque<Refusal>>>,
    /// The snapshot directory.
    dir: PathBuf,
}

impl std::fmt::Debug for SnapshotWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotWriter").field("stats", &self.stats).finish_non_exhaustive()
    }
}

impl SnapshotWriter {
    /// Starts the writer (and its pruner) on `config.dir`. `on_publish` is called on the writer
    /// thread after each file is durably published.
    pub fn start(config: WriterConfig, on_publish: Option<Callback>) -> Result<Self, SnapshotError> {
        if config.every == 0 || config.keep_slots == 0 || config.queue_bound == 0 {
            return Err(SnapshotError::Input("every, keep_slots and queue_bound must be at least 1".into()));
        }
        if config.forks && config.every != 1 {
            return Err(SnapshotError::Input("fork mode writes every bank: every must be 1".into()));
        }
        std::fs::create_dir_all(&config.dir).map_err(|e| SnapshotError::io("create", &config.dir, e))?;
        let Existing { files: existing, last_seq } = scan(&config.dir)?;
        let (tx, rx) = mpsc::sync_channel::<Item>(config.queue_bound);
        let (ptx, prx) = mpsc::channel::<PruneMsg>();
        let (spare_tx, spare_rx) = mpsc::sync_channel::<Spare>(config.queue_bound + 1);
        let stats = Arc::new(WriterStats::default());
        let done = Arc::new((Mutex::new(0u64), Condvar::new()));
        let failure = Arc::new(Mutex::new(None));
        let refused = Arc::new(Mutex::new(VecDeque::new()));
        let direct = config.direct_io && supports_direct(&config.dir);
        log::info!(
            "snapshot writer on {}: {}",
            config.dir.display(),
            if direct { "direct I/O" } else { "buffered I/O" }
        );
        let part_bytes = config.part_bytes.clamp(256, MAX_FILE_BYTES);
        let serializer = Serializer::new(&config.dir, last_seq, config.refresh_slots, direct, part_bytes);
        let thread = {
            let (stats, done, failure, refused) = (stats.clone(), done.clone(), failure.clone(), refused.clone());
            let cfg = config.clone();
            std::thread::Builder::new()
                .name("aldb-snapshot".into())
                .spawn(move || {
                    let out = Outlets { on_publish, pruner: ptx, spare: spare_tx, refused };
                    run(serializer, rx, &cfg, stats, done, failure, out)
                })
                .map_err(|e| SnapshotError::io("spawn writer", &config.dir, e))?
        };
        let pruner = {
            let (dir, keep, stats) = (config.dir.clone(), config.keep_slots, stats.clone());
            let hold = config.hold_for_shipper;
            std::thread::Builder::new()
                .name("aldb-prune".into())
                .spawn(move || prune(dir, keep, hold, existing, prx, stats))
                .map_err(|e| SnapshotError::io("spawn pruner", &config.dir, e))?
        };
        Ok(Self {
            tx: Some(tx),
            spare: Mutex::new(spare_rx),
            thread: Some(thread),
            pruner: Some(pruner),
            stats,
            done,
            failure,
            refused,
            dir: config.dir.clone(),
        })
    }

    /// A startup spill in this writer's directory, with `2^bits` partitions: the startup
    /// accounts on disk until the full snapshot is written from them
    /// ([`crate::AccountBatch::from_spill`]).
    pub fn startup_spill(&self, bits: u8) -> Result<crate::StartupSpill, SnapshotError> {
        crate::StartupSpill::create(&self.dir, bits)
    }

    /// Queues a status mark for `slot`, ordered with the slots submitted before and after it.
    /// The writer appends it to the slot-status journal (`docs/FORMAT.md`); in fork mode it also
    /// releases or drops banks (see [`SnapshotWriter`] on forks).
    pub fn mark(&self, slot: u64, mark: SlotMark) -> Result<(), SnapshotError> {
        self.stats.marks.fetch_add(1, Ordering::Relaxed);
        self.send(Item::Mark(slot, mark))
    }

    /// Fork mode: the banks refused since the last call (up to 1,024 kept; `fork_refused`
    /// counts them all).
    pub fn take_refused(&self) -> Vec<Refusal> {
        self.refused.lock().map(|mut r| r.drain(..).collect()).unwrap_or_default()
    }

    /// The writer's counters.
    pub fn stats(&self) -> &Arc<WriterStats> {
        &self.stats
    }

    /// Empty buffers to fill for the next slot: those of a slot already written when one is
    /// back (with its capacity), fresh ones otherwise. Reusing them keeps a slot's megabytes of
    /// change set and account data from being faulted in anew every slot.
    pub fn spare_buffers(&self) -> (ChangeSet, AccountBatch) {
        self.take_spare().unwrap_or_else(|| (ChangeSet::new(CAPTURE_OPTIONS), AccountBatch::default()))
    }

    /// The emptied buffers of a slot already written, if one is back; never allocates.
    pub fn take_spare(&self) -> Option<(ChangeSet, AccountBatch)> {
        self.spare.lock().ok().and_then(|rx| rx.try_recv().ok())
    }

    /// Queues one slot. Waits if the queue is full (see the module docs for why).
    /// While the writer is failing, submissions are accepted (and held); only a writer stopped
    /// for good refuses them.
    pub fn submit(&self, input: SlotInput) -> Result<(), SnapshotError> {
        self.send(Item::Slot(input))
    }

    fn send(&self, input: Item) -> Result<(), SnapshotError> {
        if self.stats.stopped.load(Ordering::Relaxed) != 0 {
            let reason = self.failure.lock().ok().and_then(|f| f.clone()).unwrap_or(WriterStop::Unknown);
            return Err(SnapshotError::Stopped(reason));
        }
        let Some(tx) = &self.tx else { return Err(SnapshotError::Stopped(WriterStop::ShutDown)) };
        self.stats.submitted.fetch_add(1, Ordering::Relaxed);
        match tx.try_send(input) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(input)) => {
                self.stats.full_waits.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                let r = tx.send(input).map_err(|_| SnapshotError::Stopped(WriterStop::ThreadExited));
                self.stats.wait_nanos.fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
                r
            }
            Err(TrySendError::Disconnected(_)) => Err(SnapshotError::Stopped(WriterStop::ThreadExited)),
        }
    }

    /// Waits until every submitted slot has been processed (written, or held while failing);
    /// returns the writer's error if it is failing or stopped.
    pub fn flush(&self) -> Result<(), SnapshotError> {
        let target = self.stats.submitted.load(Ordering::Relaxed);
        let (lock, cv) = &*self.done;
        let mut processed = lock.lock().map_err(|_| SnapshotError::Stopped(WriterStop::Panicked))?;
        while *processed < target {
            if self.stats.stopped.load(Ordering::Relaxed) != 0 {
                let reason = self.failure.lock().ok().and_then(|f| f.clone()).unwrap_or(WriterStop::Unknown);
                return Err(SnapshotError::Stopped(reason));
            }
            processed = cv
                .wait_timeout(processed, std::time::Duration::from_millis(50))
                .map_err(|_| SnapshotError::Stopped(WriterStop::Panicked))?
                .0;
        }
        match self.failure.lock().ok().and_then(|f| f.clone()) {
            Some(reason) => Err(SnapshotError::Stopped(reason)),
            None => Ok(()),
        }
    }

    /// Drains the queue, stops the threads and reports the writer's error if any.
    pub fn shutdown(mut self) -> Result<(), SnapshotError> {
        self.stop();
        match self.failure.lock().ok().and_then(|f| f.clone()) {
            Some(reason) => Err(SnapshotError::Stopped(reason)),
            None => Ok(()),
        }
    }

    fn stop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(t) = self.pruner.take() {
            let _ = t.join();
        }
    }
}

impl Drop for SnapshotWriter {
    fn drop(&mut self) {
        self.stop();
    }
}
