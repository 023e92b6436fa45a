//! Small files replaced crash-safely: the state and cursor files of clients and relayers, and
//! the hold files beside a shipped directory. One implementation, because each step matters
//! and a copy that forgets one (the directory's fsync, which makes the rename itself durable)
//! loses the file on a power cut while every test passes.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Replaces `path` with `bytes` so that after a crash it holds either the old bytes or the new:
/// the bytes go to `<path>.tmp`, are synced, renamed over `path`, and the directory is synced.
/// A `.tmp` left by an earlier crash is overwritten.
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)?;
    sync_parent(path)
}

/// Syncs the directory holding `path` (`.` for a bare file name), so a rename or creation in
/// it survives a crash.
pub fn sync_parent(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_a_stale_tmp_does_no_harm() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(dir.path().join("state.json.tmp"), b"half a write").unwrap();
        replace_file(&path, b"first").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"first");
        replace_file(&path, b"second, longer").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"second, longer");
        assert!(!dir.path().join("state.json.tmp").exists());
        let missing = dir.path().join("no-such-dir").join("x");
        assert_eq!(replace_file(&missing, b"x").unwrap_err().kind(), io::ErrorKind::NotFound);
    }
}
