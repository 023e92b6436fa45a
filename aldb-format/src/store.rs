//! Memory-mapped snapshot files and bounds-checked record access, for the reader and for the
//! writer, which reads the records it copies forward through the same checks.
//!
//! Every read goes through here, and every offset read from disk is checked against the file it
//! points into before use, so a corrupt or truncated file yields an error, never a panic or a
//! read outside the mapping. A file truncated *while* mapped is caught after the read instead
//! ([`MappedFile::intact`], [`crate::mapping_guard`]): the read itself may have seen zeros.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use aldb_verify::spec::Hash;
use memmap2::{Advice, Mmap};

use crate::error::SnapshotError;
use crate::format::{
    ACCOUNT_HEAD_LEN, BUCKET_HEAD_LEN, BUCKET_LEAF_LEN, END_MAGIC, FOOTER_LEN, HEADER_LEN, Header, MAX_ARITY, Ref,
    body_digest, checksum, hash_at, node_len, prefix_of, u32_at, u64_at,
};
use crate::mapping_guard::{self, Registration};

/// One published snapshot file, mapped read-only.
///
/// Whatever is read through the mapping must pass [`MappedFile::intact`] before it is used: a
/// file truncated under us reads as zeros instead of killing the process (see
/// [`crate::mapping_guard`]), and that check is what keeps the zeros out of every answer.
#[derive(Debug)]
pub struct MappedFile {
    /// The file's header, checked when it was opened.
    pub header: Header,
    /// Where the file was opened from.
    pub path: PathBuf,
    /// Declared before `map`, so dropped first: the range is unregistered before it is unmapped.
    guard: Registration,
    map: Mmap,
}

impl MappedFile {
    /// Maps a file and checks its header, size and (when `verify`) its checksum.
    pub fn open(path: &Path, verify: bool) -> Result<Self, SnapshotError> {
        let file = File::open(path).map_err(|e| SnapshotError::io("open", path, e))?;
        // SAFETY: published snapshot files are immutable (written under a temporary name, then
        // renamed), so the mapping never changes under us; pruning only unlinks, which keeps the
        // mapped pages valid. An operator's tool that truncates one anyway breaks that contract:
        // the registration below turns the fault into zeros plus a flag, and every read is
        // checked against the flag afterwards (`intact`), so no such zeros are ever served.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| SnapshotError::io("map", path, e))?;
        // Registered before the first read of the mapping.
        let guard = mapping_guard::register(map.as_ptr(), map.len()).map_err(|e| SnapshotError::io("map", path, e))?;
        match Self::check(&map, path, verify) {
            Ok(header) => {
                let f = Self { header, path: path.to_path_buf(), guard, map };
                f.intact(())?;
                Ok(f)
            }
            // What failed may have been zeros from a fault: say so rather than blame the bytes.
            Err(e) => {
                if let Some(last) = map.len().checked_sub(1) {
                    // SAFETY: in bounds of the mapping; volatile so the read happens here, where
                    // it faults (setting the flag) if the file has shrunk under it.
                    let _ = unsafe { std::ptr::read_volatile(map.as_ptr().add(last)) };
                }
                std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
                if guard.damaged() { Err(truncated(path)) } else { Err(e) }
            }
        }
    }

    /// Checks a mapped file's header, size and (when `verify`) its checksum; returns the header.
    fn check(map: &Mmap, path: &Path, verify: bool) -> Result<Header, SnapshotError> {
        // A fault on a file mapping reads the device's whole read-ahead window around the page
        // (8 MiB on some virtual disks), yet records are read a few at a time, scattered: the
        // writer's reads of each new file's header and footer alone pulled 300 MB/s from the
        // device (BENCHMARKS.md §2). Verifying reads the file in order, so read-ahead stays on
        // for it and only for it. Hints: failures are ignored.
        if !verify {
            let _ = map.advise(Advice::Random);
        }
        let header =
            Header::decode(map).map_err(|source| SnapshotError::Header { path: path.to_path_buf(), source })?;
        let expect = (HEADER_LEN as u64).checked_add(header.body_len).and_then(|n| n.checked_add(FOOTER_LEN as u64));
        if expect != Some(map.len() as u64) {
            return Err(SnapshotError::corrupt(path, format!("size {} does not match header", map.len())));
        }
        let end = map.len() - FOOTER_LEN;
        if map[end + 24..] != END_MAGIC {
            return Err(SnapshotError::corrupt(path, "bad end magic"));
        }
        if map[end + 16..end + 24].iter().any(|&b| b != 0) {
            return Err(SnapshotError::corrupt(path, "reserved footer bytes are not zero"));
        }
        let mut stored = [0u8; 16];
        stored.copy_from_slice(&map[end..end + 16]);
        if verify {
            if checksum(&map[..HEADER_LEN], body_digest(&map[HEADER_LEN..end])) != u128::from_le_bytes(stored) {
                return Err(SnapshotError::corrupt(path, "checksum mismatch"));
            }
            let _ = map.advise(Advice::Random);
        }
        Ok(header)
    }

    /// `value`, if this file was intact while `value` was read from it; otherwise a
    /// [`SnapshotError::Corrupt`] naming the file. Call it after the reads, never before: a page
    /// past a shrunken end reads as zeros (through the fault handler's zero page, or as the
    /// zero tail of the page that holds the new end), and only a check made afterwards sees it.
    ///
    /// Cheap: one load of the file's end magic and one atomic load. The end magic lies past any
    /// shrunken end, so it faults (setting the flag) or reads zeros; the flag covers the faults
    /// of the reads before it. Measured on 32-byte reads at random across 64 mapped files (test
    /// profile, two busy cores): about 45 ns per read unchecked, 10 ns more for the flag alone,
    /// 25-35 ns more with the end magic too (its page is one more TLB entry per file). A proof's
    /// few dozen reads pay about a microsecond; the end magic is what catches a cut inside a page.
    pub fn intact<T>(&self, value: T) -> Result<T, SnapshotError> {
        // Makes the compiler finish computing `value` (every read of the mapping it depends on,
        // and every store of them into memory others can see) before what follows.
        let value = std::hint::black_box(value);
        let len = self.map.len();
        let mut end = [0u8; 8];
        if len >= end.len() {
            // SAFETY: the last 8 bytes of the mapping; volatile so the read happens here, after
            // the reads being checked, even though the compiler may assume the bytes never change.
            end = unsafe { std::ptr::read_volatile(self.map.as_ptr().add(len - end.len()).cast::<[u8; 8]>()) };
        }
        // The flag a fault in the read just above sets must be loaded after that read.
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        if end != END_MAGIC {
            self.guard.mark_damaged();
        }
        if self.guard.damaged() {
            return Err(truncated(&self.path));
        }
        Ok(value)
    }

    /// Whether this file was found truncated or changed while mapped: once set, nothing read from
    /// it is served again, and the index should drop it.
    pub fn damaged(&self) -> bool {
        self.guard.damaged()
    }

    /// The `len` bytes at `offset` of the body, or an error naming the file when they do not lie
    /// wholly between the header and the footer. Read through the mapping: check what is made of
    /// them with [`MappedFile::intact`].
    pub fn record(&self, offset: u64, len: usize) -> Result<&[u8], SnapshotError> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let body_end = self.map.len() - FOOTER_LEN;
        match start.checked_add(len) {
            Some(end) if start >= HEADER_LEN && end <= body_end => Ok(&self.map[start..end]),
            _ => Err(SnapshotError::corrupt(&self.path, format!("record at {offset}+{len} is out of bounds"))),
        }
    }
}

fn truncated(path: &Path) -> SnapshotError {
    SnapshotError::corrupt(path, "file was truncated or changed while mapped")
}

/// A prefix node record's child references (the first `arity` of `refs`).
#[derive(Clone, Copy, Debug)]
pub struct NodeView {
    /// The child references; those past the node's arity are null.
    pub refs: [Ref; MAX_ARITY],
}

/// An account record, borrowed from its file. The fixed fields were checked when it was read;
/// `data` and `raw` are still read through the mapping, so check what is made of them with
/// [`AccountView::intact`].
#[derive(Clone, Copy, Debug)]
pub struct AccountView<'a> {
    /// Address.
    pub pubkey: Hash,
    /// Balance.
    pub lamports: u64,
    /// Owning program.
    pub owner: Hash,
    /// Whether it is a loaded program.
    pub executable: bool,
    /// Data, in the mapping.
    pub data: &'a [u8],
    /// The whole record, for copying it forward.
    pub raw: &'a [u8],
    file: &'a MappedFile,
}

impl AccountView<'_> {
    /// [`MappedFile::intact`] of the record's file: `value` (made from `data` or `raw`), if the
    /// file was intact while it was read.
    pub fn intact<T>(&self, value: T) -> Result<T, SnapshotError> {
        self.file.intact(value)
    }
}

/// Snapshot files by sequence number.
#[derive(Clone, Debug, Default)]
pub struct Files {
    by_seq: BTreeMap<u32, Arc<MappedFile>>,
}

impl Files {
    /// Adds `f` under its header's sequence number, replacing any file there.
    pub fn insert(&mut self, f: Arc<MappedFile>) {
        self.by_seq.insert(f.header.seq, f);
    }

    /// Drops the files numbered below `seq`.
    pub fn remove_below(&mut self, seq: u32) {
        self.by_seq = self.by_seq.split_off(&seq);
    }

    /// The files, by ascending sequence number.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<MappedFile>> + '_ {
        self.by_seq.values()
    }

    /// Sequence numbers present, ascending.
    pub fn seqs(&self) -> impl Iterator<Item = u32> + '_ {
        self.by_seq.keys().copied()
    }

    /// The file numbered `seq`, if present.
    pub fn get(&self, seq: u32) -> Option<&Arc<MappedFile>> {
        self.by_seq.get(&seq)
    }

    fn file(&self, r: Ref) -> Result<&MappedFile, SnapshotError> {
        self.by_seq.get(&r.seq()).map(|f| &**f).ok_or(SnapshotError::MissingFile { seq: r.seq() })
    }

    /// Asks the kernel to read the records at `refs` in the background: files are written past
    /// the page cache, so records about to be copied forward would otherwise each cost a
    /// synchronous page fault to the device. Sorts `refs`; records within 64 KiB of each other
    /// share one request. A hint only: failures are ignored.
    pub fn will_need(&self, refs: &mut [Ref]) {
        /// Bytes asked for per request: Linux's default read-ahead window.
        const WILL_NEED_PIECE: u64 = 128 << 10;
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
                let (mut from, to) = (start.min(len), end.min(len));
                // The kernel reads at most the device's read-ahead window per request (128 KiB
                // by default, 8 MiB on this project's test VM) and drops the rest silently: one
                // request for a refresh chunk's 37 MB read 8 of them, and the copy faulted on the
                // other 29 one page at a time (BENCHMARKS.md §2). Pieces of the smallest common
                // window are all read.
                while from < to {
                    let piece = (to - from).min(WILL_NEED_PIECE);
                    let _ = f.map.advise_range(memmap2::Advice::WillNeed, from as usize, piece as usize);
                    from += piece;
                }
            }
        }
    }

    /// The subtree hash a reference points to: the first 32 bytes of a node or bucket record.
    pub fn hash(&self, r: Ref) -> Result<Hash, SnapshotError> {
        if r.is_null() {
            return Ok(aldb_verify::EMPTY_ROOT);
        }
        let f = self.file(r)?;
        f.intact(hash_at(f.record(r.offset(), 32)?, 0))
    }

    /// The child references of the prefix node record at `r`, which has `arity` of them.
    pub fn node(&self, r: Ref, arity: usize) -> Result<NodeView, SnapshotError> {
        let f = self.file(r)?;
        let b = f.record(r.offset(), node_len(arity))?;
        let mut refs = [Ref::NULL; MAX_ARITY];
        for (i, slot) in refs.iter_mut().take(arity).enumerate() {
            *slot = Ref(u64_at(b, 32 + 8 * i));
        }
        f.intact(NodeView { refs })
    }

    /// The full `(path, value)` of the leaf whose account record is at `r`, recomputed from the
    /// record and checked to lie in `bucket` (the top `bucket_bits` bits of its path).
    pub fn leaf(&self, r: Ref, bucket: u64, bucket_bits: u8) -> Result<(Hash, Hash, AccountView<'_>), SnapshotError> {
        let a = self.account(r)?;
        let path = aldb_verify::spec::key_path(&a.pubkey);
        let top = if bucket_bits == 0 { 0 } else { prefix_of(&path) >> (64 - u32::from(bucket_bits)) };
        if top != bucket {
            let f = self.file(r)?;
            return Err(SnapshotError::corrupt(&f.path, "account record does not belong to its bucket"));
        }
        let value = aldb_verify::spec::account_value(a.lamports, &a.owner, a.executable, a.data);
        a.intact((path, value, a))
    }

    /// A bucket record's hash and leaves.
    pub fn bucket(&self, r: Ref, out: &mut Vec<Ref>) -> Result<Hash, SnapshotError> {
        out.clear();
        let f = self.file(r)?;
        let head = f.record(r.offset(), BUCKET_HEAD_LEN)?;
        let count = u32_at(head, 32) as usize;
        let leaves = f.record(r.offset() + BUCKET_HEAD_LEN as u64, count.saturating_mul(BUCKET_LEAF_LEN))?;
        out.extend(leaves.chunks_exact(BUCKET_LEAF_LEN).map(|l| Ref(u64_at(l, 0))));
        f.intact(hash_at(head, 0))
    }

    /// The account record at `r`, its fixed fields checked.
    pub fn account(&self, r: Ref) -> Result<AccountView<'_>, SnapshotError> {
        let f = self.file(r)?;
        let head = f.record(r.offset(), ACCOUNT_HEAD_LEN)?;
        let data_len = u32_at(head, 76) as usize;
        let raw = f.record(r.offset(), ACCOUNT_HEAD_LEN + data_len)?;
        f.intact(AccountView {
            pubkey: hash_at(head, 0),
            lamports: u64_at(head, 32),
            owner: hash_at(head, 40),
            executable: head[72] != 0,
            data: &raw[ACCOUNT_HEAD_LEN..],
            raw,
            file: f,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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

    fn page_size() -> u64 {
        // SAFETY: sysconf has no preconditions.
        u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap()
    }

    /// A valid file of 10,000 64-byte records, record `i` all bytes `fill(i)` (about 640 KiB),
    /// laid out as the writer lays one out: header, records, footer with its checksum.
    fn write_file(dir: &Path, seq: u32, fill: impl Fn(u32) -> u8) -> PathBuf {
        let body: Vec<u8> = (0..10_000u32).flat_map(|i| [fill(i); 64]).collect();
        let header = Header {
            flags: 0,
            seq,
            bucket_bits: 4,
            slot: 7,
            parent: Some(6),
            root: [9; 32],
            root_ref: Ref::NULL,
            oldest_seq: 1,
            first_seq: seq,
            body_len: body.len() as u64,
            accounts: 0,
            nodes: 0,
            buckets: 0,
            gap_after: None,
        }
        .encode();
        let mut footer = [0u8; FOOTER_LEN];
        footer[..16].copy_from_slice(&checksum(&header, body_digest(&body)).to_le_bytes());
        footer[24..].copy_from_slice(&END_MAGIC);
        let dest = dir.join(format!("{seq}.snap"));
        let mut f = File::create(&dest).unwrap();
        f.write_all(&header).unwrap();
        f.write_all(&body).unwrap();
        f.write_all(&footer).unwrap();
        f.sync_all().unwrap();
        dest
    }

    /// A published file of 10,000 64-byte records with no zero bytes.
    fn build(dir: &Path, seq: u32) -> PathBuf {
        write_file(dir, seq, |i| i as u8 | 1)
    }

    fn cut(path: &Path, len: u64) {
        let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
        f.set_len(len).unwrap();
        f.sync_all().unwrap();
    }

    /// A read wholly past the end of a file truncated under its mapping faults; the fault is
    /// survived, the read sees zeros, and the check after it turns them into an error naming
    /// the file. From then on nothing read from the file passes, even from below the cut.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_read_past_a_truncated_end_is_an_error_not_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let dest = build(dir.path(), 1);
        let page = page_size();
        let f = MappedFile::open(&dest, false).unwrap();
        let early = f.intact(f.record(HEADER_LEN as u64, 64).unwrap().to_vec()).unwrap();
        assert_eq!(early, [1u8; 64]);
        assert!(f.intact(f.record(8 * page, 64).unwrap().to_vec()).unwrap().iter().all(|&b| b & 1 == 1));
        let patched = mapping_guard::patched_pages();
        cut(&dest, 3 * page);
        let late = f.record(8 * page, 64).unwrap().to_vec();
        assert_eq!(late, [0u8; 64], "the faulting read completes with zeros");
        assert!(mapping_guard::patched_pages() > patched, "the read faulted and was patched");
        let err = f.intact(late).unwrap_err().to_string();
        assert!(err.contains(dest.to_str().unwrap()) && err.contains("truncated or changed while mapped"), "{err}");
        assert!(f.damaged());
        assert!(f.intact(f.record(HEADER_LEN as u64, 64).unwrap().to_vec()).is_err(), "the whole file is distrusted");
    }

    /// The page holding a truncated file's new end stays mapped and reads zeros past it without
    /// faulting: the end-magic check catches that.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_read_past_a_truncated_end_inside_its_page_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let dest = build(dir.path(), 2);
        let page = page_size();
        let f = MappedFile::open(&dest, false).unwrap();
        cut(&dest, 3 * page + 100);
        let b = f.record(3 * page + 200, 64).unwrap().to_vec();
        assert_eq!(b, [0u8; 64]);
        let err = f.intact(b).unwrap_err().to_string();
        assert!(err.contains("truncated or changed while mapped"), "{err}");
        assert!(f.damaged());
    }

    /// Snapshot mappings are read at random (`rr`): a page fault must not pull the device's whole
    /// read-ahead window, megabytes on some disks, to read one record. A verified mapping gets
    /// there after its checksum pass.
    #[cfg(target_os = "linux")]
    #[test]
    fn mappings_are_read_at_random() {
        let dir = tempfile::tempdir().unwrap();
        let dest = write_file(dir.path(), 1, |i| i as u8);
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
