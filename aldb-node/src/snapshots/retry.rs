//! [`WritePolicy::HoldAndRetry`](crate::WritePolicy::HoldAndRetry): writing a bank, and holding
//! it through a failure that can pass.
//!
//! The pipeline's thread hands each bank to the fork-mode snapshot writer and waits for the
//! answer.
//! A write that fails for a reason that can pass (a full disk, an I/O error, too many open files)
//! does not lose the bank: the writer hands the input back with the error
//! ([`aldb_snapshot::WriterConfig::return_refused`]), and the thread holds it and tries again with a growing wait
//! ([`RETRY_FIRST`] doubling up to [`RETRY_MAX`]), taking nothing else from the queue meanwhile,
//! so files, statuses and records stay in the order a run without the failure has them. Replay
//! never waits: the queue absorbs the banks frozen meanwhile, merging a chain into its newest
//! queued bank when full, as it does when the disk is slow.
//!
//! A failed write publishes nothing: the writer writes each file under a temporary name, syncs
//! it, renames it into place and syncs the directory, and removes the temporary file of a write
//! that failed; the tables are rolled back to the parent's state and a file number is used only
//! once a rename succeeded. So the retry writes exactly the file a first-time success would have,
//! under the same name.
//!
//! The bank is given up, and counted, when writing it can no longer matter or cannot succeed:
//!
//! - its fork died, a root passed it, a new version of its slot or a new base came
//!   (`retries_abandoned`);
//! - the failure is one no wait cures ([`classify`]): the snapshot directory is gone or is not a
//!   directory (an operator removed or replaced it), or the writer refused the input itself
//!   (its parent not written, a bound, a damaged file it must read): `banks_refused`, and its
//!   descendants are refused as their parent is not written, as before;
//! - status messages waiting behind it reach half their bound, so holding on would start dropping
//!   statuses and records (`banks_refused`);
//! - the sink stops (one last try first).
//!
//! No bank is copied to be tried again: the input held is the one submitted, back from the
//! writer, whose write reads it without changing it.

use std::io::ErrorKind;
use std::path::Path;
use std::time::{Duration, Instant};

use aldb_snapshot::{SlotInput, SnapshotError};

use super::Snapshots;
use crate::stats::NodeStats;

/// First wait before a held bank is tried again; doubles per failed try up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(100);
/// Longest wait between tries: a try that fails early (the file cannot be created) costs
/// microseconds, and a short wait ends the streak soon after the disk is back.
const RETRY_MAX: Duration = Duration::from_secs(5);

/// What a held bank waits on: the queue in front of the pipeline's thread, which knows when
/// something queued behind the bank makes its file pointless.
pub(crate) trait Hold: Send + Sync {
    /// The thread holds bank `slot` to write it again: from now on [`Hold::wait_held`] tells when
    /// something queued (already, or pushed later) makes that pointless.
    fn hold(&self, slot: u64);
    /// Waits up to `timeout` while a bank is held, waking early when the held bank is doomed,
    /// the queue closes or status messages crowd it.
    fn wait_held(&self, timeout: Duration) -> HeldWake;
    /// The held bank was written or given up.
    fn release(&self);
}

/// Why [`Hold::wait_held`] returned.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum HeldWake {
    /// The wait is over: time for the next try.
    Retry,
    /// The held bank's fork was dropped (dead, abandoned by a root, frozen again, or a new base
    /// came): its file would never be served.
    Doomed,
    /// The queue was closed (the pipeline is stopping).
    Closed,
    /// Status messages waiting reached half their bound: holding on would start dropping them.
    Crowded,
}

/// Why a failed write is not tried again, when it is not.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Permanent {
    /// The snapshot directory is gone or is not a directory.
    Directory(&'static str),
    /// The writer refused the input itself, or the filesystem the operation: the same answer
    /// would come again.
    Refused,
}

/// Whether a failed write may succeed if tried again as it is: an I/O error while the snapshot
/// directory is still a directory may pass (space freed, the device back, descriptors closed, a
/// read-only remount undone); anything else is `Err`.
pub(crate) fn classify(e: &SnapshotError, dir: &Path) -> Result<(), Permanent> {
    let SnapshotError::Io { source, .. } = e else { return Err(Permanent::Refused) };
    if matches!(source.kind(), ErrorKind::InvalidInput | ErrorKind::InvalidData | ErrorKind::Unsupported) {
        return Err(Permanent::Refused);
    }
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(Permanent::Directory("is not a directory")),
        Err(e) if matches!(e.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
            Err(Permanent::Directory("is gone"))
        }
        // The directory cannot be looked at either (an I/O error): that too may pass.
        Err(_) => Ok(()),
    }
}

/// A write the writer refused: why, and the input back when it came back.
pub(crate) struct Failed {
    pub(crate) error: SnapshotError,
    pub(crate) input: Option<SlotInput>,
}

/// How holding a bank ended.
enum Outcome {
    Written,
    Abandoned,
    /// Given up: why, and the last failure.
    Refused(String),
}

impl Snapshots {
    /// Writes a bank (or a base) and waits for the writer's answer; a failure that can pass is
    /// held and tried again (see the [module documentation](self)).
    pub(super) fn write_or_hold(&mut self, input: SlotInput) {
        let slot = input.slot;
        let Some(Failed { error: e, input }) = self.attempt(input) else { return };
        // The writer is configured to hand inputs back; without one there is nothing to hold.
        let Some(input) = input else {
            self.refused(slot, &e);
            return;
        };
        match classify(&e, &self.dir) {
            Ok(()) => self.hold(input, &e),
            Err(why) => {
                if let Permanent::Directory(what) = why {
                    log::error!(
                        "{}: the snapshot directory {} {what}; slot {slot} and its descendants are not written",
                        self.name,
                        self.dir.display()
                    );
                }
                self.refused(slot, &e);
                self.spares.recycle(input);
            }
        }
    }

    /// Hands one input to the writer and waits until it is written or refused; returns the
    /// refusal, with the input. Other refusals the writer reports are counted as they come.
    pub(crate) fn attempt(&mut self, input: SlotInput) -> Option<Failed> {
        let slot = input.slot;
        if let Err(e) = self.writer.submit(input) {
            // The writer thread is gone: nothing can be tried again.
            self.writer_error(slot, "write", &e);
            return None;
        }
        self.writer_failing = false;
        self.flush();
        let mut mine = None;
        for r in self.writer.take_refused() {
            if r.slot == slot && mine.is_none() {
                mine = Some(Failed { error: r.error, input: r.input });
            } else {
                self.refused(r.slot, &r.error);
                if let Some(other) = r.input {
                    self.spares.recycle(other);
                }
            }
        }
        mine
    }

    /// Holds `input`, whose write just failed with `first`, and tries it again until it is
    /// written or given up.
    fn hold(&mut self, input: SlotInput, first: &SnapshotError) {
        let slot = input.slot;
        let name = self.name;
        let Some(queue) = self.holder.clone() else {
            // Nothing to wait on: the bank cannot be held.
            self.refused(slot, first);
            self.spares.recycle(input);
            return;
        };
        log::error!("{name}: writing slot {slot} failed, holding it and trying again: {first}");
        let started = Instant::now();
        self.stats.start_streak();
        queue.hold(slot);
        let mut wait = RETRY_FIRST;
        let mut tries = 0u64;
        // The bank between tries; given to the writer for each (which empties it for reuse once
        // written) and back from it with each failure.
        let mut held = Some(input);
        let outcome = loop {
            let last = match queue.wait_held(wait) {
                HeldWake::Doomed => break Outcome::Abandoned,
                HeldWake::Crowded => {
                    break Outcome::Refused(format!(
                        "status messages waiting behind it reached half their bound; last failure: {first}"
                    ));
                }
                HeldWake::Retry => false,
                HeldWake::Closed => true,
            };
            tries += 1;
            NodeStats::add(&self.stats.write_retries, 1);
            let Some(input) = held.take() else { break Outcome::Refused(format!("not held; first failure: {first}")) };
            let Some(Failed { error: e, input: back }) = self.attempt(input) else { break Outcome::Written };
            let Some(back) = back else { break Outcome::Refused(e.to_string()) };
            held = Some(back);
            match classify(&e, &self.dir) {
                Err(Permanent::Directory(what)) => {
                    break Outcome::Refused(format!("the snapshot directory {} {what}: {e}", self.dir.display()));
                }
                Err(Permanent::Refused) => break Outcome::Refused(e.to_string()),
                Ok(()) if last => break Outcome::Refused(format!("the sink is stopping: {e}")),
                Ok(()) => {
                    log::debug!("{name}: slot {slot}: try {tries} failed, next in {:?}: {e}", wait * 2);
                    wait = (wait * 2).min(RETRY_MAX);
                }
            }
        };
        queue.release();
        self.stats.end_streak();
        let took = started.elapsed();
        match outcome {
            Outcome::Written => {
                NodeStats::add(&self.stats.write_recoveries, 1);
                log::warn!("{name}: slot {slot} written after {tries} more tries over {took:.1?}");
            }
            Outcome::Abandoned => {
                NodeStats::add(&self.stats.retries_abandoned, 1);
                log::warn!("{name}: slot {slot} given up after {tries} more tries: its fork is gone");
            }
            Outcome::Refused(why) => {
                log::error!("{name}: slot {slot} given up after {tries} more tries over {took:.1?}");
                self.refused(slot, &why);
            }
        }
        if let Some(input) = held {
            self.spares.recycle(input);
        }
    }
}

#[cfg(test)]
#[path = "retry_tests.rs"]
mod tests;
