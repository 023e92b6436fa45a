//! Prefix node records: the stored levels' nodes whose hash the slot changed, and those the
//! refresh chunk carries forward, deepest first.

use aldb_core::ChangeSet;
use aldb_format::SnapshotError;
use aldb_format::format::{MAX_ARITY, Ref, node_arity, node_len, node_stored};
use aldb_verify::spec::EMPTY_ROOT;

use super::Serializer;
use super::body::{Pass, Scratch, Tally};
use super::refresh::chunk_span;
use super::undo::TableEntry;
use crate::file_builder::{FileBuilder, Kind};

impl Serializer {
    /// Writes the node records, bottom-up, and sets them in the tables.
    pub(super) fn write_nodes(
        &mut self,
        fb: &mut FileBuilder,
        changes: &ChangeSet,
        pass: Pass,
        s: &mut Scratch,
        tally: &mut Tally,
    ) -> Result<(), SnapshotError> {
        let (l, refreshing, chunk, rbits) = (pass.l, pass.refreshing, pass.chunk, pass.rbits);
        let this_write = move |r: Ref| pass.this_write(r);
        let stale = move |r: Ref| pass.stale(r);
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
                    tally.top_hash = Some(hash);
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
                    tally.refresh_bytes += node_len(arity) as u64;
                }
                self.nodes[d][i] = r;
            }
        }
        Ok(())
    }
}
