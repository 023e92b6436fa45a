//! The commit worker: applies decided slots to the engine, makes each commit's root record and
//! hands the commit to the snapshot writer, on a thread of its own so no validator callback ever
//! waits for hashing or disk.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use aldb_core::AccountRef;
use aldb_snapshot::{AccountBatch, SlotInput, SlotMark, SnapshotError, SnapshotWriter, SpilledAccounts};
use geyser_adapter::{AccountRecord, Adapter, CommitKind, Committed, KeepAccounts, StatusChange, StatusKind};

use crate::metrics::PluginCounters;
use crate::panic_message;
use crate::records::Records;

/// How long the worker sleeps when nothing was decided. `commit_ready` also finds work no status
/// announces (replayed slots linked by their SlotHashes writes), so the wait must stay short.
const WAIT: Duration = Duration::from_millis(50);

/// A running commit worker.
pub(crate) struct Worker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), String>>>,
}

impl Worker {
    /// Starts the worker; it owns the writer and the record producer from now on.
    pub(crate) fn spawn(
        adapter: Arc<Adapter<KeepAccounts>>,
        writer: SnapshotWriter,
        records: Option<Records>,
        counters: Arc<PluginCounters>,
    ) -> std::io::Result<Self> {
        // Startup accounts stream to disk (before any arrives: this runs in `on_load`); without
        // a spill they are held in memory until the end of startup, as before.
        match writer.startup_spill(aldb_snapshot::DEFAULT_SPILL_BITS) {
            Ok(spill) => {
                if let Err(e) = adapter.spill_startup(spill) {
                    log::warn!("aldb-plugin: startup accounts will be held in memory: {e}");
                }
            }
            Err(e) => log::warn!("aldb-plugin: no startup spill, startup accounts will be held in memory: {e}"),
        }
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("aldb-commit".into())
                .spawn(move || run(&adapter, writer, records, &counters, &stop))?
        };
        Ok(Self { stop, thread: Some(thread) })
    }

    /// Commits what is ready, stops, waits for every submitted slot to be written and shuts the
    /// writer down. Returns the writer's error, if it had one.
    pub(crate) fn stop(mut self) -> Result<(), String> {
        self.stop.store(true, Ordering::Release);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r,
            Some(Err(payload)) => Err(format!("commit worker panicked: {}", panic_message(payload.as_ref()))),
            None => Ok(()),
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        // Not stopped explicitly (an error path): still stop the thread rather than leak it.
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    adapter: &Adapter<KeepAccounts>,
    writer: SnapshotWriter,
    mut records: Option<Records>,
    counters: &PluginCounters,
    stop: &AtomicBool,
) -> Result<(), String> {
    counters.worker_running.store(true, Ordering::Relaxed);
    counters.records_enabled.store(records.as_ref().is_some_and(Records::enabled), Ordering::Relaxed);
    let mut sink = Sink { writer, counters, started: false, failed: false, spare: None };
    loop {
        // Read before the last round, so commits decided before `stop` was set are still written.
        let stopping = stop.load(Ordering::Acquire);
        let step = catch_unwind(AssertUnwindSafe(|| {
            if !stopping {
                adapter.wait_for_work(WAIT);
            }
            let t = Instant::now();
            let batch = adapter.commit_ready();
            if !batch.is_empty() {
                counters.commit_latency.observe(t.elapsed());
            }
            for c in batch {
                counters.commit_lag.committed(c.slot);
                if let Some(r) = records.as_mut() {
                    r.record(&c, counters);
                }
                // The base commit ends startup: a streamed startup state's accounts are in the
                // spill (a genesis start leaves it empty, and dropping it removes it).
                let spill = match c.kind {
                    CommitKind::Startup => adapter.take_startup_spill(),
                    CommitKind::Genesis => {
                        // Nothing came at startup: the empty spill is removed as it is dropped.
                        drop(adapter.take_startup_spill());
                        None
                    }
                    CommitKind::Slot => None,
                };
                sink.submit(c, spill);
                // The writer hands back the change sets and account batches it has written; the
                // next commits fill them rather than fresh allocations.
                if let Some((changes, accounts)) = sink.writer.take_spare() {
                    adapter.recycle_changes(changes);
                    sink.keep_spare(accounts);
                }
            }
            // `commitment: "processed"`: what became of frozen banks, after the freezes above (a
            // call stops before a freeze that follows a change, so the order is exact).
            for ch in adapter.take_status_changes() {
                if let Some(r) = records.as_mut() {
                    r.status(&ch, counters);
                }
                sink.mark(&ch);
            }
            sink.note_refused();
            // Slots rooted since the last round get their finalized records.
            if let Some(r) = records.as_mut() {
                r.tick(counters);
            }
        }));
        if let Err(payload) = step {
            // The engine may be half-way through a commit: committing on from there could publish
            // a wrong root, so stop committing (callbacks go on; the pending bound caps memory).
            counters.worker_panics.fetch_add(1, Ordering::Relaxed);
            log::error!(
                "aldb-plugin commit worker panicked, no more slots will be committed until restart: {}",
                panic_message(payload.as_ref())
            );
            break;
        }
        if stopping {
            break;
        }
    }
    counters.worker_running.store(false, Ordering::Relaxed);
    sink.finish()
}

/// Hands commits to the snapshot writer.
struct Sink<'a> {
    writer: SnapshotWriter,
    counters: &'a PluginCounters,
    /// Whether a full snapshot went in: the writer refuses deltas before one.
    started: bool,
    /// Whether snapshots stopped for good (the writer stopped, or a commit came without a change set).
    failed: bool,
    /// A batch the writer is done with, for the next slot's accounts.
    spare: Option<AccountBatch>,
}

/// A spare batch holding more than this is dropped, not kept: the startup state's batch of every
/// account would otherwise stay allocated for the rest of the run.
const MAX_SPARE_BATCH_BYTES: usize = 64 << 20;

impl Sink<'_> {
    /// Hands a commit to the writer; `spill` holds a streamed startup state's accounts.
    fn submit(&mut self, c: Committed<AccountRecord>, spill: Option<Result<SpilledAccounts, SnapshotError>>) {
        // The base commit (genesis slot 0, or the startup state) is the whole state: its change
        // set covers the whole tree (genesis is committed onto an empty tree; the startup state
        // comes with `capture_all`) and its records are every live account. It is the only commit
        // a full snapshot can be made from, since nothing here keeps the accounts of later slots
        // that did not change.
        let full = matches!(c.kind, CommitKind::Genesis | CommitKind::Startup);
        if full {
            log::info!(
                "aldb-plugin: base state committed at slot {} ({:?}, {} accounts), root {}",
                c.slot,
                c.kind,
                c.updates,
                hex(&c.root)
            );
        } else {
            log::debug!(
                "aldb-plugin: slot {} committed ({} accounts written), root {}",
                c.slot,
                c.updates,
                hex(&c.root)
            );
        }
        if self.failed {
            self.skip();
            return;
        }
        if !full && !self.started {
            // Only possible if the base commit was lost (it is always the first commit).
            log::error!("aldb-plugin: slot {} committed before any base state; snapshots cannot start", c.slot);
            self.skip();
            return;
        }
        let Some(changes) = c.changes else {
            log::error!("aldb-plugin: slot {} came without a change set; snapshots stop", c.slot);
            self.failed = true;
            self.skip();
            return;
        };
        let accounts = match spill {
            // A streamed startup state: the writer reads its accounts back from the spill.
            Some(Ok(spill)) => AccountBatch::from_spill(spill),
            Some(Err(e)) => {
                log::error!("aldb-plugin: the startup spill failed, no full snapshot at slot {}: {e}", c.slot);
                self.failed = true;
                self.skip();
                return;
            }
            // The base state is far larger than a slot: it gets a batch of its own size.
            None => batch(c.records, full, if full { None } else { self.spare.take() }),
        };
        let input = SlotInput { slot: c.slot, parent: c.parent, root: c.root, changes, accounts, full };
        let t = Instant::now();
        let result = self.writer.submit(input);
        self.counters.submit_latency.observe(t.elapsed());
        match result {
            Ok(()) => {
                self.started |= full;
                self.counters.snapshot_submitted.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                // A failing writer holds slots and retries by itself; it refuses them only once
                // stopped for good (see `SnapshotWriter`). Roots are still committed and counted.
                log::error!("aldb-plugin: snapshots stopped at slot {} until restart: {e}", c.slot);
                self.failed = true;
                self.skip();
            }
        }
    }

    /// Hands a frozen bank's status change to the writer, which journals it beside the files
    /// (and, on forks, releases or drops the bank's tables).
    fn mark(&mut self, ch: &StatusChange) {
        if self.failed || !self.started {
            return;
        }
        let mark = match ch.kind {
            StatusKind::Confirmed => SlotMark::Confirmed,
            StatusKind::Finalized => SlotMark::Finalized,
            StatusKind::Abandoned => SlotMark::Abandoned,
        };
        if ch.kind == StatusKind::Abandoned {
            log::debug!("aldb-plugin: slot {} abandoned, root {}", ch.slot, hex(&ch.root));
        }
        if let Err(e) = self.writer.mark(ch.slot, mark) {
            log::error!(
                "aldb-plugin: snapshots stopped at the {} mark of slot {} until restart: {e}",
                ch.kind.as_str(),
                ch.slot
            );
            self.failed = true;
        }
    }

    /// Logs the banks the fork-mode writer refused (counted in its own stats): their roots
    /// stand, but their files and those of their descendants are not served.
    fn note_refused(&self) {
        for r in self.writer.take_refused() {
            log::warn!("aldb-plugin: snapshot of slot {} not written: {}", r.slot, r.error);
        }
    }

    fn keep_spare(&mut self, b: AccountBatch) {
        if b.heap_bytes() <= MAX_SPARE_BATCH_BYTES {
            self.spare = Some(b);
        }
    }

    fn skip(&self) {
        self.counters.snapshot_skipped.fetch_add(1, Ordering::Relaxed);
    }

    fn finish(self) -> Result<(), String> {
        let flushed = self.writer.flush();
        let shut = self.writer.shutdown();
        flushed.and(shut).map_err(|e| e.to_string())
    }
}

/// The records as the writer's account batch, data copied once into one buffer (`spare`'s, when
/// given, emptied first). Each record is freed as it is copied, so a large startup state is not
/// held twice. A full snapshot holds live accounts only; a delta keeps deletions too (the writer
/// writes no record for them).
fn batch(records: Vec<AccountRecord>, full: bool, spare: Option<AccountBatch>) -> AccountBatch {
    let data: usize = records.iter().map(|r| r.data.len()).sum();
    let mut b = match spare {
        Some(mut b) => {
            b.clear();
            b.reserve(records.len(), data);
            b
        }
        None => AccountBatch::with_capacity(records.len(), data),
    };
    for r in records {
        if full && r.lamports == 0 {
            continue;
        }
        let a = AccountRef {
            pubkey: &r.pubkey,
            lamports: r.lamports,
            owner: &r.owner,
            executable: r.executable,
            data: &r.data,
        };
        b.push(r.hashed.path, &a);
    }
    b
}

fn hex(h: &[u8; 32]) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(i: u8, lamports: u64, data_len: usize) -> AccountRecord {
        AccountRecord {
            slot: 5,
            pubkey: [i; 32],
            lamports,
            owner: [7; 32],
            executable: i.is_multiple_of(2),
            data: vec![i; data_len],
            write_version: u64::from(i),
            hashed: aldb_core::Update { path: [i.wrapping_add(1); 32], value: (lamports > 0).then_some([i; 32]) },
        }
    }

    /// A batch refilled from a spare that still holds an earlier slot is the same as a new one,
    /// and a full batch leaves deleted accounts out.
    #[test]
    fn batches_from_spares_equal_fresh_ones() {
        let slot =
            |base: u8| (0..40u8).map(|i| record(base + i, u64::from(i % 5), usize::from(i) * 3)).collect::<Vec<_>>();
        let dirty = batch(slot(100), false, None);
        let fresh = batch(slot(0), false, None);
        let reused = batch(slot(0), false, Some(dirty));
        assert_eq!(reused, fresh);
        assert_eq!(fresh.len(), 40);
        assert_eq!(batch(slot(0), true, None).len(), 32, "the 8 with zero lamports are left out");
    }
}
