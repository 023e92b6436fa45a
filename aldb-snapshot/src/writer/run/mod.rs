//! The writer thread: takes slots and marks off the queue in order and writes them, on a single
//! chain ([`Run::write`]) or on forks (`fork_mode`); after a write error it holds the slots and
//! retries (`failing`); published banks and marks go to the slot-status journal (`journal`).

mod failing;
mod fork_mode;
mod journal;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use aldb_format::WriterStop;
use aldb_format::status::StatusJournal;

use crate::forks::Banks;
use crate::serializer::{Published, Serializer, SlotInput};
use crate::writer::pending::Pending;
use crate::writer::prune::PruneMsg;
use crate::writer::{Callback, Item, Refusal, Spare, WriterConfig, WriterStats};
use failing::Failing;

/// Where the writer thread sends what it is done with.
pub(super) struct Outlets {
    pub(super) on_publish: Option<Callback>,
    pub(super) pruner: mpsc::Sender<PruneMsg>,
    pub(super) spare: SyncSender<Spare>,
    pub(super) refused: Arc<Mutex<VecDeque<Refusal>>>,
}

/// The writer thread's state.
struct Run {
    ser: Serializer,
    dir: PathBuf,
    stats: Arc<WriterStats>,
    failure: Arc<Mutex<Option<WriterStop>>>,
    out: Outlets,
    max_recovery_bytes: usize,
    last_published: Option<u64>,
    failing: Option<Failing>,
    stopped: bool,
    /// Fork mode: the written banks; `None` on a single chain.
    forks: Option<Banks>,
    max_fork_banks: usize,
    max_fork_bytes: usize,
    /// Fork mode: whether resuming from the files on disk was tried since the tables were last
    /// lost (it reads the whole tree, so once).
    resume_tried: bool,
    /// The slot-status journal, opened on first use.
    journal: Option<StatusJournal>,
    keep_slots: u64,
    /// The newest slot published.
    newest: Option<u64>,
    /// Journal entries left by the last compaction: the next one waits until the file doubles.
    journal_kept: u64,
    /// Fork mode: the held banks' pin and base as of the last change (the banks themselves are
    /// taken out of `forks` while a write uses them).
    fork_pin: Option<u32>,
    fork_base: Option<u64>,
    /// [`WriterConfig::forks`].
    fork_mode: bool,
    /// [`WriterConfig::return_refused`].
    return_refused: bool,
}

impl Run {
    fn published(&mut self, p: Published, started: Instant) {
        let stats = &self.stats;
        stats.write_nanos.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        stats.published.fetch_add(1, Ordering::Relaxed);
        stats.last_slot.store(p.slot, Ordering::Relaxed);
        stats.bytes.fetch_add(p.bytes, Ordering::Relaxed);
        stats.account_bytes.fetch_add(p.account_bytes, Ordering::Relaxed);
        stats.refresh_bytes.fetch_add(p.refresh_bytes, Ordering::Relaxed);
        stats.table_bytes.store(self.ser.table_bytes() as u64, Ordering::Relaxed);
        self.last_published = Some(p.slot);
        if let Some(cb) = self.out.on_publish.as_mut() {
            cb(&p);
        }
        // On forks publication order is not slot order; a single chain keeps its old rule.
        let newest = if self.fork_mode { self.newest.map_or(p.slot, |n| n.max(p.slot)) } else { p.slot };
        self.newest = Some(newest);
        let pin = self.fork_pin;
        let _ = self.out.pruner.send(PruneMsg::Published { p, newest, pin });
    }

    fn set_failure(&self, reason: Option<WriterStop>) {
        if let Ok(mut f) = self.failure.lock() {
            *f = reason;
        }
    }

    /// Writes one input while healthy; on an error, starts failing with it held.
    fn write(&mut self, input: SlotInput) {
        let t = Instant::now();
        match self.ser.write(&input) {
            Ok(p) => {
                self.published(p, t);
                self.recycle(input);
            }
            Err(e) => self.start_failing(input, e),
        }
    }

    fn recycle(&mut self, input: SlotInput) {
        let SlotInput { mut changes, mut accounts, .. } = input;
        changes.clear();
        accounts.clear();
        // Nobody asking for spares (or enough already waiting) just drops them.
        let _ = self.out.spare.try_send((changes, accounts));
    }
}

pub(super) fn run(
    ser: Serializer,
    rx: Receiver<Item>,
    config: &WriterConfig,
    stats: Arc<WriterStats>,
    done: Arc<(Mutex<u64>, Condvar)>,
    failure: Arc<Mutex<Option<WriterStop>>>,
    out: Outlets,
) {
    let every = config.every;
    let mut w = Run {
        ser,
        dir: config.dir.clone(),
        stats,
        failure,
        out,
        max_recovery_bytes: config.max_recovery_bytes,
        last_published: None,
        failing: None,
        stopped: false,
        forks: config.forks.then(Banks::default),
        max_fork_banks: config.max_fork_banks,
        max_fork_bytes: config.max_fork_bytes,
        resume_tried: false,
        journal: None,
        keep_slots: config.keep_slots,
        newest: None,
        journal_kept: 0,
        fork_pin: None,
        fork_base: None,
        fork_mode: config.forks,
        return_refused: config.return_refused,
    };
    let mut pending = Pending::default();
    loop {
        let next = match w.failing.as_ref().map(|f| f.next_try.saturating_duration_since(Instant::now())) {
            None => rx.recv().ok(),
            Some(wait) => match rx.recv_timeout(wait) {
                Ok(input) => Some(input),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    // Shutting down while failing: one last try, so a transient fault that has
                    // passed loses nothing.
                    w.retry();
                    break;
                }
            },
        };
        let Some(item) = next else {
            if w.failing.is_none() {
                break;
            }
            w.retry();
            continue;
        };
        let input = match item {
            Item::Mark(slot, mark) => {
                w.mark(slot, mark);
                None
            }
            Item::Slot(input) => Some(input),
        };
        if let Some(input) = input {
            w.slot(input, every, &mut pending);
        }
        // Processed even when held or dropped, so flush() never waits forever.
        w.stats.processed.fetch_add(1, Ordering::Relaxed);
        let (lock, cv) = &*done;
        if let Ok(mut n) = lock.lock() {
            *n += 1;
        }
        cv.notify_all();
    }
}

impl Run {
    fn slot(&mut self, input: SlotInput, every: u64, pending: &mut Pending) {
        let w = self;
        if w.stopped {
            // Stopped for good: submissions are refused, but one racing the stop is dropped.
        } else if w.failing.is_some() {
            w.hold(input);
            if w.failing.as_ref().is_some_and(|f| Instant::now() >= f.next_try) {
                w.retry();
            }
        } else if w.forks.is_some() {
            w.write_fork(input);
        } else if every == 1 {
            w.write(input);
        } else {
            pending.add(input);
            if pending.count >= every {
                w.write(pending.take());
            }
        }
    }
}
