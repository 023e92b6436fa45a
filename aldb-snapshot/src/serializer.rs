//! Turning a commit's change set into one snapshot file.
//!
//! The serializer mirrors the tree's prefix array with a table of [`Ref`]s: where the current
//! version of every prefix node and bucket lives on disk. A slot writes the records that changed
//! and points at older files for the rest, so a file holds one slot's changes yet every kept slot
//! can be walked from its own root.
//!
//! Old files must eventually be deleted, yet an untouched bucket would keep pointing at the file
//! it was last written in forever. So each slot also rewrites ("refreshes") one chunk of the key
//! space, cycling through all chunks in `2^refresh_bits` slots: once a cycle completes, every
//! record reachable from the newest root was written during that cycle, and everything older than
//! the cycle's first file is garbage as soon as no kept slot needs it. The cost is bounded extra
//! writing (the tree and accounts divided by the cycle length per slot), in exchange for never
//! reading or rewriting a whole base on the hot path.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use aldb_core::ChangeSet;
use aldb_verify::spec::{Hash, EMPTY_ROOT};

use crate::batch::AccountBatch;
use crate::error::SnapshotError;
use crate::file_builder::FileBuilder;
use crate::format::{file_name, Header, Ref, ACCOUNT_HEAD_LEN, BUCKET_LEAF_LEN, FLAG_FULL, NODE_LEN};
use crate::store::{Files, LeafView, MappedFile};

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

/// A file that was just published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Published {
    /// Its sequence number.
    pub seq: u32,
    /// The slot it holds.
    pub slot: u64,
    /// The slot's root.
    pub root: Hash,
    /// Oldest file any of its records may point into.
    pub oldest_seq: u32,
    /// File size in bytes.
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
    leaves: Vec<LeafView>,
}

impl Serializer {
    /// A serializer for `dir`, continuing the sequence after `last_seq`. Cycles through the key
    /// space in about `refresh_slots` slots.
    pub(crate) fn new(dir: &Path, last_seq: u32, refresh_slots: u64) -> Self {
        let refresh_bits = (64 - refresh_slots.max(1).saturating_sub(1).leading_zeros()) as u8;
        Self {
            dir: dir.to_path_buf(),
            files: Files::default(),
            bucket_bits: 0,
            nodes: Vec::new(),
            buckets: Vec::new(),
            next_seq: last_seq + 1,
            refresh_bits,
            cursor: 0,
            cycle_start: 0,
            oldest: 0,
            started: false,
            leaves: Vec::new(),
        }
    }

    fn reset(&mut self, bucket_bits: u8) {
        self.bucket_bits = bucket_bits;
        self.nodes = (0..bucket_bits).map(|d| vec![Ref::NULL; 1usize << d]).collect();
        self.buckets = vec![Ref::NULL; 1usize << bucket_bits];
        self.files = Files::default();
        self.cursor = 0;
    }

    fn child(&self, level: usize, index: usize) -> Ref {
        if level == usize::from(self.bucket_bits) { self.buckets[index] } else { self.nodes[level][index] }
    }

    pub(crate) fn write(&mut self, input: &SlotInput) -> Result<Published, SnapshotError> {
        if input.full {
            self.reset(input.changes.bucket_bits);
        } else if !self.started {
            return Err(SnapshotError::Input("the first snapshot after a start must be full".into()));
        } else if input.changes.bucket_bits != self.bucket_bits {
            return Err(SnapshotError::Input(format!(
                "bucket_bits changed from {} to {} without a full snapshot",
                self.bucket_bits, input.changes.bucket_bits
            )));
        }
        let seq = self.next_seq;
        let name = file_name(seq, input.slot);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let mut fb = FileBuilder::create(&tmp, seq)?;
        let result = self.write_body(&mut fb, input);
        let (counts, account_bytes, refresh_bytes, top_hash) = match result {
            Ok(v) => v,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        let root_ref = if self.bucket_bits == 0 { self.buckets[0] } else { self.nodes[0][0] };
        let found = match top_hash {
            Some(h) => h,
            None => self.files.hash(root_ref)?,
        };
        if found != input.root {
            let _ = std::fs::remove_file(&tmp);
            return Err(SnapshotError::Input(format!("change set does not produce the committed root at slot {}", input.slot)));
        }
        if input.full {
            self.oldest = seq;
            self.cycle_start = seq + 1;
            self.started = true;
        }
        let header = Header {
            flags: if input.full { FLAG_FULL } else { 0 },
            seq,
            bucket_bits: self.bucket_bits,
            slot: input.slot,
            parent: input.parent,
            root: input.root,
            root_ref,
            oldest_seq: self.oldest,
            body_len: 0,
            accounts: counts.0,
            nodes: counts.1,
            buckets: counts.2,
        };
        let dest = self.dir.join(&name);
        let bytes = fb.publish(header, &dest)?;
        self.next_seq += 1;
        self.files.insert(Arc::new(MappedFile::open(&dest, false)?));
        if !input.full {
            self.advance_refresh(seq);
        }
        self.files.remove_below(self.oldest);
        Ok(Published { seq, slot: input.slot, root: input.root, oldest_seq: header.oldest_seq, bytes, account_bytes, refresh_bytes })
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
    fn write_body(
        &mut self,
        fb: &mut FileBuilder,
        input: &SlotInput,
    ) -> Result<BodyStats, SnapshotError> {
        let l = usize::from(self.bucket_bits);
        // The newest state of each account in the batch (a coalesced batch may hold several),
        // sorted by path: changed buckets are visited in path order, so finding each leaf's new
        // record is a merge, not a hash lookup per leaf.
        let entries = input.accounts.entries();
        // Sort keys carried inline (no indirection during the sort); newest first within a path.
        let mut by_path: Vec<(Hash, std::cmp::Reverse<usize>)> =
            entries.iter().enumerate().map(|(i, e)| (e.path, std::cmp::Reverse(i))).collect();
        by_path.sort_unstable();
        by_path.dedup_by_key(|e| e.0);
        let order_by_path = by_path.iter().map(|e| e.1 .0);
        let start = fb.len();
        let mut new_accounts: Vec<(Hash, Ref)> = Vec::with_capacity(by_path.len());
        for i in order_by_path {
            let e = &entries[i];
            if e.lamports == 0 {
                continue;
            }
            let data = input.accounts.data(e);
            let head = account_record_parts(&e.pubkey, e.lamports, &e.owner, e.executable, data.len());
            let r = fb.record(&head.as_slice_with(data))?;
            new_accounts.push((e.path, r));
        }
        let mut cursor = 0usize;
        let account_bytes = fb.len() - start;
        let mut refresh_bytes = 0u64;

        // The refresh chunk: a prefix of `refresh_bits` bits whose whole subtree is rewritten.
        let rbits = usize::from(self.refresh_bits.min(self.bucket_bits));
        let refreshing = !input.full && self.started;
        let chunk = self.cursor as usize;

        // Buckets, in index order.
        let mut changed: Vec<&aldb_core::BucketChange> = input.changes.buckets.iter().collect();
        changed.sort_unstable_by_key(|b| b.index);
        let mut order: Vec<(usize, Option<&aldb_core::BucketChange>)> =
            changed.iter().map(|b| (b.index as usize, Some(*b))).collect();
        if refreshing {
            let lo = chunk << (l - rbits);
            let hi = (chunk + 1) << (l - rbits);
            let mut k = 0;
            for b in lo..hi {
                while k < changed.len() && (changed[k].index as usize) < b {
                    k += 1;
                }
                let is_changed = k < changed.len() && changed[k].index as usize == b;
                if !is_changed && !self.buckets[b].is_null() {
                    order.push((b, None));
                }
            }
        }
        // The hash of the top record if this slot rewrote it (or emptied it).
        let mut top_hash: Option<Hash> = None;
        let in_chunk = |b: usize| refreshing && (b >> (l - rbits)) == chunk;
        let mut bucket_count = 0u32;
        let mut leaf_buf: Vec<u8> = Vec::new();
        for (b, change) in order {
            if b >= self.buckets.len() {
                return Err(SnapshotError::Input(format!("bucket index {b} out of range")));
            }
            let old = self.buckets[b];
            leaf_buf.clear();
            let hash = match change {
                Some(c) => {
                    let leaves = input.changes.leaves_of(c);
                    if leaves.is_empty() {
                        self.buckets[b] = Ref::NULL;
                        if l == 0 {
                            top_hash = Some(EMPTY_ROOT);
                        }
                        continue;
                    }
                    if !old.is_null() {
                        self.files.bucket(old, &mut self.leaves)?;
                    } else {
                        self.leaves.clear();
                    }
                    for (path, _) in leaves {
                        while cursor < new_accounts.len() && new_accounts[cursor].0 < *path {
                            cursor += 1;
                        }
                        let fresh = new_accounts.get(cursor).filter(|(p, _)| p == path).map(|(_, r)| *r);
                        let acct = match fresh {
                            Some(r) => r,
                            None => match self.find_old_leaf(path)? {
                                // Inside the refresh chunk even untouched records are copied forward.
                                Some(lv) if in_chunk(b) => {
                                    let before = fb.len();
                                    let r = self.copy_account(fb, lv.account)?;
                                    refresh_bytes += fb.len() - before;
                                    r
                                }
                                Some(lv) => lv.account,
                                None => {
                                    return Err(SnapshotError::Input(format!(
                                        "leaf changed without its account record (bucket {b})"
                                    )))
                                }
                            },
                        };
                        push_leaf(&mut leaf_buf, prefix_of(path), acct);
                    }
                    c.hash
                }
                None => {
                    let before = fb.len();
                    let hash = self.files.bucket(old, &mut self.leaves)?;
                    let leaves = std::mem::take(&mut self.leaves);
                    for lv in &leaves {
                        let acct = self.copy_account(fb, lv.account)?;
                        push_leaf(&mut leaf_buf, lv.prefix, acct);
                    }
                    self.leaves = leaves;
                    refresh_bytes += fb.len() - before;
                    hash
                }
            };
            let count = (leaf_buf.len() / BUCKET_LEAF_LEN) as u32;
            let before = fb.len();
            let r = fb.record(&[&hash, &count.to_le_bytes(), &[0u8; 4], &leaf_buf])?;
            if change.is_none() {
                refresh_bytes += fb.len() - before;
            }
            self.buckets[b] = r;
            if l == 0 {
                top_hash = Some(hash);
            }
            bucket_count += 1;
        }

        // Prefix nodes, deepest level first so children's references are current.
        let mut by_level: Vec<Vec<(usize, Hash, bool)>> = vec![Vec::new(); l];
        for n in &input.changes.nodes {
            let d = usize::from(n.level);
            if d >= l || n.index >= (1u64 << d) {
                return Err(SnapshotError::Input(format!("node ({}, {}) out of range", n.level, n.index)));
            }
            by_level[d].push((n.index as usize, n.hash, true));
        }
        if refreshing {
            for (d, list) in by_level.iter_mut().enumerate() {
                let (lo, hi) = if d >= rbits {
                    (chunk << (d - rbits), (chunk + 1) << (d - rbits))
                } else {
                    (chunk >> (rbits - d), (chunk >> (rbits - d)) + 1)
                };
                for i in lo..hi {
                    list.push((i, EMPTY_ROOT, false));
                }
            }
        }
        let mut node_count = 0u32;
        for d in (0..l).rev() {
            let list = &mut by_level[d];
            // A real change wins over a refresh entry for the same node.
            list.sort_unstable_by_key(|&(i, _, real)| (i, !real));
            list.dedup_by_key(|e| e.0);
            for &(i, hash, real) in list.iter() {
                let hash = if real {
                    hash
                } else {
                    match self.nodes[d][i] {
                        r if r.is_null() => continue,
                        r => self.files.hash(r)?,
                    }
                };
                if d == 0 {
                    top_hash = Some(hash);
                }
                if hash == EMPTY_ROOT {
                    self.nodes[d][i] = Ref::NULL;
                    continue;
                }
                let (left, right) = (self.child(d + 1, 2 * i), self.child(d + 1, 2 * i + 1));
                let before = fb.len();
                let r = fb.record(&[&hash, &left.0.to_le_bytes(), &right.0.to_le_bytes()])?;
                debug_assert_eq!(fb.len() - before, NODE_LEN as u64);
                if !real {
                    refresh_bytes += NODE_LEN as u64;
                }
                self.nodes[d][i] = r;
                node_count += 1;
            }
        }
        Ok(((new_accounts.len() as u32, node_count, bucket_count), account_bytes, refresh_bytes, top_hash))
    }

    /// The old leaf (from `self.leaves`, the bucket's previous record) with this path. Prefixes
    /// almost never collide within a bucket; when they do, the account records decide.
    fn find_old_leaf(&self, path: &Hash) -> Result<Option<LeafView>, SnapshotError> {
        let prefix = prefix_of(path);
        let mut hits = self.leaves.iter().filter(|l| l.prefix == prefix);
        let Some(first) = hits.next() else { return Ok(None) };
        if hits.next().is_none() {
            return Ok(Some(*first));
        }
        for l in self.leaves.iter().filter(|l| l.prefix == prefix) {
            if aldb_verify::spec::key_path(&self.files.account(l.account)?.pubkey) == *path {
                return Ok(Some(*l));
            }
        }
        Ok(None)
    }

    /// Copies an account record from an older file into this one.
    fn copy_account(&self, fb: &mut FileBuilder, r: Ref) -> Result<Ref, SnapshotError> {
        let a = self.files.account(r)?;
        fb.record(&[a.raw])
    }
}

/// What `write_body` wrote: record counts (accounts, nodes, buckets), account bytes, refresh
/// bytes, and the top record's hash when this slot rewrote it.
type BodyStats = ((u32, u32, u32), u64, u64, Option<Hash>);

fn push_leaf(buf: &mut Vec<u8>, prefix: u64, acct: Ref) {
    buf.extend_from_slice(&prefix.to_be_bytes());
    buf.extend_from_slice(&acct.0.to_le_bytes());
}

fn prefix_of(path: &Hash) -> u64 {
    let mut p = [0u8; 8];
    p.copy_from_slice(&path[..8]);
    u64::from_be_bytes(p)
}

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
