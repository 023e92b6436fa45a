//! Streaming startup: startup accounts flow into the bulk builder, and (with a spill) their full
//! contents to disk, as they arrive.
//!
//! Each stripe gathers its startup entries (`(path, value hash, rank)`, 88 bytes) in a small
//! batch and hands it to one shared [`BulkBuilder`] once the batch is full, under the stripe's
//! lock: so a stripe's entries reach the builder in arrival order (the last pushed of equal rank
//! wins), and once `end_of_startup` has visited every stripe no batch is still on its way. With a
//! [`StartupSpill`], what the snapshot needs besides the hashes (pubkey, lamports, owner,
//! executable, data) is appended to it under the same lock, and no record is retained, so memory
//! at startup is the builder's entries plus bounded buffers, not the account set.
//!
//! Without a spill and with a [`Retain`](crate::Retain) policy that keeps records, the stripes
//! hold entries and records until the end of startup as before: the records' winners are
//! resolved against the entries.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, RwLock};

use aldb_core::{BulkBuilder, BulkEntry};
use aldb_snapshot::{SnapshotError, SpilledAccounts, StartupSpill};

use crate::stripe::lock;

/// Entries a stripe gathers before handing them to the builder: 64 stripes hold at most 23 MiB.
pub(crate) const STARTUP_BATCH: usize = 4096;

enum Build {
    /// No batch came yet.
    NotStarted,
    Building(Box<BulkBuilder>),
    /// No worker pool for a second tree could be had: entries stay in the stripes and the
    /// engine falls back at the end (see `Engine::startup`).
    Unavailable,
    /// Handed to the engine.
    Taken,
}

/// The shared state of a streaming startup.
pub(crate) struct StartupStream {
    config: aldb_core::Config,
    build: Mutex<Build>,
    spill: RwLock<Option<StartupSpill>>,
    /// Appends to the spill that failed (the root is unaffected; the full snapshot is not made).
    pub(crate) spill_errors: AtomicU64,
}

impl std::fmt::Debug for StartupStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartupStream").field("spill_errors", &self.spill_errors).finish_non_exhaustive()
    }
}

impl StartupStream {
    pub(crate) fn new(config: aldb_core::Config) -> Self {
        Self { config, build: Mutex::new(Build::NotStarted), spill: RwLock::new(None), spill_errors: AtomicU64::new(0) }
    }

    /// Sets the spill; refused once one is set.
    pub(crate) fn set_spill(&self, spill: StartupSpill) -> bool {
        let mut s = self.spill.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if s.is_some() {
            return false;
        }
        *s = Some(spill);
        true
    }

    /// Whether startup accounts go to a spill (and so keep no record).
    pub(crate) fn spilling(&self) -> bool {
        self.spill.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    /// Appends an account to the spill, if there is one; counts a failure.
    pub(crate) fn append(&self, entry: &BulkEntry, account: &aldb_core::AccountRef<'_>) {
        let s = self.spill.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(spill) = s.as_ref()
            && spill.append(&entry.path, entry.rank, account).is_err()
        {
            self.spill_errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Hands a full batch to the builder, creating it on the first; false (the batch stays
    /// with the caller) when there is no builder to take it.
    pub(crate) fn push(&self, batch: &[BulkEntry]) -> bool {
        let mut b = lock(&self.build);
        if matches!(*b, Build::NotStarted) {
            *b = match BulkBuilder::new(self.config) {
                Ok(builder) => Build::Building(Box::new(builder)),
                Err(_) => Build::Unavailable,
            };
        }
        match &mut *b {
            Build::Building(builder) => {
                builder.push(batch);
                true
            }
            _ => false,
        }
    }

    /// The builder with every batch pushed so far, for the engine; `None` if none was made.
    pub(crate) fn take_builder(&self) -> Option<Box<BulkBuilder>> {
        let mut b = lock(&self.build);
        match std::mem::replace(&mut *b, Build::Taken) {
            Build::Building(builder) => Some(builder),
            other => {
                *b = other;
                None
            }
        }
    }

    /// Finishes the spill, if there is one.
    pub(crate) fn take_spill(&self) -> Option<Result<SpilledAccounts, SnapshotError>> {
        let spill = self.spill.write().unwrap_or_else(std::sync::PoisonError::into_inner).take()?;
        let errors = self.spill_errors.load(Ordering::Relaxed);
        Some(match spill.finish() {
            Ok(_) if errors > 0 => {
                Err(SnapshotError::Input(format!("{errors} startup accounts could not be appended to the spill")))
            }
            other => other,
        })
    }
}
