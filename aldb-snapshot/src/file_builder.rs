//! Writing one snapshot file: streamed under a temporary name, then published atomically.
//!
//! Files are written once, sequentially, and read later through mappings, so the writer
//! bypasses the page cache when the filesystem allows it (`O_DIRECT`): copying every byte into
//! freshly allocated cache pages cost more than the disk itself (measured 0.3 GB/s buffered and
//! synced against 1.6 GB/s direct on the same disk, BENCHMARKS.md §2). The bytes go through two
//! block-aligned buffers that are reused for every file, so steady state allocates nothing: a
//! full chunk goes to a helper thread ([`IoLane`]) while the serializer fills the other buffer,
//! so serializing the next chunk overlaps the device writing the last one.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, SyncSender};

use xxhash_rust::xxh3::Xxh3;

use aldb_format::format::{END_MAGIC, FOOTER_LEN, HEADER_LEN, Header, MAX_RECORD_OFFSET, Ref, checksum};

use crate::error::SnapshotError;

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

/// A snapshot file being written. Nothing is visible under the final name until
/// [`FileBuilder::publish`] has synced the file, renamed it and synced the directory.
pub(crate) struct FileBuilder<'a> {
    file: Arc<File>,
    lane: &'a mut IoLane,
    tmp: PathBuf,
    seq: u32,
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
}

const ZEROS: [u8; 8] = [0; 8];

impl<'a> FileBuilder<'a> {
    /// Starts `tmp`, staging through `lane`'s buffers; `direct` writes bypass the page cache.
    pub(crate) fn create(tmp: &Path, seq: u32, lane: &'a mut IoLane, direct: bool) -> Result<Self, SnapshotError> {
        let buf = lane.free_buffer().map_err(|e| SnapshotError::io("write", tmp, e))?;
        let file = if direct {
            open_direct(tmp)
        } else {
            OpenOptions::new().write(true).create(true).truncate(true).open(tmp)
        }
        .map_err(|e| SnapshotError::io("create", tmp, e))?;
        let mut fb = Self {
            file: Arc::new(file),
            lane,
            tmp: tmp.to_path_buf(),
            seq,
            direct,
            buf,
            filled: 0,
            flushed: 0,
            first_block: None,
            body: Xxh3::new(),
            hashed_to: HEADER_LEN as u64,
            body_done: false,
        };
        // The header is patched in last, once counts and the root reference are known.
        fb.stage(&[0u8; HEADER_LEN])?;
        Ok(fb)
    }

    /// Drops the unfinished file, keeping the buffers for the next one.
    pub(crate) fn abandon(self) {
        let _ = self.lane.drain();
        self.lane.spare.push(self.buf);
        let _ = std::fs::remove_file(&self.tmp);
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

    /// Appends one record made of `parts`, 8-byte aligned, and returns its reference.
    pub(crate) fn record(&mut self, parts: &[&[u8]]) -> Result<Ref, SnapshotError> {
        let at = self.len();
        // A reference past the limit would wrap into the sequence bits and point elsewhere.
        let Some(r) = Ref::checked(self.seq, at) else {
            return Err(SnapshotError::FileTooLarge { seq: self.seq, max: MAX_RECORD_OFFSET });
        };
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let padded = total.div_ceil(8) * 8;
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
        Ok(r)
    }

    /// Bytes written so far, header included.
    pub(crate) fn len(&self) -> u64 {
        self.flushed + self.filled as u64
    }

    /// Writes the header and footer, syncs, renames to `dest` and syncs the directory. Returns
    /// the file's size; on error the temporary file is removed.
    pub(crate) fn publish(mut self, mut header: Header, dest: &Path) -> Result<u64, SnapshotError> {
        let result = self.finish(&mut header, dest);
        if result.is_err() {
            let _ = self.lane.drain();
            let _ = std::fs::remove_file(&self.tmp);
        }
        self.lane.spare.push(self.buf);
        result
    }

    fn finish(&mut self, header: &mut Header, dest: &Path) -> Result<u64, SnapshotError> {
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
        sync_dir(dest.parent().unwrap_or(Path::new(".")))?;
        Ok(size)
    }
}

/// Makes renames and unlinks in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), SnapshotError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| SnapshotError::io("fsync directory", dir, e))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use aldb_format::store::MappedFile;

    /// A header for test files: the fields that matter to a file's layout, others arbitrary.
    pub(crate) fn header(seq: u32) -> Header {
        Header {
            flags: 0,
            seq,
            bucket_bits: 4,
            slot: 7,
            parent: Some(6),
            root: [9; 32],
            root_ref: Ref::NULL,
            oldest_seq: 1,
            body_len: 0,
            accounts: 0,
            nodes: 0,
            buckets: 0,
            gap_after: None,
        }
    }

    /// A record that would start past the last offset a reference can hold is refused with a
    /// clear error instead of getting a reference that wraps into the sequence bits.
    #[test]
    fn records_past_the_addressable_size_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut lane = IoLane::start().unwrap();
        let mut fb = FileBuilder::create(&dir.path().join(".big.tmp"), 3, &mut lane, false).unwrap();
        // Pretend the file already holds almost 32 GiB (nothing below is written to disk: the
        // records stay in the staging buffer).
        fb.flushed = MAX_RECORD_OFFSET - fb.filled as u64 - 8;
        let last_but_one = fb.record(&[&[1u8; 8]]).unwrap();
        assert_eq!((last_but_one.seq(), last_but_one.offset()), (3, MAX_RECORD_OFFSET - 8));
        let last = fb.record(&[&[2u8; 8]]).unwrap();
        assert_eq!((last.seq(), last.offset()), (3, MAX_RECORD_OFFSET));
        let err = fb.record(&[&[3u8; 8]]).unwrap_err();
        assert!(matches!(err, SnapshotError::FileTooLarge { seq: 3, max: MAX_RECORD_OFFSET }), "{err}");
        fb.abandon();
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
                let tmp = dir.path().join(format!(".{seq}.tmp"));
                let dest = dir.path().join(format!("{seq}.snap"));
                let mut fb = FileBuilder::create(&tmp, seq, &mut lane, direct).unwrap();
                let mut written: Vec<(Ref, Vec<u8>)> = Vec::new();
                let mut k = 0u32;
                while (fb.len() as usize) < target {
                    // Sizes cycle through odd lengths; one record spans more than a chunk.
                    let len = if k == 3 && target > CHUNK { CHUNK + 777 } else { 1 + (k as usize * 37) % 300 };
                    let bytes: Vec<u8> = (0..len).map(|i| (i as u32 ^ k.wrapping_mul(2654435761)) as u8).collect();
                    let r = fb.record(&[&k.to_le_bytes(), &bytes]).unwrap();
                    written.push((r, bytes));
                    k += 1;
                }
                let size = fb.publish(header(seq), &dest).unwrap();
                assert!(!tmp.exists());
                assert_eq!(std::fs::metadata(&dest).unwrap().len(), size);
                let f = MappedFile::open(&dest, true).unwrap();
                assert_eq!(f.header.slot, 7);
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

    /// A builder dropped half-way leaves no file behind and its buffers serve the next file.
    #[test]
    fn abandoned_file_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let direct = supports_direct(dir.path());
        let mut lane = IoLane::start().unwrap();
        let tmp = dir.path().join(".1.tmp");
        let mut fb = FileBuilder::create(&tmp, 1, &mut lane, direct).unwrap();
        for _ in 0..(2 * CHUNK / 4096) {
            fb.record(&[&[1u8; 4096]]).unwrap();
        }
        fb.abandon();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let dest = dir.path().join("2.snap");
        let mut fb = FileBuilder::create(&dir.path().join(".2.tmp"), 2, &mut lane, direct).unwrap();
        fb.record(&[b"after"]).unwrap();
        fb.publish(header(2), &dest).unwrap();
        MappedFile::open(&dest, true).unwrap();
    }
}
