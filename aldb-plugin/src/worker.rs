//! The commit worker: applies decided slots to the engine and turns each commit and each status
//! change into the node pipeline's input ([`aldb_node`]: snapshot files, root records, the
//! slot-status journal), on a thread of its own so no validator callback ever waits for hashing
//! or disk.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use aldb_core::AccountRef;
use aldb_node::{BankRecord, NodeStats, Records, Snapshots, Spares, StartupAccounts};
use aldb_snapshot::{AccountBatch, SlotInput, SlotMark, SnapshotError, SpilledAccounts};
use aldb_verify::Commitment;
use geyser_adapter::{AccountRecord, Adapter, CommitKind, Committed, KeepAccounts, StatusChange, StatusKind};

use crate::error::StopError;
use crate::metrics::PluginCounters;

/// How long the worker sleeps when nothing was decided. `commit_ready` also finds work no status
/// announces (replayed slots linked by their SlotHashes writes), so the wait must stay short.
const WAIT: Duration = Duration::from_millis(50);

/// What a panic on the worker logs: it stops committing.
const STOPPING: &str = "aldb-plugin commit worker panicked, no more slots will be committed until restart";

/// The pipeline the worker feeds.
pub(crate) struct Pipeline {
    pub(crate) snapshots: Snapshots,
    pub(crate) records: Option<Records>,
    /// The buffers the writer is done with (shared with `snapshots`).
    pub(crate) spares: Arc<Spares>,
    /// The startup spill the adapter streams startup accounts into, when one could be made.
    pub(crate) spill: Option<Arc<StartupAccounts>>,
}

impl Pipeline {
    /// Streams startup accounts into a spill in the snapshot directory (before any arrives:
    /// this runs in `on_load`); without one they are held in memory until the end of startup.
    pub(crate) fn spill_startup(&mut self, adapter: &Adapter<KeepAccounts>) {
        match StartupAccounts::create(&self.snapshots) {
            Ok(accounts) => {
                let accounts = Arc::new(accounts);
                match adapter.spill_startup(Arc::new(SpillFeed(accounts.clone()))) {
                    Ok(()) => self.spill = Some(accounts),
                    Err(e) => log::warn!("aldb-plugin: startup accounts will be held in memory: {e}"),
                }
            }
            Err(e) => log::warn!("aldb-plugin: no startup spill, startup accounts will be held in memory: {e}"),
        }
    }

    /// The startup spill, finished, once the adapter no longer hands it accounts.
    fn finished_spill(&self, adapter: &Adapter<KeepAccounts>) -> Option<Result<SpilledAccounts, SnapshotError>> {
        adapter.take_startup_sink()?;
        self.spill.as_ref()?.finish()
    }
}

/// The adapter's handle on the pipeline's startup spill.
struct SpillFeed(Arc<StartupAccounts>);

impl geyser_adapter::StartupSink for SpillFeed {
    fn append(&self, path: &[u8; 32], rank: (u64, u64), account: &AccountRef<'_>) {
        self.0.append(path, rank, account);
    }
}

/// A running commit worker.
pub(crate) struct Worker {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<(), aldb_node::NodeError>>>,
}

impl Worker {
    /// Starts the worker; it owns the pipeline from now on.
    pub(crate) fn spawn(
        adapter: Arc<Adapter<KeepAccounts>>,
        pipeline: Pipeline,
        counters: Arc<PluginCounters>,
    ) -> std::io::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name("aldb-commit".into())
                .spawn(move || run(&adapter, pipeline, &counters, &stop))?
        };
        Ok(Self { stop, thread: Some(thread) })
    }

    /// Commits what is ready, stops, waits for every submitted slot to be written and shuts the
    /// writer down. Returns the writer's error, if it had one.
    pub(crate) fn stop(mut self) -> Result<(), StopError> {
        self.stop.store(true, Ordering::Release);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(r)) => r.map_err(StopError::from),
            Some(Err(payload)) => Err(StopError::Panicked(aldb_node::panic::panic_message(payload.as_ref()))),
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
    mut pipeline: Pipeline,
    counters: &PluginCounters,
    stop: &AtomicBool,
) -> Result<(), aldb_node::NodeError> {
    let node: &NodeStats = &counters.node;
    node.running.store(1, Ordering::Relaxed);
    node.records_enabled.store(pipeline.records.as_ref().is_some_and(Records::enabled), Ordering::Relaxed);
    // A batch the writer is done with, for the next slot's accounts.
    let mut spare: Option<AccountBatch> = None;
    loop {
        // Read before the last round, so commits decided before `stop` was set are still written.
        let stopping = stop.load(Ordering::Acquire);
        let step = aldb_node::panic::step(node, STOPPING, || {
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
                if let Some(r) = pipeline.records.as_mut() {
                    r.committed(&bank_record(c.slot, c.parent, c.root, c.block, c.parent_bank_hash), node);
                }
                // The base commit ends startup: a streamed startup state's accounts are in the
                // spill (a genesis start leaves it empty, and dropping it removes it).
                let spill = match c.kind {
                    CommitKind::Startup => pipeline.finished_spill(adapter),
                    CommitKind::Genesis => {
                        // Nothing came at startup: the empty spill is removed as it is dropped.
                        drop(pipeline.finished_spill(adapter));
                        None
                    }
                    CommitKind::Slot => None,
                };
                submit(&mut pipeline.snapshots, c, spill, &mut spare);
                // The writer hands back the change sets and account batches it has written; the
                // next commits fill them rather than fresh allocations.
                pipeline.snapshots.collect();
                if let Some((changes, accounts)) = pipeline.spares.take() {
                    adapter.recycle_changes(changes);
                    spare = Some(accounts);
                }
            }
            // `commitment: "processed"`: what became of frozen banks, after the freezes above (a
            // call stops before a freeze that follows a change, so the order is exact).
            for ch in adapter.take_status_changes() {
                status(&mut pipeline, &ch, node);
            }
            pipeline.snapshots.collect();
            // Slots rooted since the last round get their finalized records.
            if let Some(r) = pipeline.records.as_mut() {
                r.tick(node);
            }
        });
        if step.is_err() || stopping {
            // After a panic the engine may be half-way through a commit: committing on from there
            // could publish a wrong root, so stop committing (callbacks go on; the pending bound
            // caps memory).
            break;
        }
    }
    node.running.store(0, Ordering::Relaxed);
    pipeline.snapshots.finish()
}

fn bank_record(
    slot: u64,
    parent: Option<u64>,
    root: [u8; 32],
    block: Option<geyser_adapter::BlockInfo>,
    parent_bank_hash: Option<[u8; 32]>,
) -> BankRecord {
    BankRecord { slot, parent, root, block, parent_bank_hash }
}

/// A frozen bank's status change (`commitment: "processed"`): its record at the level it
/// reached (none for an abandoned bank), and the mark in the slot-status journal.
fn status(pipeline: &mut Pipeline, ch: &StatusChange, node: &NodeStats) {
    let bank = bank_record(ch.slot, ch.parent, ch.root, ch.block, ch.parent_bank_hash);
    let (level, mark) = match ch.kind {
        StatusKind::Confirmed => (Some(Commitment::Confirmed), SlotMark::Confirmed),
        StatusKind::Finalized => (Some(Commitment::Finalized), SlotMark::Finalized),
        StatusKind::Abandoned => {
            log::debug!("aldb-plugin: slot {} abandoned, root {}", ch.slot, hex(&ch.root));
            (None, SlotMark::Abandoned)
        }
    };
    if let (Some(r), Some(level)) = (pipeline.records.as_mut(), level) {
        r.reached(&bank, level, node);
    }
    pipeline.snapshots.mark(ch.slot, mark);
}

/// Hands a commit to the pipeline's writer; `spill` holds a streamed startup state's accounts.
fn submit(
    snapshots: &mut Snapshots,
    c: Committed<AccountRecord>,
    spill: Option<Result<SpilledAccounts, SnapshotError>>,
    spare: &mut Option<AccountBatch>,
) {
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
        log::debug!("aldb-plugin: slot {} committed ({} accounts written), root {}", c.slot, c.updates, hex(&c.root));
    }
    if !snapshots.ready(c.slot, full) {
        return;
    }
    let Some(changes) = c.changes else {
        snapshots.stop(&format!("slot {} came without a change set; snapshots stop", c.slot));
        return;
    };
    let accounts = match spill {
        // A streamed startup state: the writer reads its accounts back from the spill.
        Some(Ok(spill)) => AccountBatch::from_spill(spill),
        Some(Err(e)) => {
            snapshots.stop(&format!("the startup spill failed, no full snapshot at slot {}: {e}", c.slot));
            return;
        }
        // The base state is far larger than a slot: it gets a batch of its own size.
        None => batch(c.records, full, if full { None } else { spare.take() }),
    };
    snapshots.write(SlotInput { slot: c.slot, parent: c.parent, root: c.root, changes, accounts, full });
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
