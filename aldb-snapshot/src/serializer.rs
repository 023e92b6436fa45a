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

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aldb_core::{CaptureOptions, ChangeSet, prefetch};
use aldb_verify::spec::{EMPTY_ROOT, Hash};

use aldb_format::SnapshotError;
use aldb_format::format::{
    ACCOUNT_HEAD_LEN, FLAG_AFTER_GAP, FLAG_FULL, FileKind, Header, MAX_ARITY, Ref, node_arity, node_len, node_stored,
    parse_published_name, prefix_of,
};
use aldb_format::store::{Files, MappedFile};

use crate::batch::AccountBatch;
use crate::file_builder::{FileBuilder, IoLane, Kind};
use crate::leaf_table::{LeafTable, LeafView, tag};
use crate::path_index::{PathEntry, PathIndex};

/// What the writer reads of a change set: the levels it stores (even levels, without the one
/// just above the buckets: see [`aldb_format::format::node_stored`]) and the buckets' leaf paths. A
/// commit captured with these options records well under half the bytes of a full capture; any
/// capture that includes them is accepted.
pub const CAPTURE_OPTIONS: CaptureOptions =
    CaptureOptions::ALL.with_level_step(2).without_leaf_values().without_levels_above_buckets(1);

/// One slot's input to the writer.
#[derive(Debug)]
pub struct SlotInput {
    /// The committed slot.
    pub slot: u64,
    /// Its parent slot, if known.
    pub parent: Option<u64>,
    /// The root the engine committed for it.
    pub root: Hash,
    /// What the commit changed ([`aldb_core::Pleiades::commit_capture`]), or everything
    /// ([`aldb_core::Pleiades::capture_all`]) when `full`.
    pub changes: ChangeSet,
    /// The new state of every account whose leaf changed (all accounts when `full`).
    pub accounts: AccountBatch,
    /// Whether this is the whole state: the first input after a start must be.
    pub full: bool,
}

/// A slot that was just published: its file, and the part files before it when what it wrote
/// outgrew one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Published {
    /// The sequence number of the slot's file.
    pub seq: u32,
    /// The sequence number of its first part (`seq` when the slot fits in one file): files
    /// `first_seq..seq` are its parts.
    pub first_seq: u32,
    /// The slot it holds.
    pub slot: u64,
    /// The slot's root.
    pub root: Hash,
    /// Oldest file any of its records may point into.
    pub oldest_seq: u32,
    /// Bytes of its files (parts included).
    pub bytes: u64,
    /// Bytes of account records in it.
    pub account_bytes: u64,
    /// Bytes of refresh copies in it (records rewritten only to retire old files).
    pub refresh_bytes: u64,
}

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

/// Where the refresh cycle stands on one chain (each fork has its own).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RefreshState {
    cursor: u64,
    cycle_start: u32,
    oldest: u32,
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

/// Per-slot working memory of [`Serializer::write_body`], kept so its capacity is reused.
#[derive(Default)]
struct Scratch {
    /// The batch's accounts by path.
    index: PathIndex,
    /// Records the refresh will read, for [`Files::will_need`].
    hint: Vec<Ref>,
    /// The refresh chunk the last write already asked the device for, a slot ahead.
    hinted: Option<usize>,
    /// By batch index: the account record written for it (null: superseded or deleted).
    refs: Vec<Ref>,
    /// By position in `by_path`: the account record written (null when deleted).
    path_refs: Vec<Ref>,
    /// The refresh chunk's buckets this slot changed, then those it only carries forward.
    chunk_changed: Vec<u64>,
    refresh: Vec<u64>,
    leaf_buf: Vec<u8>,
    new_leaves: Vec<LeafView>,
    /// Per level: `(prefix, hash)` of its changed nodes.
    by_level: Vec<Vec<(u32, Hash)>>,
}

/// How far ahead the bucket loop prefetches a bucket's old leaves; it fetches the bucket's
/// entries in the writer's tables (which say where those leaves are) twice as far ahead, so the
/// leaves' address is in cache when it is needed.
const PREFETCH_BUCKETS: usize = 8;

/// Marks an account to write in [`Scratch::refs`] (never a real reference: its sequence number
/// would be `u32::MAX`, which no file gets).
const WRITE_ME: Ref = Ref(u64::MAX);

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

    fn refresh_state(&self) -> RefreshState {
        RefreshState { cursor: self.cursor, cycle_start: self.cycle_start, oldest: self.oldest }
    }

    fn set_refresh_state(&mut self, r: RefreshState) {
        (self.cursor, self.cycle_start, self.oldest) = (r.cursor, r.cycle_start, r.oldest);
    }

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

    /// Rebuilds the in-memory state from the published file `path` (and the older files its
    /// records reach), as if that file had just been written, so the writer can go on with
    /// deltas after a failure instead of needing a full state nobody holds. Reads the whole tree
    /// once (every node and bucket record, and each leaf's account record for its path): a cost
    /// paid only on recovery, on the writer's thread. Every file is verified first.
    pub(crate) fn recover(&mut self, path: &Path) -> Result<(), SnapshotError> {
        self.started = false;
        let top = Arc::new(MappedFile::open(path, true)?);
        let h = top.header;
        if h.is_part() {
            return Err(SnapshotError::corrupt(path, "a part file holds no slot to continue from"));
        }
        let mut files = Files::default();
        let rd = std::fs::read_dir(&self.dir).map_err(|e| SnapshotError::io("list", &self.dir, e))?;
        for entry in rd {
            let entry = entry.map_err(|e| SnapshotError::io("list", &self.dir, e))?;
            let name = entry.file_name();
            // The slot's parts and everything before them it reaches, named as slots or parts.
            let Some((seq, _, kind)) = name.to_str().and_then(parse_published_name) else { continue };
            if seq < h.oldest_seq || seq >= h.seq {
                continue;
            }
            let f = MappedFile::open(&entry.path(), true)?;
            if f.header.seq != seq || FileKind::of(&f.header) != kind {
                return Err(SnapshotError::corrupt(
                    entry.path(),
                    "header and file name disagree on the sequence number or the kind of file",
                ));
            }
            if files.get(seq).is_some() {
                return Err(SnapshotError::corrupt(entry.path(), format!("a second file with sequence number {seq}")));
            }
            files.insert(Arc::new(f));
        }
        files.insert(top);
        if let Some(missing) = (h.oldest_seq..=h.seq).find(|&q| files.get(q).is_none()) {
            return Err(SnapshotError::MissingFile { seq: missing });
        }
        self.reset(h.bucket_bits);
        self.files = files;
        let l = usize::from(h.bucket_bits);
        if l == 0 {
            self.buckets[0] = h.root_ref;
        } else {
            self.nodes[0][0] = h.root_ref;
        }
        for d in (0..l).filter(|&d| node_stored(d, l)) {
            let arity = node_arity(d, l);
            let below = d + arity.trailing_zeros() as usize;
            for i in 0..1usize << d {
                let r = self.nodes[d][i];
                if r.is_null() {
                    continue;
                }
                let n = self.files.node(r, arity)?;
                for (c, child) in n.refs[..arity].iter().enumerate() {
                    if below == l {
                        self.buckets[arity * i + c] = *child;
                    } else {
                        self.nodes[below][arity * i + c] = *child;
                    }
                }
            }
        }
        let mut leaves = Vec::new();
        for b in 0..self.buckets.len() {
            let r = self.buckets[b];
            if r.is_null() {
                continue;
            }
            self.files.bucket(r, &mut leaves)?;
            let mut views = Vec::with_capacity(leaves.len());
            for &a in &leaves {
                let (path, _, _) = self.files.leaf(a, b as u64, h.bucket_bits)?;
                views.push(LeafView::new(&path, h.bucket_bits, a));
            }
            self.bucket_leaves.set(b, &views).map_err(|e| too_large(b, e))?;
        }
        self.bucket_leaves.seal();
        let root = self.files.hash(h.root_ref)?;
        if root != h.root {
            return Err(SnapshotError::corrupt(path, "the top record's hash is not the header's root"));
        }
        // A new refresh cycle starts now: everything written before counts as old, so one full
        // cycle from here retires every file below this one, as after a full snapshot.
        self.oldest = h.oldest_seq;
        self.cycle_start = self.next_seq;
        self.cursor = 0;
        self.started = true;
        self.next_seq = self.next_seq.max(h.seq.saturating_add(1));
        Ok(())
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

    fn advance_refresh(&mut self, seq: u32) {
        let chunks = 1u64 << self.refresh_bits.min(self.bucket_bits);
        self.cursor += 1;
        if self.cursor >= chunks {
            // Every record reachable from now on was written at or after the cycle's first file.
            self.cursor = 0;
            self.oldest = self.cycle_start;
            self.cycle_start = seq + 1;
        }
    }

    /// Writes accounts, buckets and nodes; returns record counts and byte counts.
    fn write_body(&mut self, fb: &mut FileBuilder, input: &SlotInput, first: u32) -> Result<BodyStats, SnapshotError> {
        // Working memory is kept across slots: fresh allocations of a slot's megabytes cost
        // more in page faults than the work done in them.
        let mut s = std::mem::take(&mut self.scratch);
        let result = self.write_body_with(fb, input, first, &mut s);
        // Except after a full write: its working memory is sized to the whole state (about 97
        // bytes per leaf), which no later delta slot needs, and keeping it would hold that much
        // beside the tree for the writer's lifetime.
        if !input.full {
            self.scratch = s;
        }
        result
    }

    fn write_body_with(
        &mut self,
        fb: &mut FileBuilder,
        input: &SlotInput,
        first: u32,
        s: &mut Scratch,
    ) -> Result<BodyStats, SnapshotError> {
        let l = usize::from(self.bucket_bits);
        // Records this write made are in files numbered from `first` (its parts, then its own).
        let this_write = move |r: Ref| r.seq() >= first;
        // The refresh chunk: a prefix of `refresh_bits` bits whose whole subtree is rewritten.
        let rbits = usize::from(self.refresh_bits.min(self.bucket_bits));
        let refreshing = !input.full && self.started;
        let chunk = self.cursor as usize;
        let in_chunk = |b: usize| refreshing && (b >> (l - rbits)) == chunk;
        // Only records from before the current cycle need carrying forward: one written since
        // it began is already in a file the cycle's end keeps, and so is a record all of whose
        // references are (a record never points at a newer one).
        let cycle_start = self.cycle_start;
        let stale = move |r: Ref| !r.is_null() && r.seq() < cycle_start;
        // The chunk's buckets.
        let (chunk_lo, chunk_hi) = chunk_span(chunk, rbits, l);
        if refreshing {
            // The chunk's records are read back below: the stale account records it copies
            // forward, and the hash of every bucket and stored node it rewrites without a change
            // of its own, wherever that record is. Files are written past the page cache, so each
            // of those reads is a fault to the device unless asked for in advance; hinting only
            // the stale records, right before the copy, left 6,274 major faults and ~280 ms
            // blocked per 400k-update slot at 2^26 (BENCHMARKS.md §2). The next chunk is asked
            // for a slot ahead, so its reads have a whole slot to complete; this chunk only when
            // the last write did not (the first refreshing write, after a full one or a restart).
            s.hint.clear();
            let chunks = 1usize << rbits;
            if s.hinted != Some(chunk) {
                self.refresh_reads(chunk, rbits, &stale, &mut s.hint);
            }
            let next = (chunk + 1) % chunks;
            self.refresh_reads(next, rbits, &stale, &mut s.hint);
            s.hinted = Some(next);
            self.files.will_need(&mut s.hint);
        }

        // Accounts: the newest state of each account in the batch (a coalesced batch may hold
        // several) is written; `by_path` and `path_refs` then let changed buckets, visited in
        // path order, find each leaf's new record by a merge.
        let entries = input.accounts.entries();
        s.index.build(entries);
        let by_path: &[PathEntry] = s.index.sorted();
        s.refs.clear();
        s.refs.resize(entries.len(), Ref::NULL);
        let start = fb.written();
        let write = |fb: &mut FileBuilder, e: &crate::batch::AccountEntry| -> Result<Ref, SnapshotError> {
            if e.lamports == 0 {
                return Ok(Ref::NULL);
            }
            let data = input.accounts.data(e);
            let head = account_record_parts(&e.pubkey, e.lamports, &e.owner, e.executable, data.len());
            fb.record(Kind::Account, &head.as_slice_with(data))
        };
        // A spilled full state: each leaf's account, in the change set's (path) order, from the
        // batch if one was merged on top, else the spill's winner; `path_refs` is then by leaf.
        let spilled = input.accounts.spilled().filter(|_| input.full);
        if let Some(spill) = spilled {
            s.path_refs.clear();
            let mut winners = spill.winners();
            let mut cursor = 0usize;
            for c in input.changes.buckets() {
                for path in c.paths {
                    let key = (prefix_of(path), path);
                    while cursor < by_path.len() && (by_path[cursor].0, &by_path[cursor].1) < key {
                        cursor += 1;
                    }
                    let r = match by_path.get(cursor) {
                        Some(&(_, p, std::cmp::Reverse(i))) if p == *path => write(fb, &entries[i as usize])?,
                        _ => match winners.seek(path)? {
                            Some(w) => {
                                let a = w.account;
                                let head =
                                    account_record_parts(a.pubkey, a.lamports, a.owner, a.executable, a.data.len());
                                fb.record(Kind::Account, &head.as_slice_with(a.data))?
                            }
                            None => Ref::NULL,
                        },
                    };
                    if r.is_null() {
                        return Err(SnapshotError::Input(format!(
                            "leaf of bucket {} has no account in the startup spill",
                            c.index
                        )));
                    }
                    s.path_refs.push(r);
                }
            }
        } else if input.full {
            // A full state is written in path order: the refresh later copies a key range at a
            // time, and reads it back sequentially only if it lies together on disk.
            for &(_, _, std::cmp::Reverse(i)) in by_path {
                s.refs[i as usize] = write(fb, &entries[i as usize])?;
            }
        } else {
            // A slot is written in batch order, reading the batch sequentially (in path order
            // most of the time went to cache misses on it).
            for &(_, _, std::cmp::Reverse(i)) in by_path {
                s.refs[i as usize] = WRITE_ME;
            }
            for (e, r) in entries.iter().zip(s.refs.iter_mut()) {
                if *r == WRITE_ME {
                    *r = write(fb, e)?;
                }
            }
        }
        // One gather (independent loads the CPU overlaps), so the bucket loop reads in order.
        if spilled.is_none() {
            s.path_refs.clear();
            s.path_refs.extend(by_path.iter().map(|&(_, _, std::cmp::Reverse(i))| s.refs[i as usize]));
        }
        // The next leaf's record of a spilled full state.
        let mut leaf_k = 0usize;
        let account_bytes = fb.written() - start;
        let mut refresh_bytes = 0u64;

        // Buckets in index order: the changed ones, then the refresh chunk's untouched ones.
        let changes = &input.changes;
        s.chunk_changed.clear();
        s.refresh.clear();
        if refreshing {
            let (lo, hi) = (chunk_lo as u64, chunk_hi as u64);
            s.chunk_changed.extend(changes.buckets().map(|c| c.index).skip_while(|&b| b < lo).take_while(|&b| b < hi));
            let mut k = 0;
            for b in chunk_lo..chunk_hi {
                while k < s.chunk_changed.len() && (s.chunk_changed[k] as usize) < b {
                    k += 1;
                }
                let is_changed = k < s.chunk_changed.len() && s.chunk_changed[k] as usize == b;
                let carry = stale(self.buckets[b]) || self.bucket_leaves.leaves(b).iter().any(|lv| stale(lv.account()));
                if !is_changed && carry {
                    s.refresh.push(b as u64);
                }
            }
        }
        // The hash of the top record if this slot rewrote it (or emptied it).
        let mut top_hash: Option<Hash> = None;
        let mut cursor = 0usize;
        let mut previous: Option<u64> = None;
        // The buckets' table entries and old leaves are scattered in memory: ask for them a few
        // buckets ahead so the misses overlap.
        let order = || changes.buckets().map(|c| c.index).chain(s.refresh.iter().copied());
        let (mut near, mut far) = (order().skip(PREFETCH_BUCKETS), order().skip(2 * PREFETCH_BUCKETS));
        let visits = changes.buckets().map(|c| (c.index, Some(c))).chain(s.refresh.iter().map(|&b| (b, None)));
        for (b, change) in visits {
            if let Some(a) = far.next().filter(|&a| (a as usize) < self.buckets.len()) {
                self.bucket_leaves.prefetch_block(a as usize);
                prefetch(&self.buckets[a as usize]);
            }
            if let Some(a) = near.next() {
                self.bucket_leaves.prefetch_leaves(a as usize);
            }
            if change.is_some() {
                if previous.is_some_and(|p| p >= b) {
                    return Err(SnapshotError::Input(format!("changed buckets out of order at bucket {b}")));
                }
                previous = Some(b);
            }
            let b = b as usize;
            if b >= self.buckets.len() {
                return Err(SnapshotError::Input(format!("bucket index {b} out of range")));
            }
            let old = self.buckets[b];
            s.new_leaves.clear();
            let hash = match change {
                Some(c) => {
                    let old_leaves = self.bucket_leaves.leaves(b);
                    if let Some(u) = self.undo.as_mut() {
                        u.push(TableEntry::Bucket { index: b as u64, r: old, leaves: old_leaves.into() });
                    }
                    if c.paths.is_empty() {
                        self.buckets[b] = Ref::NULL;
                        self.bucket_leaves.set(b, &[]).map_err(|e| too_large(b, e))?;
                        if l == 0 {
                            top_hash = Some(EMPTY_ROOT);
                        }
                        continue;
                    }
                    for path in c.paths {
                        let fresh = if spilled.is_some() {
                            leaf_k += 1;
                            s.path_refs.get(leaf_k - 1).copied()
                        } else {
                            let key = (prefix_of(path), path);
                            while cursor < by_path.len() && (by_path[cursor].0, &by_path[cursor].1) < key {
                                cursor += 1;
                            }
                            match by_path.get(cursor) {
                                Some((_, p, _)) if p == path => Some(s.path_refs[cursor]).filter(|r| !r.is_null()),
                                _ => None,
                            }
                        };
                        let acct = match fresh {
                            Some(r) => r,
                            None => match self.find_old_leaf(old_leaves, path)? {
                                // Inside the refresh chunk untouched records from before the
                                // cycle are copied forward.
                                Some(lv) if in_chunk(b) && stale(lv.account()) => {
                                    let before = fb.written();
                                    let r = self.copy_account(fb, lv.account())?;
                                    refresh_bytes += fb.written() - before;
                                    r
                                }
                                Some(lv) => lv.account(),
                                None => {
                                    return Err(SnapshotError::Input(format!(
                                        "leaf changed without its account record (bucket {b})"
                                    )));
                                }
                            },
                        };
                        s.new_leaves.push(LeafView::new(path, self.bucket_bits, acct));
                    }
                    c.hash
                }
                None => {
                    let before = fb.written();
                    let hash = self.files.hash(old)?;
                    let old_leaves = self.bucket_leaves.leaves(b);
                    for &lv in old_leaves {
                        let acct = lv.account();
                        s.new_leaves.push(lv.with_account(if stale(acct) {
                            self.copy_account(fb, acct)?
                        } else {
                            acct
                        }));
                    }
                    refresh_bytes += fb.written() - before;
                    if let Some(u) = self.undo.as_mut() {
                        u.push(TableEntry::Bucket { index: b as u64, r: old, leaves: old_leaves.into() });
                    }
                    hash
                }
            };
            // Most changed buckets keep their leaf count (updates, not inserts or deletes): the
            // table then overwrites them in place.
            self.bucket_leaves.set(b, &s.new_leaves).map_err(|e| too_large(b, e))?;
            // On disk a leaf is its account reference alone (the prefix stays in memory).
            s.leaf_buf.clear();
            s.leaf_buf.extend(s.new_leaves.iter().flat_map(|lv| lv.account().0.to_le_bytes()));
            let count = s.new_leaves.len() as u32;
            let before = fb.written();
            let r = fb.record(Kind::Bucket, &[&hash, &count.to_le_bytes(), &[0u8; 4], &s.leaf_buf])?;
            if change.is_none() {
                refresh_bytes += fb.written() - before;
            }
            self.buckets[b] = r;
            if l == 0 {
                top_hash = Some(hash);
            }
        }

        // Prefix nodes at even levels (the odd ones are recomputed by readers), deepest first so
        // each points at its grandchildren's newest records; within a level any order will do,
        // so nodes are only bucketed by level.
        s.by_level.resize_with(l, Vec::new);
        for list in &mut s.by_level {
            list.clear();
        }
        for n in changes.nodes() {
            let d = usize::from(n.level);
            if d >= l || n.index >= (1u64 << d) {
                return Err(SnapshotError::Input(format!("node ({}, {}) out of range", n.level, n.index)));
            }
            if node_stored(d, l) {
                s.by_level[d].push((n.index as u32, n.hash));
            }
        }
        for d in (0..l).rev().filter(|&d| node_stored(d, l)) {
            let arity = node_arity(d, l);
            let below = d + arity.trailing_zeros() as usize;
            let (lo, hi) = if refreshing { chunk_span(chunk, rbits, d) } else { (0, 0) };
            let real = s.by_level[d].iter().map(|&(i, h)| (i as usize, Some(h)));
            for (i, k) in real.chain((lo..hi).map(|i| (i, None))) {
                let hash = match k {
                    Some(h) => h,
                    // A refresh entry: skip empty prefixes and nodes this slot already wrote, and
                    // those from this cycle none of whose children this slot rewrote.
                    None => match self.nodes[d][i] {
                        r if r.is_null() || this_write(r) => continue,
                        r if !stale(r) && (0..arity).all(|c| !this_write(self.child(below, arity * i + c))) => {
                            continue;
                        }
                        r => self.files.hash(r)?,
                    },
                };
                if d == 0 {
                    top_hash = Some(hash);
                }
                if let Some(u) = self.undo.as_mut() {
                    u.push(TableEntry::Node { level: d as u8, index: i as u64, r: self.nodes[d][i] });
                }
                if hash == EMPTY_ROOT {
                    self.nodes[d][i] = Ref::NULL;
                    continue;
                }
                let mut record = [0u8; node_len(MAX_ARITY)];
                record[..32].copy_from_slice(&hash);
                for c in 0..arity {
                    let child = self.child(below, arity * i + c);
                    record[32 + 8 * c..40 + 8 * c].copy_from_slice(&child.0.to_le_bytes());
                }
                let r = fb.record(Kind::Node, &[&record[..node_len(arity)]])?;
                if k.is_none() {
                    refresh_bytes += node_len(arity) as u64;
                }
                self.nodes[d][i] = r;
            }
        }
        Ok((account_bytes, refresh_bytes, top_hash))
    }

    /// Pushes to `out` the records a refresh of `chunk` reads: its buckets' stale account
    /// records (copied forward), and every bucket and stored node record of the chunk (their
    /// hashes are read back for whatever this slot does not change). A superset of the reads
    /// is harmless: it only asks the device for a few pages more.
    fn refresh_reads(&self, chunk: usize, rbits: usize, stale: &impl Fn(Ref) -> bool, out: &mut Vec<Ref>) {
        let l = usize::from(self.bucket_bits);
        let (lo, hi) = chunk_span(chunk, rbits, l);
        for b in lo..hi {
            out.extend(self.bucket_leaves.leaves(b).iter().map(|lv| lv.account()).filter(|&r| stale(r)));
            out.push(self.buckets[b]);
        }
        for d in (0..l).filter(|&d| node_stored(d, l)) {
            let (lo, hi) = chunk_span(chunk, rbits, d);
            out.extend(self.nodes[d][lo..hi].iter().copied());
        }
        out.retain(|r| !r.is_null());
    }

    /// The old leaf (from `old`, the bucket's previous leaves) with this path. Tags almost never
    /// collide within a bucket; when they do, the account records decide.
    fn find_old_leaf(&self, old: &[LeafView], path: &Hash) -> Result<Option<LeafView>, SnapshotError> {
        let t = tag(path, self.bucket_bits);
        let mut hits = old.iter().filter(|l| l.tag() == t);
        let Some(first) = hits.next() else { return Ok(None) };
        if hits.next().is_none() {
            return Ok(Some(*first));
        }
        for l in old.iter().filter(|l| l.tag() == t) {
            if aldb_verify::spec::key_path(&self.files.account(l.account())?.pubkey) == *path {
                return Ok(Some(*l));
            }
        }
        Ok(None)
    }

    /// Copies an account record from an older file into this one.
    fn copy_account(&self, fb: &mut FileBuilder, r: Ref) -> Result<Ref, SnapshotError> {
        let a = self.files.account(r)?;
        // Copied straight out of the mapping: checked after the copy (`AccountView::intact`).
        let copied = fb.record(Kind::Account, &[a.raw])?;
        a.intact(copied)
    }
}

/// The prefixes of `d` bits that refresh chunk `chunk` (a prefix of `rbits` bits) rewrites: those
/// under it when `d >= rbits`, else the one it lies under.
fn chunk_span(chunk: usize, rbits: usize, d: usize) -> (usize, usize) {
    if d >= rbits {
        (chunk << (d - rbits), (chunk + 1) << (d - rbits))
    } else {
        (chunk >> (rbits - d), (chunk >> (rbits - d)) + 1)
    }
}

/// A bucket's leaves do not fit the writer's table.
fn too_large(b: usize, e: crate::leaf_table::BucketTooLarge) -> SnapshotError {
    SnapshotError::Input(format!("bucket {b} holds {} leaves, more than the writer's table records", e.0))
}

/// What `write_body` wrote: account bytes, refresh bytes, and the top record's hash when this
/// slot rewrote it.
type BodyStats = (u64, u64, Option<Hash>);

/// The fixed part of an account record.
pub(crate) struct AccountHead([u8; ACCOUNT_HEAD_LEN]);

impl AccountHead {
    fn as_slice_with<'a>(&'a self, data: &'a [u8]) -> [&'a [u8]; 2] {
        [&self.0, data]
    }
}

pub(crate) fn account_record_parts(
    pubkey: &[u8; 32],
    lamports: u64,
    owner: &[u8; 32],
    executable: bool,
    data_len: usize,
) -> AccountHead {
    let mut h = [0u8; ACCOUNT_HEAD_LEN];
    h[0..32].copy_from_slice(pubkey);
    h[32..40].copy_from_slice(&lamports.to_le_bytes());
    h[40..72].copy_from_slice(owner);
    h[72] = u8::from(executable);
    // Account data is at most 10 MiB on Solana, far below u32::MAX.
    h[76..80].copy_from_slice(&(data_len as u32).to_le_bytes());
    AccountHead(h)
}
