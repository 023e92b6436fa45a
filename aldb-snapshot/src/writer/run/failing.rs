//! A writer that failed to write: it holds the slots that follow, merged, and retries with
//! backoff until it can write them as one file after a gap, or gives up past its memory bound.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use aldb_format::{SnapshotError, WriterStop};

use super::Run;
use crate::serializer::SlotInput;
use crate::writer::pending::Pending;
use crate::writer::scan::newest_published;

/// First wait before a failed writer retries; doubles per failed retry up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
/// Longest wait between retries of a failed writer.
const RETRY_MAX: Duration = Duration::from_secs(60);

/// A writer that failed: what it holds until it can write again.
pub(super) struct Failing {
    /// The slot that failed and every slot since, merged.
    merged: Pending,
    /// The newest slot published before the failure.
    gap_after: Option<u64>,
    /// Account bytes held when the failure began (a failed full state is held whole).
    base_bytes: usize,
    pub(super) next_try: Instant,
    backoff: Duration,
}

impl Run {
    /// Starts failing after `e`: holds `input` (merged with the slots that follow) and retries
    /// after [`RETRY_FIRST`].
    pub(super) fn start_failing(&mut self, input: SlotInput, e: SnapshotError) {
        log::error!("snapshot writer: slot {} not written, holding slots and retrying: {e}", input.slot);
        self.stats.errors.fetch_add(1, Ordering::Relaxed);
        self.stats.failing.store(1, Ordering::Relaxed);
        self.set_failure(Some(WriterStop::Failed(Arc::new(e))));
        self.ser.invalidate();
        let mut merged = Pending::default();
        merged.add(input);
        let base_bytes = merged.account_bytes();
        self.failing = Some(Failing {
            merged,
            gap_after: self.last_published,
            base_bytes,
            next_try: Instant::now() + RETRY_FIRST,
            backoff: RETRY_FIRST,
        });
    }

    /// Holds one more slot while failing, within the memory bound.
    pub(super) fn hold(&mut self, input: SlotInput) {
        let Some(f) = self.failing.as_mut() else { return };
        f.merged.add(input);
        let limit = f.base_bytes.saturating_add(self.max_recovery_bytes);
        if f.merged.account_bytes() > limit {
            f.merged.compact();
        }
        let held = f.merged.account_bytes();
        if held > limit {
            let reason =
                WriterStop::OverBound { held, gap_after: f.gap_after, max_recovery_bytes: self.max_recovery_bytes };
            log::error!("{reason}");
            self.set_failure(Some(reason));
            self.stop_for_good();
        }
    }

    fn stop_for_good(&mut self) {
        self.failing = None;
        self.stopped = true;
        self.stats.stopped.store(1, Ordering::Relaxed);
    }

    /// Tries to write what a failing writer holds: rebuilds the tables from the newest file on
    /// disk unless what is held is a full state, then writes it as one file marked with the gap.
    pub(super) fn retry(&mut self) {
        let Some(mut f) = self.failing.take() else { return };
        let merged_slots = f.merged.count;
        let input = f.merged.take();
        let t = Instant::now();
        let attempt = (|| {
            let (newest, last_seq) = newest_published(&self.dir)?;
            self.ser.continue_after(last_seq);
            if !input.full {
                match newest {
                    Some(path) => self.ser.recover(&path)?,
                    None => {
                        return Err(SnapshotError::Input(
                            "no published file to continue from and no full state held".into(),
                        ));
                    }
                }
            }
            self.ser.mark_gap(f.gap_after);
            self.ser.write(&input)
        })();
        match attempt {
            Ok(p) => {
                log::warn!(
                    "snapshot writer recovered: slot {} published after a gap of {} unwritten slots since {}",
                    p.slot,
                    merged_slots - 1,
                    f.gap_after.map_or("start".to_string(), |s| s.to_string())
                );
                self.stats.gap_slots.fetch_add(merged_slots - 1, Ordering::Relaxed);
                self.stats.recoveries.fetch_add(1, Ordering::Relaxed);
                self.stats.failing.store(0, Ordering::Relaxed);
                self.set_failure(None);
                self.published(p, t);
            }
            Err(e) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                self.ser.invalidate();
                f.backoff = (f.backoff * 2).min(RETRY_MAX);
                log::error!("snapshot writer: retry failed, next in {:?}: {e}", f.backoff);
                self.set_failure(Some(WriterStop::Failed(Arc::new(e))));
                f.next_try = Instant::now() + f.backoff;
                f.merged.add(input);
                // Still every slot since the failure, not the one merged input.
                f.merged.count = merged_slots;
                self.failing = Some(f);
            }
        }
    }
}
