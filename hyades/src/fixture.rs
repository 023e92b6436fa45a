//! Snapshot directories from synthetic account histories, written by the real engine and
//! snapshot writer: for the integration tests and the load benchmark, so both exercise exactly
//! the files a validator-side writer publishes.

use std::collections::{BTreeMap, HashSet};

use aldb_core::{AccountRef, ChangeSet, Config, CoreError, Pleiades};
use aldb_snapshot::{Account, AccountBatch, SlotInput, SnapshotError, SnapshotWriter, WriterConfig};
use aldb_verify::spec::Hash;

/// Why a history could not be written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FixtureError {
    /// The engine rejected its configuration.
    #[error("engine: {0}")]
    Engine(#[from] CoreError),
    /// The snapshot writer failed.
    #[error("snapshot writer: {0}")]
    Snapshot(#[from] SnapshotError),
}

/// An engine and a snapshot writer committing one slot at a time.
#[derive(Debug)]
pub struct History {
    tree: Pleiades,
    writer: SnapshotWriter,
    started: bool,
    roots: BTreeMap<u64, Hash>,
}

impl History {
    /// Starts a writer on `config.dir`, with the engine sized for about `expected_accounts`.
    pub fn start(config: WriterConfig, expected_accounts: u64) -> Result<Self, FixtureError> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let tree = Pleiades::new(Config::for_leaves(expected_accounts, threads))?;
        let writer = SnapshotWriter::start(config, None)?;
        Ok(Self { tree, writer, started: false, roots: BTreeMap::new() })
    }

    /// Commits `accounts` as `slot`, child of `parent`, and hands the change to the writer. The
    /// first commit is written as a full snapshot. Within one call a later entry for the same
    /// pubkey wins; zero lamports deletes. Returns the slot's root.
    pub fn commit(&mut self, slot: u64, parent: Option<u64>, accounts: &[Account]) -> Result<Hash, FixtureError> {
        // The engine takes one update per key in a commit: keep each key's last entry.
        let mut seen = HashSet::new();
        let mut last: Vec<&Account> = accounts.iter().rev().filter(|a| seen.insert(a.pubkey)).collect();
        last.reverse();
        let refs: Vec<AccountRef<'_>> = last
            .iter()
            .map(|a| AccountRef { pubkey: &a.pubkey, lamports: a.lamports, owner: &a.owner, executable: a.executable, data: &a.data })
            .collect();
        let updates = self.tree.hash_accounts(&refs);
        let batch = AccountBatch::from_updates(&updates, &refs);
        let mut changes = ChangeSet::default();
        let root = self.tree.commit_capture(updates, &mut changes);
        let full = !self.started;
        if full {
            // Nothing was committed before, so this slot's accounts are the whole state.
            self.tree.capture_all(&mut changes);
            self.started = true;
        }
        self.writer.submit(SlotInput { slot, parent, root, changes, accounts: batch, full })?;
        self.roots.insert(slot, root);
        Ok(root)
    }

    /// The root committed for every slot so far.
    pub fn roots(&self) -> &BTreeMap<u64, Hash> {
        &self.roots
    }

    /// Waits until every committed slot has been written (or merged, with `every > 1`).
    pub fn flush(&self) -> Result<(), FixtureError> {
        Ok(self.writer.flush()?)
    }

    /// Flushes and stops the writer; returns the committed roots.
    pub fn finish(self) -> Result<BTreeMap<u64, Hash>, FixtureError> {
        self.writer.shutdown()?;
        Ok(self.roots)
    }
}
