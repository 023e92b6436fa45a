//! The adapter: the callback-facing entry points and where each lock sits.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use aldb_core::{BulkEntry, ForkLimits, Pleiades, Update};

use crate::control::{Control, Cx, Shared};
use crate::engine::{Applied, CommitKind, Committed, Engine};
use crate::error::{AdapterError, IgnoreReason, Ignored};
use crate::retain::{NoRecords, Retain};
use crate::startup::{STARTUP_BATCH, StartupSink, StartupStream};
use crate::stats::{Counters, Stats};
use crate::status::StatusChange;
use crate::stripe::{Buffer, Incoming, Stripes, lock};
use crate::sysvar::{SLOT_HASHES_SYSVAR, slot_hashes_newest};
use crate::types::{AccountUpdate, AdapterConfig, Commitment, SlotEvent};

/// Status changes kept for [`Adapter::take_status_changes`] at most; past that the oldest are
/// dropped and counted. A worker that takes them every round holds a handful.
pub const MAX_STATUS_CHANGES: usize = 1 << 16;

/// The slot and fork state machine between the validator's callbacks and the engine.
///
/// All methods take `&self` and the adapter is `Sync`: share it (for example in an `Arc`)
/// between the validator's callback threads and one commit worker. Three kinds of lock, only
/// ever nested in the order engine, state machine, stripe:
///
/// - [`update_account`](Self::update_account) hashes with no lock held, then holds one of
///   [`AdapterConfig::stripes`] stripe locks for a hash-map insert. It never waits for the state
///   machine or the engine. A startup account may also take, under the stripe lock, a spill
///   partition's lock and the bulk builder's (`docs/ADAPTER.md` §3, "Streaming startup").
/// - [`update_slot_status`](Self::update_slot_status) and [`end_of_startup`](Self::end_of_startup)
///   hold the state-machine lock for bookkeeping proportional to the tracked slots and the
///   stripe count; they hand buffers over by handle and never hash or touch the engine.
/// - [`commit_ready`](Self::commit_ready) holds the engine lock while it applies the decided
///   slots, taking the state-machine lock only to pop each job. Run it on a worker thread of
///   the plugin's own, never in a callback: applying a slot or building the startup state takes
///   as long as the hashing does.
pub struct Adapter<R: Retain = NoRecords> {
    config: AdapterConfig,
    retain: R,
    stripes: Stripes<R::Record>,
    shared: Shared,
    counters: Counters,
    startup: StartupStream,
    control: Mutex<Control<R::Record>>,
    work: Condvar,
    engine: Mutex<Engine>,
    /// Status changes applied and not yet taken (`Commitment::Processed`).
    status: Mutex<VecDeque<StatusChange>>,
}

impl<R: Retain> std::fmt::Debug for Adapter<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Adapter").field("config", &self.config).field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl Adapter<NoRecords> {
    /// An adapter that keeps only the hashes the engine needs.
    pub fn new(config: AdapterConfig) -> Result<Self, AdapterError> {
        Self::with_retain(config, NoRecords)
    }
}

impl<R: Retain> Adapter<R> {
    /// An adapter that also keeps what `retain` copies out of each update.
    pub fn with_retain(config: AdapterConfig, retain: R) -> Result<Self, AdapterError> {
        config.validate()?;
        // The fork engine's bank bound is the pending bound: the state machine drops the lowest
        // slots past it first, so the engine refuses a freeze only over its byte bound.
        let forks = (config.commitment == Commitment::Processed)
            .then(|| ForkLimits::new(config.max_pending_slots, ForkLimits::default().max_bytes));
        let engine = Engine::new(config.engine, config.capture_changes, forks)?;
        Ok(Self {
            control: Mutex::new(Control::new(config.commitment, config.max_pending_slots)),
            stripes: Stripes::new(config.stripes),
            config,
            retain,
            shared: Shared::default(),
            counters: Counters::default(),
            startup: StartupStream::new(config.engine),
            work: Condvar::new(),
            engine: Mutex::new(engine),
            status: Mutex::new(VecDeque::new()),
        })
    }

    fn cx(&self) -> Cx<'_, R::Record> {
        Cx { stripes: &self.stripes, shared: &self.shared, counters: &self.counters, startup: &self.startup }
    }

    /// The settings in use.
    pub fn config(&self) -> &AdapterConfig {
        &self.config
    }

    /// The retention policy.
    pub fn retain_policy(&self) -> &R {
        &self.retain
    }

    /// One account update, from any thread. The data is hashed (and retained per the policy)
    /// before the call returns; nothing borrowed is kept.
    pub fn update_account(&self, u: &AccountUpdate<'_>) -> Result<(), Ignored> {
        Counters::add(&self.counters.updates_received, 1);
        let hashed = Update::from_account(&u.account());
        let hint =
            if !u.is_startup && u.pubkey == SLOT_HASHES_SYSVAR { slot_hashes_newest(u.slot, u.data) } else { None };
        // A streamed startup account keeps no record: what the snapshot needs goes to the sink.
        let spilling = u.is_startup && self.startup.spilling();
        let record = (!spilling).then(|| self.retain.retain(u, &hashed));
        // Startup entries go to the builder as they arrive unless records must be resolved
        // against them at the end.
        let streaming = spilling || std::mem::size_of::<R::Record>() == 0;
        let result = {
            let mut stripe = self.stripes.lock_path(&hashed.path);
            if u.is_startup {
                // Read under the stripe lock: see `Shared::startup_open`.
                if self.shared.startup_open.load(Ordering::Acquire) {
                    let entry = BulkEntry { path: hashed.path, value: hashed.value, rank: (u.slot, u.write_version) };
                    if spilling {
                        self.startup.append(&entry, &u.account());
                    }
                    stripe.push_startup(entry, record);
                    if streaming {
                        stripe.flush_startup(STARTUP_BATCH, &self.startup);
                    }
                    Counters::add(&self.counters.startup_updates, 1);
                    Ok(Buffer::Done)
                } else {
                    Err(IgnoreReason::LateStartupUpdate)
                }
            } else if let Some(record) = record {
                let base = self.counters.base.get();
                let incoming = Incoming {
                    slot: u.slot,
                    path: hashed.path,
                    value: hashed.value,
                    write_version: u.write_version,
                    record,
                    hint,
                };
                stripe.buffer(incoming, base)
            } else {
                // Unreachable: only startup accounts skip the record.
                Err(IgnoreReason::LateStartupUpdate)
            }
        };
        match result {
            Ok(Buffer::Done) => Ok(()),
            Ok(Buffer::NewSlot) => {
                lock(&self.shared.fresh).push(u.slot);
                Ok(())
            }
            Err(reason) => {
                self.counters.ignore(reason);
                Err(Ignored { reason, slot: Some(u.slot) })
            }
        }
    }

    /// Streams startup accounts to `sink` (the node pipeline's startup spill) instead of keeping
    /// them: each startup account's hashes go to the bulk builder as it arrives, the rest of it to
    /// the sink, and no record is retained for it, so the startup commit's
    /// [`Committed::records`] is empty and the full snapshot is written from what the sink
    /// holds once [`take_startup_sink`](Self::take_startup_sink) says startup is over. Call it
    /// before the first startup account; refused after one arrived or once a sink is set.
    pub fn spill_startup(&self, sink: Arc<dyn StartupSink>) -> Result<(), AdapterError> {
        if self.counters.startup_updates.load(Ordering::Relaxed) > 0
            || !self.shared.startup_open.load(Ordering::Acquire)
        {
            return Err(AdapterError::Config("the startup spill must be set before the first startup account".into()));
        }
        if !self.startup.set_sink(sink) {
            return Err(AdapterError::Config("a startup spill is already set".into()));
        }
        Ok(())
    }

    /// The startup sink, given back once startup is over (after
    /// [`end_of_startup`](Self::end_of_startup), or the implicit end a slot status makes): no
    /// account is handed to it from then on, so its owner may finish it and write the startup
    /// state's full snapshot from it. `None` while startup is open or when no sink was set (or it
    /// was taken).
    pub fn take_startup_sink(&self) -> Option<Arc<dyn StartupSink>> {
        if self.shared.startup_open.load(Ordering::Acquire) {
            return None;
        }
        self.startup.take_sink()
    }

    /// One slot status. Decides what became ready to commit and queues it for
    /// [`commit_ready`](Self::commit_ready); does no engine work itself.
    pub fn update_slot_status(&self, ev: SlotEvent) -> Result<(), Ignored> {
        Counters::add(&self.counters.statuses_received, 1);
        let mut control = lock(&self.control);
        let result = control.on_status(ev, &self.cx());
        if !control.jobs.is_empty() {
            self.work.notify_all();
        }
        result
    }

    /// Block metadata of a slot (agave's `notify_block_metadata`, sent from replay once the bank
    /// is frozen): its blockhash and block height. It never delays or triggers a commit: it is
    /// attached to the slot's [`Committed`] if it arrives before the commit is applied, and
    /// dropped with the slot if the slot never commits. Without a block height it is ignored.
    pub fn block_metadata(&self, slot: u64, blockhash: [u8; 32], block_height: Option<u64>) -> Result<(), Ignored> {
        Counters::add(&self.counters.blocks_received, 1);
        let Some(block_height) = block_height else {
            self.counters.ignore(IgnoreReason::BlockWithoutHeight);
            return Err(Ignored { reason: IgnoreReason::BlockWithoutHeight, slot: Some(slot) });
        };
        lock(&self.control).on_block(slot, aldb_verify::record::BlockInfo { blockhash, block_height }, &self.cx())
    }

    /// The validator finished sending startup accounts: the startup state is queued for a bulk
    /// build and becomes the base.
    pub fn end_of_startup(&self) -> Result<(), Ignored> {
        let mut control = lock(&self.control);
        let cx = self.cx();
        let result = control.end_of_startup(&cx);
        control.advance(&cx);
        if !control.jobs.is_empty() {
            self.work.notify_all();
        }
        result
    }

    /// Applies every decided commit to the engine, in chain order, and returns them. Also picks
    /// up readiness that needs no status (replayed slots linked by their SlotHashes writes).
    ///
    /// Call it from one worker thread (concurrent calls are safe but serialize); each call
    /// blocks for as long as the engine works.
    ///
    /// Under [`Commitment::Processed`] it returns every bank frozen, forks included, each with
    /// its parent; confirmations, roots and abandoned banks applied in the same call are queued
    /// for [`take_status_changes`](Self::take_status_changes). A call stops before a freeze that
    /// follows a status change, so taking the changes after each call gives the exact order;
    /// the rest waits for the next call ([`wait_for_work`](Self::wait_for_work) says there is
    /// some).
    pub fn commit_ready(&self) -> Vec<Committed<R::Record>> {
        let mut engine = lock(&self.engine);
        let cx = self.cx();
        let mut out = Vec::new();
        let mut changes = Vec::new();
        let mut refused = None;
        let mut first = true;
        loop {
            // Popped while the engine lock is held, so jobs are applied in the order decided.
            let job = {
                let mut control = lock(&self.control);
                if let Some(slot) = refused.take() {
                    control.on_refused(slot, &cx);
                }
                if first {
                    control.advance(&cx);
                    first = false;
                }
                // A freeze after a status change waits for the next call, so that whoever takes
                // the changes after this call sees them after every freeze before them and before
                // every freeze after them (a restarted slot is abandoned, then frozen again).
                let job = if !changes.is_empty() && control.next_is_freeze() { None } else { control.pop_job() };
                self.counters.queued_commits.store(control.jobs.len() as u64, Ordering::Relaxed);
                job
            };
            let Some(job) = job else { break };
            let done = match engine.apply(job, &self.counters, &mut changes) {
                Applied::Committed(c) => *c,
                Applied::Refused(slot) => {
                    refused = Some(slot);
                    continue;
                }
                Applied::Nothing => continue,
            };
            Counters::add(&self.counters.slots_committed, 1);
            if done.kind == CommitKind::Slot && done.block.is_none() {
                Counters::add(&self.counters.slots_without_block, 1);
            }
            self.counters.last_committed.set(Some(done.slot));
            out.push(done);
        }
        if !changes.is_empty() {
            let mut status = lock(&self.status);
            status.extend(changes);
            let excess = status.len().saturating_sub(MAX_STATUS_CHANGES);
            status.drain(..excess);
            Counters::add(&self.counters.status_changes_dropped, excess as u64);
            self.counters.queued_status_changes.store(status.len() as u64, Ordering::Relaxed);
        }
        out
    }

    /// Takes the status changes of frozen banks applied so far, in order (see [`StatusChange`]):
    /// call it right after [`commit_ready`](Self::commit_ready), so every change follows the
    /// [`Committed`] of its bank. Always empty unless the commitment is
    /// [`Commitment::Processed`]. At most [`MAX_STATUS_CHANGES`] wait; older ones are dropped
    /// and counted.
    pub fn take_status_changes(&self) -> Vec<StatusChange> {
        let mut status = lock(&self.status);
        self.counters.queued_status_changes.store(0, Ordering::Relaxed);
        status.drain(..).collect()
    }

    /// Waits up to `timeout` for a decided commit; returns whether one is queued. Readiness
    /// found only by [`commit_ready`](Self::commit_ready) itself does not wake this, so a worker
    /// should call `commit_ready` after every wait, whatever it returns.
    pub fn wait_for_work(&self, timeout: Duration) -> bool {
        let control = lock(&self.control);
        if !control.jobs.is_empty() {
            return true;
        }
        let (control, _) = self.work.wait_timeout(control, timeout).unwrap_or_else(PoisonError::into_inner);
        !control.jobs.is_empty()
    }

    /// Counters and gauges for metrics; lock-free.
    pub fn stats(&self) -> Stats {
        self.counters.snapshot()
    }

    /// Hands back a change set from an earlier [`Committed`] that its consumer is done with, so a
    /// later commit captures into its allocations instead of new ones. Ignored when change capture
    /// is off or the set was made with other options. Takes the engine lock: call it from the
    /// thread that calls [`commit_ready`](Self::commit_ready).
    pub fn recycle_changes(&self, changes: aldb_core::ChangeSet) {
        lock(&self.engine).recycle(changes);
    }

    /// Runs `f` on the engine's tree (at the last applied commit; under
    /// [`Commitment::Processed`], at the fork engine's head), holding the engine lock.
    pub fn with_tree<T>(&self, f: impl FnOnce(&Pleiades) -> T) -> T {
        f(lock(&self.engine).tree())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::retain::KeepAccounts;

    #[test]
    fn the_adapter_can_be_shared_between_threads() {
        fn shared<T: Send + Sync>() {}
        shared::<Adapter>();
        shared::<Adapter<KeepAccounts>>();
    }

    #[test]
    fn bad_configs_are_refused() {
        let mut c = AdapterConfig::new(crate::Commitment::Confirmed, aldb_core::Config::for_leaves(10, 1));
        c.stripes = 3;
        assert!(matches!(Adapter::new(c), Err(AdapterError::Config(_))));
        c.stripes = 4;
        c.max_pending_slots = 0;
        assert!(matches!(Adapter::new(c), Err(AdapterError::Config(_))));
        c.max_pending_slots = 1;
        c.engine.threads = 0;
        assert!(matches!(Adapter::new(c), Err(AdapterError::Engine(_))));
    }
}
