//! Rebuilding the tables from the files on disk, so a writer goes on with deltas after a failure
//! or a restart instead of needing a full state.

use std::path::Path;
use std::sync::Arc;

use aldb_format::SnapshotError;
use aldb_format::format::{FileKind, node_arity, node_stored, parse_published_name};
use aldb_format::store::{Files, MappedFile};

use super::{Serializer, too_large};
use crate::leaf_table::LeafView;

impl Serializer {
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
}
