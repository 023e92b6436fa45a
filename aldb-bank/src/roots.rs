//! A root for every frozen bank: the fork engine behind the plain-bytes API, and the sink it
//! feeds when one is configured.

use std::collections::{BTreeSet, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use aldb_core::{BulkBuilder, ChangeSet, Config, ForkEngine, ForkLimits, Update, hash_accounts};
use aldb_node::{BankRecord, Queued};
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput};
use aldb_verify::spec::Hash;

use crate::Account;
use crate::SinkStats;
use crate::config::{ConfigError, SinkConfig};
use crate::error::{BankError, SinkStartError};
use crate::meta::BankMeta;
use crate::metrics::{MetricsServer, ModuleStats, Sources, render};

/// The tree is sized for at least this many leaves, so a small genesis does not leave a layout
/// too shallow for the accounts that follow (the root never depends on the layout).
const MIN_EXPECTED_LEAVES: u64 = 1 << 20;
/// Slots confirmed before this node froze them, remembered until they freeze.
const MAX_EARLY_CONFIRMED: usize = 4096;

/// Why a module refuses every call: its sink was configured but cannot run.
#[derive(Clone, Debug)]
enum Refused {
    Config(ConfigError),
    Start(Arc<SinkStartError>),
}

impl From<&Refused> for BankError {
    fn from(r: &Refused) -> Self {
        match r {
            Refused::Config(e) => BankError::Config(e.clone()),
            Refused::Start(s) => BankError::SinkStart(s.clone()),
        }
    }
}

/// The module: a fork-aware Pleiades holding the state of a rooted slot (the base) and of every
/// frozen bank above it, and optionally the sink writing them. See the [crate
/// documentation](crate).
#[derive(Debug)]
pub struct BankRoots {
    threads: usize,
    /// Whether the tree's workers are pinned to CPUs ([`SinkConfig::pin_workers`]).
    pin_workers: bool,
    limits: ForkLimits,
    engine: Option<ForkEngine>,
    sink: Option<Queued>,
    refused: Option<Refused>,
    /// With a sink: held banks already reported confirmed, so confirming a bank reports each of
    /// its unconfirmed ancestors once.
    confirmed: BTreeSet<u64>,
    /// With a sink: slots confirmed before they froze here.
    early: BTreeSet<u64>,
    /// The module's own counters, for metrics.
    stats: Arc<ModuleStats>,
    /// `GET /metrics`, when the config asks for it.
    metrics: Option<MetricsServer>,
}

/// The default worker threads: [`crate::THREADS_ENV`], else up to 4 (fewer on smaller
/// machines).
pub(crate) fn default_threads() -> usize {
    let available = std::thread::available_parallelism().map_or(1, usize::from);
    std::env::var(crate::THREADS_ENV).ok().and_then(|v| v.parse::<usize>().ok()).unwrap_or(available.min(4)).max(1)
}

impl BankRoots {
    /// An empty module whose trees use `threads` workers, with no sink; it holds nothing until
    /// [`BankRoots::build_base`].
    pub fn new(threads: usize) -> Self {
        Self {
            threads: threads.max(1),
            pin_workers: false,
            limits: ForkLimits::default(),
            engine: None,
            sink: None,
            refused: None,
            confirmed: BTreeSet::new(),
            early: BTreeSet::new(),
            stats: Arc::default(),
            metrics: None,
        }
    }

    /// A module that also writes snapshot files and root records as `config` says: its writer
    /// thread is started and its record log opened now.
    pub fn with_sink(config: &SinkConfig) -> Result<Self, BankError> {
        Self::start_sink(config).map_err(|e| BankError::SinkStart(Arc::new(e)))
    }

    fn start_sink(config: &SinkConfig) -> Result<Self, SinkStartError> {
        let mut roots = Self::new(config.threads.unwrap_or_else(default_threads));
        roots.pin_workers = config.pin_workers;
        let sink = Queued::start(&config.node_config(), config.queue_bounds())?;
        if let Some(addr) = config.metrics_addr {
            let sources = Sources {
                module: roots.stats.clone(),
                node: aldb_node::families::NodeSources {
                    node: sink.stats().clone(),
                    writer: sink.writer_stats().clone(),
                },
            };
            let server = MetricsServer::start(addr, "aldb-bank", "aldb-bank-metrics", move || render(&sources))
                .map_err(|source| SinkStartError::Metrics { addr, source })?;
            log::info!("aldb-bank: metrics at http://{}/metrics", server.addr());
            roots.metrics = Some(server);
        }
        roots.sink = Some(sink);
        Ok(roots)
    }

    /// The module the environment asks for: with the sink [`crate::CONFIG_ENV`] configures, or
    /// without one when it is unset. Never fails: a config that cannot be used makes a module
    /// that refuses every call with the reason (logged here once), so the validator stops at its
    /// first bank with the aldb feature active.
    pub fn from_env() -> Self {
        let refuse = |r: Refused| {
            log::error!("{}", BankError::from(&r));
            Self { refused: Some(r), ..Self::new(default_threads()) }
        };
        match SinkConfig::from_env() {
            Ok(None) => Self::new(default_threads()),
            Ok(Some(config)) => match Self::start_sink(&config) {
                Ok(roots) => roots,
                Err(e) => refuse(Refused::Start(Arc::new(e))),
            },
            Err(e) => refuse(Refused::Config(e)),
        }
    }

    fn check(&self) -> Result<(), BankError> {
        match &self.refused {
            Some(r) => Err(r.into()),
            None => Ok(()),
        }
    }

    /// Counts a call's error for metrics and passes the result on.
    fn counted<T>(&self, r: Result<T, BankError>) -> Result<T, BankError> {
        if r.is_err() {
            self.stats.call_errors.fetch_add(1, Relaxed);
        }
        r
    }

    /// Updates the gauges of what the module holds.
    fn held_gauges(&self) {
        self.stats.banks_held.store(self.bank_count() as u64, Relaxed);
        self.stats.rooted_slot.store(self.base().map_or(0, |b| b.saturating_add(1)), Relaxed);
    }

    /// Where `GET /metrics` is served, when the config asked for it (the bound address: the real
    /// port when port 0 was asked for).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().map(MetricsServer::addr)
    }

    /// Replaces everything held by the state `accounts` as of `slot`, which becomes the rooted
    /// slot, and returns its root. Zero-lamport accounts are absent; of two entries for one
    /// pubkey the later wins. With a sink the state is also written whole (a full snapshot
    /// file), and its root records made.
    pub fn build_base(&mut self, slot: u64, accounts: &[Account<'_>]) -> Result<Hash, BankError> {
        let r = self.build_base_inner(slot, accounts);
        if r.is_ok() {
            self.stats.bases.fetch_add(1, Relaxed);
        }
        self.held_gauges();
        self.counted(r)
    }

    fn build_base_inner(&mut self, slot: u64, accounts: &[Account<'_>]) -> Result<Hash, BankError> {
        self.check()?;
        // Drop the old tree (and its worker threads) before building the new one.
        self.engine = None;
        self.confirmed.clear();
        self.early.retain(|&s| s > slot);
        let expected = (accounts.len() as u64).saturating_mul(2).max(MIN_EXPECTED_LEAVES);
        let mut builder =
            BulkBuilder::new(Config::for_leaves(expected, self.threads).with_pinned_workers(self.pin_workers))?;
        // Ranks make the last entry of a pubkey win whatever shard order the builder uses.
        for (i, chunk) in accounts.chunks(1 << 16).enumerate() {
            builder.push_accounts(chunk, (0, i as u64));
        }
        let engine = ForkEngine::new(builder.finish(), slot, self.limits);
        let root = engine.base_root();
        if let Some(sink) = self.sink.as_mut() {
            let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
            engine.tree().capture_all(&mut changes);
            let accounts = whole_state(&engine, accounts);
            sink.base(SlotInput { slot, parent: None, root, changes, accounts, full: true });
        }
        self.engine = Some(engine);
        Ok(root)
    }

    /// Freezes bank `slot` on `parent` with the accounts it stored in its own slot (zero lamports:
    /// deleted) and returns the root of its state. Freezing a slot again replaces its old version
    /// and that version's descendants. With a sink the bank's changes are queued for its file.
    pub fn freeze(&mut self, slot: u64, parent: u64, accounts: &[Account<'_>]) -> Result<Hash, BankError> {
        let started = Instant::now();
        let r = self.freeze_inner(slot, parent, accounts);
        if r.is_ok() {
            self.stats.freezes.fetch_add(1, Relaxed);
            self.stats.freeze_time.observe(started.elapsed());
        }
        self.held_gauges();
        self.counted(r)
    }

    fn freeze_inner(&mut self, slot: u64, parent: u64, accounts: &[Account<'_>]) -> Result<Hash, BankError> {
        self.check()?;
        let engine = match self.engine.as_mut() {
            Some(e) if e.base() == parent || e.bank_root(parent).is_some() => e,
            _ => return Err(BankError::UnknownParent { slot, parent }),
        };
        let mut updates: Vec<Update> = Vec::with_capacity(accounts.len());
        hash_accounts(accounts, &mut updates);
        let Some(sink) = self.sink.as_mut() else {
            return Ok(engine.freeze(slot, parent, updates)?);
        };
        let again = engine.bank_root(slot).is_some();
        let (mut changes, mut batch) = sink.buffers();
        batch.fill_from_updates(&updates, accounts);
        let root = engine.freeze_capture(slot, parent, updates, &mut changes)?;
        sink.bank(SlotInput { slot, parent: Some(parent), root, changes, accounts: batch, full: false });
        if again {
            // The old version's descendants are gone with it.
            let engine = &*engine;
            self.confirmed.retain(|&s| s != slot && engine.bank_root(s).is_some());
        }
        if self.early.remove(&slot) {
            self.report_confirmed(slot);
        }
        Ok(root)
    }

    /// Gives the sink a frozen bank's hash and block, for its root records; called right after
    /// the hash is computed. Without a sink it does nothing.
    pub fn bank_hash(&mut self, slot: u64, meta: BankMeta) -> Result<(), BankError> {
        self.counted(self.check())?;
        if let Some(sink) = &self.sink {
            sink.meta(slot, meta.frozen());
        }
        Ok(())
    }

    /// The node saw `slot` optimistically confirmed: with a sink, the bank and every ancestor not
    /// yet confirmed are journaled `confirmed` and get their `confirmed` records, oldest first. A
    /// slot not frozen here yet is remembered and reported when it freezes.
    pub fn confirmed(&mut self, slot: u64) -> Result<(), BankError> {
        self.counted(self.check())?;
        if self.sink.is_none() {
            return Ok(());
        }
        match self.engine.as_ref() {
            Some(e) if e.bank_root(slot).is_some() => self.report_confirmed(slot),
            Some(e) if slot <= e.base() => {}
            _ => {
                if self.early.len() >= MAX_EARLY_CONFIRMED {
                    self.early.pop_first();
                }
                self.early.insert(slot);
            }
        }
        Ok(())
    }

    fn report_confirmed(&mut self, slot: u64) {
        let (Some(engine), Some(sink)) = (self.engine.as_ref(), self.sink.as_ref()) else { return };
        let mut banks = Vec::new();
        let mut s = slot;
        while !self.confirmed.contains(&s) {
            let (Some(root), Some(parent)) = (engine.bank_root(s), engine.parent_of(s)) else { break };
            banks.push(BankRecord { slot: s, parent: Some(parent), root, ..BankRecord::default() });
            s = parent;
        }
        banks.reverse();
        self.confirmed.extend(banks.iter().map(|b| b.slot));
        sink.confirmed(banks);
    }

    /// Whether the module holds `slot`: the rooted slot or a frozen bank above it.
    pub fn holds(&self, slot: u64) -> bool {
        self.engine.as_ref().is_some_and(|e| e.base() == slot || e.bank_root(slot).is_some())
    }

    /// The root of `slot`'s state, when the module holds it.
    pub fn root_of(&self, slot: u64) -> Option<Hash> {
        let e = self.engine.as_ref()?;
        if e.base() == slot { Some(e.base_root()) } else { e.bank_root(slot) }
    }

    /// The rooted slot, once a base is built.
    pub fn base(&self) -> Option<u64> {
        self.engine.as_ref().map(ForkEngine::base)
    }

    /// Makes `slot` the rooted slot: it and its ancestors release what they hold and every bank
    /// not descending from it is dropped. Returns `false`, doing nothing, when the module does not
    /// hold `slot` (a bank frozen before the feature was active, or none built yet). With a sink
    /// the newly final banks are journaled `finalized` and get their `finalized` records, and the
    /// dropped ones are journaled `abandoned`.
    pub fn root(&mut self, slot: u64) -> Result<bool, BankError> {
        let r = self.root_inner(slot);
        self.held_gauges();
        self.counted(r)
    }

    fn root_inner(&mut self, slot: u64) -> Result<bool, BankError> {
        self.check()?;
        let Some(e) = self.engine.as_mut() else { return Ok(false) };
        if e.base() == slot {
            return Ok(true);
        }
        if e.bank_root(slot).is_none() {
            return Ok(false);
        }
        // The chain down to the old base, asked before the engine forgets it.
        let mut chain = Vec::new();
        if self.sink.is_some() {
            let mut s = slot;
            while let (Some(root), Some(parent)) = (e.bank_root(s), e.parent_of(s)) {
                chain.push(BankRecord { slot: s, parent: Some(parent), root, ..BankRecord::default() });
                s = parent;
            }
            chain.reverse();
        }
        let rooted = e.root(slot)?;
        if let Some(sink) = self.sink.as_mut() {
            let e = &*e;
            self.confirmed.retain(|&s| s > slot && e.bank_root(s).is_some());
            self.early.retain(|&s| s > slot);
            sink.finalized(slot, chain, rooted.abandoned);
        }
        Ok(true)
    }

    /// Drops bank `slot` and its descendants; returns their slots (none when it is not held).
    /// With a sink they are journaled `abandoned`.
    pub fn dead(&mut self, slot: u64) -> Result<Vec<u64>, BankError> {
        let r = self.dead_inner(slot);
        self.held_gauges();
        self.counted(r)
    }

    fn dead_inner(&mut self, slot: u64) -> Result<Vec<u64>, BankError> {
        self.check()?;
        let dropped = match self.engine.as_mut() {
            Some(e) if e.bank_root(slot).is_some() => e.dead(slot)?,
            _ => return Ok(Vec::new()),
        };
        if let Some(sink) = self.sink.as_mut() {
            for s in &dropped {
                self.confirmed.remove(s);
            }
            sink.dead(slot, &dropped);
        }
        Ok(dropped)
    }

    /// Unrooted banks held.
    pub fn bank_count(&self) -> usize {
        self.engine.as_ref().map_or(0, ForkEngine::bank_count)
    }

    /// The sink's counters, when a sink runs.
    pub fn sink_stats(&self) -> Option<Arc<SinkStats>> {
        self.sink.as_ref().map(|s| s.stats().clone())
    }

    /// Waits until everything handed to the sink so far is written (or refused) by the writer.
    /// For tests and shutdown: replay never calls it.
    pub fn flush_sink(&self) {
        if let Some(sink) = &self.sink {
            sink.flush();
        }
    }
}

/// The accounts of a whole state as a full file holds them: the last entry of each pubkey, and
/// only live ones.
fn whole_state(engine: &ForkEngine, accounts: &[Account<'_>]) -> AccountBatch {
    let updates = engine.tree().hash_accounts(accounts);
    let mut seen: HashSet<&[u8; 32]> = HashSet::with_capacity(accounts.len());
    let keep: Vec<usize> = (0..accounts.len()).rev().filter(|&i| seen.insert(accounts[i].pubkey)).collect();
    let live: Vec<usize> = keep.into_iter().rev().filter(|&i| accounts[i].lamports != 0).collect();
    let data = live.iter().map(|&i| accounts[i].data.len()).sum();
    let mut batch = AccountBatch::with_capacity(live.len(), data);
    for i in live {
        if let (Some(u), Some(a)) = (updates.get(i), accounts.get(i)) {
            batch.push(u.path, a);
        }
    }
    batch
}
