//! What a starting (or recovering) writer finds in its directory: the published files, the
//! sequence number to continue after, the newest slot file to recover from. Unfinished files are
//! removed and damaged names above every valid one set aside.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use aldb_format::SnapshotError;
use aldb_format::format::{FOOTER_LEN, FileKind, HEADER_LEN, Header, SET_ASIDE_SUFFIX, parse_published_name};

use crate::file_builder::sync_dir;

/// A published file as the writer and its pruner know it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Known {
    pub(super) slot: u64,
    /// `u32::MAX` for a file whose header does not match its name: it never holds other files
    /// back and is pruned like any other once below every kept slot's oldest file.
    pub(super) oldest_seq: u32,
    /// A part is pruned like any file but is never a kept slot itself.
    pub(super) kind: FileKind,
}

/// What a starting writer finds in its directory.
pub(super) struct Existing {
    /// Every published name (slot files and parts), for the pruner, by sequence number.
    pub(super) files: BTreeMap<u32, Known>,
    /// The highest sequence number of a file (slot file or part) this writer's format published
    /// under that very name: numbering goes on after it. A stray or damaged name is not trusted
    /// here, so a name with the largest sequence number cannot make the writer wrap onto live
    /// files.
    pub(super) last_seq: u32,
}

/// Lists the directory, removing unfinished files.
pub(super) fn scan(dir: &Path) -> Result<Existing, SnapshotError> {
    let mut files = BTreeMap::new();
    let mut last_seq = 0;
    let mut invalid = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| SnapshotError::io("list", dir, e))?;
    for entry in rd {
        let entry = entry.map_err(|e| SnapshotError::io("list", dir, e))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.starts_with('.') && name.ends_with(".tmp") {
            // An unfinished file from a crash: never published, never read.
            let _ = std::fs::remove_file(entry.path());
            continue;
        }
        let Some((seq, slot, kind)) = parse_published_name(name) else { continue };
        match read_header(&entry.path()) {
            Ok(h) if h.seq == seq && h.slot == slot && FileKind::of(&h) == kind => {
                files.insert(seq, Known { slot, oldest_seq: h.oldest_seq, kind });
                last_seq = last_seq.max(seq);
            }
            Ok(h) => invalid.push((
                seq,
                slot,
                kind,
                name.to_string(),
                format!("its header says sequence {} slot {} ({:?})", h.seq, h.slot, FileKind::of(&h)),
            )),
            Err(e) => invalid.push((seq, slot, kind, name.to_string(), e.to_string())),
        }
    }
    // A damaged or foreign name numbered above every valid file would share its number with the
    // next file published. It is set aside under a name no reader serves (its bytes kept for the
    // operator), so the number is free and no reader confuses the two. Lower ones can never
    // collide: they stay, reported by readers, and are pruned like any other file.
    let mut moved = false;
    for (seq, slot, kind, name, reason) in invalid {
        if seq > last_seq {
            let to = dir.join(format!("{name}{SET_ASIDE_SUFFIX}"));
            log::warn!("snapshot {name}: {reason}; set aside as {}", to.display());
            std::fs::rename(dir.join(&name), &to).map_err(|e| SnapshotError::io("set aside", dir.join(&name), e))?;
            moved = true;
        } else {
            log::warn!("snapshot {name}: {reason}; not served");
            files.entry(seq).or_insert(Known { slot, oldest_seq: u32::MAX, kind });
        }
    }
    if moved {
        sync_dir(dir)?;
    }
    Ok(Existing { files, last_seq })
}

/// A file's header, if the file is as long as its header says. Cheap (one small read): the
/// checksum is Hyades' to check.
fn read_header(path: &Path) -> Result<Header, SnapshotError> {
    use std::io::Read;
    let mut buf = [0u8; HEADER_LEN];
    let mut f = std::fs::File::open(path).map_err(|e| SnapshotError::io("open", path, e))?;
    let len = f.metadata().map_err(|e| SnapshotError::io("stat", path, e))?.len();
    f.read_exact(&mut buf).map_err(|e| SnapshotError::io("read", path, e))?;
    let h = Header::decode(&buf).map_err(|source| SnapshotError::Header { path: path.to_path_buf(), source })?;
    let expect = (HEADER_LEN as u64 + FOOTER_LEN as u64).checked_add(h.body_len);
    if expect != Some(len) {
        return Err(SnapshotError::corrupt(path, format!("size {len} does not match its header")));
    }
    Ok(h)
}

/// The newest slot file in `dir` whose header matches its name, if any: what a recovering
/// writer continues from; and the highest number of any valid file there (parts of a write that
/// failed included), which it numbers after. Both are found on disk rather than remembered,
/// because a failure after the rename (the directory sync) may have published a file the writer
/// counted as failed.
pub(super) fn newest_published(dir: &Path) -> Result<(Option<PathBuf>, u32), SnapshotError> {
    let existing = scan(dir)?;
    let newest = existing
        .files
        .iter()
        .rev()
        .find(|(_, k)| k.oldest_seq != u32::MAX && k.kind == FileKind::Slot)
        .map(|(seq, k)| dir.join(aldb_format::format::file_name(*seq, k.slot)));
    Ok((newest, existing.last_seq))
}
