//! Fork mode: each bank written against its parent's state (the tables moved between banks by
//! [`Banks`]), refused with a typed error when that state is not held; marks that release and
//! drop banks.

use std::sync::atomic::Ordering;
use std::time::Instant;

use aldb_format::SnapshotError;
use aldb_format::format::FileKind;
use aldb_format::status::{SlotStatusKind, StatusEntry, StatusJournal};

use super::Run;
use crate::forks::Banks;
use crate::serializer::SlotInput;
use crate::writer::prune::PruneMsg;
use crate::writer::scan::scan;
use crate::writer::{MAX_REFUSALS, Refusal, SlotMark};

impl Run {
    /// Fork mode: writes one bank against its parent's state, or refuses it.
    pub(super) fn write_fork(&mut self, input: SlotInput) {
        let slot = input.slot;
        let Some(mut banks) = self.forks.take() else { return };
        let t = Instant::now();
        let result = self.write_bank(&mut banks, &input, t);
        self.sync_banks(&banks);
        self.forks = Some(banks);
        match result {
            Ok(()) => self.recycle(input),
            Err(e) => self.refuse(slot, e, input),
        }
    }

    fn write_bank(&mut self, banks: &mut Banks, input: &SlotInput, t: Instant) -> Result<(), SnapshotError> {
        let slot = input.slot;
        if input.full {
            banks.clear();
            let p = match self.ser.write(input) {
                Ok(p) => p,
                Err(e) => {
                    self.ser.invalidate();
                    self.resume_tried = false;
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    return Err(e);
                }
            };
            banks.reset_to(slot, p.oldest_seq);
            self.sync_banks(banks);
            self.journal(&[StatusEntry {
                slot,
                kind: SlotStatusKind::Processed,
                parent: input.parent,
                seq: Some(p.seq),
            }]);
            self.published(p, t);
            return Ok(());
        }
        if !self.ser.started() {
            if self.resume_tried {
                return Err(SnapshotError::ParentNotWritten { slot, parent: input.parent });
            }
            if let Err(e) = self.resume(banks) {
                log::warn!("snapshot writer: cannot resume fork mode from the files on disk: {e}");
                self.ser.invalidate();
                return Err(SnapshotError::ParentNotWritten { slot, parent: input.parent });
            }
        }
        let parent = input.parent.ok_or(SnapshotError::ParentNotWritten { slot, parent: None })?;
        if banks.contains(slot) {
            // Frozen again (a repeated CreatedBank): the old version and its descendants go.
            let parent_of = banks.parent_of(slot);
            let dropped = banks.drop_subtree(&mut self.ser, slot)?;
            let entries: Vec<StatusEntry> = dropped
                .iter()
                .map(|&s| StatusEntry {
                    slot: s,
                    kind: SlotStatusKind::Abandoned,
                    parent: if s == slot { parent_of } else { None },
                    seq: None,
                })
                .collect();
            self.stats.fork_dropped.fetch_add(dropped.len() as u64, Ordering::Relaxed);
            self.sync_banks(banks);
            self.journal(&entries);
        }
        if !banks.contains(parent) {
            return Err(SnapshotError::ParentNotWritten { slot, parent: Some(parent) });
        }
        if banks.len() >= self.max_fork_banks || banks.held_bytes() >= self.max_fork_bytes {
            return Err(SnapshotError::TooManyBanks { slot, banks: banks.len(), bytes: banks.held_bytes() });
        }
        let moved = banks.switch(&mut self.ser, parent)?;
        self.moved(moved);
        self.ser.record();
        match self.ser.write(input) {
            Ok(p) => {
                let log = self.ser.finish_record();
                banks.insert(slot, parent, p.oldest_seq, log);
                self.sync_banks(banks);
                self.journal(&[StatusEntry {
                    slot,
                    kind: SlotStatusKind::Processed,
                    parent: Some(parent),
                    seq: Some(p.seq),
                }]);
                self.published(p, t);
                Ok(())
            }
            Err(e) => {
                // The tables go back to the parent's state; this bank and its descendants are
                // refused, other forks go on.
                self.ser.abort_record();
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                Err(e)
            }
        }
    }

    /// Fork mode after a start (or after losing the tables): rebuilds them from the files on
    /// disk, at the newest finalized slot the journal names whose file is present, else at the
    /// newest file (a directory written as a single chain). That bank becomes the base.
    fn resume(&mut self, banks: &mut Banks) -> Result<(), SnapshotError> {
        self.resume_tried = true;
        let existing = scan(&self.dir)?;
        self.ser.continue_after(existing.last_seq);
        let valid = |slot: Option<u64>| {
            existing
                .files
                .iter()
                .rev()
                .find(|(_, k)| k.oldest_seq != u32::MAX && k.kind == FileKind::Slot && slot.is_none_or(|s| k.slot == s))
                .map(|(seq, k)| (*seq, k.slot, k.oldest_seq))
        };
        let finalized = StatusJournal::read(&self.dir).ok().and_then(|st| st.newest_finalized());
        let Some((seq, slot, oldest)) = finalized.and_then(|f| valid(Some(f))).or_else(|| valid(None)) else {
            return Err(SnapshotError::Input("no published file to resume from".into()));
        };
        self.ser.recover(&self.dir.join(aldb_format::format::file_name(seq, slot)))?;
        banks.reset_to(slot, oldest);
        self.sync_banks(banks);
        log::info!("snapshot writer: fork mode resumes from slot {slot} (file {seq})");
        Ok(())
    }

    /// Notes what the held banks changed: the pin the serializer and the pruner keep files
    /// from, the base the journal is compacted to, the gauges.
    fn sync_banks(&mut self, b: &Banks) {
        self.fork_pin = b.pin();
        self.fork_base = b.base();
        if let Some(pin) = self.fork_pin {
            self.ser.keep_files_from(pin);
        }
        self.stats.fork_banks.store(b.len() as u64, Ordering::Relaxed);
        self.stats.fork_held_bytes.store(b.held_bytes() as u64, Ordering::Relaxed);
    }

    fn moved(&self, m: crate::forks::Moved) {
        if m.rolled_back + m.reapplied > 0 {
            self.stats.fork_switches.fetch_add(1, Ordering::Relaxed);
            self.stats.fork_rolled_back.fetch_add(m.rolled_back, Ordering::Relaxed);
            self.stats.fork_reapplied.fetch_add(m.reapplied, Ordering::Relaxed);
        }
    }

    /// Reports a refused bank, with its input when the caller asked for it back, else empties
    /// the input for reuse.
    fn refuse(&mut self, slot: u64, error: SnapshotError, input: SlotInput) {
        log::warn!("snapshot writer: {error}");
        self.stats.fork_refused.fetch_add(1, Ordering::Relaxed);
        let (input, spare) = if self.return_refused { (Some(input), None) } else { (None, Some(input)) };
        if let Ok(mut r) = self.out.refused.lock() {
            if r.len() >= MAX_REFUSALS {
                r.pop_front();
            }
            r.push_back(Refusal { slot, error, input });
        }
        if let Some(input) = spare {
            self.recycle(input);
        }
    }

    /// A status mark: in fork mode releases or drops banks; always journaled, with what it
    /// implied (ancestors finalized with the slot, banks dropped).
    pub(super) fn mark(&mut self, slot: u64, mark: SlotMark) {
        let entry = |slot, kind, parent| StatusEntry { slot, kind, parent, seq: None };
        let mut entries = Vec::new();
        let parent = self.forks.as_ref().and_then(|b| b.parent_of(slot));
        match (mark, self.forks.as_mut()) {
            (SlotMark::Confirmed, _) => entries.push(entry(slot, SlotStatusKind::Confirmed, parent)),
            (SlotMark::Finalized, None) => entries.push(entry(slot, SlotStatusKind::Finalized, None)),
            (SlotMark::Abandoned, None) => entries.push(entry(slot, SlotStatusKind::Abandoned, None)),
            (SlotMark::Finalized, Some(banks)) => match banks.finalize(&mut self.ser, slot) {
                Ok(f) => {
                    let f = f.unwrap_or_default();
                    entries.extend(f.ancestors.iter().map(|&s| entry(s, SlotStatusKind::Finalized, None)));
                    entries.push(entry(slot, SlotStatusKind::Finalized, parent));
                    entries.extend(f.abandoned.iter().map(|&s| entry(s, SlotStatusKind::Abandoned, None)));
                    self.stats.fork_dropped.fetch_add(f.abandoned.len() as u64, Ordering::Relaxed);
                }
                Err(e) => {
                    log::error!("snapshot writer: finalizing slot {slot}: {e}");
                    entries.push(entry(slot, SlotStatusKind::Finalized, parent));
                }
            },
            (SlotMark::Abandoned, Some(banks)) => match banks.drop_subtree(&mut self.ser, slot) {
                Ok(dropped) => {
                    self.stats.fork_dropped.fetch_add(dropped.len() as u64, Ordering::Relaxed);
                    if dropped.first() != Some(&slot) {
                        entries.push(entry(slot, SlotStatusKind::Abandoned, parent));
                    }
                    entries.extend(dropped.iter().map(|&s| entry(s, SlotStatusKind::Abandoned, None)));
                    if let Some(e) = entries.first_mut() {
                        e.parent = parent;
                    }
                }
                Err(e) => log::warn!("snapshot writer: slot {slot} marked abandoned: {e}"),
            },
        }
        if let Some(b) = self.forks.take() {
            self.sync_banks(&b);
            self.forks = Some(b);
            let _ = self.out.pruner.send(PruneMsg::Pin(self.fork_pin));
        }
        self.journal(&entries);
    }
}
