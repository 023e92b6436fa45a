//! The slot-status journal as the writer keeps it: appended after each published bank and mark,
//! compacted once it has doubled (`docs/FORMAT.md`, "Slot-status journal").

use std::sync::atomic::Ordering;

use aldb_format::status::{StatusEntry, StatusJournal};

use super::Run;

impl Run {
    /// Appends to the slot-status journal, opening it on first use. A failure is logged and
    /// counted, never fatal: the snapshot files stay correct without it.
    pub(super) fn journal(&mut self, entries: &[StatusEntry]) {
        if entries.is_empty() {
            return;
        }
        let result = match self.journal.as_mut() {
            Some(j) => j.append(entries),
            None => StatusJournal::open(&self.dir).and_then(|mut j| {
                let r = j.append(entries);
                self.journal = Some(j);
                r
            }),
        };
        if let Err(e) = result {
            log::error!("slot-status journal: {e}");
            self.stats.journal_errors.fetch_add(1, Ordering::Relaxed);
            // Reopened (and its torn tail cut) on the next append.
            self.journal = None;
        }
        self.compact_journal();
    }

    /// Drops the journal entries of slots below every kept one, once the file has doubled since
    /// the last compaction.
    fn compact_journal(&mut self) {
        let Some(j) = self.journal.as_mut() else { return };
        if j.entries() < 2 * self.journal_kept + 1024 {
            return;
        }
        let window = self.newest.map_or(0, |n| n.saturating_sub(self.keep_slots - 1));
        let keep_from = match self.fork_base {
            Some(base) => window.min(base),
            None => window,
        };
        match j.compact(keep_from) {
            Ok(_) => self.journal_kept = j.entries(),
            Err(e) => {
                log::error!("slot-status journal: compaction failed: {e}");
                self.stats.journal_errors.fetch_add(1, Ordering::Relaxed);
                self.journal = None;
            }
        }
    }
}
