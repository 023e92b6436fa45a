//! The record log as the pipeline keeps it: the producer (which signs and appends), reopened
//! after a failure, retried while it cannot be opened, and pruned.
//!
//! Nothing here can stop the node or change a root. A record that cannot be made or logged is
//! logged, counted and skipped. Because a failed append may leave a torn entry at the end of the
//! log, the producer is then dropped and the log reopened, which cuts a torn tail off and resumes
//! each chain from what the log durably holds (so a slot whose record did reach the log is never
//! signed again, and one whose record did not is never half-served). If the log cannot be opened,
//! records pause and the log is tried again every [`RecordSettings::reopen_every`] records. The
//! slot whose record is missing breaks its chain there: its child's record is not `CHAINED`
//! (relayers start a new chain segment, `docs/SPEC.md` §9.4), and the records after that chain
//! again.

use std::path::PathBuf;

use aldb_snapshot::records::{RecordInput, RecordProducer, RecordsError, Signer};

use crate::bank_hashes::base58;
use crate::config::RecordSettings;
use crate::error::NodeError;
use crate::stats::NodeStats;

/// Records between two attempts to delete old record log segments (each holds 65,536 records,
/// so nothing is gained by trying more often).
pub(crate) const PRUNE_EVERY: u64 = 4096;

/// The producer and what reopening it needs.
pub(crate) struct RecordLog {
    name: &'static str,
    dir: PathBuf,
    genesis_hash: [u8; 32],
    keypair: Option<PathBuf>,
    keep_slots: u64,
    /// No segment the archive may lack is deleted (the shipper's `shipped-records.slot`, nothing
    /// while it is absent).
    hold_for_shipper: bool,
    reopen_every: u64,
    producer: Option<RecordProducer>,
    /// Records to let pass before trying to open the log again.
    pub(crate) retry_in: u64,
    /// Consecutive failures so far: only the first of a run is logged as an error.
    failing: u64,
    /// Records until the next pruning attempt.
    pub(crate) prune_in: u64,
}

/// Why the log could not be opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum OpenError {
    /// The signing key could not be read.
    #[error("cannot read the signing key: {0}")]
    Key(#[source] RecordsError),
    /// The log itself could not be opened.
    #[error(transparent)]
    Log(RecordsError),
}

impl From<OpenError> for NodeError {
    fn from(e: OpenError) -> Self {
        match e {
            OpenError::Key(e) => NodeError::Key(e),
            OpenError::Log(e) => NodeError::RecordLog(e),
        }
    }
}

impl RecordLog {
    /// Opens the log under `dir`. A signing key that cannot be read fails; a log that cannot be
    /// opened fails when [`RecordSettings::must_open`], else pauses records (an error in the log).
    pub(crate) fn start(
        settings: &RecordSettings,
        dir: PathBuf,
        hold_for_shipper: bool,
        name: &'static str,
    ) -> Result<Self, NodeError> {
        let mut r = Self {
            name,
            dir,
            genesis_hash: settings.genesis_hash,
            keypair: settings.keypair.clone(),
            keep_slots: settings.keep_slots,
            hold_for_shipper,
            reopen_every: settings.reopen_every.max(1),
            producer: None,
            retry_in: 0,
            failing: 0,
            prune_in: PRUNE_EVERY,
        };
        let signer = r.signer().map_err(NodeError::from)?;
        let identity = signer.as_ref().map(Signer::identity);
        match RecordProducer::open(&r.dir, r.genesis_hash, signer) {
            Ok(p) => {
                log::info!(
                    "{name}: root records for genesis {}, {}, newest logged slot {:?}",
                    base58(&r.genesis_hash),
                    identity.map_or_else(|| "unsigned".to_string(), |id| format!("signed by {}", base58(&id))),
                    p.last_slot(),
                );
                r.producer = Some(p);
            }
            Err(e) if settings.must_open => return Err(NodeError::RecordLog(e)),
            Err(e) => {
                log::error!(
                    "{name}: root records paused, the record log cannot be opened (retried every {} slots): {e}",
                    r.reopen_every
                );
                r.retry_in = r.reopen_every;
            }
        }
        Ok(r)
    }

    fn signer(&self) -> Result<Option<Signer>, OpenError> {
        match &self.keypair {
            None => Ok(None),
            Some(path) => Signer::from_keypair_file(path).map(Some).map_err(OpenError::Key),
        }
    }

    /// Whether records are being produced right now.
    pub(crate) fn enabled(&self) -> bool {
        self.producer.is_some()
    }

    /// Whether records wait for the log to be tried again.
    pub(crate) fn paused(&self) -> bool {
        self.producer.is_none() && self.retry_in > 0
    }

    /// Drops the producer and opens the log again (cutting a torn tail off). On failure records
    /// pause for [`RecordSettings::reopen_every`] records.
    pub(crate) fn reopen(&mut self) -> Result<(), OpenError> {
        self.producer = None;
        let opened =
            self.signer().and_then(|s| RecordProducer::open(&self.dir, self.genesis_hash, s).map_err(OpenError::Log));
        match opened {
            Ok(p) => {
                self.producer = Some(p);
                Ok(())
            }
            Err(e) => {
                self.retry_in = self.reopen_every;
                Err(e)
            }
        }
    }

    fn failed(&mut self, slot: u64, what: &str, e: &dyn std::fmt::Display, stats: &NodeStats) {
        NodeStats::add(&stats.record_errors, 1);
        if self.failing == 0 {
            log::error!("{}: no root record for slot {slot}: {what}: {e}", self.name);
        } else {
            log::debug!("{}: no root record for slot {slot}: {what}: {e}", self.name);
        }
        self.failing += 1;
    }

    /// Produces, signs and logs one record; errors are logged and counted, never returned.
    pub(crate) fn produce(&mut self, input: RecordInput, stats: &NodeStats) {
        let slot = input.slot;
        let name = self.name;
        if self.producer.is_none() {
            if self.retry_in > 1 {
                self.retry_in -= 1;
                self.failed(slot, "records paused", &"the record log is not open", stats);
                return;
            }
            if let Err(e) = self.reopen() {
                self.failed(slot, "cannot open the record log", &e, stats);
                return;
            }
            log::info!("{name}: record log reopened at slot {slot}");
        }
        let Some(producer) = self.producer.as_mut() else { return };
        match producer.produce(input) {
            Ok(Some(logged)) => {
                NodeStats::add(&stats.records_produced, 1);
                self.prune_in = self.prune_in.saturating_sub(1);
                if self.prune_in == 0 {
                    self.prune_in = PRUNE_EVERY;
                    let keep_from = slot.saturating_sub(self.keep_slots);
                    let pruned = match self.hold_for_shipper {
                        // Only below the shipper's record hold, nothing while it has none.
                        true => producer.prune_before_held(keep_from),
                        false => producer.prune_before(keep_from),
                    };
                    match pruned {
                        Ok(0) => {}
                        Ok(n) => log::info!("{name}: deleted {n} old record log segment(s)"),
                        // Old records only cost disk: log and go on.
                        Err(e) => log::warn!("{name}: could not delete old record log segments: {e}"),
                    }
                }
                if !logged.attestations.is_empty() {
                    NodeStats::add(&stats.records_signed, 1);
                }
                if self.failing > 0 {
                    log::info!("{name}: root records resumed at slot {slot} after {} failures", self.failing);
                    self.failing = 0;
                }
            }
            // At or below the newest slot logged at this level (replayed after a restart).
            Ok(None) => NodeStats::add(&stats.records_skipped, 1),
            Err(e) => {
                self.failed(slot, "record log", &e, stats);
                // The append may have left a torn entry: start over from what the log holds.
                if let Err(e) = self.reopen() {
                    log::error!(
                        "{name}: root records paused, the record log cannot be reopened (retried every {} slots): {e}",
                        self.reopen_every
                    );
                }
            }
        }
    }
}
