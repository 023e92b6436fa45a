//! Bucket records: the buckets the slot changed, each with its leaves' new or old account
//! records, then the refresh chunk's untouched buckets carried forward.

use aldb_core::prefetch;
use aldb_format::SnapshotError;
use aldb_format::format::{Ref, prefix_of};
use aldb_verify::spec::{EMPTY_ROOT, Hash};

use super::body::{Pass, Scratch, Tally};
use super::input::SlotInput;
use super::refresh::chunk_span;
use super::undo::TableEntry;
use super::{Serializer, too_large};
use crate::file_builder::{FileBuilder, Kind};
use crate::leaf_table::{LeafView, tag};
use crate::path_index::PathEntry;

/// How far ahead the bucket loop prefetches a bucket's old leaves; it fetches the bucket's
/// entries in the writer's tables (which say where those leaves are) twice as far ahead, so the
/// leaves' address is in cache when it is needed.
const PREFETCH_BUCKETS: usize = 8;

impl Serializer {
    /// Writes the bucket records, in index order, and sets them in the tables.
    pub(super) fn write_buckets(
        &mut self,
        fb: &mut FileBuilder,
        input: &SlotInput,
        pass: Pass,
        s: &mut Scratch,
        tally: &mut Tally,
    ) -> Result<(), SnapshotError> {
        let (l, refreshing) = (pass.l, pass.refreshing);
        let stale = move |r: Ref| pass.stale(r);
        let in_chunk = move |b: usize| pass.in_chunk(b);
        // The chunk's buckets.
        let (chunk_lo, chunk_hi) = chunk_span(pass.chunk, pass.rbits, l);
        let by_path: &[PathEntry] = s.index.sorted();
        // A spilled full state: `path_refs` is by leaf.
        let spilled = input.full && input.accounts.spilled().is_some();
        // The next leaf's record of a spilled full state.
        let mut leaf_k = 0usize;
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
                            tally.top_hash = Some(EMPTY_ROOT);
                        }
                        continue;
                    }
                    for path in c.paths {
                        let fresh = if spilled {
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
                                    tally.refresh_bytes += fb.written() - before;
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
                    tally.refresh_bytes += fb.written() - before;
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
                tally.refresh_bytes += fb.written() - before;
            }
            self.buckets[b] = r;
            if l == 0 {
                tally.top_hash = Some(hash);
            }
        }
        Ok(())
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
}
