//! The startup spill: a streaming startup's accounts on disk as they arrive, until the full
//! snapshot of the startup state is written from them.
//!
//! The front end's state machine hashes each startup account into its bulk builder and hands
//! the account here ([`StartupAccounts::append`]), from the validator's threads; nothing is
//! kept in memory but the spill's bounded buffers. When the startup state commits, the pipeline
//! finishes the spill and the writer reads the accounts back from it for the full snapshot
//! ([`AccountBatch::from_spill`]); the spill is removed once written (or when dropped unwritten).
//! A failed append leaves the root as it is and only costs the full snapshot.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};

use aldb_core::AccountRef;
use aldb_snapshot::{AccountBatch, DEFAULT_SPILL_BITS, SnapshotError, SpilledAccounts, StartupSpill};

use crate::snapshots::Snapshots;

/// A spill for one startup's accounts; see the [module documentation](self).
#[derive(Debug)]
pub struct StartupAccounts {
    spill: RwLock<Option<StartupSpill>>,
    /// Appends that failed (the root is unaffected; the full snapshot is not made).
    errors: AtomicU64,
}

impl StartupAccounts {
    /// A spill in the snapshot directory the pipeline writes (a spill left there by a start
    /// that crashed is removed first).
    pub fn create(snapshots: &Snapshots) -> Result<Self, SnapshotError> {
        Ok(Self::new(snapshots.startup_spill(DEFAULT_SPILL_BITS)?))
    }

    /// Accounts go to `spill`.
    pub fn new(spill: StartupSpill) -> Self {
        Self { spill: RwLock::new(Some(spill)), errors: AtomicU64::new(0) }
    }

    /// Appends one startup account, with its key path and rank (`(slot, write_version)`: the
    /// highest wins), from any thread; a failure is counted, never returned.
    pub fn append(&self, path: &[u8; 32], rank: (u64, u64), account: &AccountRef<'_>) {
        let s = self.spill.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(spill) = s.as_ref()
            && spill.append(path, rank, account).is_err()
        {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Finishes the spill, once appends are over: the startup state's accounts for its full
    /// snapshot. `None` once taken; an error if an append failed (the root stands, the full
    /// snapshot cannot be made from it).
    pub fn finish(&self) -> Option<Result<SpilledAccounts, SnapshotError>> {
        let spill = self.spill.write().unwrap_or_else(PoisonError::into_inner).take()?;
        let errors = self.errors.load(Ordering::Relaxed);
        Some(match spill.finish() {
            Ok(_) if errors > 0 => {
                Err(SnapshotError::Input(format!("{errors} startup accounts could not be appended to the spill")))
            }
            other => other,
        })
    }

    /// Finishes the spill as the full snapshot's accounts; `None` when there is none.
    pub fn batch(&self) -> Option<Result<AccountBatch, SnapshotError>> {
        self.finish().map(|r| r.map(AccountBatch::from_spill))
    }
}
