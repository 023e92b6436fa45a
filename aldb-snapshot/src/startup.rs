//! The startup spill: startup accounts on disk as they arrive, read back as the full snapshot.
//!
//! A validator starting from a snapshot sends every account it loads before the first slot; at
//! mainnet size that is about a billion accounts, far more data than memory. The adapter keeps
//! only what the bulk build needs (key path, value hash, rank) and appends the rest of each
//! account here. When the base state is built, the full snapshot's account section is written
//! from this spill: each partition is read back once, sequentially, its winners (highest
//! `(slot, write_version)` per path, the later arrival on a tie; deleted accounts dropped) are
//! picked in path order, and they are written in the order the full snapshot stores accounts.
//!
//! Accounts are partitioned by the top bits of their key path, so partition `k` holds a
//! contiguous key range and the partitions read in order give path order. Memory: one write
//! buffer per partition while accounts arrive, then one partition's bytes and index while the
//! snapshot is written.
//!
//! The spill is not a published file: it lives in a subdirectory of the snapshot directory that
//! no reader looks at, is never synced, and is removed once the full snapshot is written, or by
//! the next start's spill after a crash.

use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use aldb_core::AccountRef;
use aldb_verify::spec::Hash;

use aldb_format::SnapshotError;

/// The spill's subdirectory of the snapshot directory.
pub const SPILL_DIR: &str = "startup-spill";

/// Default partition bits: 256 partitions, so at a billion accounts of about 250 bytes each a
/// partition read back is about 1 GB, and the write buffers take 16 MiB.
pub const DEFAULT_SPILL_BITS: u8 = 8;

/// Write buffer per partition.
const BUFFER_BYTES: usize = 64 << 10;

/// Bytes of a spilled account before its data: path, slot, write version, pubkey, lamports,
/// owner, executable, data length.
const HEAD: usize = 32 + 8 + 8 + 32 + 8 + 32 + 1 + 4;

/// Removes a spill left by a process that stopped during startup. It was never published, so
/// nothing is lost: the next startup sends every account again.
pub fn remove_leftover_spill(snapshot_dir: &Path) -> Result<bool, SnapshotError> {
    let dir = snapshot_dir.join(SPILL_DIR);
    match std::fs::remove_dir_all(&dir) {
        Ok(()) => {
            log::warn!("removed {}, a startup spill left by an interrupted start", dir.display());
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(SnapshotError::io("remove", dir, e)),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One partition while accounts arrive.
#[derive(Debug, Default)]
struct Part {
    out: Option<BufWriter<File>>,
    accounts: u64,
    bytes: u64,
    /// The first write error; the partition takes nothing more.
    failed: Option<String>,
}

/// Startup accounts being appended, partitioned by key path. Shared by the callback threads:
/// appends to different partitions do not wait for each other.
#[derive(Debug)]
pub struct StartupSpill {
    dir: PathBuf,
    bits: u8,
    parts: Box<[Mutex<Part>]>,
}

impl StartupSpill {
    /// A new spill under `snapshot_dir`, with `2^bits` partitions (`bits` at most 16). Whatever
    /// an earlier start left there is removed first.
    pub fn create(snapshot_dir: &Path, bits: u8) -> Result<Self, SnapshotError> {
        if bits > 16 {
            return Err(SnapshotError::Input(format!("spill partition bits must be at most 16, got {bits}")));
        }
        remove_leftover_spill(snapshot_dir)?;
        let dir = snapshot_dir.join(SPILL_DIR);
        std::fs::create_dir_all(&dir).map_err(|e| SnapshotError::io("create", &dir, e))?;
        let parts = (0..1usize << bits).map(|_| Mutex::new(Part::default())).collect();
        Ok(Self { dir, bits, parts })
    }

    /// The partition of a key path: its top `bits` bits.
    fn partition(&self, path: &Hash) -> usize {
        let top = usize::from(path[0]) << 8 | usize::from(path[1]);
        top >> (16 - u32::from(self.bits))
    }

    fn part_path(&self, k: usize) -> PathBuf {
        self.dir.join(format!("{k:05}.spill"))
    }

    /// Appends one startup account with its key path and rank `(slot, write_version)`. Safe from
    /// any thread. A failed write is kept and reported by [`StartupSpill::finish`]: the root does
    /// not depend on the spill, only the full snapshot does.
    pub fn append(&self, path: &Hash, rank: (u64, u64), a: &AccountRef<'_>) -> Result<(), SnapshotError> {
        let k = self.partition(path);
        let Some(m) = self.parts.get(k) else {
            return Err(SnapshotError::Input(format!("partition {k} out of range")));
        };
        let mut p = lock(m);
        if let Some(e) = &p.failed {
            return Err(SnapshotError::Input(format!("startup spill partition {k} failed earlier: {e}")));
        }
        let len = u32::try_from(a.data.len())
            .map_err(|_| SnapshotError::Input(format!("account data of {} bytes", a.data.len())))?;
        let mut head = [0u8; HEAD];
        head[0..32].copy_from_slice(path);
        head[32..40].copy_from_slice(&rank.0.to_le_bytes());
        head[40..48].copy_from_slice(&rank.1.to_le_bytes());
        head[48..80].copy_from_slice(a.pubkey);
        head[80..88].copy_from_slice(&a.lamports.to_le_bytes());
        head[88..120].copy_from_slice(a.owner);
        head[120] = u8::from(a.executable);
        head[121..125].copy_from_slice(&len.to_le_bytes());
        let file = self.part_path(k);
        let written = (|| {
            if p.out.is_none() {
                p.out = Some(BufWriter::with_capacity(BUFFER_BYTES, File::create(&file)?));
            }
            let out = p.out.as_mut().ok_or_else(|| std::io::Error::other("no writer"))?;
            out.write_all(&head)?;
            out.write_all(a.data)
        })();
        match written {
            Ok(()) => {
                p.accounts += 1;
                p.bytes += (HEAD + a.data.len()) as u64;
                Ok(())
            }
            Err(e) => {
                p.failed = Some(e.to_string());
                p.out = None;
                Err(SnapshotError::io("append to", file, e))
            }
        }
    }

    /// Accounts appended so far.
    pub fn accounts(&self) -> u64 {
        self.parts.iter().map(|m| lock(m).accounts).sum()
    }

    /// Flushes every partition (no sync: a spill is never read after a crash) and hands the
    /// spill over for the full snapshot. Fails if any append failed.
    pub fn finish(self) -> Result<SpilledAccounts, SnapshotError> {
        let mut parts = Vec::with_capacity(self.parts.len());
        let mut inner = Inner { dir: self.dir.clone(), parts: Vec::new(), accounts: 0 };
        for (k, m) in self.parts.into_vec().into_iter().enumerate() {
            let p = m.into_inner().unwrap_or_else(PoisonError::into_inner);
            if let Some(e) = p.failed {
                // `inner` removes the directory when dropped here.
                return Err(SnapshotError::Input(format!("startup spill partition {k} failed: {e}")));
            }
            if let Some(mut out) = p.out {
                out.flush().map_err(|e| SnapshotError::io("flush", self.dir.join(format!("{k:05}.spill")), e))?;
            }
            inner.accounts += p.accounts;
            parts.push(PartFile { accounts: p.accounts, bytes: p.bytes });
        }
        inner.parts = parts;
        Ok(SpilledAccounts(Arc::new(inner)))
    }
}

/// A finished partition.
#[derive(Debug, PartialEq, Eq)]
struct PartFile {
    accounts: u64,
    bytes: u64,
}

#[derive(Debug, PartialEq, Eq)]
struct Inner {
    dir: PathBuf,
    parts: Vec<PartFile>,
    accounts: u64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A finished spill: the startup accounts on disk, ready to be written as the full snapshot's
/// accounts ([`crate::AccountBatch::from_spill`]). Cheap to clone; the files are removed when the
/// last clone is dropped.
#[derive(Clone, Debug)]
pub struct SpilledAccounts(Arc<Inner>);

impl PartialEq for SpilledAccounts {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for SpilledAccounts {}

impl SpilledAccounts {
    /// Accounts spilled, duplicates and deletions included.
    pub fn accounts(&self) -> u64 {
        self.0.accounts
    }

    /// Bytes spilled.
    pub fn bytes(&self) -> u64 {
        self.0.parts.iter().map(|p| p.bytes).sum()
    }

    /// The winning live account of every path, in path order.
    pub fn winners(&self) -> Winners<'_> {
        Winners { spill: self, next_part: 0, buf: Vec::new(), order: Vec::new(), pos: 0 }
    }
}

/// One winning account read back from the spill.
#[derive(Clone, Copy, Debug)]
pub struct SpilledAccount<'a> {
    /// Its key path.
    pub path: Hash,
    /// `(slot, write_version)` it was spilled with.
    pub rank: (u64, u64),
    /// The account.
    pub account: AccountRef<'a>,
}

/// Winners of a spill in path order, one partition in memory at a time.
#[derive(Debug)]
pub struct Winners<'a> {
    spill: &'a SpilledAccounts,
    next_part: usize,
    buf: Vec<u8>,
    /// Offsets in `buf` of the current partition's winners, in path order.
    order: Vec<usize>,
    pos: usize,
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

fn hash_at(b: &[u8], at: usize) -> Hash {
    let mut h = [0u8; 32];
    h.copy_from_slice(&b[at..at + 32]);
    h
}

impl Winners<'_> {
    /// Reads the next non-empty partition and picks its winners; false when none is left.
    fn load(&mut self) -> Result<bool, SnapshotError> {
        loop {
            let k = self.next_part;
            let Some(part) = self.spill.0.parts.get(k) else { return Ok(false) };
            self.next_part += 1;
            if part.accounts == 0 {
                continue;
            }
            let path = self.spill.0.dir.join(format!("{k:05}.spill"));
            self.buf.clear();
            let len = usize::try_from(part.bytes).map_err(|_| SnapshotError::corrupt(&path, "too large"))?;
            self.buf.reserve_exact(len);
            File::open(&path)
                .and_then(|f| f.take(part.bytes).read_to_end(&mut self.buf))
                .map_err(|e| SnapshotError::io("read", &path, e))?;
            if self.buf.len() != len {
                return Err(SnapshotError::corrupt(&path, format!("{} bytes, expected {len}", self.buf.len())));
            }
            // (path, rank, offset): sorting orders a path's states by rank, then by arrival.
            let mut index: Vec<(Hash, (u64, u64), usize)> = Vec::with_capacity(part.accounts as usize);
            let mut at = 0;
            while at < self.buf.len() {
                if at + HEAD > self.buf.len() {
                    return Err(SnapshotError::corrupt(&path, format!("truncated record at {at}")));
                }
                let b = &self.buf;
                let data_len = u32::from_le_bytes([b[at + 121], b[at + 122], b[at + 123], b[at + 124]]) as usize;
                index.push((hash_at(b, at), (le_u64(b, at + 32), le_u64(b, at + 40)), at));
                at += HEAD + data_len;
            }
            if at != self.buf.len() {
                return Err(SnapshotError::corrupt(&path, "a record runs past the end"));
            }
            index.sort_unstable();
            self.order.clear();
            for (i, &(p, _, off)) in index.iter().enumerate() {
                let last = index.get(i + 1).is_none_or(|n| n.0 != p);
                if last && le_u64(&self.buf, off + 80) != 0 {
                    self.order.push(off);
                }
            }
            self.pos = 0;
            if !self.order.is_empty() {
                return Ok(true);
            }
        }
    }

    fn view(&self, off: usize) -> SpilledAccount<'_> {
        let b = &self.buf;
        let data_len = u32::from_le_bytes([b[off + 121], b[off + 122], b[off + 123], b[off + 124]]) as usize;
        let start = off + HEAD;
        SpilledAccount {
            path: hash_at(b, off),
            rank: (le_u64(b, off + 32), le_u64(b, off + 40)),
            account: AccountRef {
                pubkey: slice32(&b[off + 48..off + 80]),
                lamports: le_u64(b, off + 80),
                owner: slice32(&b[off + 88..off + 120]),
                executable: b[off + 120] != 0,
                data: &b[start..start + data_len],
            },
        }
    }

    /// The current winner's path, loading partitions as needed; `None` past the last.
    fn peek_path(&mut self) -> Result<Option<Hash>, SnapshotError> {
        if self.pos >= self.order.len() && !self.load()? {
            return Ok(None);
        }
        Ok(self.order.get(self.pos).map(|&off| hash_at(&self.buf, off)))
    }

    /// The next winner in path order.
    pub fn next_winner(&mut self) -> Result<Option<SpilledAccount<'_>>, SnapshotError> {
        if self.peek_path()?.is_none() {
            return Ok(None);
        }
        let off = self.order[self.pos];
        self.pos += 1;
        Ok(Some(self.view(off)))
    }

    /// Skips winners below `path` and returns the one at `path`, if any. Calls must come in path
    /// order.
    pub fn seek(&mut self, path: &Hash) -> Result<Option<SpilledAccount<'_>>, SnapshotError> {
        while let Some(p) = self.peek_path()? {
            if p < *path {
                self.pos += 1;
                continue;
            }
            if p == *path {
                let off = self.order[self.pos];
                self.pos += 1;
                return Ok(Some(self.view(off)));
            }
            return Ok(None);
        }
        Ok(None)
    }
}

fn slice32(b: &[u8]) -> &[u8; 32] {
    // Always 32 bytes: every caller slices a fixed 32-byte field.
    b.try_into().unwrap_or(&[0; 32])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acct<'a>(key: &'a [u8; 32], lamports: u64, data: &'a [u8]) -> AccountRef<'a> {
        AccountRef { pubkey: key, lamports, owner: key, executable: false, data }
    }

    #[test]
    fn winners_come_in_path_order_by_rank_then_arrival_without_deletions() {
        let dir = tempfile::tempdir().unwrap();
        let spill = StartupSpill::create(dir.path(), 2).unwrap();
        let k: Vec<[u8; 32]> = (0..4u8).map(|i| [i * 60; 32]).collect();
        let path = |i: usize| k[i];
        spill.append(&path(2), (5, 1), &acct(&k[2], 1, b"old")).unwrap();
        spill.append(&path(2), (5, 2), &acct(&k[2], 2, b"new")).unwrap();
        spill.append(&path(0), (9, 0), &acct(&k[0], 3, b"a")).unwrap();
        spill.append(&path(0), (3, 7), &acct(&k[0], 4, b"b")).unwrap();
        spill.append(&path(1), (1, 1), &acct(&k[1], 5, b"x")).unwrap();
        spill.append(&path(1), (2, 0), &acct(&k[1], 0, b"")).unwrap();
        spill.append(&path(3), (1, 1), &acct(&k[3], 6, b"first")).unwrap();
        spill.append(&path(3), (1, 1), &acct(&k[3], 7, b"second")).unwrap();
        assert_eq!(spill.accounts(), 8);
        let done = spill.finish().unwrap();
        let mut w = done.winners();
        let mut got = Vec::new();
        while let Some(a) = w.next_winner().unwrap() {
            got.push((a.path, a.account.lamports, a.account.data.to_vec()));
        }
        let want = vec![(path(0), 3, b"a".to_vec()), (path(2), 2, b"new".to_vec()), (path(3), 7, b"second".to_vec())];
        assert_eq!(got, want);
        let mut w = done.winners();
        assert!(w.seek(&path(1)).unwrap().is_none(), "deleted");
        assert_eq!(w.seek(&path(3)).unwrap().map(|a| a.account.lamports), Some(7));
        assert!(dir.path().join(SPILL_DIR).exists());
        drop(done);
        assert!(!dir.path().join(SPILL_DIR).exists(), "removed with the last handle");
    }

    #[test]
    fn a_leftover_spill_is_removed_by_the_next_one() {
        let dir = tempfile::tempdir().unwrap();
        let left = dir.path().join(SPILL_DIR);
        std::fs::create_dir_all(&left).unwrap();
        std::fs::write(left.join("00003.spill"), b"partial record").unwrap();
        let spill = StartupSpill::create(dir.path(), 4).unwrap();
        assert!(!left.join("00003.spill").exists());
        let done = spill.finish().unwrap();
        assert!(done.winners().next_winner().unwrap().is_none());
    }
}
