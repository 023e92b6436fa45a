//! The output file (accepted roots) and the cursor file (chain state), and how a restart
//! reconciles them.
//!
//! For every accepted record the relayer first appends `<slot> <base58 root>\n` to the output
//! and syncs it, then replaces the cursor (`<slot> <base58 record hash>\n`) atomically: write a
//! temporary file, sync it, rename it over the cursor, sync the directory. A crash can therefore
//! leave the output one line *ahead* of the cursor (never behind), or a torn last output line.
//!
//! On start the output's last complete line is authoritative for what has been written: a torn
//! tail is cut off, and lines past the cursor are remembered. The chain resumes from the cursor
//! (the only place the record hash is kept); records it accepts again for slots the output
//! already holds are checked against those lines and not written twice. Without a cursor but
//! with output lines (a crash before the first cursor write, or an operator re-anchoring), the
//! anchor is looked for from the output's last slot on, so the output never gets a gap that the
//! start slot did not ask for.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use aldb_verify::{Hash, hash_from_base58, hash_to_base58};

use crate::chain::{Start, Tip};
use crate::error::StoreError;

/// Bytes read from the end of the output on start: far more than the few lines that can lie
/// past the cursor.
const TAIL_BYTES: u64 = 64 * 1024;

/// The output and cursor files.
#[derive(Debug)]
pub struct Store {
    output_path: PathBuf,
    cursor_path: PathBuf,
    output: File,
    /// The newest slot the output holds.
    written_through: Option<u64>,
    /// Output lines the chain has to accept again (past the cursor), by slot.
    replay: BTreeMap<u64, Hash>,
}

/// What a restart found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resume {
    /// The cursor, if there is one.
    pub cursor: Option<Tip>,
    /// The output's last line, if any.
    pub last_output: Option<(u64, Hash)>,
    /// Bytes of a torn last line cut off the output.
    pub truncated: u64,
}

impl Resume {
    /// Where the chain starts, given the configured start slot.
    pub fn start(&self, start_slot: u64) -> Start {
        match (self.cursor, self.last_output) {
            (Some(tip), _) => Start::Cursor(tip),
            (None, Some((slot, _))) => Start::Anchor { from_slot: start_slot.max(slot) },
            (None, None) => Start::Anchor { from_slot: start_slot },
        }
    }
}

fn corrupt(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::Corrupt { path: path.to_path_buf(), reason: reason.into() }
}

/// Parses `<slot> <base58 32 bytes>`.
fn parse_line(line: &str) -> Option<(u64, Hash)> {
    let (slot, hash) = line.split_once(' ')?;
    if slot.is_empty() || !slot.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((slot.parse().ok()?, hash_from_base58(hash).ok()?))
}

/// Reads the cursor file, if present.
pub fn read_cursor(path: &Path) -> Result<Option<Tip>, StoreError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("read", path, e)),
    };
    let line = text.strip_suffix('\n').ok_or_else(|| corrupt(path, "not one `<slot> <record hash>` line"))?;
    let (slot, record_hash) = parse_line(line).ok_or_else(|| corrupt(path, "not one `<slot> <record hash>` line"))?;
    Ok(Some(Tip { slot, record_hash }))
}

/// Replaces the cursor file atomically.
pub fn write_cursor(path: &Path, tip: &Tip) -> Result<(), StoreError> {
    let line = format!("{} {}\n", tip.slot, hash_to_base58(&tip.record_hash));
    aldb_format::durable::replace_file(path, line.as_bytes()).map_err(|e| StoreError::io("replace", path, e))
}

impl Store {
    /// Opens (creating) the output, cuts a torn last line off, reads the cursor and checks the
    /// two agree.
    pub fn open(output_path: &Path, cursor_path: &Path) -> Result<(Self, Resume), StoreError> {
        let cursor = read_cursor(cursor_path)?;
        Self::open_with_cursor(output_path, cursor_path, cursor)
    }

    /// As [`open`](Self::open), with the cursor kept elsewhere (the votes mode's state file at
    /// `cursor_path`, its bank hash standing for the record hash): only [`append`](Self::append)
    /// is used then, and the caller replaces the cursor.
    pub fn open_with_cursor(
        output_path: &Path,
        cursor_path: &Path,
        cursor: Option<Tip>,
    ) -> Result<(Self, Resume), StoreError> {
        let mut output = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(output_path)
            .map_err(|e| StoreError::io("open", output_path, e))?;
        // Exclusive for the life of the store, and taken before the torn-line repair below, so a
        // second relayer started on the same output can neither cut nor interleave lines.
        match output.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(StoreError::InUse { path: output_path.to_path_buf() });
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(StoreError::io("lock", output_path, e)),
        }
        let len = output.metadata().map_err(|e| StoreError::io("stat", output_path, e))?.len();
        let from = len.saturating_sub(TAIL_BYTES);
        output.seek(SeekFrom::Start(from)).map_err(|e| StoreError::io("seek", output_path, e))?;
        let mut tail = Vec::new();
        output.read_to_end(&mut tail).map_err(|e| StoreError::io("read", output_path, e))?;
        // Cut a torn last line (no newline yet) off: it was never acknowledged.
        let complete = tail.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        let truncated = (tail.len() - complete) as u64;
        if truncated > 0 {
            if from > 0 && complete == 0 {
                return Err(corrupt(output_path, "the last 64 KiB hold no complete line"));
            }
            output.set_len(from + complete as u64).map_err(|e| StoreError::io("truncate", output_path, e))?;
            output.sync_all().map_err(|e| StoreError::io("fsync", output_path, e))?;
        }
        let text = std::str::from_utf8(&tail[..complete]).map_err(|_| corrupt(output_path, "not UTF-8 text"))?;
        let mut lines: Vec<&str> = text.lines().collect();
        if from > 0 && !lines.is_empty() {
            // The first line read may be the end of a longer one.
            lines.remove(0);
        }
        let mut parsed = Vec::with_capacity(lines.len());
        for l in &lines {
            let p = parse_line(l).ok_or_else(|| corrupt(output_path, format!("not a `<slot> <root>` line: {l:?}")))?;
            if parsed.last().is_some_and(|&(s, _): &(u64, Hash)| s >= p.0) {
                return Err(corrupt(output_path, format!("slot {} does not follow the line before it", p.0)));
            }
            parsed.push(p);
        }
        let last_output = parsed.last().copied();
        let inconsistent = |reason: String| StoreError::Inconsistent {
            cursor: cursor_path.to_path_buf(),
            output: output_path.to_path_buf(),
            reason,
        };
        let mut replay = BTreeMap::new();
        match (cursor, last_output) {
            (Some(c), None) => {
                return Err(inconsistent(format!(
                    "the cursor is at slot {} but the output is empty; remove the cursor to re-anchor",
                    c.slot
                )));
            }
            (Some(c), Some((last, _))) if last < c.slot => {
                return Err(inconsistent(format!(
                    "the cursor is at slot {} but the output ends at slot {last}",
                    c.slot
                )));
            }
            (Some(c), Some(_)) => {
                replay.extend(parsed.iter().filter(|(s, _)| *s > c.slot).copied());
            }
            (None, Some(last)) => {
                replay.insert(last.0, last.1);
            }
            (None, None) => {}
        }
        let store = Self {
            output_path: output_path.to_path_buf(),
            cursor_path: cursor_path.to_path_buf(),
            output,
            written_through: last_output.map(|(s, _)| s),
            replay,
        };
        Ok((store, Resume { cursor, last_output, truncated }))
    }

    /// Records an accepted record: appends its output line unless the output already holds the
    /// slot (then checks it is the same root), then replaces the cursor. Returns whether a line
    /// was written.
    pub fn commit(&mut self, slot: u64, root: &Hash, record_hash: &Hash) -> Result<bool, StoreError> {
        let wrote = self.append(slot, root)?;
        write_cursor(&self.cursor_path, &Tip { slot, record_hash: *record_hash })?;
        Ok(wrote)
    }

    /// Appends an accepted root's output line unless the output already holds the slot (then
    /// checks it is the same root); the caller replaces the cursor. Returns whether a line was
    /// written.
    pub fn append(&mut self, slot: u64, root: &Hash) -> Result<bool, StoreError> {
        let wrote = if self.written_through.is_some_and(|w| slot <= w) {
            match self.replay.remove(&slot) {
                Some(written) if written == *root => false,
                Some(written) => {
                    return Err(StoreError::Conflict {
                        slot,
                        written: hash_to_base58(&written),
                        accepted: hash_to_base58(root),
                    });
                }
                None => {
                    return Err(StoreError::Inconsistent {
                        cursor: self.cursor_path.clone(),
                        output: self.output_path.clone(),
                        reason: format!(
                            "the chain accepted slot {slot}, which the output (written through slot {}) does not hold",
                            self.written_through.unwrap_or_default()
                        ),
                    });
                }
            }
        } else {
            let line = format!("{slot} {}\n", hash_to_base58(root));
            self.output.write_all(line.as_bytes()).map_err(|e| StoreError::io("append", &self.output_path, e))?;
            self.output.sync_data().map_err(|e| StoreError::io("fsync", &self.output_path, e))?;
            self.written_through = Some(slot);
            true
        };
        self.replay.retain(|s, _| *s > slot);
        Ok(wrote)
    }

    /// The newest slot in the output.
    pub fn written_through(&self) -> Option<u64> {
        self.written_through
    }
}

/// Reads every line of an output file (for tests and tools).
pub fn read_output(path: &Path) -> Result<Vec<(u64, Hash)>, StoreError> {
    let text = std::fs::read_to_string(path).map_err(|e| StoreError::io("read", path, e))?;
    text.lines().map(|l| parse_line(l).ok_or_else(|| corrupt(path, format!("bad line {l:?}")))).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)]
    use super::*;

    fn paths(dir: &Path) -> (PathBuf, PathBuf) {
        (dir.join("roots.txt"), dir.join("cursor"))
    }

    /// A second relayer on the same output is refused, without touching the file (not even its
    /// torn last line, which belongs to the first); once the first is gone the output opens.
    #[test]
    fn a_second_relayer_on_the_same_output_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (out, cur) = paths(dir.path());
        let (mut first, _) = Store::open(&out, &cur).expect("open");
        assert!(first.commit(5, &[5; 32], &[50; 32]).expect("commit"));
        let mut f = OpenOptions::new().append(true).open(&out).expect("open");
        f.write_all(b"6 torn").expect("write");
        let before = std::fs::read(&out).expect("read");
        let Err(e) = Store::open(&out, &dir.path().join("other-cursor")) else { panic!("second open must fail") };
        assert!(matches!(e, StoreError::InUse { .. }), "{e}");
        assert!(e.to_string().contains("in use by another relayer"), "{e}");
        assert_eq!(std::fs::read(&out).expect("read"), before);
        drop(first);
        let (_, r) = Store::open(&out, &cur).expect("reopen after the first is gone");
        assert_eq!(r.truncated, 6);
    }

    #[test]
    fn writes_lines_and_resumes_from_the_cursor() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (out, cur) = paths(dir.path());
        let (mut s, r) = Store::open(&out, &cur).expect("open");
        assert_eq!(r.start(5), Start::Anchor { from_slot: 5 });
        assert!(s.commit(5, &[5; 32], &[50; 32]).expect("commit"));
        assert!(s.commit(7, &[7; 32], &[70; 32]).expect("commit"));
        drop(s);
        let (_, r) = Store::open(&out, &cur).expect("reopen");
        assert_eq!(r.start(0), Start::Cursor(Tip { slot: 7, record_hash: [70; 32] }));
        assert_eq!(read_output(&out).expect("read"), vec![(5, [5; 32]), (7, [7; 32])]);
    }

    #[test]
    fn a_crash_between_output_and_cursor_writes_nothing_twice() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (out, cur) = paths(dir.path());
        let (mut s, _) = Store::open(&out, &cur).expect("open");
        s.commit(1, &[1; 32], &[10; 32]).expect("commit");
        drop(s);
        // The line for slot 2 made it, the cursor did not; then a torn line for slot 3.
        let mut f = OpenOptions::new().append(true).open(&out).expect("open");
        f.write_all(format!("2 {}\n3 {}", hash_to_base58(&[2; 32]), &hash_to_base58(&[3; 32])[..10]).as_bytes())
            .expect("write");
        drop(f);
        let (mut s, r) = Store::open(&out, &cur).expect("reopen");
        assert!(r.truncated > 0);
        assert_eq!(r.start(0), Start::Cursor(Tip { slot: 1, record_hash: [10; 32] }));
        // The chain accepts slot 2 again: not written twice; slot 3 is written.
        assert!(!s.commit(2, &[2; 32], &[20; 32]).expect("commit"));
        assert!(s.commit(3, &[3; 32], &[30; 32]).expect("commit"));
        assert_eq!(read_output(&out).expect("read"), vec![(1, [1; 32]), (2, [2; 32]), (3, [3; 32])]);
        assert_eq!(read_cursor(&cur).expect("cursor"), Some(Tip { slot: 3, record_hash: [30; 32] }));
    }

    #[test]
    fn a_different_root_for_a_written_slot_is_a_conflict() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (out, cur) = paths(dir.path());
        std::fs::write(&out, format!("4 {}\n", hash_to_base58(&[4; 32]))).expect("write");
        let (mut s, r) = Store::open(&out, &cur).expect("open");
        // No cursor: the anchor is looked for from the output's last slot.
        assert_eq!(r.start(0), Start::Anchor { from_slot: 4 });
        assert_eq!(r.start(9), Start::Anchor { from_slot: 9 });
        assert!(matches!(s.commit(4, &[5; 32], &[1; 32]), Err(StoreError::Conflict { slot: 4, .. })));
    }

    #[test]
    fn a_cursor_ahead_of_the_output_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (out, cur) = paths(dir.path());
        write_cursor(&cur, &Tip { slot: 9, record_hash: [1; 32] }).expect("cursor");
        assert!(matches!(Store::open(&out, &cur), Err(StoreError::Inconsistent { .. })));
        std::fs::write(&out, format!("3 {}\n", hash_to_base58(&[4; 32]))).expect("write");
        assert!(matches!(Store::open(&out, &cur), Err(StoreError::Inconsistent { .. })));
        std::fs::write(&cur, "garbage").expect("write");
        assert!(matches!(Store::open(&out, &cur), Err(StoreError::Corrupt { .. })));
    }
}
