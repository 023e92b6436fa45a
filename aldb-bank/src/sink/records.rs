//! Root records from the module's own roots: a `confirmed` record when a bank is confirmed, a
//! `finalized` one when it is rooted, each chained per level (`docs/SPEC.md` §9.4), signed when a
//! key is configured, appended to the record log under the snapshot directory.
//!
//! Nothing here stops the node or changes a root. A record that cannot be logged is counted and
//! logged; the producer is then dropped and the log reopened at the next record, which cuts a
//! torn tail off and resumes each chain from what the log durably holds.

use std::path::PathBuf;

use aldb_snapshot::records::{RecordInput, RecordProducer, Signer};
use aldb_verify::record::{BlockInfo, Commitment};

use super::queue::BankId;
use super::stats::SinkStats;
use crate::config::{RecordLevel, RecordsConfig};
use crate::meta::BankMeta;

/// Records between two attempts to delete old record log segments (each holds 65,536 records).
const PRUNE_EVERY: u64 = 4096;

/// The record producer and what reopening it needs.
pub(crate) struct Records {
    dir: PathBuf,
    genesis_hash: [u8; 32],
    keypair: Option<PathBuf>,
    confirmed: bool,
    finalized: bool,
    keep_slots: u64,
    /// [`crate::SinkConfig::hold_for_shipper`]: segments the archive may lack are kept.
    hold_for_shipper: bool,
    producer: Option<RecordProducer>,
    prune_in: u64,
    /// Consecutive failures: only the first of a run is logged as an error.
    failing: u64,
}

impl Records {
    /// Opens the log; fails when it cannot be opened or holds another cluster's records (a start
    /// refuses, rather than run without the records asked for).
    pub(crate) fn open(
        dir: PathBuf,
        genesis_hash: [u8; 32],
        config: &RecordsConfig,
        hold_for_shipper: bool,
    ) -> Result<Self, String> {
        let mut r = Self {
            dir,
            genesis_hash,
            keypair: config.keypair.clone(),
            confirmed: config.levels.contains(&RecordLevel::Confirmed),
            finalized: config.levels.contains(&RecordLevel::Finalized),
            keep_slots: config.keep_slots,
            hold_for_shipper,
            producer: None,
            prune_in: PRUNE_EVERY,
            failing: 0,
        };
        r.reopen()?;
        if let Some(p) = &r.producer {
            log::info!(
                "aldb-bank: root records for genesis {}, {}, newest logged slot {:?}",
                bs58::encode(genesis_hash).into_string(),
                p.identity().map_or_else(
                    || "unsigned".to_string(),
                    |id| format!("signed by {}", bs58::encode(id).into_string())
                ),
                p.last_slot(),
            );
        }
        Ok(r)
    }

    fn reopen(&mut self) -> Result<(), String> {
        self.producer = None;
        let signer = match &self.keypair {
            None => None,
            Some(k) => Some(Signer::from_keypair_file(k).map_err(|e| format!("cannot read the signing key: {e}"))?),
        };
        let p = RecordProducer::open(&self.dir, self.genesis_hash, signer)
            .map_err(|e| format!("cannot open the record log: {e}"))?;
        self.producer = Some(p);
        Ok(())
    }

    /// A bank became confirmed.
    pub(crate) fn confirmed(&mut self, bank: &BankId, meta: Option<&BankMeta>, stats: &SinkStats) {
        if self.confirmed {
            self.produce(bank, meta, Commitment::Confirmed, stats);
        }
    }

    /// A bank became final.
    pub(crate) fn finalized(&mut self, bank: &BankId, meta: Option<&BankMeta>, stats: &SinkStats) {
        if self.finalized {
            self.produce(bank, meta, Commitment::Finalized, stats);
        }
    }

    fn produce(&mut self, bank: &BankId, meta: Option<&BankMeta>, commitment: Commitment, stats: &SinkStats) {
        let input = RecordInput {
            slot: bank.slot,
            parent: bank.parent,
            commitment,
            state_root: bank.root,
            block: meta.map(|m| BlockInfo { blockhash: m.blockhash, block_height: m.block_height }),
            parent_bank_hash: meta.map(|m| m.parent_bank_hash),
            bank_hash: meta.map(|m| m.bank_hash),
        };
        if self.producer.is_none()
            && let Err(e) = self.reopen()
        {
            self.failed(bank.slot, &e, stats);
            return;
        }
        let Some(p) = self.producer.as_mut() else { return };
        match p.produce(input) {
            Ok(Some(_)) => {
                SinkStats::add(&stats.records_produced, 1);
                self.failing = 0;
                self.prune_in = self.prune_in.saturating_sub(1);
                if self.prune_in == 0 {
                    self.prune_in = PRUNE_EVERY;
                    let keep_from = bank.slot.saturating_sub(self.keep_slots);
                    let pruned = match self.hold_for_shipper {
                        // Only below the shipper's record hold, nothing while it has none.
                        true => p.prune_before_held(keep_from),
                        false => p.prune_before(keep_from),
                    };
                    match pruned {
                        Ok(0) => {}
                        Ok(n) => log::info!("aldb-bank: deleted {n} old record log segment(s)"),
                        // Old records only cost disk.
                        Err(e) => log::warn!("aldb-bank: could not delete old record log segments: {e}"),
                    }
                }
            }
            // At or below the newest slot logged at this level (replayed after a restart).
            Ok(None) => {}
            Err(e) => {
                // A failed append may leave a torn entry: reopen before the next record.
                self.producer = None;
                self.failed(bank.slot, &e.to_string(), stats);
            }
        }
    }

    fn failed(&mut self, slot: u64, e: &str, stats: &SinkStats) {
        SinkStats::add(&stats.record_errors, 1);
        if self.failing == 0 {
            log::error!("aldb-bank: no root record for slot {slot}: {e}");
        } else {
            log::debug!("aldb-bank: no root record for slot {slot}: {e}");
        }
        self.failing += 1;
    }
}

#[cfg(test)]
#[path = "records_tests.rs"]
mod tests;
