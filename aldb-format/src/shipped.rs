//! The archive hold: how far an archiver (the object-store shipper) has copied a snapshot
//! directory, so the writer never deletes a file that is not yet archived.
//!
//! A directory whose history goes to an archive must not lose a file to local retention before
//! the archive has it: a shipper that falls behind (a slow bucket, a stopped process) would
//! otherwise find files pruned under it, and the archive would have holes for good. The shipper
//! writes `shipped.seq` after each pass whose manifest is durable; a writer configured to hold
//! for it deletes no file at or above that sequence number, and nothing at all while the file
//! does not exist. This is the same contract as a database's WAL archiver: retention waits for
//! the archive, and the directory grows while the archiver is down (which its lag metric shows).
//!
//! The file is one line of ASCII: `aldb-shipped 1 <seq>\n`, where `<seq>` is the lowest sequence
//! number the archive may still lack (every published file below it is archived, or was refused
//! as damaged and never will be). It is replaced atomically (temporary file, `fsync`, rename,
//! directory `fsync`), so a reader sees the old value or the new one.

use std::io::Write;
use std::path::Path;

/// Name of the hold file in a snapshot directory.
pub const SHIPPED_FILE: &str = "shipped.seq";

const MAGIC: &str = "aldb-shipped 1 ";

/// Why the hold file could not be read or written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ShippedError {
    /// The file system refused.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file exists but is not a hold file of this version.
    #[error("{path}: not an archive hold (expected `{MAGIC}<seq>`): {found:?}")]
    Malformed {
        /// The file.
        path: String,
        /// What it holds (at most 64 bytes of it).
        found: String,
    },
}

fn io(path: &Path, source: std::io::Error) -> ShippedError {
    ShippedError::Io { path: path.display().to_string(), source }
}

/// Reads the hold of `dir`: `Ok(None)` when nothing was shipped yet (no file).
pub fn read_shipped(dir: &Path) -> Result<Option<u64>, ShippedError> {
    let path = dir.join(SHIPPED_FILE);
    let text = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path, e)),
    };
    let malformed = || ShippedError::Malformed {
        path: path.display().to_string(),
        found: String::from_utf8_lossy(&text[..text.len().min(64)]).into_owned(),
    };
    let s = std::str::from_utf8(&text).map_err(|_| malformed())?;
    let seq = s
        .strip_prefix(MAGIC)
        .and_then(|rest| rest.strip_suffix('\n'))
        .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|digits| digits.parse::<u64>().ok())
        .ok_or_else(malformed)?;
    Ok(Some(seq))
}

/// Replaces the hold of `dir` with `seq`, durably.
pub fn write_shipped(dir: &Path, seq: u64) -> Result<(), ShippedError> {
    let path = dir.join(SHIPPED_FILE);
    let tmp = dir.join(format!("{SHIPPED_FILE}.tmp"));
    let mut f = std::fs::File::create(&tmp).map_err(|e| io(&tmp, e))?;
    f.write_all(format!("{MAGIC}{seq}\n").as_bytes()).map_err(|e| io(&tmp, e))?;
    f.sync_all().map_err(|e| io(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
    std::fs::File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_written_replaced_and_malformed() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_shipped(dir.path()).unwrap(), None);
        write_shipped(dir.path(), 7).unwrap();
        assert_eq!(read_shipped(dir.path()).unwrap(), Some(7));
        write_shipped(dir.path(), 1 << 40).unwrap();
        assert_eq!(read_shipped(dir.path()).unwrap(), Some(1 << 40));
        assert!(!dir.path().join(format!("{SHIPPED_FILE}.tmp")).exists());
        for bad in ["", "aldb-shipped 1 \n", "aldb-shipped 1 12", "aldb-shipped 2 12\n", "aldb-shipped 1 -3\n", "x"] {
            std::fs::write(dir.path().join(SHIPPED_FILE), bad).unwrap();
            let err = read_shipped(dir.path()).unwrap_err();
            assert!(matches!(err, ShippedError::Malformed { .. }), "{bad:?}: {err}");
        }
    }
}
