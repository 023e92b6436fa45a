//! The pruner: its own thread, deleting the files no kept slot can reach.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc::Receiver;

use aldb_format::format::{FileKind, published_name};

use super::WriterStats;
use super::scan::Known;
use crate::file_builder::sync_dir;
use crate::serializer::Published;

/// What the pruner hears from the writer.
pub(super) enum PruneMsg {
    /// A file was published. `newest`: the newest slot published (the keep window ends there);
    /// `pin`: in fork mode, the oldest file a held bank may reach.
    Published { p: Published, newest: u64, pin: Option<u32> },
    /// Fork mode: the held banks changed (a mark), so the pin may have moved.
    Pin(Option<u32>),
}

/// The lowest sequence number the archive may still lack: nothing at or above it may be deleted.
/// No hold file yet, or one that cannot be read, holds everything (a warning says why).
fn shipped_below(dir: &Path) -> u32 {
    match aldb_format::shipped::read_shipped(dir) {
        Ok(Some(seq)) => u32::try_from(seq).unwrap_or(u32::MAX),
        Ok(None) => 0,
        Err(e) => {
            log::warn!("retention held for the shipper: {e}");
            0
        }
    }
}

/// Deletes files no kept slot can reach: everything older than the oldest file a kept slot's
/// records may point into.
pub(super) fn prune(
    dir: PathBuf,
    keep: u64,
    hold_for_shipper: bool,
    mut files: BTreeMap<u32, Known>,
    rx: Receiver<PruneMsg>,
    stats: Arc<WriterStats>,
) {
    let mut newest = None;
    for msg in rx {
        let pin = match msg {
            PruneMsg::Published { p, newest: n, pin } => {
                let (slot, oldest_seq) = (p.slot, p.oldest_seq);
                for seq in p.first_seq..p.seq {
                    files.insert(seq, Known { slot, oldest_seq, kind: FileKind::Part });
                }
                files.insert(p.seq, Known { slot, oldest_seq, kind: FileKind::Slot });
                newest = Some((n, p.oldest_seq));
                pin
            }
            PruneMsg::Pin(pin) => pin,
        };
        let Some((newest, last_oldest)) = newest else { continue };
        // Kept: the slots of the keep window, and in fork mode every bank the writer holds
        // (files above the oldest one a held bank reaches are never deleted). Parts are not
        // slots: they are kept by the slot files that reach them, and a part left by a write
        // that failed is deleted once it falls below every kept slot's oldest file.
        let min_oldest = files
            .values()
            .filter(|k| k.kind == FileKind::Slot && newest.saturating_sub(k.slot) < keep)
            .map(|k| k.oldest_seq)
            .chain(pin)
            .min()
            .unwrap_or(last_oldest);
        let min_oldest = if hold_for_shipper { min_oldest.min(shipped_below(&dir)) } else { min_oldest };
        let doomed: Vec<(u32, Known)> = files.range(..min_oldest).map(|(seq, k)| (*seq, *k)).collect();
        if doomed.is_empty() {
            continue;
        }
        for (seq, k) in doomed {
            let path = dir.join(published_name(seq, k.slot, k.kind));
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    stats.pruned_files.fetch_add(1, Ordering::Relaxed);
                    files.remove(&seq);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    files.remove(&seq);
                }
                Err(e) => log::warn!("cannot prune {}: {e}", path.display()),
            }
        }
        if let Err(e) = sync_dir(&dir) {
            log::warn!("{e}");
        }
    }
}
