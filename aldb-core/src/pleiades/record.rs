//! Commits that keep what it takes to take them back, for the fork engine.
//!
//! A recorded commit is a plain commit whose shard workers also write, while merging each bucket,
//! the old state of every path whose value changed: the undo record costs no extra walk of the
//! tree, only a 65-byte store per changed path. The bank's own updates come back sorted and
//! de-duplicated, so re-applying them later skips nothing a commit needs.

use aldb_verify::spec::Hash;
use rayon::prelude::*;

use super::{Pleiades, ShardResult, apply_to_shard, partition, shard_index, sort_keep_last, split_by_offsets};
use crate::account::Update;
use crate::changes::{CaptureSink, ChangeSet};
use crate::shard::{ShardScratch, UndoSlice};

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

/// One non-empty shard's part of a recorded commit.
struct Part {
    shard: usize,
    /// Updates left after sorting and keeping the last of each path.
    kept: usize,
    /// Undo entries written.
    undone: usize,
    result: Option<ShardResult>,
}

impl Pleiades {
    /// Applies one batch like [`Pleiades::commit`] (and like [`Pleiades::commit_capture`] when
    /// `changes` is given), and returns the applied updates and their undo record.
    ///
    /// `updates`' allocation is reused for the applied updates, which are never more.
    pub(crate) fn commit_recorded(&mut self, updates: Vec<Update>, changes: Option<&mut ChangeSet>) -> Recorded {
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
        // Each shard changes at most one path per update it was given, so its slice of the same
        // size always has room; entries are compacted after.
        let mut undo = vec![Update { path: [0; 32], value: None }; parts.len()];
        let done = self.apply_recording(
            split_by_offsets(&mut parts, &offsets),
            split_by_offsets(&mut undo, &offsets),
            changes.as_deref_mut(),
        );
        let mut undone = 0;
        let mut results = Vec::with_capacity(done.len());
        for p in done {
            let start = offsets[p.shard];
            applied.extend_from_slice(&parts[start..start + p.kept]);
            undo.copy_within(start..start + p.undone, undone);
            undone += p.undone;
            results.extend(p.result);
        }
        undo.truncate(undone);
        undo.shrink_to_fit();
        self.scratch = parts;
        self.finish_commit(results, changes);
        Recorded { root: self.root(), applied, undo }
    }

    /// The shard workers' part of [`Pleiades::commit_recorded`]: sort, apply and record undo.
    fn apply_recording(
        &mut self,
        parts: Vec<&mut [Update]>,
        undo: Vec<&mut [Update]>,
        capture: Option<&mut ChangeSet>,
    ) -> Vec<Part> {
        let shards = &mut self.shards;
        let sinks: Vec<Option<CaptureSink<'_>>> = match capture {
            Some(c) => {
                let options = c.options();
                let levels = options.level_mask(c.bucket_bits());
                c.parts_mut().iter_mut().map(|part| Some(CaptureSink { part, options, levels })).collect()
            }
            None => (0..shards.len()).map(|_| None).collect(),
        };
        self.pool.install(|| {
            shards
                .par_iter_mut()
                .zip(parts)
                .zip(undo)
                .zip(sinks)
                .enumerate()
                .filter(|(_, (((_, ops), _), _))| !ops.is_empty())
                .map_init(ShardScratch::default, |scratch, (i, (((shard, ops), buf), c))| {
                    let ops: &[Update] = sort_keep_last(ops);
                    let mut sink = UndoSlice { buf, len: 0 };
                    let result = apply_to_shard(i, shard, ops, scratch, c, &mut sink);
                    Part { shard: i, kept: ops.len(), undone: sink.len, result }
                })
                .collect()
        })
    }
}
