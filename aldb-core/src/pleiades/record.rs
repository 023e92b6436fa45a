//! Commits that keep what it takes to take them back, for the fork engine.
//!
//! A recorded commit is a plain commit whose shard workers also write, while merging each bucket,
//! the old state of every path whose value changed: the undo record costs no extra walk of the
//! tree, only a 65-byte store per changed path. The bank's own updates come back sorted and
//! de-duplicated, so re-applying them later skips nothing a commit needs.

use aldb_verify::spec::Hash;

use super::{Pleiades, partition, shard_index};
use crate::account::Update;
use crate::changes::ChangeSet;

/// What a recorded commit leaves behind.
#[derive(Debug)]
pub(crate) struct Recorded {
    /// The new root.
    pub(crate) root: Hash,
    /// The updates as applied: sorted by path, one per path (the last given wins).
    pub(crate) applied: Vec<Update>,
    /// The old state of every path whose value changed, sorted by path (`None`: was absent).
    /// Committing it restores the tree as it was before.
    pub(crate) undo: Vec<Update>,
}

impl Pleiades {
    /// Applies one batch like [`Pleiades::commit`] (and like [`Pleiades::commit_capture`] when
    /// `changes` is given), and returns the applied updates and their undo record.
    ///
    /// `updates`' allocation is reused for the applied updates, which are never more, and
    /// `spare`'s (its contents are dropped) for the undo record: a buffer that already has its
    /// pages saves faulting in fresh ones, which costs as much as a tenth of a large commit here.
    pub(crate) fn commit_recorded(
        &mut self,
        updates: Vec<Update>,
        spare: Vec<Update>,
        changes: Option<&mut ChangeSet>,
    ) -> Recorded {
        let shard_bits = self.config.shard_bits;
        let workers = self.config.threads;
        let mut changes = changes;
        if let Some(c) = changes.as_deref_mut() {
            c.reset(self.config.bucket_bits, shard_bits, self.shards.len());
        }
        let mut parts = std::mem::take(&mut self.scratch);
        let offsets = self.pool.install(|| {
            partition(&updates, 1usize << shard_bits, |u| shard_index(&u.path, shard_bits), workers, &mut parts)
        });
        let mut applied = updates;
        applied.clear();
        // Each run changes at most one path per update it was given, so its stretch of the same
        // size always has room. The buffer is kept from commit to commit (its pages stay mapped)
        // and only the entries written are copied out.
        let n = parts.len();
        let mut undo_buf = std::mem::take(&mut self.undo_scratch);
        if undo_buf.len() < n {
            undo_buf.resize(n, Update { path: [0; 32], value: None });
        }
        let done = self.apply_runs(&mut parts, &offsets, Some(&mut undo_buf[..n]), changes.as_deref_mut());
        let mut undo = spare;
        undo.clear();
        undo.reserve(done.iter().map(|d| d.undone).sum());
        let mut results = Vec::with_capacity(done.iter().map(|d| d.results.len()).sum());
        for d in done {
            applied.extend_from_slice(&parts[d.at..d.at + d.kept]);
            undo.extend_from_slice(&undo_buf[d.at..d.at + d.undone]);
            results.extend(d.results);
        }
        self.scratch = parts;
        self.undo_scratch = undo_buf;
        self.finish_commit(results, changes);
        Recorded { root: self.root(), applied, undo }
    }
}
