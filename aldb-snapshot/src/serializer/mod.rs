//! Turning a commit's change set into one snapshot file.
//!
//! The serializer mirrors the tree's prefix array with a table of [`Ref`]s: where the current
//! version of every prefix node and bucket lives on disk. A slot writes the records that changed
//! and points at older files for the rest, so a file holds one slot's changes yet every kept slot
//! can be walked from its own root.
//!
//! Old files must eventually be deleted, yet an untouched bucket would keep pointing at the file
//! it was last written in forever. So each slot also visits ("refreshes") one chunk of the key
//! space, cycling through all chunks in `2^refresh_bits` slots, and copies forward the records
//! under it that predate the current cycle: once a cycle completes, every record reachable from
//! the newest root was written during that cycle, and everything older than the cycle's first
//! file is garbage as soon as no kept slot needs it. The cost is bounded extra writing (at most
//! the tree and accounts divided by the cycle length per slot, and only what stayed untouched for
//! a whole cycle), in exchange for never reading or rewriting a whole base on the hot path.
//!
//! Here: the tables, and the write of one slot (its input checked, its files numbered, cut into
//! parts and published). The records of the write are `body`'s (accounts, then `buckets`, then
//! `nodes`); `refresh` is the cycle; `undo` records what a fork-mode write changed in the tables;
//! `recover` rebuilds them from the files on disk.

mod accounts;
mod body;
mod buckets;
mod input;
mod nodes;
mod recover;
mod refresh;
mod undo;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aldb_format::SnapshotError;
use aldb_format::format::{FLAG_AFTER_GAP, FLAG_FULL, Header, Ref, node_stored};
use aldb_format::store::{Files, MappedFile};

use crate::file_builder::{FileBuilder, IoLane};
use crate::leaf_table::LeafTable;
use body::Scratch;
pub use input::{CAPTURE_OPTIONS, Published, SlotInput};
use refresh::RefreshState;
use undo::TableEntry;
pub(crate) use undo::TableLog;

pub(crate) struct Serializer {
    dir: PathBuf,
    files: Files,
    bucket_bits: u8,
    nodes: Vec<Vec<Ref>>,
    buckets: Vec<Ref>,
    next_seq: u32,
    refresh_bits: u8,
    cursor: u64,
    cycle_start: u32,
    oldest: u32,
    started: bool,
    /// The leaves of every bucket's current record, so a changed bucket is rewritten without
    /// reading its old record back from disk (see [`crate::leaf_table`]). About 11 bytes per leaf.
    bucket_leaves: LeafTable,
    direct: bool,
    io: Option<IoLane>,
    scratch: Scratch,
    /// Set after a failure: the next file published carries [`FLAG_AFTER_GAP`] with this
    /// `gap_after` (the newest slot published before the failure).
    gap: Option<Option<u64>>,
    /// While a fork-mode write runs: every table entry it replaced, in order, so the write can
    /// be taken back (see [`TableEntry`]).
    undo: Option<Vec<TableEntry>>,
    /// The refresh-cycle state before the write being recorded.
    undo_refresh: RefreshState,
    /// Files below this are kept open for other forks even if the current table no longer
    /// reaches them (`u32::MAX`: only what the table reaches, as on a single chain).
    keep_files_from: u32,
    /// The most bytes one file holds; a write past it is cut into part files.
    part_bytes: u64,
}

impl Serializer {
    /// A serializer for `dir`, continuing the sequence after `last_seq`. Cycles through the key
    /// space in about `refresh_slots` slots.
    /// `direct` writes files past the page cache (see [`crate::file_builder`]); a slot that
    /// writes more than `part_bytes` bytes is cut into part files.
    pub(crate) fn new(dir: &Path, last_seq: u32, refresh_slots: u64, direct: bool, part_bytes: u64) -> Self {
        let refresh_bits = (64 - refresh_slots.max(1).saturating_sub(1).leading_zeros()) as u8;
        Self {
            dir: dir.to_path_buf(),
            files: Files::default(),
            bucket_bits: 0,
            nodes: Vec::new(),
            buckets: Vec::new(),
            next_seq: last_seq.saturating_add(1),
            refresh_bits,
            cursor: 0,
            cycle_start: 0,
            oldest: 0,
            started: false,
            bucket_leaves: LeafTable::default(),
            direct,
            io: None,
            scratch: Scratch::default(),
            gap: None,
            undo: None,
            undo_refresh: RefreshState::default(),
            keep_files_from: u32::MAX,
            part_bytes,
        }
    }

    /// Numbers the next file after `last_seq` at least: files found on disk (parts of a write
    /// that failed, a file published by a write whose directory sync failed) keep their numbers.
    pub(crate) fn continue_after(&mut self, last_seq: u32) {
        self.next_seq = self.next_seq.max(last_seq.saturating_add(1));
    }

    /// Whether the tables hold a state to write deltas against.
    pub(crate) fn started(&self) -> bool {
        self.started
    }

    /// Bytes of the tables on the heap: node and bucket references, and the buckets' leaves.
    pub(crate) fn table_bytes(&self) -> usize {
        let refs = self.nodes.iter().map(Vec::capacity).sum::<usize>() + self.buckets.capacity();
        refs * std::mem::size_of::<Ref>()
            + self.nodes.capacity() * std::mem::size_of::<Vec<Ref>>()
            + self.bucket_leaves.heap_bytes()
    }

    /// Keeps the files at and above `seq` open whatever the current chain reaches: other forks
    /// refer into them.
    pub(crate) fn keep_files_from(&mut self, seq: u32) {
        self.keep_files_from = seq;
    }

    /// Marks the next published file as the first after a gap: the slots after `gap_after` (the
    /// newest slot published before the writer failed) and before that file's slot are lost.
    pub(crate) fn mark_gap(&mut self, gap_after: Option<u64>) {
        if self.gap.is_none() {
            self.gap = Some(gap_after);
        }
    }

    /// Forgets the in-memory state: after a failed write it may point into the file that was
    /// never published. The next write must be full or follow [`Serializer::recover`].
    pub(crate) fn invalidate(&mut self) {
        self.started = false;
    }

    fn reset(&mut self, bucket_bits: u8) {
        self.bucket_bits = bucket_bits;
        // Levels without records (see `node_len`) get no table.
        let l = usize::from(bucket_bits);
        self.nodes =
            (0..l).map(|d| if node_stored(d, l) { vec![Ref::NULL; 1usize << d] } else { Vec::new() }).collect();
        self.buckets = vec![Ref::NULL; 1usize << bucket_bits];
        self.bucket_leaves = LeafTable::new(bucket_bits);
        self.files = Files::default();
        self.cursor = 0;
    }

    fn child(&self, level: usize, index: usize) -> Ref {
        if level == usize::from(self.bucket_bits) { self.buckets[index] } else { self.nodes[level][index] }
    }

    pub(crate) fn write(&mut self, input: &SlotInput) -> Result<Published, SnapshotError> {
        let bucket_bits = input.changes.bucket_bits();
        let options = input.changes.options();
        let l = usize::from(bucket_bits);
        if let Some(d) = (0..l).find(|&d| node_stored(d, l) && !options.keeps_level(d as u8, bucket_bits)) {
            return Err(SnapshotError::Input(format!(
                "the change set leaves out level {d}, which the snapshot stores"
            )));
        }
        if input.accounts.spilled().is_some() && !input.full {
            return Err(SnapshotError::Input("spilled accounts are a full state, submitted without `full`".into()));
        }
        if input.full {
            self.reset(bucket_bits);
        } else if !self.started {
            return Err(SnapshotError::Input("the first snapshot after a start must be full".into()));
        } else if bucket_bits != self.bucket_bits {
            return Err(SnapshotError::Input(format!(
                "bucket_bits changed from {} to {bucket_bits} without a full snapshot",
                self.bucket_bits
            )));
        }
        let seq = self.next_seq;
        if seq == u32::MAX {
            // The last number is never used, so `seq + 1` below never wraps onto live files.
            return Err(SnapshotError::SequenceExhausted { dir: self.dir.clone() });
        }
        let mut lane = match self.io.take() {
            Some(lane) => lane,
            None => IoLane::start().map_err(|e| SnapshotError::io("spawn I/O thread", &self.dir, e))?,
        };
        let result = self.write_files(&mut lane, input, seq);
        self.io = Some(lane);
        if input.full {
            self.bucket_leaves.seal();
        }
        result
    }

    fn write_files(&mut self, lane: &mut IoLane, input: &SlotInput, first: u32) -> Result<Published, SnapshotError> {
        // Every file of the write shares these; a full state reaches nothing before its first
        // file. (The refresh state moves only once the write is published.)
        let template = Header {
            flags: if input.full { FLAG_FULL } else { 0 },
            seq: first,
            bucket_bits: self.bucket_bits,
            slot: input.slot,
            parent: input.parent,
            root: input.root,
            root_ref: Ref::NULL,
            oldest_seq: if input.full { first } else { self.oldest },
            first_seq: first,
            body_len: 0,
            accounts: 0,
            nodes: 0,
            buckets: 0,
            gap_after: None,
        };
        let mut fb = FileBuilder::create(&self.dir, template, self.part_bytes, lane, self.direct)?;
        let result = self.write_into(&mut fb, input, template);
        // Numbers of files published are never reused, even by a write that then failed.
        self.next_seq = self.next_seq.max(fb.next_free());
        let parts: Vec<PathBuf> = fb.parts().to_vec();
        fb.close();
        let (published, seq) = result?;
        for p in &parts {
            self.files.insert(Arc::new(MappedFile::open(p, false)?));
        }
        self.files.insert(Arc::new(MappedFile::open(
            &self.dir.join(aldb_format::format::file_name(seq, input.slot)),
            false,
        )?));
        if input.full {
            self.oldest = first;
            self.cycle_start = seq + 1;
            self.started = true;
        } else {
            self.advance_refresh(seq);
        }
        self.files.remove_below(self.oldest.min(self.keep_files_from));
        Ok(published)
    }

    /// Writes the slot's records through `fb` and publishes its file; returns what was published
    /// and the slot file's sequence number.
    fn write_into(
        &mut self,
        fb: &mut FileBuilder,
        input: &SlotInput,
        template: Header,
    ) -> Result<(Published, u32), SnapshotError> {
        let root_ref = |s: &Self| if s.bucket_bits == 0 { s.buckets[0] } else { s.nodes[0][0] };
        let (account_bytes, refresh_bytes, top_hash) = self.write_body(fb, input, template.first_seq)?;
        let found = match top_hash {
            Some(h) => h,
            None => self.files.hash(root_ref(self))?,
        };
        if found != input.root {
            return Err(SnapshotError::Input(format!(
                "change set does not produce the committed root at slot {}",
                input.slot
            )));
        }
        let gap = self.gap;
        let header = Header {
            flags: template.flags | if gap.is_some() { FLAG_AFTER_GAP } else { 0 },
            root_ref: root_ref(self),
            gap_after: gap.flatten(),
            ..template
        };
        let bytes = fb.publish(header)?;
        self.gap = None;
        let seq = fb.next_free() - 1;
        let published = Published {
            seq,
            first_seq: template.first_seq,
            slot: input.slot,
            root: input.root,
            oldest_seq: template.oldest_seq,
            bytes,
            account_bytes,
            refresh_bytes,
        };
        Ok((published, seq))
    }
}

/// A bucket's leaves do not fit the writer's table.
fn too_large(b: usize, e: crate::leaf_table::BucketTooLarge) -> SnapshotError {
    SnapshotError::Input(format!("bucket {b} holds {} leaves, more than the writer's table records", e.0))
}
