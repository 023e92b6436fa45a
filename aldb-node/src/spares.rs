//! Spare buffers: the change sets and account batches the snapshot writer is done with, emptied
//! and handed back so the next banks fill them instead of fresh allocations.
//!
//! Shared between the thread that hands banks to the writer (which puts spares here) and the
//! one that fills the next bank (which takes them): the same thread in the geyser plugin, the
//! writer thread and the replay thread in the in-process module.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Mutex, PoisonError};

use aldb_core::ChangeSet;
use aldb_snapshot::{AccountBatch, SlotInput, SnapshotWriter};

/// Emptied buffer pairs waiting to be filled again.
const SPARES: usize = 4;
/// Buffers holding more than this are dropped, not kept: a base's capture of the whole tree, or
/// the startup state's batch of every account, would otherwise stay allocated for the rest of
/// the run.
pub(crate) const MAX_SPARE_BYTES: usize = 64 << 20;

/// The pool of spare buffers; see the [module documentation](self).
#[derive(Debug)]
pub struct Spares {
    tx: SyncSender<(ChangeSet, AccountBatch)>,
    rx: Mutex<Receiver<(ChangeSet, AccountBatch)>>,
}

impl Default for Spares {
    fn default() -> Self {
        let (tx, rx) = sync_channel(SPARES);
        Self { tx, rx: Mutex::new(rx) }
    }
}

impl Spares {
    /// A change set and an account batch to fill, emptied, when one is spare.
    pub fn take(&self) -> Option<(ChangeSet, AccountBatch)> {
        self.rx.lock().unwrap_or_else(PoisonError::into_inner).try_recv().ok()
    }

    /// Keeps the buffers the writer handed back (already emptied by it), while there is room.
    pub(crate) fn collect(&self, writer: &SnapshotWriter) {
        while let Some(spare) = writer.take_spare() {
            if spare.0.heap_bytes() + spare.1.heap_bytes() > MAX_SPARE_BYTES {
                continue;
            }
            if self.tx.try_send(spare).is_err() {
                break;
            }
        }
    }

    /// Keeps the buffers of an input the writer no longer needs, emptied.
    pub(crate) fn recycle(&self, input: SlotInput) {
        let SlotInput { mut changes, mut accounts, .. } = input;
        if changes.heap_bytes() + accounts.heap_bytes() > MAX_SPARE_BYTES {
            return;
        }
        changes.clear();
        accounts.clear();
        let _ = self.tx.try_send((changes, accounts));
    }
}
