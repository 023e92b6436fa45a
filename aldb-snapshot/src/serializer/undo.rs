//! Fork mode's record of a write: the table entries it replaced and set, so the tables can be
//! moved back to a bank's parent and forward again without touching the tree.

use aldb_format::format::Ref;

use super::Serializer;
use super::refresh::RefreshState;
use crate::leaf_table::LeafView;

/// One entry of the writer's tables, as a fork-mode write found or left it: a node's reference,
/// or a bucket's reference with a copy of its leaves.
#[derive(Clone, Debug)]
pub(crate) enum TableEntry {
    /// `nodes[level][index]`.
    Node { level: u8, index: u64, r: Ref },
    /// `buckets[index]` and `bucket_leaves[index]`.
    Bucket { index: u64, r: Ref, leaves: Box<[LeafView]> },
}

impl TableEntry {
    /// Bytes this entry holds: itself, and for a bucket its leaves.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + match self {
                Self::Node { .. } => 0,
                Self::Bucket { leaves, .. } => std::mem::size_of_val::<[LeafView]>(leaves),
            }
    }
}

/// What one fork-mode write changed in the tables: applying `undo` in reverse takes the tables
/// from the bank back to its parent, applying `redo` in order takes them forward again.
#[derive(Debug, Default)]
pub(crate) struct TableLog {
    pub(crate) undo: Vec<TableEntry>,
    pub(crate) redo: Vec<TableEntry>,
    pub(crate) before: RefreshState,
    pub(crate) after: RefreshState,
}

impl TableLog {
    /// Bytes held by both lists.
    pub(crate) fn bytes(&self) -> usize {
        self.undo.iter().chain(&self.redo).map(TableEntry::bytes).sum::<usize>() + std::mem::size_of::<Self>()
    }
}

impl Serializer {
    /// Starts recording the table entries the next write replaces.
    pub(crate) fn record(&mut self) {
        self.undo = Some(Vec::new());
        self.undo_refresh = self.refresh_state();
    }

    /// Ends a recording after a successful write: what it replaced and what it set.
    pub(crate) fn finish_record(&mut self) -> TableLog {
        let undo = self.undo.take().unwrap_or_default();
        let redo = undo.iter().map(|e| self.current(e)).collect();
        TableLog { undo, redo, before: self.undo_refresh, after: self.refresh_state() }
    }

    /// Ends a recording after a failed write: puts back every entry the write replaced, so the
    /// tables hold the parent's state again.
    pub(crate) fn abort_record(&mut self) {
        if let Some(undo) = self.undo.take() {
            self.apply(undo.iter().rev());
            self.set_refresh_state(self.undo_refresh);
        }
    }

    /// The entry at `e`'s position as the tables hold it now.
    fn current(&self, e: &TableEntry) -> TableEntry {
        match *e {
            TableEntry::Node { level, index, .. } => {
                TableEntry::Node { level, index, r: self.nodes[usize::from(level)][index as usize] }
            }
            TableEntry::Bucket { index, .. } => TableEntry::Bucket {
                index,
                r: self.buckets[index as usize],
                leaves: self.bucket_leaves.leaves(index as usize).into(),
            },
        }
    }

    /// Sets table entries (from a [`TableLog`]), in the order given.
    pub(crate) fn apply<'a>(&mut self, entries: impl Iterator<Item = &'a TableEntry>) {
        for e in entries {
            match e {
                TableEntry::Node { level, index, r } => self.nodes[usize::from(*level)][*index as usize] = *r,
                TableEntry::Bucket { index, r, leaves } => {
                    self.buckets[*index as usize] = *r;
                    // The list was read from the table, so it fits the table's length field.
                    let _ = self.bucket_leaves.set(*index as usize, leaves);
                }
            }
        }
    }

    /// Moves the tables across one bank: back to its parent (`undo`) or forward to it.
    pub(crate) fn apply_log(&mut self, log: &TableLog, undo: bool) {
        if undo {
            self.apply(log.undo.iter().rev());
            self.set_refresh_state(log.before);
        } else {
            self.apply(log.redo.iter());
            self.set_refresh_state(log.after);
        }
    }
}
