//! The `GeyserPlugin` implementation: agave's callbacks in, the adapter's events out.
//!
//! Every callback runs inside [`catch_unwind`]: a panic must never unwind into the validator (it
//! would take the validator down; agave's own panic hook exits the process, though that hook lives
//! in the validator's copy of std and the plugin's panics go through the plugin's). A caught panic
//! is logged, counted and returned as an error, which agave logs and otherwise ignores.
//!
//! Callbacks never block on anything but the adapter's brief locks: account updates take one
//! stripe lock for a hash-map insert, slot statuses the state-machine lock for bookkeeping. The
//! engine and the node pipeline are on the commit worker ([`crate::worker`]).
//!
//! Ignored events (a `Processed` after its slot committed, an update for a passed fork, ...) are
//! not errors: they are counted by reason in the metrics and return `Ok`. Returning an error
//! would make agave log an error line per event, and several are routine on every slot.

use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::Arc;

use agave_geyser_plugin_interface::geyser_plugin_interface::{
    GeyserPlugin, GeyserPluginError, ReplicaAccountInfoVersions, ReplicaBlockInfoVersions,
    ReplicaTransactionInfoVersions, Result as PluginResult, SlotStatus,
};
use aldb_node::panic::panic_message;
use aldb_node::{Records, RootedSlots, Snapshots, Spares};
use geyser_adapter::{AccountUpdate, Adapter, Ignored, KeepAccounts, SlotEvent, Stats};

use crate::config::Config;
use crate::error::{CallbackError, StartError};
use crate::metrics::{Callback, MetricsServer, PluginCounters, Sources};
use crate::worker::{Pipeline, Worker};

/// The aldb geyser plugin: commits a provable state root for every slot of the chosen chain and
/// writes snapshots that Hyades serves proofs from.
///
/// agave creates it through `_create_plugin`, then calls `setup_logger`, `on_load` with the path
/// of the config file, the callbacks from many threads, and `on_unload`.
pub struct AldbPlugin {
    runtime: Option<Runtime>,
    counters: Arc<PluginCounters>,
    /// Test hook: callbacks panic while set, to prove the panic is caught.
    #[cfg(test)]
    panic_in_callbacks: std::sync::atomic::AtomicBool,
}

/// What runs between `on_load` and `on_unload`.
struct Runtime {
    config: Config,
    adapter: Arc<Adapter<KeepAccounts>>,
    worker: Worker,
    metrics: Option<MetricsServer>,
    /// Where `Rooted` statuses go for the `finalized` records, when slots commit at `confirmed`.
    rooted: Option<Arc<RootedSlots>>,
    /// The validator's bank hashes and roots beside the plugin's roots (block metadata V0_0_5).
    #[cfg(feature = "patched-interface")]
    bank_hashes: Option<Arc<aldb_node::BankHashes>>,
    /// The vote-evidence writer (`vote_evidence: true`).
    #[cfg(feature = "patched-interface")]
    evidence: Option<aldb_node::evidence::Evidence>,
    /// The hash of the last next-epoch set handed to the evidence writer: a set's encoding (some
    /// 94 KB on mainnet) is copied only when a bank binds another one.
    #[cfg(feature = "patched-interface")]
    last_set: std::sync::Mutex<Option<aldb_verify::Hash>>,
}

impl std::fmt::Debug for AldbPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AldbPlugin")
            .field("loaded", &self.runtime.is_some())
            .field("config", &self.runtime.as_ref().map(|r| &r.config))
            .finish_non_exhaustive()
    }
}

impl Default for AldbPlugin {
    fn default() -> Self {
        Self::new()
    }
}

impl AldbPlugin {
    /// A plugin that is not loaded yet: every callback fails until [`GeyserPlugin::on_load`].
    pub fn new() -> Self {
        Self {
            runtime: None,
            counters: Arc::new(PluginCounters::default()),
            #[cfg(test)]
            panic_in_callbacks: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The effective config, once loaded.
    pub fn config(&self) -> Option<&Config> {
        self.runtime.as_ref().map(|r| &r.config)
    }

    /// The adapter's counters and gauges, once loaded.
    pub fn stats(&self) -> Option<Stats> {
        self.runtime.as_ref().map(|r| r.adapter.stats())
    }

    /// Where metrics are served (the bound port, when the config asked for port 0).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.runtime.as_ref()?.metrics.as_ref().map(MetricsServer::addr)
    }

    /// Panics caught in callbacks so far.
    pub fn callback_panics(&self) -> u64 {
        self.counters.panics()
    }

    /// Errors returned from callbacks so far (panics not included).
    pub fn callback_errors(&self) -> u64 {
        self.counters.errors()
    }

    fn adapter(&self) -> Result<&Adapter<KeepAccounts>, CallbackError> {
        match &self.runtime {
            Some(r) => Ok(&r.adapter),
            None => Err(CallbackError::NotLoaded),
        }
    }

    /// Runs one callback's body: counts and returns its error, and turns a panic into an error.
    fn guard(&self, cb: Callback, body: impl FnOnce() -> Result<(), CallbackError>) -> PluginResult<()> {
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            #[cfg(test)]
            if self.panic_in_callbacks.load(std::sync::atomic::Ordering::Relaxed) {
                panic!("injected by a test");
            }
            body()
        }));
        let msg = match outcome {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => {
                self.counters.callback_error(cb);
                e.to_string()
            }
            Err(payload) => {
                self.counters.callback_panic(cb);
                let msg = format!("panic caught in aldb-plugin: {}", panic_message(payload.as_ref()));
                log::error!("{msg}");
                msg
            }
        };
        Err(match cb {
            Callback::UpdateAccount => GeyserPluginError::AccountsUpdateError { msg },
            Callback::UpdateSlotStatus => GeyserPluginError::SlotStatusUpdateError { msg },
            Callback::EndOfStartup | Callback::BlockMetadata | Callback::Transaction => {
                GeyserPluginError::Custom(msg.into())
            }
        })
    }

    fn start(&self, config: &Config, is_reload: bool) -> Result<Runtime, StartError> {
        let adapter =
            Adapter::with_retain(config.adapter_config(), KeepAccounts).map(Arc::new).map_err(StartError::Adapter)?;
        let node = config.node_config();
        let spares = Arc::new(Spares::default());
        let snapshots = Snapshots::start(&node, self.counters.node.clone(), spares.clone())?;
        let writer_stats = snapshots.writer_stats().clone();
        let metrics = match config.metrics_addr {
            None => None,
            Some(addr) => {
                let sources = Sources { adapter: adapter.clone(), writer: writer_stats, plugin: self.counters.clone() };
                Some(
                    MetricsServer::start(addr, "aldb-plugin", "aldb-metrics", move || crate::metrics::render(&sources))
                        .map_err(|source| StartError::Metrics { addr, source })?,
                )
            }
        };
        #[cfg(feature = "patched-interface")]
        let (bank_hashes, evidence) = {
            let counters = self.counters.node.evidence.clone();
            let bank_hashes = (config.block_metadata_version >= 5)
                .then(|| Arc::new(aldb_node::BankHashes::new(node.bank_hash_slots, counters.clone(), node.name)));
            let evidence = match config.vote_evidence {
                true => Some(aldb_node::evidence::Evidence::start(
                    &config.snapshot_dir,
                    config.keep_slots,
                    config.hold_for_shipper,
                    counters,
                    node.name,
                )?),
                false => None,
            };
            (bank_hashes, evidence)
        };
        if let Some(why) = config.records_disabled_reason() {
            log::warn!("aldb-plugin: {why}");
        }
        #[cfg_attr(not(feature = "patched-interface"), allow(unused_mut))]
        let mut records = Records::start(&node)?;
        #[cfg(feature = "patched-interface")]
        if let (Some(r), Some(b)) = (records.as_mut(), &bank_hashes) {
            r.set_bank_hashes(b.clone());
        }
        let rooted = records.as_ref().and_then(Records::rooted_slots);
        let mut pipeline = Pipeline { snapshots, records, spares, spill: None };
        pipeline.spill_startup(&adapter);
        let worker = Worker::spawn(adapter.clone(), pipeline, self.counters.clone()).map_err(StartError::Worker)?;
        if is_reload {
            // A reloaded plugin has missed genesis or the startup accounts, and no base state
            // can be built from the updates that follow: no slot will commit until the validator
            // restarts (the pending bound keeps memory in check meanwhile).
            log::warn!("aldb-plugin reloaded while the validator runs: no roots until the validator restarts");
        }
        Ok(Runtime {
            config: config.clone(),
            adapter,
            worker,
            metrics,
            rooted,
            #[cfg(feature = "patched-interface")]
            bank_hashes,
            #[cfg(feature = "patched-interface")]
            evidence,
            #[cfg(feature = "patched-interface")]
            last_set: std::sync::Mutex::new(None),
        })
    }
}

/// The slot, blockhash and block height of a block metadata notification (every version carries
/// them; agave 4.2.0 sends `V0_0_4`, the patched validator `V0_0_5` to a plugin that asks). Fails
/// on a blockhash that is not base58 of 32 bytes.
fn block_info(info: &ReplicaBlockInfoVersions<'_>) -> Result<(u64, [u8; 32], Option<u64>), CallbackError> {
    let (slot, blockhash, height) = match info {
        ReplicaBlockInfoVersions::V0_0_1(b) => (b.slot, b.blockhash, b.block_height),
        ReplicaBlockInfoVersions::V0_0_2(b) => (b.slot, b.blockhash, b.block_height),
        ReplicaBlockInfoVersions::V0_0_3(b) => (b.slot, b.blockhash, b.block_height),
        ReplicaBlockInfoVersions::V0_0_4(b) => (b.slot, b.blockhash, b.block_height),
        #[cfg(feature = "patched-interface")]
        ReplicaBlockInfoVersions::V0_0_5(b) => (b.slot, b.blockhash, b.block_height),
    };
    let hash = aldb_verify::hash_from_base58(blockhash).map_err(|source| CallbackError::Blockhash {
        slot,
        excerpt: aldb_verify::Excerpt(blockhash).to_string(),
        source,
    })?;
    Ok((slot, hash, height))
}

/// The adapter's account update for an agave one; fails on a malformed address.
fn account_update<'a>(
    account: ReplicaAccountInfoVersions<'a>,
    slot: u64,
    is_startup: bool,
) -> Result<AccountUpdate<'a>, CallbackError> {
    // Every version carries the same fields the commitment needs; V2 and V3 add the transaction.
    let (pubkey, lamports, owner, executable, data, write_version) = match account {
        ReplicaAccountInfoVersions::V0_0_1(a) => (a.pubkey, a.lamports, a.owner, a.executable, a.data, a.write_version),
        ReplicaAccountInfoVersions::V0_0_2(a) => (a.pubkey, a.lamports, a.owner, a.executable, a.data, a.write_version),
        ReplicaAccountInfoVersions::V0_0_3(a) => (a.pubkey, a.lamports, a.owner, a.executable, a.data, a.write_version),
    };
    let key = |what: &'static str, b: &[u8]| -> Result<[u8; 32], CallbackError> {
        b.try_into().map_err(|_| CallbackError::KeyLength { what, slot, len: b.len() })
    };
    Ok(AccountUpdate {
        slot,
        pubkey: key("pubkey", pubkey)?,
        lamports,
        owner: key("owner", owner)?,
        executable,
        data,
        write_version,
        is_startup,
    })
}

/// The adapter's status for an agave one.
fn slot_status(status: &SlotStatus) -> geyser_adapter::SlotStatus {
    use geyser_adapter::SlotStatus as S;
    match status {
        SlotStatus::Processed => S::Processed,
        SlotStatus::Rooted => S::Rooted,
        SlotStatus::Confirmed => S::Confirmed,
        SlotStatus::FirstShredReceived => S::FirstShredReceived,
        SlotStatus::Completed => S::Completed,
        SlotStatus::CreatedBank => S::CreatedBank,
        SlotStatus::Dead(_) => S::Dead,
    }
}

/// Ignored events are counted by the adapter; they only reach the log at debug level (or trace
/// for the routine ones, which happen every slot).
fn note_ignored(ig: Ignored) {
    if ig.reason.is_routine() {
        log::trace!("aldb-plugin: {ig}");
    } else {
        log::debug!("aldb-plugin: {ig}");
    }
}

#[cfg(feature = "patched-interface")]
impl AldbPlugin {
    /// Block metadata V0_0_5: the bank's hash and the root the validator mixed into it, for the
    /// root cross-check and the vote-evidence log.
    fn bank_frozen(
        &self,
        b: &agave_geyser_plugin_interface::geyser_plugin_interface::ReplicaBlockInfoV5<'_>,
    ) -> Result<(), CallbackError> {
        let (_, _, _, info) = crate::patched::block_info_v5(b)?;
        self.note_bank(&info);
        // Only a set the bank hash was checked to bind (the entry keeps its hash) is handed over.
        if let Some((hash, encoding)) = crate::patched::next_set_encoding(b)
            && info.entry.next_set_hash == Some(hash)
        {
            self.hand_set(info.entry.slot, hash, encoding);
        }
        Ok(())
    }

    /// Hands the evidence writer the encoding of the set a bank binds, copying it only when its
    /// hash is not the last one handed over; a set the full queue dropped is handed again with
    /// the next bank.
    fn hand_set(&self, slot: u64, hash: aldb_verify::Hash, encoding: &[u8]) {
        let Some(rt) = &self.runtime else { return };
        let Some(ev) = &rt.evidence else { return };
        let mut last = rt.last_set.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *last == Some(hash) {
            return;
        }
        if ev.send(aldb_node::evidence::Item::NextSet { slot, hash, encoding: encoding.to_vec() }) {
            *last = Some(hash);
        }
    }

    /// A frozen bank as V0_0_5 described it: to the root check and the evidence log.
    fn note_bank(&self, info: &crate::patched::BankInfo) {
        let Some(rt) = &self.runtime else { return };
        let slot = info.entry.slot;
        if info.unexplained {
            self.counters.node.evidence.unexplained_bank_hashes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            log::error!(
                "aldb-plugin: slot {slot}: bank hash {} does not follow from the h, root and next set hash the validator sent",
                aldb_verify::hash_to_base58(&info.entry.bank_hash)
            );
        }
        if let Some(roots) = &rt.bank_hashes {
            let frozen =
                aldb_node::Frozen { bank_hash: info.entry.bank_hash, aldb_root: info.aldb_root, ..Default::default() };
            roots.frozen(slot, frozen);
        }
        if let Some(ev) = &rt.evidence {
            ev.send(aldb_node::evidence::Item::Bank(info.entry));
        }
    }

    /// A transaction of the block of `slot`: a vote goes to the evidence log as its wire bytes.
    fn vote_transaction(&self, tx: &ReplicaTransactionInfoVersions<'_>, slot: u64) {
        let Some(ev) = self.runtime.as_ref().and_then(|r| r.evidence.as_ref()) else { return };
        match crate::patched::vote_wire_bytes(tx) {
            None => {}
            Some(Ok(tx)) => {
                ev.send(aldb_node::evidence::Item::Vote { slot, tx });
            }
            Some(Err(why)) => {
                ev.counters().rejected.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                log::debug!("aldb-plugin: a vote of slot {slot} not logged: {why:?}");
            }
        }
    }
}

impl GeyserPlugin for AldbPlugin {
    fn name(&self) -> &'static str {
        "aldb"
    }

    fn setup_logger(&self, logger: &'static dyn log::Log, level: log::LevelFilter) -> PluginResult<()> {
        // The plugin has its own copy of the `log` crate's globals: route them to the
        // validator's logger. A second call (the same library loaded again) finds the logger set,
        // which is fine: it is the same validator logger.
        log::set_max_level(level);
        let _ = log::set_logger(logger);
        Ok(())
    }

    fn on_load(&mut self, config_file: &str, is_reload: bool) -> PluginResult<()> {
        if self.runtime.is_some() {
            let msg = "aldb-plugin: on_load called while already loaded".to_string();
            log::error!("{msg}");
            return Err(GeyserPluginError::Custom(msg.into()));
        }
        // An error here stops the validator from starting, so the reason is logged first: agave
        // reports the returned error too, but in its own words.
        let config = Config::from_file(Path::new(config_file))
            .and_then(|c| c.prepare_snapshot_dir().map(|()| c))
            .map_err(|e| {
                log::error!("aldb-plugin: not loading: {e}");
                GeyserPluginError::ConfigFileReadError { msg: e.to_string() }
            })?;
        log::set_max_level(config.log_level);
        let runtime = self.start(&config, is_reload).map_err(|e| {
            log::error!("aldb-plugin: not loading: {e}");
            GeyserPluginError::Custom(Box::new(e))
        })?;
        log::info!(
            "aldb-plugin loaded: snapshots in {}, commitment {:?}, {} engine threads, metrics {}",
            config.snapshot_dir.display(),
            config.commitment,
            config.threads,
            runtime.metrics.as_ref().map_or_else(|| "off".to_string(), |m| format!("on http://{}/metrics", m.addr())),
        );
        self.runtime = Some(runtime);
        Ok(())
    }

    fn on_unload(&mut self) {
        let Some(rt) = self.runtime.take() else { return };
        // The evidence thread appends what it holds before it ends.
        #[cfg(feature = "patched-interface")]
        drop(rt.evidence);
        // The worker commits what is ready, then the writer drains its queue and syncs.
        match rt.worker.stop() {
            Ok(()) => log::info!("aldb-plugin: snapshots flushed"),
            Err(e) => log::error!("aldb-plugin: snapshot writer: {e}"),
        }
        if let Some(m) = rt.metrics {
            m.stop();
        }
        let s = rt.adapter.stats();
        log::info!(
            "aldb-plugin unloaded: {} slots committed (last {:?}), {} account updates, {} callback errors, {} panics caught",
            s.slots_committed,
            s.last_committed_slot,
            s.updates_received,
            self.counters.errors(),
            self.counters.panics(),
        );
    }

    fn update_account(&self, account: ReplicaAccountInfoVersions, slot: u64, is_startup: bool) -> PluginResult<()> {
        let start = std::time::Instant::now();
        let result = self.guard(Callback::UpdateAccount, || {
            let adapter = self.adapter()?;
            let update = account_update(account, slot, is_startup)?;
            if let Err(ig) = adapter.update_account(&update) {
                note_ignored(ig);
            }
            Ok(())
        });
        self.counters.update_account_ns.observe(start.elapsed());
        result
    }

    fn notify_end_of_startup(&self) -> PluginResult<()> {
        self.guard(Callback::EndOfStartup, || {
            let adapter = self.adapter()?;
            log::info!("aldb-plugin: end of startup, building the startup state");
            if let Err(ig) = adapter.end_of_startup() {
                note_ignored(ig);
            }
            Ok(())
        })
    }

    fn update_slot_status(&self, slot: u64, parent: Option<u64>, status: &SlotStatus) -> PluginResult<()> {
        self.guard(Callback::UpdateSlotStatus, || {
            let adapter = self.adapter()?;
            if let SlotStatus::Dead(reason) = status {
                log::debug!("aldb-plugin: slot {slot} dead: {reason}");
            }
            if matches!(status, SlotStatus::Processed) {
                self.counters.commit_lag.processed(slot);
            }
            if let (SlotStatus::Rooted, Some(rooted)) = (status, self.runtime.as_ref().and_then(|r| r.rooted.as_ref()))
            {
                rooted.push(slot);
            }
            if let Err(ig) = adapter.update_slot_status(SlotEvent::new(slot, parent, slot_status(status))) {
                note_ignored(ig);
            }
            Ok(())
        })
    }

    fn notify_block_metadata(&self, blockinfo: ReplicaBlockInfoVersions) -> PluginResult<()> {
        // Always delivered (no opt-in flag): agave sends it from replay once a bank is frozen.
        self.guard(Callback::BlockMetadata, || {
            let adapter = self.adapter()?;
            let (slot, blockhash, height) = block_info(&blockinfo)?;
            #[cfg(feature = "patched-interface")]
            if let ReplicaBlockInfoVersions::V0_0_5(b) = &blockinfo {
                self.bank_frozen(b)?;
            }
            if let Err(ig) = adapter.block_metadata(slot, blockhash, height) {
                note_ignored(ig);
            }
            Ok(())
        })
    }

    fn notify_transaction(&self, transaction: ReplicaTransactionInfoVersions, slot: u64) -> PluginResult<()> {
        #[cfg(feature = "patched-interface")]
        return self.guard(Callback::Transaction, || {
            self.adapter()?;
            self.vote_transaction(&transaction, slot);
            Ok(())
        });
        // The stock build never asks for transactions.
        #[cfg(not(feature = "patched-interface"))]
        {
            let _ = (transaction, slot);
            Ok(())
        }
    }

    fn account_data_notifications_enabled(&self) -> bool {
        true
    }

    fn account_data_snapshot_notifications_enabled(&self) -> bool {
        // The startup accounts are the base state of a snapshot start; without them no root.
        true
    }

    fn transaction_notifications_enabled(&self) -> bool {
        // agave asks once the plugin is loaded; only the vote-evidence log needs transactions.
        #[cfg(feature = "patched-interface")]
        return self.runtime.as_ref().is_some_and(|r| r.evidence.is_some());
        #[cfg(not(feature = "patched-interface"))]
        false
    }

    fn entry_notifications_enabled(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use agave_geyser_plugin_interface::geyser_plugin_interface::ReplicaAccountInfo;

    use super::*;

    fn loaded(dir: &Path) -> AldbPlugin {
        let cfg = dir.join("aldb.json5");
        std::fs::write(&cfg, "{libpath: 'libaldb_plugin.so', snapshot_dir: 'snap', threads: 1}").unwrap();
        let mut p = AldbPlugin::new();
        p.on_load(cfg.to_str().unwrap(), false).unwrap();
        p
    }

    fn info(pubkey: &[u8]) -> ReplicaAccountInfo<'_> {
        ReplicaAccountInfo {
            pubkey,
            lamports: 5,
            owner: &[1; 32],
            executable: false,
            rent_epoch: 0,
            data: b"x",
            write_version: 1,
        }
    }

    #[test]
    fn a_panic_in_a_callback_is_caught_and_returned_as_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = loaded(dir.path());
        p.panic_in_callbacks.store(true, Ordering::Relaxed);
        let key = [7u8; 32];
        let r = p.update_account(ReplicaAccountInfoVersions::V0_0_1(&info(&key)), 0, false);
        assert!(
            matches!(&r, Err(GeyserPluginError::AccountsUpdateError { msg }) if msg.contains("panic caught")),
            "{r:?}"
        );
        let r = p.update_slot_status(1, Some(0), &SlotStatus::CreatedBank);
        assert!(matches!(r, Err(GeyserPluginError::SlotStatusUpdateError { .. })), "{r:?}");
        assert!(p.notify_end_of_startup().is_err());
        assert_eq!(p.callback_panics(), 3);
        assert_eq!(p.callback_errors(), 0);
        // The plugin carries on once the cause is gone.
        p.panic_in_callbacks.store(false, Ordering::Relaxed);
        p.update_account(ReplicaAccountInfoVersions::V0_0_1(&info(&key)), 0, false).unwrap();
        assert_eq!(p.stats().unwrap().updates_received, 1);
        p.on_unload();
    }

    #[test]
    fn malformed_accounts_are_errors_not_panics() {
        let dir = tempfile::tempdir().unwrap();
        let mut p = loaded(dir.path());
        let r = p.update_account(ReplicaAccountInfoVersions::V0_0_1(&info(&[1; 31])), 0, false);
        assert!(matches!(&r, Err(GeyserPluginError::AccountsUpdateError { msg }) if msg.contains("31 bytes")), "{r:?}");
        let mut bad_owner = info(&[1; 32]);
        bad_owner.owner = &[];
        assert!(p.update_account(ReplicaAccountInfoVersions::V0_0_1(&bad_owner), 0, false).is_err());
        assert_eq!((p.callback_errors(), p.callback_panics()), (2, 0));
        assert_eq!(p.stats().unwrap().updates_received, 0);
        p.on_unload();
    }

    #[test]
    fn callbacks_before_on_load_fail_cleanly() {
        let p = AldbPlugin::new();
        assert!(p.update_account(ReplicaAccountInfoVersions::V0_0_1(&info(&[1; 32])), 0, false).is_err());
        assert!(p.update_slot_status(1, Some(0), &SlotStatus::Processed).is_err());
        assert_eq!(p.callback_errors(), 2);
    }

    #[test]
    fn each_committed_slot_gets_a_signed_chained_record_with_its_block_and_a_finalized_one_once_rooted() {
        use agave_geyser_plugin_interface::geyser_plugin_interface::{ReplicaBlockInfo, ReplicaBlockInfoV2};
        use aldb_format::records::RecordLogReader;
        use aldb_snapshot::records::Signer;

        let dir = tempfile::tempdir().unwrap();
        let seed = [5u8; 32];
        let identity = Signer::from_seed(&seed).identity();
        let key: Vec<u8> = seed.iter().chain(identity.iter()).copied().collect();
        std::fs::write(dir.path().join("id.json"), serde_json::to_string(&key).unwrap()).unwrap();
        let genesis = aldb_verify::hash_to_base58(&[9; 32]);
        let cfg = dir.path().join("aldb.json5");
        let text = format!(
            "{{libpath: 'x.so', snapshot_dir: 'snap', threads: 1, keypair: 'id.json', genesis_hash: '{genesis}'}}"
        );
        std::fs::write(&cfg, text).unwrap();
        let mut p = AldbPlugin::new();
        p.on_load(cfg.to_str().unwrap(), false).unwrap();

        let k = [7u8; 32];
        let blockhash = |slot: u64| [slot as u8 + 100; 32];
        let b58 = |slot: u64| aldb_verify::hash_to_base58(&blockhash(slot));
        p.update_account(ReplicaAccountInfoVersions::V0_0_1(&info(&k)), 0, false).unwrap();
        for slot in 1..=3u64 {
            p.update_slot_status(slot, Some(slot - 1), &SlotStatus::CreatedBank).unwrap();
            p.update_account(ReplicaAccountInfoVersions::V0_0_1(&info(&k)), slot, false).unwrap();
            // Slot 2's metadata never comes; the others come in two of the versions agave has.
            let (h1, h3) = (b58(1), b58(3));
            match slot {
                1 => {
                    let b = ReplicaBlockInfo {
                        slot,
                        blockhash: &h1,
                        rewards: &[],
                        block_time: None,
                        block_height: Some(slot + 10),
                    };
                    p.notify_block_metadata(ReplicaBlockInfoVersions::V0_0_1(&b)).unwrap();
                }
                3 => {
                    let b = ReplicaBlockInfoV2 {
                        parent_slot: slot - 1,
                        parent_blockhash: "",
                        slot,
                        blockhash: &h3,
                        rewards: &[],
                        block_time: None,
                        block_height: Some(slot + 10),
                        executed_transaction_count: 0,
                    };
                    p.notify_block_metadata(ReplicaBlockInfoVersions::V0_0_2(&b)).unwrap();
                }
                _ => {}
            }
            p.update_slot_status(slot, Some(slot - 1), &SlotStatus::Processed).unwrap();
        }
        p.update_slot_status(3, None, &SlotStatus::Confirmed).unwrap();
        // A malformed blockhash is an error, not a panic.
        let bad = ReplicaBlockInfo { slot: 4, blockhash: "0OIl", rewards: &[], block_time: None, block_height: None };
        assert!(p.notify_block_metadata(ReplicaBlockInfoVersions::V0_0_1(&bad)).is_err());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while p.stats().unwrap().last_committed_slot != Some(3) {
            assert!(std::time::Instant::now() < deadline, "slots not committed");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let without = p.stats().unwrap().slots_without_block;
        // Slot 2 rooted: it and its ancestors get their finalized records, 3 waits.
        p.update_slot_status(2, Some(1), &SlotStatus::Rooted).unwrap();
        let mut reader = RecordLogReader::new(&dir.path().join("snap"));
        let mut all = Vec::new();
        while all.len() < 7 {
            assert!(std::time::Instant::now() < deadline, "finalized records not logged: {}", all.len());
            all.extend(reader.refresh().unwrap());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        p.on_unload();
        assert_eq!(without, 1);
        all.extend(reader.refresh().unwrap());
        let (logged, finalized): (Vec<_>, Vec<_>) =
            all.into_iter().partition(|r| r.record.commitment == aldb_verify::Commitment::Confirmed);
        assert_eq!(finalized.iter().map(|r| r.record.slot).collect::<Vec<_>>(), [0, 1, 2]);
        for w in finalized.windows(2) {
            assert!(w[1].record.extends(&w[0].record, &w[0].record_hash), "finalized slot {}", w[1].record.slot);
            w[1].attestations[0].verify(&w[1].record_hash).unwrap();
        }
        assert_eq!(logged.iter().map(|r| r.record.slot).collect::<Vec<_>>(), [0, 1, 2, 3]);
        for (i, r) in logged.iter().enumerate() {
            let rec = &r.record;
            assert_eq!(rec.genesis_hash, [9; 32]);
            assert_eq!(rec.commitment, aldb_verify::Commitment::Confirmed);
            assert_eq!(r.record_hash, rec.hash());
            assert_eq!(r.attestations.len(), 1);
            assert_eq!(r.attestations[0].identity, identity);
            r.attestations[0].verify(&r.record_hash).unwrap();
            let want_block = match rec.slot {
                1 | 3 => Some(aldb_verify::BlockInfo { blockhash: blockhash(rec.slot), block_height: rec.slot + 10 }),
                _ => None,
            };
            assert_eq!(rec.block, want_block, "slot {}", rec.slot);
            match i {
                0 => assert_eq!(rec.parent, None),
                _ => assert!(rec.extends(&logged[i - 1].record, &logged[i - 1].record_hash), "slot {}", rec.slot),
            }
        }
    }

    #[test]
    fn a_bad_config_fails_on_load() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = dir.path().join("aldb.json");
        std::fs::write(&cfg, r#"{"libpath": "x.so", "snapshot_dir": "s", "keep_slot": 5}"#).unwrap();
        let mut p = AldbPlugin::new();
        let r = p.on_load(cfg.to_str().unwrap(), false);
        assert!(
            matches!(&r, Err(GeyserPluginError::ConfigFileReadError { msg }) if msg.contains("keep_slot")),
            "{r:?}"
        );
        assert!(p.config().is_none());
        let r = p.on_load(dir.path().join("missing.json").to_str().unwrap(), false);
        assert!(r.is_err());
    }

    #[test]
    fn a_snapshot_dir_the_plugin_cannot_use_fails_on_load() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("file"), b"").unwrap();
        let cfg = dir.path().join("aldb.json");
        std::fs::write(&cfg, "{libpath: 'x.so', snapshot_dir: 'file/snap', threads: 1}").unwrap();
        let mut p = AldbPlugin::new();
        let r = p.on_load(cfg.to_str().unwrap(), false);
        assert!(
            matches!(&r, Err(GeyserPluginError::ConfigFileReadError { msg }) if msg.contains("`snapshot_dir` cannot be created")),
            "{r:?}"
        );
        assert!(p.config().is_none());
    }

    #[test]
    fn a_taken_metrics_port_fails_on_load() {
        let dir = tempfile::tempdir().unwrap();
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let cfg = dir.path().join("aldb.json");
        let text = format!(
            "{{libpath: 'x.so', snapshot_dir: 's', threads: 1, metrics_addr: '{}'}}",
            taken.local_addr().unwrap()
        );
        std::fs::write(&cfg, text).unwrap();
        let mut p = AldbPlugin::new();
        let r = p.on_load(cfg.to_str().unwrap(), false);
        assert!(
            matches!(&r, Err(GeyserPluginError::Custom(e)) if e.to_string().contains("cannot serve metrics")),
            "{r:?}"
        );
    }

    /// A bank frozen with the given aldb root, as block metadata V0_0_5 describes it (`h` is
    /// fixed, so the bank hash follows from the root). The decoding of the notification itself
    /// is exercised against the patched validator (`scripts/validator-votes.sh`): its rewards
    /// field is a type of a crate the plugin does not link.
    #[cfg(feature = "patched-interface")]
    fn notify_v5(p: &AldbPlugin, slot: u64, root: [u8; 32]) -> [u8; 32] {
        let h = [slot as u8 + 50; 32];
        let bank_hash = aldb_verify::votes::mix_root(&h, &root);
        p.note_bank(&crate::patched::bank_info(slot, slot.saturating_sub(1), bank_hash, Some((h, root)), None));
        bank_hash
    }

    #[cfg(feature = "patched-interface")]
    #[test]
    fn v5_metadata_puts_the_bank_hash_in_records_checks_roots_and_logs_banks() {
        use std::sync::atomic::Ordering::Relaxed;

        use aldb_format::records::RecordLogReader;
        use aldb_format::votes::VoteLogReader;

        let dir = tempfile::tempdir().unwrap();
        let genesis = aldb_verify::hash_to_base58(&[9; 32]);
        let cfg = dir.path().join("aldb.json5");
        let text = format!(
            "{{libpath: 'x.so', snapshot_dir: 'snap', threads: 1, genesis_hash: '{genesis}', \
              block_metadata_version: 5, vote_evidence: true}}"
        );
        std::fs::write(&cfg, text).unwrap();
        let mut p = AldbPlugin::new();
        p.on_load(cfg.to_str().unwrap(), false).unwrap();
        assert!(p.transaction_notifications_enabled());

        let k = [7u8; 32];
        p.update_account(ReplicaAccountInfoVersions::V0_0_1(&info(&k)), 0, false).unwrap();
        // Slot 1's metadata comes before its commit, with a root that is not the plugin's.
        p.update_slot_status(1, Some(0), &SlotStatus::CreatedBank).unwrap();
        p.update_account(ReplicaAccountInfoVersions::V0_0_1(&info(&k)), 1, false).unwrap();
        let bank1 = notify_v5(&p, 1, [0xaa; 32]);
        p.update_slot_status(1, Some(0), &SlotStatus::Processed).unwrap();
        p.update_slot_status(2, Some(1), &SlotStatus::CreatedBank).unwrap();
        p.update_slot_status(2, Some(1), &SlotStatus::Processed).unwrap();
        p.update_slot_status(2, None, &SlotStatus::Confirmed).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut reader = RecordLogReader::new(&dir.path().join("snap"));
        let mut records = Vec::new();
        while records.len() < 3 {
            assert!(std::time::Instant::now() < deadline, "records not logged: {}", records.len());
            records.extend(reader.refresh().unwrap());
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let by_slot = |s: u64| records.iter().find(|r| r.record.slot == s).unwrap().record;
        assert_eq!(by_slot(1).bank_hash, Some(bank1), "the slot's own bank hash is in its record");
        assert_eq!(by_slot(2).bank_hash, None, "no V0_0_5 before the commit: no bank hash");
        // Slot 2's metadata comes after its commit, with the plugin's own root.
        let bank2 = notify_v5(&p, 2, by_slot(2).state_root);
        let counters = p.counters.node.evidence.clone();
        assert_eq!(counters.roots_checked.load(Relaxed), 2);
        assert_eq!(counters.root_mismatches.load(Relaxed), 1);
        p.on_unload();

        let mut votes = VoteLogReader::new(&dir.path().join("snap"));
        votes.refresh().unwrap();
        assert_eq!(votes.bank(1).map(|b| b.bank_hash), Some(bank1));
        let b2 = votes.bank(2).unwrap();
        assert_eq!((b2.bank_hash, b2.aldb.map(|a| a.root)), (bank2, Some(by_slot(2).state_root)));
        assert_eq!(counters.banks.load(Relaxed), 2);
    }
}
