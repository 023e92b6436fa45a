//! Root records (`docs/SPEC.md` §9) at each commitment level: made as a bank commits or reaches
//! a level, carrying what the validator said of the bank ([`crate::BankHashes`]), signed when a
//! key is configured, and appended to the record log under the snapshot directory, which Hyades
//! serves.
//!
//! When they are made is the front end's [`Schedule`]. The geyser plugin at `confirmed`
//! commitment gives a slot its `confirmed` record when it commits and its `finalized` one once
//! rooted ([`finality`]); at `finalized` a slot commits once rooted and gets the `finalized`
//! record only. At `processed`, and in the in-process module, a bank gets each level's record
//! as it reaches the level, with the root it was frozen with; those reports walk the confirmed
//! and the rooted chain in order, so each level chains exactly as the commit schedule chains it,
//! and abandoned banks never get a record. Each level is its own chain (§9.4); a slot is never
//! recorded twice at a level, across restarts too ([`record_log`]).

pub(crate) mod finality;
pub(crate) mod record_log;

use std::sync::Arc;
use std::sync::atomic::Ordering;

use aldb_snapshot::records::RecordInput;
use aldb_verify::Commitment;
use aldb_verify::record::BlockInfo;
use aldb_verify::spec::Hash;

use crate::bank_hashes::BankHashes;
use crate::config::{Levels, NodeConfig, Schedule};
use crate::error::NodeError;
use crate::stats::NodeStats;
use finality::{Finality, RootedSlots};
use record_log::RecordLog;

/// A bank as its records name it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BankRecord {
    /// The bank's slot.
    pub slot: u64,
    /// Its parent slot; `None` for a base (genesis, or a start's whole state).
    pub parent: Option<u64>,
    /// The root of its state.
    pub root: Hash,
    /// Its block, when the front end knows it (else what [`BankHashes`] holds).
    pub block: Option<BlockInfo>,
    /// Its parent's bank hash, when the front end knows it (else what [`BankHashes`] holds).
    pub parent_bank_hash: Option<Hash>,
}

/// Makes the root records of the pipeline's banks; see the [module documentation](self).
pub struct Records {
    name: &'static str,
    log: RecordLog,
    schedule: Schedule,
    /// At [`Schedule::AtCommit`] `confirmed`: committed slots waiting for their root.
    finality: Option<Finality>,
    /// What the validator said of each bank, which records then carry.
    bank_hashes: Option<Arc<BankHashes>>,
}

impl std::fmt::Debug for Records {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records").field("schedule", &self.schedule).finish_non_exhaustive()
    }
}

impl Records {
    /// The records `config` asks for (`None` when it asks for none), the log opened.
    pub fn start(config: &NodeConfig) -> Result<Option<Self>, NodeError> {
        let Some(settings) = &config.records else { return Ok(None) };
        let log = RecordLog::start(settings, config.writer.dir.clone(), config.writer.hold_for_shipper, config.name)?;
        let finality = (settings.schedule == Schedule::AtCommit(Commitment::Confirmed)).then(Finality::default);
        Ok(Some(Self { name: config.name, log, schedule: settings.schedule, finality, bank_hashes: None }))
    }

    /// Where `Rooted` statuses go, when slots commit at `confirmed` and so get a `finalized`
    /// record later.
    pub fn rooted_slots(&self) -> Option<Arc<RootedSlots>> {
        self.finality.as_ref().map(|f| f.rooted_in.clone())
    }

    /// Records carry each bank's hash (and, when the front end did not give them, its block and
    /// parent bank hash) from `bank_hashes`, which also checks the validator's roots.
    pub fn set_bank_hashes(&mut self, bank_hashes: Arc<BankHashes>) {
        self.bank_hashes = Some(bank_hashes);
    }

    /// Whether records are being produced right now.
    pub fn enabled(&self) -> bool {
        self.log.enabled()
    }

    fn levels(&self) -> Levels {
        self.schedule.levels()
    }

    fn input(&self, bank: &BankRecord, commitment: Commitment) -> RecordInput {
        let said = self.bank_hashes.as_ref().and_then(|b| b.committed(bank.slot, &bank.root));
        RecordInput {
            slot: bank.slot,
            parent: bank.parent,
            commitment,
            state_root: bank.root,
            block: bank.block.or(said.and_then(|s| s.block)),
            parent_bank_hash: bank.parent_bank_hash.or(said.and_then(|s| s.parent_bank_hash)),
            bank_hash: said.map(|s| s.bank_hash),
        }
    }

    /// A slot committed: at [`Schedule::AtCommit`], its record at that level (and at
    /// `confirmed`, its `finalized` one waits for the root). Errors are logged and counted, never
    /// returned.
    pub fn committed(&mut self, bank: &BankRecord, stats: &NodeStats) {
        let Schedule::AtCommit(level) = self.schedule else {
            // Its status changes make its records.
            return;
        };
        let input = self.input(bank, level);
        self.log.produce(input, stats);
        if let Some(f) = self.finality.as_mut() {
            // Also when the confirmed record was logged before a restart: its finalized one
            // may not have been.
            f.wait(RecordInput { commitment: Commitment::Finalized, ..input }, self.name);
            self.finalize(stats);
        }
        self.gauge(stats);
    }

    /// A bank reached `level` (confirmed, or final): its record at that level, when records are
    /// made at it. Errors are logged and counted, never returned.
    pub fn reached(&mut self, bank: &BankRecord, level: Commitment, stats: &NodeStats) {
        if self.levels().has(level) {
            let input = self.input(bank, level);
            self.log.produce(input, stats);
        }
        self.gauge(stats);
    }

    /// Takes the `Rooted` statuses that came since the last call and logs the `finalized`
    /// records of the committed slots they root. Called every round of the pipeline's thread.
    pub fn tick(&mut self, stats: &NodeStats) {
        if self.finality.is_some() {
            self.finalize(stats);
            self.gauge(stats);
        }
    }

    fn gauge(&self, stats: &NodeStats) {
        stats.records_enabled.store(self.enabled(), Ordering::Relaxed);
    }

    fn finalize(&mut self, stats: &NodeStats) {
        let Self { finality: Some(f), log, .. } = self else { return };
        if let Some(upto) = f.final_upto() {
            // Paused: they wait for the log (the queue's bound still holds).
            while !log.paused() {
                let Some(input) = f.pop_upto(upto) else { break };
                log.produce(input, stats);
            }
        }
        f.trim_rooted();
    }
}

#[cfg(test)]
mod tests;
