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
//!
//! The vote-evidence log (`votes/`) is shipped too, and held the same way by a second file,
//! `shipped-votes.slot`: one line `aldb-shipped-votes 1 <slot>\n`, where `<slot>` is the first
//! slot (the name) of the lowest vote segment the archive may still lack (every segment named
//! below it is archived sealed, had no valid entry, or was refused as damaged). A second file,
//! not a new version of `shipped.seq`, so a writer that knows only the snapshot hold keeps reading
//! its file unchanged; both are written by the same shipper pass, the vote hold after the
//! snapshot hold. The evidence writer, holding for the shipper, deletes no segment named at or
//! above it and none while the file does not exist ([`crate::votes::VoteLog::prune_held`]).
//!
//! The signed root-record log (`records/`) is held by a third file of the same shape,
//! `shipped-records.slot`: one line `aldb-shipped-records 1 <slot>\n`, where `<slot>` is the first
//! slot (the name) of the lowest record segment the archive may still lack, written by the same
//! pass after the vote hold. The record producer, holding for the shipper, deletes no segment
//! named at or above it and none while the file does not exist (`RecordLogWriter::prune_before_held`
//! in `aldb-snapshot`).

use std::path::Path;

/// Name of the hold file in a snapshot directory.
pub const SHIPPED_FILE: &str = "shipped.seq";

/// Name of the vote-evidence log's hold file in a snapshot directory.
pub const VOTES_SHIPPED_FILE: &str = "shipped-votes.slot";

/// Name of the root-record log's hold file in a snapshot directory.
pub const RECORDS_SHIPPED_FILE: &str = "shipped-records.slot";

const MAGIC: &str = "aldb-shipped 1 ";
const VOTES_MAGIC: &str = "aldb-shipped-votes 1 ";
const RECORDS_MAGIC: &str = "aldb-shipped-records 1 ";

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
    #[error("{path}: not an archive hold (expected `{expected}<number>`): {found:?}")]
    Malformed {
        /// The file.
        path: String,
        /// The prefix its line must start with.
        expected: &'static str,
        /// What it holds (at most 64 bytes of it).
        found: String,
    },
}

fn io(path: &Path, source: std::io::Error) -> ShippedError {
    ShippedError::Io { path: path.display().to_string(), source }
}

/// Reads the hold of `dir`: `Ok(None)` when nothing was shipped yet (no file).
pub fn read_shipped(dir: &Path) -> Result<Option<u64>, ShippedError> {
    read_hold(dir, SHIPPED_FILE, MAGIC)
}

/// Replaces the hold of `dir` with `seq`, durably.
pub fn write_shipped(dir: &Path, seq: u64) -> Result<(), ShippedError> {
    write_hold(dir, SHIPPED_FILE, MAGIC, seq)
}

/// Reads the vote-evidence log's hold of `dir` (the first slot of the lowest vote segment the
/// archive may still lack): `Ok(None)` when no vote segment was shipped yet (no file).
pub fn read_votes_shipped(dir: &Path) -> Result<Option<u64>, ShippedError> {
    read_hold(dir, VOTES_SHIPPED_FILE, VOTES_MAGIC)
}

/// Replaces the vote-evidence log's hold of `dir` with `first_slot`, durably.
pub fn write_votes_shipped(dir: &Path, first_slot: u64) -> Result<(), ShippedError> {
    write_hold(dir, VOTES_SHIPPED_FILE, VOTES_MAGIC, first_slot)
}

/// Reads the root-record log's hold of `dir` (the first slot of the lowest record segment the
/// archive may still lack): `Ok(None)` when no record segment was shipped yet (no file).
pub fn read_records_shipped(dir: &Path) -> Result<Option<u64>, ShippedError> {
    read_hold(dir, RECORDS_SHIPPED_FILE, RECORDS_MAGIC)
}

/// Replaces the root-record log's hold of `dir` with `first_slot`, durably.
pub fn write_records_shipped(dir: &Path, first_slot: u64) -> Result<(), ShippedError> {
    write_hold(dir, RECORDS_SHIPPED_FILE, RECORDS_MAGIC, first_slot)
}

fn read_hold(dir: &Path, file: &str, magic: &'static str) -> Result<Option<u64>, ShippedError> {
    let path = dir.join(file);
    let text = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io(&path, e)),
    };
    let malformed = || ShippedError::Malformed {
        path: path.display().to_string(),
        expected: magic,
        found: String::from_utf8_lossy(&text[..text.len().min(64)]).into_owned(),
    };
    let s = std::str::from_utf8(&text).map_err(|_| malformed())?;
    let value = s
        .strip_prefix(magic)
        .and_then(|rest| rest.strip_suffix('\n'))
        .filter(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|digits| digits.parse::<u64>().ok())
        .ok_or_else(malformed)?;
    Ok(Some(value))
}

fn write_hold(dir: &Path, file: &str, magic: &str, value: u64) -> Result<(), ShippedError> {
    let path = dir.join(file);
    crate::durable::replace_file(&path, format!("{magic}{value}\n").as_bytes()).map_err(|e| io(&path, e))
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

    #[test]
    fn votes_hold_round_trips_apart_from_the_snapshot_hold_and_refuses_malformed() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_votes_shipped(dir.path()).unwrap(), None);
        write_shipped(dir.path(), 3).unwrap();
        assert_eq!(read_votes_shipped(dir.path()).unwrap(), None, "the snapshot hold is not the vote hold");
        write_votes_shipped(dir.path(), 300).unwrap();
        assert_eq!(read_votes_shipped(dir.path()).unwrap(), Some(300));
        assert_eq!(read_shipped(dir.path()).unwrap(), Some(3));
        write_votes_shipped(dir.path(), u64::MAX).unwrap();
        assert_eq!(read_votes_shipped(dir.path()).unwrap(), Some(u64::MAX));
        assert!(!dir.path().join(format!("{VOTES_SHIPPED_FILE}.tmp")).exists());
        for bad in [
            "",
            "aldb-shipped 1 12\n",
            "aldb-shipped-votes 2 12\n",
            "aldb-shipped-votes 1 12",
            "aldb-shipped-votes 1 \n",
            "aldb-shipped-votes 1 1 2\n",
            "aldb-shipped-votes 1 18446744073709551616\n",
        ] {
            std::fs::write(dir.path().join(VOTES_SHIPPED_FILE), bad).unwrap();
            let err = read_votes_shipped(dir.path()).unwrap_err();
            assert!(matches!(err, ShippedError::Malformed { .. }), "{bad:?}: {err}");
        }
    }

    #[test]
    fn records_hold_round_trips_apart_from_the_other_holds_and_refuses_malformed() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_records_shipped(dir.path()).unwrap(), None);
        write_shipped(dir.path(), 3).unwrap();
        write_votes_shipped(dir.path(), 40).unwrap();
        assert_eq!(read_records_shipped(dir.path()).unwrap(), None, "neither other hold is the record hold");
        write_records_shipped(dir.path(), 500).unwrap();
        assert_eq!(read_records_shipped(dir.path()).unwrap(), Some(500));
        assert_eq!(read_shipped(dir.path()).unwrap(), Some(3));
        assert_eq!(read_votes_shipped(dir.path()).unwrap(), Some(40));
        write_records_shipped(dir.path(), u64::MAX).unwrap();
        assert_eq!(read_records_shipped(dir.path()).unwrap(), Some(u64::MAX));
        assert!(!dir.path().join(format!("{RECORDS_SHIPPED_FILE}.tmp")).exists());
        for bad in [
            "",
            "aldb-shipped 1 12\n",
            "aldb-shipped-votes 1 12\n",
            "aldb-shipped-records 2 12\n",
            "aldb-shipped-records 1 12",
            "aldb-shipped-records 1 \n",
            "aldb-shipped-records 1 1 2\n",
            "aldb-shipped-records 1 18446744073709551616\n",
        ] {
            std::fs::write(dir.path().join(RECORDS_SHIPPED_FILE), bad).unwrap();
            let err = read_records_shipped(dir.path()).unwrap_err();
            assert!(matches!(err, ShippedError::Malformed { .. }), "{bad:?}: {err}");
        }
    }
}
