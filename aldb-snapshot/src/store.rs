//! Memory-mapped snapshot files and bounds-checked record access.
//!
//! Every read goes through here, and every offset read from disk is checked against the file it
//! points into before use, so a corrupt or truncated file yields an error, never a panic or a
//! read outside the mapping.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aldb_verify::spec::Hash;
use memmap2::{Advice, Mmap};

use crate::error::SnapshotError;
use crate::path_index::prefix_of;
use crate::format::{
    body_digest, checksum, hash_at, u32_at, u64_at, Header, Ref, ACCOUNT_HEAD_LEN, BUCKET_HEAD_LEN, BUCKET_LEAF_LEN, END_MAGIC,
    FOOTER_LEN, HEADER_LEN, MAX_ARITY, node_len,
};

/// One published snapshot file, mapped read-only.
#[derive(Debug)]
pub(crate) struct MappedFile {
    pub(crate) header: Header,
    pub(crate) path: PathBuf,
    map: Mmap,
}

impl MappedFile {
    /// Maps a file and checks its header, size and (when `verify`) its checksum.
    pub(crate) fn open(path: &Path, verify: bool) -> Result<Self, SnapshotError> {
        let file = File::open(path).map_err(|e| SnapshotError::io("open", path, e))?;
        // SAFETY: published snapshot files are immutable (written under a temporary name, then
        // renamed), so the mapping never changes under us; pruning only unlinks, which keeps the
        // mapped pages valid.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| SnapshotError::io("map", path, e))?;
        // A fault on a file mapping reads the device's whole read-ahead window around the page
        // (8 MiB on some virtual disks), yet records are read a few at a time, scattered: the
        // writer's reads of each new file's header and footer alone pulled 300 MB/s from the
        // device (BENCHMARKS.md §2). Verifying reads the file in order, so read-ahead stays on
        // for it and only for it. Hints: failures are ignored.
        if !verify {
            let _ = map.advise(Advice::Random);
        }
        let header = Header::decode(&map).map_err(|r| SnapshotError::corrupt(path, r))?;
        let expect = (HEADER_LEN as u64).checked_add(header.body_len).and_then(|n| n.checked_add(FOOTER_LEN as u64));
        if expect != Some(map.len() as u64) {
            return Err(SnapshotError::corrupt(path, format!("size {} does not match header", map.len())));
        }
        let end = map.len() - FOOTER_LEN;
        if map[end + 24..] != END_MAGIC {
            return Err(SnapshotError::corrupt(path, "bad end magic"));
        }
        let mut stored = [0u8; 16];
        stored.copy_from_slice(&map[end..end + 16]);
        if verify {
            if checksum(&map[..HEADER_LEN], body_digest(&map[HEADER_LEN..end])) != u128::from_le_bytes(stored) {
                return Err(SnapshotError::corrupt(path, "checksum mismatch"));
            }
            let _ = map.advise(Advice::Random);
        }
        Ok(Self { header, path: path.to_path_buf(), map })
    }

    pub(crate) fn record(&self, offset: u64, len: usize) -> Result<&[u8], SnapshotError> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let body_end = self.map.len() - FOOTER_LEN;
        match start.checked_add(len) {
            Some(end) if start >= HEADER_LEN && end <= body_end => Ok(&self.map[start..end]),
            _ => Err(SnapshotError::corrupt(&self.path, format!("record at {offset}+{len} is out of bounds"))),
        }
    }
}

/// A prefix node record's child references (the first `arity` of `refs`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct NodeView {
    pub(crate) refs: [Ref; MAX_ARITY],
}

/// An account record, borrowed from its file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AccountView<'a> {
    pub(crate) pubkey: Hash,
    pub(crate) lamports: u64,
    pub(crate) owner: Hash,
    pub(crate) executable: bool,
    pub(crate) data: &'a [u8],
    /// The whole record, for copying it forward.
    pub(crate) raw: &'a [u8],
}

/// Snapshot files by sequence number.
#[derive(Clone, Debug, Default)]
pub(crate) struct Files {
    by_seq: BTreeMap<u32, Arc<MappedFile>>,
}

impl Files {
    pub(crate) fn insert(&mut self, f: Arc<MappedFile>) {
        self.by_seq.insert(f.header.seq, f);
    }

    pub(crate) fn remove_below(&mut self, seq: u32) {
        self.by_seq = self.by_seq.split_off(&seq);
    }

    /// Sequence numbers present, ascending.
    pub(crate) fn seqs(&self) -> impl Iterator<Item = u32> + '_ {
        self.by_seq.keys().copied()
    }

    pub(crate) fn get(&self, seq: u32) -> Option<&Arc<MappedFile>> {
        self.by_seq.get(&seq)
    }

    fn file(&self, r: Ref) -> Result<&MappedFile, SnapshotError> {
        self.by_seq.get(&r.seq()).map(|f| &**f).ok_or(SnapshotError::MissingFile { seq: r.seq() })
    }

    /// Asks the kernel to read the records at `refs` in the background: files are written past
    /// the page cache, so records about to be copied forward would otherwise each cost a
    /// synchronous page fault to the device. Sorts `refs`; records within 64 KiB of each other
    /// share one request. A hint only: failures are ignored.
    pub(crate) fn will_need(&self, refs: &mut [Ref]) {
        const GAP: u64 = 64 << 10;
        // An account record is a few hundred bytes; one page past its start covers nearly all.
        const TAIL: u64 = 4096;
        refs.sort_unstable();
        let mut i = 0;
        while i < refs.len() {
            let (seq, start) = (refs[i].seq(), refs[i].offset());
            let mut end = start + TAIL;
            i += 1;
            while i < refs.len() && refs[i].seq() == seq && refs[i].offset() <= end + GAP {
                end = refs[i].offset() + TAIL;
                i += 1;
            }
            if let Some(f) = self.by_seq.get(&seq) {
                let len = f.map.len() as u64;
                let (from, to) = (start.min(len), end.min(len));
                let _ = f.map.advise_range(memmap2::Advice::WillNeed, from as usize, (to - from) as usize);
            }
        }
    }

    /// The subtree hash a reference points to: the first 32 bytes of a node or bucket record.
    pub(crate) fn hash(&self, r: Ref) -> Result<Hash, SnapshotError> {
        if r.is_null() {
            return Ok(aldb_verify::EMPTY_ROOT);
        }
        Ok(hash_at(self.file(r)?.record(r.offset(), 32)?, 0))
    }

    pub(crate) fn node(&self, r: Ref, arity: usize) -> Result<NodeView, SnapshotError> {
        let b = self.file(r)?.record(r.offset(), node_len(arity))?;
        let mut refs = [Ref::NULL; MAX_ARITY];
        for (i, slot) in refs.iter_mut().take(arity).enumerate() {
            *slot = Ref(u64_at(b, 32 + 8 * i));
        }
        Ok(NodeView { refs })
    }

    /// The full `(path, value)` of the leaf whose account record is at `r`, recomputed from the
    /// record and checked to lie in `bucket` (the top `bucket_bits` bits of its path).
    pub(crate) fn leaf(&self, r: Ref, bucket: u64, bucket_bits: u8) -> Result<(Hash, Hash, AccountView<'_>), SnapshotError> {
        let a = self.account(r)?;
        let path = aldb_verify::spec::key_path(&a.pubkey);
        let top = if bucket_bits == 0 { 0 } else { prefix_of(&path) >> (64 - u32::from(bucket_bits)) };
        if top != bucket {
            let f = self.file(r)?;
            return Err(SnapshotError::corrupt(&f.path, "account record does not belong to its bucket"));
        }
        let value = aldb_verify::spec::account_value(a.lamports, &a.owner, a.executable, a.data);
        Ok((path, value, a))
    }

    /// A bucket record's hash and leaves.
    pub(crate) fn bucket(&self, r: Ref, out: &mut Vec<Ref>) -> Result<Hash, SnapshotError> {
        out.clear();
        let f = self.file(r)?;
        let head = f.record(r.offset(), BUCKET_HEAD_LEN)?;
        let count = u32_at(head, 32) as usize;
        let leaves = f.record(r.offset() + BUCKET_HEAD_LEN as u64, count.saturating_mul(BUCKET_LEAF_LEN))?;
        out.extend(leaves.chunks_exact(BUCKET_LEAF_LEN).map(|l| Ref(u64_at(l, 0))));
        Ok(hash_at(head, 0))
    }

    pub(crate) fn account(&self, r: Ref) -> Result<AccountView<'_>, SnapshotError> {
        let f = self.file(r)?;
        let head = f.record(r.offset(), ACCOUNT_HEAD_LEN)?;
        let data_len = u32_at(head, 76) as usize;
        let raw = f.record(r.offset(), ACCOUNT_HEAD_LEN + data_len)?;
        Ok(AccountView {
            pubkey: hash_at(head, 0),
            lamports: u64_at(head, 32),
            owner: hash_at(head, 40),
            executable: head[72] != 0,
            data: &raw[ACCOUNT_HEAD_LEN..],
            raw,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file_builder::tests::header;
    use crate::file_builder::{FileBuilder, IoLane};

    /// The `VmFlags` of every mapping of `path` in this process, from `/proc/self/smaps`.
    #[cfg(target_os = "linux")]
    fn mapping_flags(path: &Path) -> Vec<Vec<String>> {
        let path = std::fs::canonicalize(path).unwrap();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut out = Vec::new();
        let mut in_mapping = false;
        for line in smaps.lines() {
            if let Some(flags) = line.strip_prefix("VmFlags:") {
                if in_mapping {
                    out.push(flags.split_whitespace().map(String::from).collect());
                }
                in_mapping = false;
            } else if line.split_whitespace().next().is_some_and(|a| a.contains('-') && !a.ends_with(':')) {
                in_mapping = line.ends_with(path.to_str().unwrap());
            }
        }
        out
    }

    /// Snapshot mappings are read at random (`rr`): a page fault must not pull the device's whole
    /// read-ahead window, megabytes on some disks, to read one record. A verified mapping gets
    /// there after its checksum pass.
    #[cfg(target_os = "linux")]
    #[test]
    fn mappings_are_read_at_random() {
        let dir = tempfile::tempdir().unwrap();
        let mut lane = IoLane::start().unwrap();
        let dest = dir.path().join("1.snap");
        let mut fb = FileBuilder::create(&dir.path().join(".1.tmp"), 1, &mut lane, false).unwrap();
        for i in 0..10_000u32 {
            fb.record(&[&[i as u8; 64]]).unwrap();
        }
        fb.publish(header(1), &dest).unwrap();
        assert!(mapping_flags(&dest).is_empty());
        for verify in [false, true] {
            let f = MappedFile::open(&dest, verify).unwrap();
            let flags = mapping_flags(&dest);
            assert_eq!(flags.len(), 1, "one mapping of the file (verify: {verify})");
            assert!(flags[0].iter().any(|f| f == "rr"), "not read at random (verify: {verify}): {flags:?}");
            drop(f);
        }
    }
}
