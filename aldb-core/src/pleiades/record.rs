//! Commits that keep what it takes to take them back, for the fork engine.
//!
//! A recorded commit is a plain commit whose shard workers also write, while merging each bucket,
//! the old state of every path whose value changed: the undo record costs no extra walk of the
//! tree, only a 65-byte store per changed path. The bank's own updates come back sorted and
//! de-duplicated, so re-applying them later skips nothing a commit needs.

use aldb_verify::spec::Hash;
use rayon::prelude::*;

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
        // Each run changes at most one path per update it was given, so its stretch of the same
        // size always has room. The buffer is kept from commit to commit (its pages stay mapped)
        // and only the entries written are copied out.
        let n = parts.len();
        let mut undo_buf = std::mem::take(&mut self.undo_scratch);
        if undo_buf.len() < n {
            undo_buf.resize(n, Update { path: [0; 32], value: None });
        }
        let done = self.apply_runs(&mut parts, &offsets, Some(&mut undo_buf[..n]), changes.as_deref_mut());
        // The runs' applied updates and undo entries are copied out on the workers, each run's
        // into its own stretch: one thread copying both lists took about a tenth of a large
        // freeze while the other cores waited. `applied` still holds every given update, never
        // fewer than are kept, so truncating leaves it initialised with no fill pass.
        let kept: usize = done.iter().map(|d| d.kept).sum();
        let undone: usize = done.iter().map(|d| d.undone).sum();
        applied.truncate(kept);
        let mut undo = spare;
        undo.resize(undone, Update { path: [0; 32], value: None });
        let mut copies = Vec::with_capacity(done.len());
        let (mut applied_rest, mut undo_rest) = (&mut applied[..], &mut undo[..]);
        let mut results = Vec::with_capacity(done.iter().map(|d| d.results.len()).sum());
        for d in done {
            let (a, ar) = std::mem::take(&mut applied_rest).split_at_mut(d.kept);
            let (u, ur) = std::mem::take(&mut undo_rest).split_at_mut(d.undone);
            (applied_rest, undo_rest) = (ar, ur);
            copies.push((a, &parts[d.at..d.at + d.kept], u, &undo_buf[d.at..d.at + d.undone]));
            results.extend(d.results);
        }
        self.pool.install(|| {
            copies.into_par_iter().for_each(|(a, from_a, u, from_u)| {
                a.copy_from_slice(from_a);
                u.copy_from_slice(from_u);
            })
        });
        self.scratch = parts;
        self.undo_scratch = undo_buf;
        self.finish_commit(results, changes);
        Recorded { root: self.root(), applied, undo }
    }
}
