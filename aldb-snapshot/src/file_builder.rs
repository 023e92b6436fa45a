//! Writing one snapshot file: streamed under a temporary name, then published atomically.
//!
//! Files are written once, sequentially, and read later through mappings, so the writer
//! bypasses the page cache when the filesystem allows it (`O_DIRECT`): copying every byte into
//! freshly allocated cache pages cost more than the disk itself (measured 0.3 GB/s buffered and
//! synced against 1.6 GB/s direct on the same disk, BENCHMARKS.md §2). The bytes go through two
//! block-aligned buffers that are reused for every file, so steady state allocates nothing: a
//! full chunk goes to a helper thread ([`IoLane`]) while the serializer fills the other buffer,
//! so serializing the next chunk overlaps the device writing the last one.
//!
//! One write may span several files: a record that would end past the part bound (32 GiB, the
//! most a reference addresses) first publishes what is staged as a **part file** and goes on in
//! the next sequence number (`docs/FORMAT.md`, "Parts"). Records only ever refer to records
//! written before them, so any record boundary is a valid place to cut.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, SyncSender};

use xxhash_rust::xxh3::Xxh3;

use aldb_format::format::{
    END_MAGIC, FLAG_AFTER_GAP, FLAG_PART, FOOTER_LEN, HEADER_LEN, Header, MAX_RECORD_OFFSET, Ref, checksum, file_name,
    part_file_name,
};

use aldb_format::SnapshotError;

/// Alignment of direct writes: offsets, lengths and buffer addresses. 4 KiB covers every
/// logical block size Linux filesystems use on common devices.
const BLOCK: usize = 4096;
/// Bytes gathered before one write: large enough that a write costs one device round trip per
/// few milliseconds of serializing.
const CHUNK: usize = 8 << 20;
/// The huge page size on x86-64 and aarch64 (with 4 KiB base pages). Direct I/O pins the
/// staging buffer's pages for every write: four huge pages per chunk instead of 2,048 small ones.
const HUGE_PAGE: usize = 2 << 20;

/// A block-aligned staging buffer, allocated once per writer and reused for every file.
pub(crate) struct IoBuffer {
    raw: Vec<u8>,
    start: usize,
    len: usize,
}

impl IoBuffer {
    /// A staging buffer of one chunk.
    pub(crate) fn new() -> Self {
        Self::with_len(CHUNK)
    }

    /// `len` block-aligned bytes; a buffer of whole huge pages starts on one, advised to be
    /// backed by them.
    fn with_len(len: usize) -> Self {
        let align = if len >= HUGE_PAGE && len.is_multiple_of(HUGE_PAGE) { HUGE_PAGE } else { BLOCK };
        // Zeroed by the allocator with fresh pages, so nothing is touched before the advice.
        let raw = vec![0u8; len + align];
        // Offset of the first aligned byte; safe code, no aligned allocator needed.
        let start = (align - (raw.as_ptr() as usize % align)) % align;
        #[cfg(target_os = "linux")]
        if align == HUGE_PAGE {
            // SAFETY: the range lies inside `raw`'s allocation; the advice changes only how the
            // kernel backs it, never its contents, and a refusal is harmless.
            unsafe {
                libc::madvise(raw.as_ptr().add(start).cast_mut().cast(), len, libc::MADV_HUGEPAGE);
            }
        }
        Self { raw, start, len }
    }

    fn bytes(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.len]
    }
}

impl Default for IoBuffer {
    fn default() -> Self {
        Self::new()
    }
}

/// A chunk on its way to the disk, or back from it.
struct Job {
    file: Arc<File>,
    at: u64,
    len: usize,
    buf: IoBuffer,
}

/// The writer's I/O helper thread and the second staging buffer: while one buffer is being
/// written, the serializer fills the other.
pub(crate) struct IoLane {
    jobs: Option<SyncSender<Job>>,
    done: Receiver<(IoBuffer, std::io::Result<()>)>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// Free buffers (two in all, counting the one in flight and the one being filled).
    spare: Vec<IoBuffer>,
    in_flight: bool,
}

impl IoLane {
    /// Starts the helper thread.
    pub(crate) fn start() -> std::io::Result<Self> {
        let (jobs, rx) = mpsc::sync_channel::<Job>(1);
        let (tx, done) = mpsc::sync_channel(1);
        let thread = std::thread::Builder::new().name("aldb-snapshot-io".into()).spawn(move || {
            for mut job in rx {
                let r = job.file.write_all_at(&job.buf.bytes()[..job.len], job.at);
                drop(job.file);
                if tx.send((job.buf, r)).is_err() {
                    return;
                }
            }
        })?;
        Ok(Self { jobs: Some(jobs), done, thread: Some(thread), spare: Vec::new(), in_flight: false })
    }

    /// Waits for the chunk in flight, if any; its buffer becomes the spare.
    fn drain(&mut self) -> std::io::Result<()> {
        if !self.in_flight {
            return Ok(());
        }
        self.in_flight = false;
        let (buf, r) = self.done.recv().map_err(|_| std::io::Error::other("snapshot I/O thread exited"))?;
        self.spare.push(buf);
        r
    }

    /// A free buffer: the spare, or the one in flight once written.
    fn free_buffer(&mut self) -> std::io::Result<IoBuffer> {
        self.drain()?;
        Ok(self.spare.pop().unwrap_or_default())
    }

    fn send(&mut self, job: Job) -> std::io::Result<()> {
        let jobs = self.jobs.as_ref().ok_or_else(|| std::io::Error::other("snapshot I/O thread stopped"))?;
        jobs.send(job).map_err(|_| std::io::Error::other("snapshot I/O thread exited"))?;
        self.in_flight = true;
        Ok(())
    }
}

impl Drop for IoLane {
    fn drop(&mut self) {
        let _ = self.drain();
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether `dir`'s filesystem accepts block-aligned `O_DIRECT` writes (tmpfs, for one, does
/// not). Decided once per writer by writing and removing a probe file.
pub(crate) fn supports_direct(dir: &Path) -> bool {
    let probe = dir.join(".direct-probe.tmp");
    let ok = open_direct(&probe).is_ok_and(|f| {
        // One block is enough to learn the answer; a chunk-sized buffer would be faulted in for nothing.
        let mut buf = IoBuffer::with_len(BLOCK);
        f.write_all_at(buf.bytes(), 0).is_ok()
    });
    let _ = std::fs::remove_file(&probe);
    ok
}

#[cfg(target_os = "linux")]
fn open_direct(path: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new().write(true).create(true).truncate(true).custom_flags(libc::O_DIRECT).open(path)
}

#[cfg(not(target_os = "linux"))]
fn open_direct(_path: &Path) -> std::io::Result<File> {
    Err(std::io::Error::new(std::io::ErrorKind::Unsupported, "direct I/O is only used on Linux"))
}

/// What a record is, for the header's counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Account = 0,
    Node = 1,
    Bucket = 2,
}

/// Whether a record of `padded` bytes starting at `at` would leave its file, footer included,
/// past `limit` bytes: the builder then starts the next part first.
fn ends_past(at: u64, padded: usize, limit: u64) -> bool {
    at.saturating_add(padded as u64).saturating_add(FOOTER_LEN as u64) > limit
}

/// The files of one write being written: the current one under a temporary name, the parts
/// before it already published. Nothing is visible under the slot's name until
/// [`FileBuilder::publish`] has synced the last file, renamed it and synced the directory; parts
/// are published as they fill, but no reader serves a part as a slot.
pub(crate) struct FileBuilder<'a> {
    file: Arc<File>,
    lane: &'a mut IoLane,
    dir: PathBuf,
    tmp: PathBuf,
    /// What every file of this write shares: flags (never [`FLAG_PART`] or [`FLAG_AFTER_GAP`]),
    /// slot, parent, bucket level, `oldest_seq`, and `seq` = `first_seq`: the first file's.
    template: Header,
    /// The current file's sequence number.
    seq: u32,
    /// The most bytes one file may hold (see [`ends_past`]).
    part_bytes: u64,
    direct: bool,
    buf: IoBuffer,
    /// Bytes of `buf` in use; they belong at file offset `flushed`.
    filled: usize,
    /// File offset of `buf`'s first byte: everything before it is written (block-aligned).
    flushed: u64,
    /// Block 0 as written, kept so the header can be patched in without reading the file back.
    first_block: Option<Vec<u8>>,
    body: Xxh3,
    /// File offset up to which body bytes have gone into `body`: hashing whole staged spans,
    /// not record by record, keeps the checksum at memory speed.
    hashed_to: u64,
    /// Set once the body is complete, so the footer is never hashed.
    body_done: bool,
    /// Records of each [`Kind`] in the current file.
    counts: [u64; 3],
    /// Bodies of the parts already published, in bytes.
    parts_body: u64,
    /// The parts already published, oldest first.
    parts: Vec<PathBuf>,
    /// Bytes of every file published by this write.
    published_bytes: u64,
    /// The sequence number after the last file renamed into place: what the next write starts
    /// at, whether or not this one completes.
    next_free: u32,
}

const ZEROS: [u8; 8] = [0; 8];

impl<'a> FileBuilder<'a> {
    /// Starts the write of `template`'s slot at sequence number `template.seq`, in `dir`,
    /// staging through `lane`'s buffers; `direct` writes bypass the page cache. Files are cut
    /// into parts of at most `part_bytes` bytes.
    pub(crate) fn create(
        dir: &Path,
        template: Header,
        part_bytes: u64,
        lane: &'a mut IoLane,
        direct: bool,
    ) -> Result<Self, SnapshotError> {
        let buf = lane.free_buffer().map_err(|e| SnapshotError::io("write", dir, e))?;
        let seq = template.seq;
        let template = Header { flags: template.flags & !(FLAG_PART | FLAG_AFTER_GAP), first_seq: seq, ..template };
        let (file, tmp) = match open_tmp(dir, seq, template.slot, direct) {
            Ok(f) => f,
            Err(e) => {
                lane.spare.push(buf);
                return Err(e);
            }
        };
        let mut fb = Self {
            file,
            lane,
            dir: dir.to_path_buf(),
            tmp,
            template,
            seq,
            part_bytes,
            direct,
            buf,
            filled: 0,
            flushed: 0,
            first_block: None,
            body: Xxh3::new(),
            hashed_to: HEADER_LEN as u64,
            body_done: false,
            counts: [0; 3],
            parts_body: 0,
            parts: Vec::new(),
            published_bytes: 0,
            next_free: seq,
        };
        // The header is patched in last, once counts and the root reference are known.
        if let Err(e) = fb.stage(&[0u8; HEADER_LEN]) {
            fb.close();
            return Err(e);
        }
        Ok(fb)
    }

    /// Opens file `seq` under its temporary name, with the header left to patch in last.
    fn open(&mut self, seq: u32) -> Result<(), SnapshotError> {
        (self.file, self.tmp) = open_tmp(&self.dir, seq, self.template.slot, self.direct)?;
        self.seq = seq;
        self.filled = 0;
        self.flushed = 0;
        self.first_block = None;
        self.body = Xxh3::new();
        self.hashed_to = HEADER_LEN as u64;
        self.body_done = false;
        self.counts = [0; 3];
        // The header is patched in last, once counts and the root reference are known.
        self.stage(&[0u8; HEADER_LEN])
    }

    /// Drops what is not published (the current file), keeping the buffers for the next write.
    /// Parts already published stay: their sequence numbers are used ([`FileBuilder::next_free`]).
    pub(crate) fn close(self) {
        let _ = self.lane.drain();
        self.lane.spare.push(self.buf);
        // Gone already if it was published (renamed): then this does nothing.
        let _ = std::fs::remove_file(&self.tmp);
    }

    /// The sequence number after the last file this write published (parts included).
    pub(crate) fn next_free(&self) -> u32 {
        self.next_free
    }

    /// The parts published so far, oldest first.
    pub(crate) fn parts(&self) -> &[PathBuf] {
        &self.parts
    }

    fn io(&self, op: &'static str, e: std::io::Error) -> SnapshotError {
        SnapshotError::io(op, &self.tmp, e)
    }

    /// Copies bytes into the staging buffer, writing out full chunks.
    fn stage(&mut self, mut bytes: &[u8]) -> Result<(), SnapshotError> {
        while !bytes.is_empty() {
            let room = CHUNK - self.filled;
            let n = room.min(bytes.len());
            let at = self.filled;
            self.buf.bytes()[at..at + n].copy_from_slice(&bytes[..n]);
            self.filled += n;
            bytes = &bytes[n..];
            if self.filled == CHUNK {
                self.write_chunk()?;
            }
        }
        Ok(())
    }

    /// Feeds the staged body bytes below file offset `upto` that are not hashed yet.
    fn hash_staged(&mut self, upto: u64) {
        if self.body_done || upto <= self.hashed_to {
            return;
        }
        let from = (self.hashed_to - self.flushed) as usize;
        let to = (upto - self.flushed) as usize;
        let span = &self.buf.raw[self.buf.start + from..self.buf.start + to];
        self.body.update(span);
        self.hashed_to = upto;
    }

    /// Hands the full staging buffer to the I/O thread and continues in the free one.
    fn write_chunk(&mut self) -> Result<(), SnapshotError> {
        self.hash_staged(self.flushed + CHUNK as u64);
        if self.flushed == 0 {
            self.first_block = Some(self.buf.bytes()[..BLOCK].to_vec());
        }
        let next = self.lane.free_buffer().map_err(|e| self.io("write", e))?;
        let full = std::mem::replace(&mut self.buf, next);
        let job = Job { file: self.file.clone(), at: self.flushed, len: CHUNK, buf: full };
        self.lane.send(job).map_err(|e| self.io("write", e))?;
        self.filled = 0;
        self.flushed += CHUNK as u64;
        Ok(())
    }

    /// Writes the first `len` staged bytes (a multiple of [`BLOCK`] for direct I/O) at `flushed`,
    /// on this thread, after the chunk in flight.
    fn write_out(&mut self, len: usize) -> Result<(), SnapshotError> {
        self.lane.drain().map_err(|e| self.io("write", e))?;
        self.hash_staged(self.flushed + len as u64);
        if self.flushed == 0 && len >= BLOCK {
            self.first_block = Some(self.buf.bytes()[..BLOCK].to_vec());
        }
        let at = self.flushed;
        let r = self.file.write_all_at(&self.buf.bytes()[..len], at);
        r.map_err(|e| self.io("write", e))?;
        let filled = self.filled;
        self.buf.bytes().copy_within(len..filled, 0);
        self.filled -= len;
        self.flushed += len as u64;
        Ok(())
    }

    /// Appends one record of kind `kind` made of `parts`, 8-byte aligned, and returns its
    /// reference. A record that would take the file past the part bound goes first to the next
    /// part (unless the file holds no record yet: a record larger than the bound has a file of
    /// its own).
    pub(crate) fn record(&mut self, kind: Kind, parts: &[&[u8]]) -> Result<Ref, SnapshotError> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let padded = total.div_ceil(8) * 8;
        if self.len() > HEADER_LEN as u64 && ends_past(self.len(), padded, self.part_bytes) {
            self.next_part()?;
        }
        let at = self.len();
        // A reference past the limit would wrap into the sequence bits and point elsewhere.
        let Some(r) = Ref::checked(self.seq, at) else {
            return Err(SnapshotError::FileTooLarge { seq: self.seq, max: MAX_RECORD_OFFSET });
        };
        if padded <= CHUNK - self.filled {
            // The common case: the record fits, one copy per part and no bookkeeping.
            let from = self.filled;
            let out = &mut self.buf.bytes()[from..from + padded];
            let mut o = 0;
            for p in parts {
                out[o..o + p.len()].copy_from_slice(p);
                o += p.len();
            }
            out[o..].fill(0);
            self.filled += padded;
            if self.filled == CHUNK {
                self.write_chunk()?;
            }
        } else {
            for p in parts {
                self.stage(p)?;
            }
            self.stage(&ZEROS[..padded - total])?;
        }
        self.counts[kind as usize] += 1;
        Ok(r)
    }

    /// Bytes of the current file so far, header included.
    fn len(&self) -> u64 {
        self.flushed + self.filled as u64
    }

    /// Bytes of records this write has written so far, in all its files: a position that only
    /// grows, for measuring what a stretch of records took.
    pub(crate) fn written(&self) -> u64 {
        self.parts_body + self.len() - HEADER_LEN as u64
    }

    /// The header of the current file: `header`'s fields, with this builder's sequence numbers
    /// and record counts.
    fn header_for(&self, header: Header) -> Header {
        let [accounts, nodes, buckets] = self.counts;
        Header { seq: self.seq, first_seq: self.template.first_seq, accounts, nodes, buckets, ..header }
    }

    /// Publishes the current file as a part and opens the next one.
    fn next_part(&mut self) -> Result<(), SnapshotError> {
        // The last number is never used (see `SequenceExhausted`): checked before the part is
        // published, so a write that cannot go on leaves no part it cannot follow.
        let Some(next) = self.seq.checked_add(1).filter(|&s| s != u32::MAX) else {
            return Err(SnapshotError::SequenceExhausted { dir: self.dir.clone() });
        };
        let part = self.header_for(Header {
            flags: self.template.flags | FLAG_PART,
            root: [0; 32],
            root_ref: Ref::NULL,
            gap_after: None,
            ..self.template
        });
        let dest = self.dir.join(part_file_name(self.seq, self.template.slot));
        let body = self.len() - HEADER_LEN as u64;
        self.finish(part, &dest)?;
        self.parts_body += body;
        self.parts.push(dest);
        self.open(next)
    }

    /// Publishes the slot's file: `header` (its root, root reference, flags and gap) with this
    /// builder's sequence numbers and counts. Returns the bytes of every file this write
    /// published. On error nothing more is published; [`FileBuilder::close`] removes the rest.
    pub(crate) fn publish(&mut self, header: Header) -> Result<u64, SnapshotError> {
        let header = self.header_for(Header { flags: header.flags & !FLAG_PART, ..header });
        let dest = self.dir.join(file_name(self.seq, self.template.slot));
        self.finish(header, &dest)?;
        Ok(self.published_bytes)
    }

    /// Writes the header and footer of the current file, syncs, renames to `dest` and syncs
    /// the directory.
    fn finish(&mut self, mut header: Header, dest: &Path) -> Result<(), SnapshotError> {
        header.body_len = self.len() - HEADER_LEN as u64;
        self.hash_staged(self.len());
        self.body_done = true;
        let head = header.encode();
        let sum = checksum(&head, self.body.digest128());
        let mut footer = [0u8; FOOTER_LEN];
        footer[..16].copy_from_slice(&sum.to_le_bytes());
        footer[24..].copy_from_slice(&END_MAGIC);
        self.stage(&footer)?;
        let size = self.len();
        // Direct writes must cover whole blocks: pad the tail, then cut the file to its size.
        let tail = if self.direct { self.filled.div_ceil(BLOCK) * BLOCK } else { self.filled };
        let filled = self.filled;
        self.buf.bytes()[filled..tail].fill(0);
        let header_staged = self.flushed == 0;
        if header_staged {
            self.buf.bytes()[..HEADER_LEN].copy_from_slice(&head);
        }
        self.filled = tail;
        self.write_out(tail)?;
        if !header_staged {
            // Block 0 went out with a placeholder header: rewrite it whole (direct writes cannot
            // touch 128 bytes alone).
            let Some(block) = self.first_block.take() else {
                return Err(self.io("write header", std::io::Error::other("first block was not kept")));
            };
            // Written from the aligned buffer (free again now): direct writes need its alignment.
            let staged = self.buf.bytes();
            staged[..BLOCK].copy_from_slice(&block);
            staged[..HEADER_LEN].copy_from_slice(&head);
            let r = self.file.write_all_at(&self.buf.bytes()[..BLOCK], 0);
            r.map_err(|e| self.io("write header", e))?;
        }
        if self.direct {
            let r = self.file.set_len(size);
            r.map_err(|e| self.io("truncate", e))?;
        }
        let r = self.file.sync_all();
        r.map_err(|e| self.io("fsync", e))?;
        std::fs::rename(&self.tmp, dest).map_err(|e| self.io("rename", e))?;
        // From here the number is taken, even if the directory sync fails: a retry must not
        // publish another file under it.
        self.next_free = self.seq.saturating_add(1);
        self.published_bytes += size;
        sync_dir(dest.parent().unwrap_or(Path::new(".")))
    }
}

/// Creates the temporary file of file `seq` of `slot` in `dir`.
fn open_tmp(dir: &Path, seq: u32, slot: u64, direct: bool) -> Result<(Arc<File>, PathBuf), SnapshotError> {
    let tmp = dir.join(format!(".{}.tmp", file_name(seq, slot)));
    let file =
        if direct { open_direct(&tmp) } else { OpenOptions::new().write(true).create(true).truncate(true).open(&tmp) }
            .map_err(|e| SnapshotError::io("create", &tmp, e))?;
    Ok((Arc::new(file), tmp))
}

/// Makes renames and unlinks in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), SnapshotError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| SnapshotError::io("fsync directory", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use aldb_format::format::{FileKind, MAX_FILE_BYTES, parse_published_name};
    use aldb_format::store::MappedFile;

    /// A header for test files: the fields that matter to a file's layout, others arbitrary.
    fn header(seq: u32) -> Header {
        Header {
            flags: 0,
            seq,
            bucket_bits: 4,
            slot: 7,
            parent: Some(6),
            root: [9; 32],
            root_ref: Ref::NULL,
            oldest_seq: 1,
            first_seq: seq,
            body_len: 0,
            accounts: 0,
            nodes: 0,
            buckets: 0,
            gap_after: None,
        }
    }

    fn create<'a>(dir: &Path, seq: u32, part_bytes: u64, lane: &'a mut IoLane, direct: bool) -> FileBuilder<'a> {
        FileBuilder::create(dir, header(seq), part_bytes, lane, direct).unwrap()
    }

    /// At the real bound every record a file takes starts at an offset a reference holds, and
    /// the file stays within 32 GiB: the part bound, not `FileTooLarge`, is what a large state
    /// meets.
    #[test]
    fn the_part_bound_keeps_every_record_addressable() {
        let last_start = MAX_FILE_BYTES - FOOTER_LEN as u64 - 8;
        assert!(!ends_past(last_start, 8, MAX_FILE_BYTES));
        assert!(ends_past(last_start + 8, 8, MAX_FILE_BYTES));
        assert!(Ref::checked(u32::MAX - 1, last_start).is_some());
        // A 10 MiB account (Solana's largest) near the end goes to the next part.
        assert!(ends_past(MAX_FILE_BYTES - (10 << 20), (10 << 20) + 80, MAX_FILE_BYTES));
    }

    /// A record that would start past the last offset a reference can hold is refused with a
    /// clear error instead of getting a reference that wraps into the sequence bits (the part
    /// bound keeps a writer from getting there; the check stays as the last line).
    #[test]
    fn records_past_the_addressable_size_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut lane = IoLane::start().unwrap();
        let mut fb = create(dir.path(), 3, u64::MAX, &mut lane, false);
        // Pretend the file already holds almost 32 GiB (nothing below is written to disk: the
        // records stay in the staging buffer).
        fb.flushed = MAX_RECORD_OFFSET - fb.filled as u64 - 8;
        let last_but_one = fb.record(Kind::Node, &[&[1u8; 8]]).unwrap();
        assert_eq!((last_but_one.seq(), last_but_one.offset()), (3, MAX_RECORD_OFFSET - 8));
        let last = fb.record(Kind::Node, &[&[2u8; 8]]).unwrap();
        assert_eq!((last.seq(), last.offset()), (3, MAX_RECORD_OFFSET));
        let err = fb.record(Kind::Node, &[&[3u8; 8]]).unwrap_err();
        assert!(matches!(err, SnapshotError::FileTooLarge { seq: 3, max: MAX_RECORD_OFFSET }), "{err}");
        fb.close();
        assert_eq!(Ref::checked(1, MAX_RECORD_OFFSET + 8), None);
        assert_eq!(Ref::checked(1, 12), None);
    }

    /// Writes records of many sizes (one larger than a chunk) through both I/O modes, for files
    /// that end inside the first block, inside the first chunk and several chunks later, and
    /// reads every record back through the reader's checked mapping.
    #[test]
    fn files_round_trip_in_both_modes() {
        let dir = tempfile::tempdir().unwrap();
        let direct_ok = supports_direct(dir.path());
        let mut lane = IoLane::start().unwrap();
        let mut seq = 0;
        for direct in [false, direct_ok] {
            for target in [100usize, 3 * BLOCK + 5, CHUNK - 64, 3 * CHUNK + 12345] {
                seq += 1;
                let mut fb = create(dir.path(), seq, MAX_FILE_BYTES, &mut lane, direct);
                let mut written: Vec<(Ref, Vec<u8>)> = Vec::new();
                let mut k = 0u32;
                while (fb.len() as usize) < target {
                    // Sizes cycle through odd lengths; one record spans more than a chunk.
                    let len = if k == 3 && target > CHUNK { CHUNK + 777 } else { 1 + (k as usize * 37) % 300 };
                    let bytes: Vec<u8> = (0..len).map(|i| (i as u32 ^ k.wrapping_mul(2654435761)) as u8).collect();
                    let r = fb.record(Kind::Account, &[&k.to_le_bytes(), &bytes]).unwrap();
                    written.push((r, bytes));
                    k += 1;
                }
                let size = fb.publish(header(seq)).unwrap();
                assert_eq!(fb.next_free(), seq + 1);
                fb.close();
                let dest = dir.path().join(file_name(seq, 7));
                assert!(!dir.path().join(format!(".{}.tmp", file_name(seq, 7))).exists());
                assert_eq!(std::fs::metadata(&dest).unwrap().len(), size);
                let f = MappedFile::open(&dest, true).unwrap();
                assert_eq!((f.header.slot, f.header.accounts, f.header.first_seq), (7, u64::from(k), seq));
                assert_eq!(f.header.body_len, size - (HEADER_LEN + FOOTER_LEN) as u64);
                for (i, (r, bytes)) in written.iter().enumerate() {
                    assert_eq!(r.seq(), seq);
                    let got = f.record(r.offset(), 4 + bytes.len()).unwrap();
                    assert_eq!(&got[..4], &(i as u32).to_le_bytes(), "record {i} of file {seq}");
                    assert_eq!(&got[4..], &bytes[..], "record {i} of file {seq} (direct: {direct})");
                }
            }
        }
    }

    /// With a small part bound one write becomes consecutive part files and the slot's file:
    /// each within the bound (unless a single record is larger), each record where its
    /// reference says, the counts per file, and the positions of `written` continuous.
    #[test]
    fn a_write_past_the_part_bound_is_cut_into_parts() {
        let dir = tempfile::tempdir().unwrap();
        let direct_ok = supports_direct(dir.path());
        let mut lane = IoLane::start().unwrap();
        for (direct, first, bound) in [(false, 5u32, 1000u64), (direct_ok, 60, 700)] {
            let mut fb = create(dir.path(), first, bound, &mut lane, direct);
            let mut written: Vec<(Ref, Vec<u8>)> = Vec::new();
            let mut total = 0u64;
            for k in 0..200u32 {
                // One record larger than the bound gets a part of its own.
                let len = if k == 77 { 5000 } else { 8 + (k as usize * 53) % 200 };
                let bytes: Vec<u8> = (0..len).map(|i| (i as u32).wrapping_mul(k + 1) as u8).collect();
                let before = fb.written();
                let kind = [Kind::Account, Kind::Bucket, Kind::Node][k as usize % 3];
                written.push((fb.record(kind, &[&bytes]).unwrap(), bytes));
                total += fb.written() - before;
            }
            assert_eq!(total, written.iter().map(|(_, b)| b.len().div_ceil(8) as u64 * 8).sum::<u64>());
            let parts = fb.parts().to_vec();
            let bytes = fb.publish(header(first)).unwrap();
            let last = fb.next_free() - 1;
            fb.close();
            assert_eq!(last, first + parts.len() as u32);
            assert!(parts.len() > 10, "{} parts", parts.len());
            let mut on_disk = 0;
            let mut counted = 0;
            for seq in first..=last {
                let kind = if seq == last { FileKind::Slot } else { FileKind::Part };
                let path = dir.path().join(aldb_format::format::published_name(seq, 7, kind));
                assert_eq!(parse_published_name(path.file_name().unwrap().to_str().unwrap()), Some((seq, 7, kind)));
                let f = MappedFile::open(&path, true).unwrap();
                let h = f.header;
                assert_eq!((h.seq, h.first_seq, h.is_part()), (seq, first, seq != last));
                let len = std::fs::metadata(&path).unwrap().len();
                let holds_big = written.iter().any(|(r, b)| r.seq() == seq && b.len() > 1000);
                assert!(len <= bound || holds_big, "file {seq} of {len} bytes");
                on_disk += len;
                counted += h.accounts + h.nodes + h.buckets;
                for (r, b) in written.iter().filter(|(r, _)| r.seq() == seq) {
                    assert_eq!(f.record(r.offset(), b.len()).unwrap(), &b[..]);
                }
            }
            assert_eq!((bytes, counted), (on_disk, 200));
        }
    }

    /// A builder closed half-way leaves no temporary file behind, keeps the parts it published
    /// (their numbers are used), and its buffers serve the next file.
    #[test]
    fn a_closed_write_leaves_only_its_published_parts() {
        let dir = tempfile::tempdir().unwrap();
        let direct = supports_direct(dir.path());
        let mut lane = IoLane::start().unwrap();
        let mut fb = create(dir.path(), 1, MAX_FILE_BYTES, &mut lane, direct);
        for _ in 0..(2 * CHUNK / 4096) {
            fb.record(Kind::Account, &[&[1u8; 4096]]).unwrap();
        }
        assert_eq!(fb.next_free(), 1);
        fb.close();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let mut fb = create(dir.path(), 2, 3 * 4096, &mut lane, direct);
        for _ in 0..7 {
            fb.record(Kind::Account, &[&[1u8; 4096]]).unwrap();
        }
        let next = fb.next_free();
        fb.close();
        let names: Vec<String> =
            std::fs::read_dir(dir.path()).unwrap().map(|d| d.unwrap().file_name().into_string().unwrap()).collect();
        assert!(names.iter().all(|n| n.ends_with(".part")), "{names:?}");
        assert_eq!(names.len() as u32, next - 2);
        let mut fb = create(dir.path(), next, MAX_FILE_BYTES, &mut lane, direct);
        fb.record(Kind::Account, &[b"after"]).unwrap();
        fb.publish(header(next)).unwrap();
        fb.close();
        MappedFile::open(&dir.path().join(file_name(next, 7)), true).unwrap();
    }
}
