//! Writing one snapshot file: streamed under a temporary name, then published atomically.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::Xxh3;

use crate::error::SnapshotError;
use crate::format::{checksum, Header, Ref, END_MAGIC, FOOTER_LEN, HEADER_LEN};

/// A snapshot file being written. Nothing is visible under the final name until
/// [`FileBuilder::publish`] has synced the file, renamed it and synced the directory.
pub(crate) struct FileBuilder {
    out: BufWriter<File>,
    tmp: PathBuf,
    seq: u32,
    pos: u64,
    body: Xxh3,
}

const ZEROS: [u8; 8] = [0; 8];

impl FileBuilder {
    pub(crate) fn create(tmp: &Path, seq: u32) -> Result<Self, SnapshotError> {
        let f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(tmp)
            .map_err(|e| SnapshotError::io("create", tmp, e))?;
        let mut out = BufWriter::with_capacity(1 << 20, f);
        // The header is written last, once counts and the root reference are known.
        out.write_all(&[0u8; HEADER_LEN]).map_err(|e| SnapshotError::io("write", tmp, e))?;
        Ok(Self { out, tmp: tmp.to_path_buf(), seq, pos: HEADER_LEN as u64, body: Xxh3::new() })
    }

    fn raw(&mut self, bytes: &[u8]) -> Result<(), SnapshotError> {
        self.out.write_all(bytes).map_err(|e| SnapshotError::io("write", &self.tmp, e))?;
        self.body.update(bytes);
        self.pos += bytes.len() as u64;
        Ok(())
    }

    /// Appends one record made of `parts`, 8-byte aligned, and returns its reference.
    pub(crate) fn record(&mut self, parts: &[&[u8]]) -> Result<Ref, SnapshotError> {
        let at = self.pos;
        for p in parts {
            self.raw(p)?;
        }
        let pad = (8 - (self.pos % 8) as usize) % 8;
        self.raw(&ZEROS[..pad])?;
        Ok(Ref::new(self.seq, at))
    }

    /// Bytes written so far, header included.
    pub(crate) fn len(&self) -> u64 {
        self.pos
    }

    /// Writes the header and footer, syncs, renames to `dest` and syncs the directory.
    pub(crate) fn publish(mut self, mut header: Header, dest: &Path) -> Result<u64, SnapshotError> {
        header.body_len = self.pos - HEADER_LEN as u64;
        let head = header.encode();
        let sum = checksum(&head, self.body.digest128());
        let mut footer = [0u8; FOOTER_LEN];
        footer[..16].copy_from_slice(&sum.to_le_bytes());
        footer[24..].copy_from_slice(&END_MAGIC);
        let tmp = self.tmp.clone();
        let io = |op, e| SnapshotError::io(op, &tmp, e);
        self.out.write_all(&footer).map_err(|e| io("write", e))?;
        self.out.seek(SeekFrom::Start(0)).map_err(|e| io("seek", e))?;
        self.out.write_all(&head).map_err(|e| io("write", e))?;
        let file = self.out.into_inner().map_err(|e| io("flush", e.into_error()))?;
        file.sync_all().map_err(|e| io("fsync", e))?;
        drop(file);
        std::fs::rename(&tmp, dest).map_err(|e| io("rename", e))?;
        sync_dir(dest.parent().unwrap_or(Path::new(".")))?;
        Ok(self.pos + FOOTER_LEN as u64)
    }
}

/// Makes renames and unlinks in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), SnapshotError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| SnapshotError::io("fsync directory", dir, e))
}
