//! Streaming startup: startup accounts flow into the bulk builder, and (with a [`StartupSink`])
//! their full contents to the node pipeline's startup spill, as they arrive.
//!
//! Each stripe gathers its startup entries (`(path, value hash, rank)`, 88 bytes) in a small
//! batch and hands it to one shared [`BulkBuilder`] once the batch is full, under the stripe's
//! lock: so a stripe's entries reach the builder in arrival order (the last pushed of equal rank
//! wins), and once `end_of_startup` has visited every stripe no batch is still on its way. With a
//! [`StartupSink`], what the snapshot needs besides the hashes (pubkey, lamports, owner,
//! executable, data) is handed to it under the same lock, and no record is retained, so memory
//! at startup is the builder's entries plus bounded buffers, not the account set.
//!
//! Without a sink and with a [`Retain`](crate::Retain) policy that keeps records, the stripes
//! hold entries and records until the end of startup as before: the records' winners are
//! resolved against the entries.

use std::sync::{Arc, Mutex, RwLock};

use aldb_core::{AccountRef, BulkBuilder, BulkEntry};

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

/// Where a streaming startup's accounts go besides the engine: the node pipeline's startup spill,
/// from which the startup state's full snapshot is written.
///
/// Called from the validator's threads, under a stripe lock: it must not block for long and
/// must never panic; a failure is the sink's to count (the root is unaffected).
pub trait StartupSink: Send + Sync {
    /// One startup account, with its key path and rank (`(slot, write_version)`: the highest
    /// wins, the later of equal ones).
    fn append(&self, path: &[u8; 32], rank: (u64, u64), account: &AccountRef<'_>);
}

/// The shared state of a streaming startup.
pub(crate) struct StartupStream {
    config: aldb_core::Config,
    build: Mutex<Build>,
    sink: RwLock<Option<Arc<dyn StartupSink>>>,
}

impl std::fmt::Debug for StartupStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartupStream").field("spilling", &self.spilling()).finish_non_exhaustive()
    }
}

impl StartupStream {
    pub(crate) fn new(config: aldb_core::Config) -> Self {
        Self { config, build: Mutex::new(Build::NotStarted), sink: RwLock::new(None) }
    }

    /// Sets the sink; refused once one is set.
    pub(crate) fn set_sink(&self, sink: Arc<dyn StartupSink>) -> bool {
        let mut s = self.sink.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if s.is_some() {
            return false;
        }
        *s = Some(sink);
        true
    }

    /// Whether startup accounts go to a sink (and so keep no record).
    pub(crate) fn spilling(&self) -> bool {
        self.sink.read().unwrap_or_else(std::sync::PoisonError::into_inner).is_some()
    }

    /// Hands an account to the sink, if there is one.
    pub(crate) fn append(&self, entry: &BulkEntry, account: &AccountRef<'_>) {
        let s = self.sink.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(sink) = s.as_ref() {
            sink.append(&entry.path, entry.rank, account);
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

    /// Gives the sink up, if there is one.
    pub(crate) fn take_sink(&self) -> Option<Arc<dyn StartupSink>> {
        self.sink.write().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }
}
