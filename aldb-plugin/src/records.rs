//! Root records (`docs/SPEC.md` §9): made on the commit worker right after the engine commits a
//! slot, signed when a keypair is configured, and appended to the record log under the snapshot
//! directory, which Hyades serves.
//!
//! With `commitment: "confirmed"` (the default) a slot gets two records: a `confirmed` one when
//! it commits, and a `finalized` one once the validator reports it, or a descendant of it on the
//! committed chain, `Rooted`. The committed slots wait in a bounded queue for that; `Rooted`
//! statuses reach the worker through [`RootedSlots`], since the adapter has forgotten a slot by
//! the time it is rooted. The committed chain is one chain (each commit's parent is the previous
//! commit), so a rooted committed slot finalizes every committed slot before it. With
//! `commitment: "finalized"` slots commit only once rooted and get the `finalized` record only.
//! With `commitment: "processed"` every frozen bank gets a root but no record: a slot gets its
//! `confirmed` record when the adapter reports it confirmed and its `finalized` one when it
//! reports it finalized ([`Records::status`]), each with the root the bank had when it was
//! frozen. Those reports walk the confirmed and the rooted chain in order, so each level chains
//! exactly as the other commitments chain it; abandoned banks never get a record.
//!
//! Nothing here can stop the validator or the roots. A record that cannot be made or logged is
//! logged, counted and skipped. Because a failed append may leave a torn entry at the end of the
//! log, the producer is then dropped and the log reopened, which cuts a torn tail off and resumes
//! the chain from what the log durably holds (so a slot whose record did reach the log is never
//! signed again, and one whose record did not is never half-served). If the log cannot be opened,
//! records pause and the log is tried again every [`RETRY_COMMITS`] commits. The slot whose
//! record is missing breaks the chain there: its child's record is not `CHAINED` (relayers start
//! a new chain segment, §9.4), and the records after that chain again.

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use aldb_snapshot::records::{RecordInput, RecordProducer, Signer};
use aldb_verify::Commitment;
use geyser_adapter::{Committed, StatusChange, StatusKind};

use crate::bank_roots::BankRoots;
use crate::config::{CommitmentLevel, Config};
use crate::metrics::PluginCounters;

/// Commits between attempts to reopen a record log that could not be opened.
pub(crate) const RETRY_COMMITS: u64 = 64;
/// Commits between two attempts to delete old record log segments (each holds 65,536 records,
/// so nothing is gained by trying more often).
const PRUNE_EVERY: u64 = 4096;
/// Committed slots waiting to be rooted: about 27 minutes of slots. A slot pushed out of the
/// queue never gets its `finalized` record (rooting lags confirmation by some 32 slots, so
/// only a validator that stopped rooting gets there).
pub(crate) const MAX_AWAITING_ROOT: usize = 4096;
/// Rooted slots held until their commit comes (the worker can lag the callbacks, and replayed
/// slots are rooted before they commit).
const MAX_ROOTED: usize = 16_384;

/// `Rooted` statuses on their way from the validator's callbacks to the commit worker.
#[derive(Debug, Default)]
pub(crate) struct RootedSlots {
    slots: Mutex<Vec<u64>>,
}

impl RootedSlots {
    /// Notes a rooted slot (called from `update_slot_status`: one short lock).
    pub(crate) fn push(&self, slot: u64) {
        let mut s = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        // Drained every worker round; the bound matters only if the worker stopped.
        if s.len() < MAX_ROOTED {
            s.push(slot);
        }
    }

    fn take(&self) -> Vec<u64> {
        std::mem::take(&mut *self.slots.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// Makes the root records of committed slots.
pub(crate) struct Records {
    snapshot_dir: PathBuf,
    genesis_hash: [u8; 32],
    keypair: Option<PathBuf>,
    commitment: Commitment,
    /// `commitment: "processed"`: records come from status changes, not commits.
    processed: bool,
    producer: Option<RecordProducer>,
    /// Commits to let pass before trying to open the log again.
    retry_in: u64,
    /// Consecutive failures so far: only the first of a run is logged as an error.
    failing: u64,
    /// Root records of the newest this many slots are kept.
    keep_slots: u64,
    /// `hold_for_shipper`: no segment the archive may lack is deleted (the shipper's
    /// `shipped-records.slot`, nothing while it is absent).
    hold_for_shipper: bool,
    /// Commits until the next pruning attempt.
    prune_in: u64,
    /// `Rooted` statuses from the callbacks; `None` when slots commit at `finalized`.
    rooted_in: Option<Arc<RootedSlots>>,
    /// Committed slots (their record inputs, at `finalized`) not yet known to be rooted, in
    /// commit order.
    awaiting_root: VecDeque<RecordInput>,
    /// Rooted slots not committed yet (or never to be: off the committed chain or below it).
    rooted: BTreeSet<u64>,
    /// The validator's bank hashes (block metadata V0_0_5), which records then carry, and the
    /// check of its roots against the plugin's. `None` in a stock build.
    bank_roots: Option<Arc<BankRoots>>,
}

impl Records {
    /// The records the config asks for: `None` without a genesis hash (records are off, with a
    /// warning). A keypair that cannot be read fails, as it would have in the config check; a
    /// record log that cannot be opened only pauses records (an error in the log).
    pub(crate) fn from_config(config: &Config) -> Result<Option<Self>, String> {
        let Some(genesis_hash) = config.genesis_hash else {
            if let Some(why) = config.records_disabled_reason() {
                log::warn!("aldb-plugin: {why}");
            }
            return Ok(None);
        };
        let commitment = match config.commitment {
            CommitmentLevel::Confirmed | CommitmentLevel::Processed => Commitment::Confirmed,
            CommitmentLevel::Finalized => Commitment::Finalized,
        };
        let processed = config.commitment == CommitmentLevel::Processed;
        let mut r = Self {
            snapshot_dir: config.snapshot_dir.clone(),
            genesis_hash,
            keypair: config.keypair.clone(),
            commitment,
            processed,
            producer: None,
            keep_slots: config.record_keep_slots,
            hold_for_shipper: config.hold_for_shipper,
            prune_in: PRUNE_EVERY,
            retry_in: 0,
            failing: 0,
            // Under `processed` the adapter reports roots itself.
            rooted_in: (commitment == Commitment::Confirmed && !processed).then(Arc::default),
            awaiting_root: VecDeque::new(),
            rooted: BTreeSet::new(),
            bank_roots: None,
        };
        let signer = r.signer()?;
        let identity = signer.as_ref().map(Signer::identity);
        match RecordProducer::open(&r.snapshot_dir, genesis_hash, signer) {
            Ok(p) => {
                log::info!(
                    "aldb-plugin: root records for genesis {}, {}, newest logged slot {:?}",
                    aldb_verify::hash_to_base58(&genesis_hash),
                    identity.map_or_else(
                        || "unsigned".to_string(),
                        |id| format!("signed by {}", aldb_verify::hash_to_base58(&id))
                    ),
                    p.last_slot(),
                );
                r.producer = Some(p);
            }
            Err(e) => {
                log::error!(
                    "aldb-plugin: root records paused, the record log cannot be opened (retried every {RETRY_COMMITS} slots): {e}"
                );
                r.retry_in = RETRY_COMMITS;
            }
        }
        Ok(Some(r))
    }

    fn signer(&self) -> Result<Option<Signer>, String> {
        match &self.keypair {
            None => Ok(None),
            Some(path) => {
                Signer::from_keypair_file(path).map(Some).map_err(|e| format!("cannot read the signing key: {e}"))
            }
        }
    }

    /// Where `Rooted` statuses go, when slots commit at `confirmed` and so get a `finalized`
    /// record later.
    pub(crate) fn rooted_slots(&self) -> Option<Arc<RootedSlots>> {
        self.rooted_in.clone()
    }

    /// Whether records are being produced right now.
    pub(crate) fn enabled(&self) -> bool {
        self.producer.is_some()
    }

    /// Drops the producer and opens the log again (cutting a torn tail off). On failure records
    /// pause for [`RETRY_COMMITS`] commits.
    fn reopen(&mut self) -> Result<(), String> {
        self.producer = None;
        let opened = self
            .signer()
            .and_then(|s| RecordProducer::open(&self.snapshot_dir, self.genesis_hash, s).map_err(|e| e.to_string()));
        match opened {
            Ok(p) => {
                self.producer = Some(p);
                Ok(())
            }
            Err(e) => {
                self.retry_in = RETRY_COMMITS;
                Err(e)
            }
        }
    }

    fn failed(&mut self, slot: u64, what: &str, e: &str, counters: &PluginCounters) {
        counters.record_errors.fetch_add(1, Ordering::Relaxed);
        if self.failing == 0 {
            log::error!("aldb-plugin: no root record for slot {slot}: {what}: {e}");
        } else {
            log::debug!("aldb-plugin: no root record for slot {slot}: {what}: {e}");
        }
        self.failing += 1;
    }

    /// Records carry the slot's own bank hash from the validator's block metadata (V0_0_5), and
    /// each slot's root is checked against the validator's.
    #[cfg_attr(not(feature = "patched-interface"), allow(dead_code))]
    pub(crate) fn set_bank_roots(&mut self, bank_roots: Arc<BankRoots>) {
        self.bank_roots = Some(bank_roots);
    }

    fn bank_hash(&self, slot: u64, root: &aldb_verify::Hash) -> Option<aldb_verify::Hash> {
        self.bank_roots.as_ref()?.committed(slot, root)
    }

    /// Produces, signs and logs the commit's record; errors are logged and counted, never
    /// returned.
    pub(crate) fn record<Rec>(&mut self, c: &Committed<Rec>, counters: &PluginCounters) {
        if self.processed {
            // A processed root gets no record; its status changes make them.
            return;
        }
        let input = RecordInput {
            slot: c.slot,
            parent: c.parent,
            commitment: self.commitment,
            state_root: c.root,
            block: c.block,
            parent_bank_hash: c.parent_bank_hash,
            bank_hash: self.bank_hash(c.slot, &c.root),
        };
        self.produce(input, counters);
        if self.rooted_in.is_some() {
            // Also when the confirmed record was logged before a restart: its finalized one
            // may not have been.
            if self.awaiting_root.len() >= MAX_AWAITING_ROOT
                && let Some(old) = self.awaiting_root.pop_front()
            {
                log::warn!(
                    "aldb-plugin: slot {} was not rooted within {MAX_AWAITING_ROOT} commits; no finalized record for it",
                    old.slot
                );
            }
            self.awaiting_root.push_back(RecordInput { commitment: Commitment::Finalized, ..input });
            self.finalize(counters);
        }
        counters.records_enabled.store(self.enabled(), Ordering::Relaxed);
    }

    /// `commitment: "processed"`: the record a status change calls for (a `confirmed` or a
    /// `finalized` one, with the root the bank was frozen with); nothing for an abandoned bank.
    /// Errors are logged and counted, never returned.
    pub(crate) fn status(&mut self, ch: &StatusChange, counters: &PluginCounters) {
        let commitment = match ch.kind {
            StatusKind::Confirmed => Commitment::Confirmed,
            StatusKind::Finalized => Commitment::Finalized,
            StatusKind::Abandoned => return,
        };
        let input = RecordInput {
            slot: ch.slot,
            parent: ch.parent,
            commitment,
            state_root: ch.root,
            block: ch.block,
            parent_bank_hash: ch.parent_bank_hash,
            bank_hash: self.bank_hash(ch.slot, &ch.root),
        };
        self.produce(input, counters);
        counters.records_enabled.store(self.enabled(), Ordering::Relaxed);
    }

    /// Takes the `Rooted` statuses that came since the last call and logs the `finalized`
    /// records of the committed slots they root. Called every worker round.
    pub(crate) fn tick(&mut self, counters: &PluginCounters) {
        if self.rooted_in.is_some() {
            self.finalize(counters);
            counters.records_enabled.store(self.enabled(), Ordering::Relaxed);
        }
    }

    fn finalize(&mut self, counters: &PluginCounters) {
        if let Some(rooted_in) = &self.rooted_in {
            self.rooted.extend(rooted_in.take());
        }
        // The newest committed slot waiting that is rooted: it and every slot committed before
        // it (its ancestors) are final.
        let Some(upto) = self.awaiting_root.iter().rev().map(|i| i.slot).find(|s| self.rooted.contains(s)) else {
            self.trim_rooted();
            return;
        };
        while self.awaiting_root.front().is_some_and(|i| i.slot <= upto) {
            if self.producer.is_none() && self.retry_in > 0 {
                // Paused: they wait for the log (the queue's bound still holds).
                break;
            }
            let Some(input) = self.awaiting_root.pop_front() else { break };
            self.produce(input, counters);
        }
        self.trim_rooted();
    }

    /// Drops rooted slots that can no longer be matched: at or below the newest commit and not
    /// waiting (commits come in slot order), and the oldest past [`MAX_ROOTED`].
    fn trim_rooted(&mut self) {
        if let Some(newest) = self.awaiting_root.back().map(|i| i.slot) {
            let waiting = &self.awaiting_root;
            self.rooted.retain(|s| *s > newest || waiting.binary_search_by_key(s, |i| i.slot).is_ok());
        }
        while self.rooted.len() > MAX_ROOTED {
            self.rooted.pop_first();
        }
    }

    /// Produces, signs and logs one record; errors are logged and counted, never returned.
    fn produce(&mut self, input: RecordInput, counters: &PluginCounters) {
        let slot = input.slot;
        if self.producer.is_none() {
            if self.retry_in > 1 {
                self.retry_in -= 1;
                self.failed(slot, "records paused", "the record log is not open", counters);
                return;
            }
            if let Err(e) = self.reopen() {
                self.failed(slot, "cannot open the record log", &e, counters);
                return;
            }
            log::info!("aldb-plugin: record log reopened at slot {slot}");
        }
        let Some(producer) = self.producer.as_mut() else { return };
        match producer.produce(input) {
            Ok(Some(logged)) => {
                counters.records_produced.fetch_add(1, Ordering::Relaxed);
                self.prune_in = self.prune_in.saturating_sub(1);
                if self.prune_in == 0 {
                    self.prune_in = PRUNE_EVERY;
                    let keep_from = slot.saturating_sub(self.keep_slots);
                    let pruned = match self.hold_for_shipper {
                        true => producer.prune_before_held(keep_from),
                        false => producer.prune_before(keep_from),
                    };
                    match pruned {
                        Ok(0) => {}
                        Ok(n) => log::info!("aldb-plugin: deleted {n} old record log segment(s)"),
                        // Old records only cost disk: log and go on.
                        Err(e) => log::warn!("aldb-plugin: could not delete old record log segments: {e}"),
                    }
                }
                if !logged.attestations.is_empty() {
                    counters.records_signed.fetch_add(1, Ordering::Relaxed);
                }
                if self.failing > 0 {
                    log::info!("aldb-plugin: root records resumed at slot {slot} after {} failures", self.failing);
                    self.failing = 0;
                }
            }
            Ok(None) => {
                counters.records_skipped.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                self.failed(slot, "record log", &e.to_string(), counters);
                // The append may have left a torn entry: start over from what the log holds.
                if let Err(e) = self.reopen() {
                    log::error!(
                        "aldb-plugin: root records paused, the record log cannot be reopened (retried every {RETRY_COMMITS} slots): {e}"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::Path;

    use aldb_format::records::RecordLogReader;
    use geyser_adapter::CommitKind;

    use super::*;

    fn config(dir: &Path, genesis: [u8; 32]) -> Config {
        let text = format!(
            "{{libpath: 'x.so', snapshot_dir: 'snap', genesis_hash: '{}'}}",
            aldb_verify::hash_to_base58(&genesis)
        );
        Config::parse(&text, dir).unwrap()
    }

    fn commit(slot: u64, parent: Option<u64>) -> Committed {
        Committed {
            slot,
            parent,
            root: [slot as u8; 32],
            kind: CommitKind::Slot,
            updates: 0,
            records: Vec::new(),
            changes: None,
            block: None,
            parent_bank_hash: None,
        }
    }

    /// With `hold_for_shipper` pruning keeps every record segment the shipper has not recorded as
    /// archived (`shipped-records.slot`), and all of them before it recorded anything; without it
    /// `record_keep_slots` alone rules.
    #[test]
    fn record_pruning_waits_for_the_shipper_when_held() {
        use aldb_format::records::{encode_entry, list_segments, segment_header, segment_name};
        for held in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let snap = dir.path().join("snap");
            let counters = PluginCounters::default();
            let text = format!(
                "{{libpath: 'x.so', snapshot_dir: 'snap', genesis_hash: '{}', record_keep_slots: 1, hold_for_shipper: {held}}}",
                aldb_verify::hash_to_base58(&[1; 32])
            );
            let mut r = Records::from_config(&Config::parse(&text, dir.path()).unwrap()).unwrap().unwrap();
            for s in 0..6 {
                r.record(&commit(s, s.checked_sub(1)), &counters);
            }
            // Cut the log in segments of three (a real one cuts every 65,536 records).
            let logged = RecordLogReader::new(&snap).refresh().unwrap();
            for (_, path) in list_segments(&snap.join("records")).unwrap() {
                std::fs::remove_file(path).unwrap();
            }
            for chunk in logged.chunks(3) {
                let mut bytes = segment_header().to_vec();
                chunk.iter().for_each(|l| bytes.extend(encode_entry(l)));
                std::fs::write(snap.join("records").join(segment_name(chunk[0].record.slot)), bytes).unwrap();
            }
            r.reopen().unwrap();
            let names =
                || list_segments(&snap.join("records")).unwrap().into_iter().map(|(f, _)| f).collect::<Vec<_>>();
            r.prune_in = 1;
            r.record(&commit(6, Some(5)), &counters);
            if !held {
                assert_eq!(names(), [3], "segment 0 holds only slots below 5");
                continue;
            }
            assert_eq!(names(), [0, 3], "no hold yet: nothing may go");
            aldb_format::shipped::write_records_shipped(&snap, 3).unwrap();
            r.prune_in = 1;
            r.record(&commit(7, Some(6)), &counters);
            assert_eq!(names(), [3]);
            assert_eq!(counters.records_produced.load(Ordering::Relaxed), 8);
        }
    }

    #[test]
    fn a_torn_tail_is_cut_off_and_the_chain_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let counters = PluginCounters::default();
        let mut r = Records::from_config(&config(dir.path(), [1; 32])).unwrap().unwrap();
        for s in 0..3 {
            r.record(&commit(s, s.checked_sub(1)), &counters);
        }
        // What a failed append can leave behind: part of an entry.
        let seg = std::fs::read_dir(dir.path().join("snap/records")).unwrap().next().unwrap().unwrap().path();
        std::fs::OpenOptions::new().append(true).open(&seg).unwrap().write_all(&[200, 0, 0, 0, 1, 2]).unwrap();
        r.reopen().unwrap();
        r.record(&commit(3, Some(2)), &counters);
        r.record(&commit(2, Some(1)), &counters); // never a second record for a slot
        assert_eq!(counters.records_produced.load(Ordering::Relaxed), 4);
        assert_eq!(counters.records_skipped.load(Ordering::Relaxed), 1);
        let mut reader = RecordLogReader::new(&dir.path().join("snap"));
        let logged = reader.refresh().unwrap();
        assert_eq!(logged.iter().map(|l| l.record.slot).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert!(logged[3].record.extends(&logged[2].record, &logged[2].record_hash));
        assert_eq!(reader.bad_entries(), 0);
    }

    #[test]
    fn another_clusters_log_pauses_records_without_failing() {
        let dir = tempfile::tempdir().unwrap();
        let counters = PluginCounters::default();
        let mut r = Records::from_config(&config(dir.path(), [1; 32])).unwrap().unwrap();
        r.record(&commit(0, None), &counters);
        drop(r);
        let mut other = Records::from_config(&config(dir.path(), [2; 32])).unwrap().unwrap();
        assert!(!other.enabled());
        for s in 1..=(RETRY_COMMITS + 1) {
            other.record(&commit(s, Some(s - 1)), &counters);
        }
        assert!(!other.enabled());
        assert!(!counters.records_enabled.load(Ordering::Relaxed));
        assert_eq!(counters.record_errors.load(Ordering::Relaxed), RETRY_COMMITS + 1);
        assert_eq!(counters.records_produced.load(Ordering::Relaxed), 1);
    }

    fn levels(dir: &Path) -> Vec<(u64, Commitment)> {
        let logged = RecordLogReader::new(&dir.join("snap")).refresh().unwrap();
        logged.iter().map(|l| (l.record.slot, l.record.commitment)).collect()
    }

    #[test]
    fn rooted_slots_get_a_finalized_record_chained_to_the_finalized_parent() {
        use Commitment::{Confirmed, Finalized};
        let dir = tempfile::tempdir().unwrap();
        let counters = PluginCounters::default();
        let mut r = Records::from_config(&config(dir.path(), [1; 32])).unwrap().unwrap();
        let rooted = r.rooted_slots().expect("confirmed commits get finalized records");
        for s in 0..4 {
            r.record(&commit(s, s.checked_sub(1)), &counters);
        }
        // Rooted before its commit (a worker behind the callbacks): held until slot 5 commits.
        rooted.push(5);
        // Slot 2 rooted: it and its committed ancestors are final; 3 waits.
        rooted.push(2);
        rooted.push(1); // repeated by a later status: nothing new
        r.tick(&counters);
        r.tick(&counters);
        assert_eq!(
            levels(dir.path()),
            [
                (0, Confirmed),
                (1, Confirmed),
                (2, Confirmed),
                (3, Confirmed),
                (0, Finalized),
                (1, Finalized),
                (2, Finalized)
            ]
        );
        // Slot 4 is skipped by the cluster: 5's parent is 3. Committing 5 finalizes 3 and 5.
        r.record(&commit(5, Some(3)), &counters);
        let all = levels(dir.path());
        assert_eq!(&all[7..], [(5, Confirmed), (3, Finalized), (5, Finalized)]);
        assert_eq!(counters.records_produced.load(Ordering::Relaxed), 10);
        let logged = RecordLogReader::new(&dir.path().join("snap")).refresh().unwrap();
        let fin: Vec<_> = logged.iter().filter(|l| l.record.commitment == Finalized).collect();
        for w in fin.windows(2) {
            assert!(w[1].record.extends(&w[0].record, &w[0].record_hash), "slot {}", w[1].record.slot);
        }
        drop(r);

        // Restarted: the validator commits slots 3 to 6 again (replay) and roots them. Nothing
        // is signed twice at either level; 6 gets both records, chained to 5's.
        let mut r = Records::from_config(&config(dir.path(), [1; 32])).unwrap().unwrap();
        let rooted = r.rooted_slots().unwrap();
        for (s, p) in [(3, 2), (5, 3), (6, 5)] {
            r.record(&commit(s, Some(p)), &counters);
            rooted.push(s);
            r.tick(&counters);
        }
        assert_eq!(&levels(dir.path())[10..], [(6, Confirmed), (6, Finalized)]);
        assert_eq!(counters.records_skipped.load(Ordering::Relaxed), 4);
        let logged = RecordLogReader::new(&dir.path().join("snap")).refresh().unwrap();
        assert!(logged[11].record.extends(&logged[9].record, &logged[9].record_hash));
    }

    #[test]
    fn at_processed_commitment_status_changes_make_the_records() {
        use Commitment::{Confirmed, Finalized};
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "{{libpath: 'x.so', snapshot_dir: 'snap', commitment: 'processed', genesis_hash: '{}'}}",
            aldb_verify::hash_to_base58(&[1; 32])
        );
        let mut r = Records::from_config(&Config::parse(&text, dir.path()).unwrap()).unwrap().unwrap();
        assert!(r.rooted_slots().is_none(), "the adapter reports roots");
        let counters = PluginCounters::default();
        // Freezes make no record, forks included.
        for (s, p) in [(0, None), (1, Some(0)), (2, Some(0)), (3, Some(1))] {
            r.record(&commit(s, p), &counters);
        }
        assert!(levels(dir.path()).is_empty());
        let ch = |slot: u64, parent: Option<u64>, kind| StatusChange {
            slot,
            kind,
            root: [slot as u8; 32],
            parent,
            block: None,
            parent_bank_hash: None,
        };
        for c in [
            ch(0, None, StatusKind::Confirmed),
            ch(0, None, StatusKind::Finalized),
            ch(1, Some(0), StatusKind::Confirmed),
            ch(2, Some(0), StatusKind::Abandoned),
            ch(3, Some(1), StatusKind::Confirmed),
            ch(1, Some(0), StatusKind::Finalized),
            ch(3, Some(1), StatusKind::Finalized),
        ] {
            r.status(&c, &counters);
        }
        assert_eq!(
            levels(dir.path()),
            [(0, Confirmed), (0, Finalized), (1, Confirmed), (3, Confirmed), (1, Finalized), (3, Finalized)]
        );
        let logged = RecordLogReader::new(&dir.path().join("snap")).refresh().unwrap();
        for level in [Confirmed, Finalized] {
            let chain: Vec<_> = logged.iter().filter(|l| l.record.commitment == level).collect();
            for w in chain.windows(2) {
                assert!(w[1].record.extends(&w[0].record, &w[0].record_hash), "{level:?} slot {}", w[1].record.slot);
            }
        }
        // Once per slot and level, as at the other commitments.
        r.status(&ch(3, Some(1), StatusKind::Confirmed), &counters);
        assert_eq!(levels(dir.path()).len(), 6);
        assert_eq!(counters.records_skipped.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn at_finalized_commitment_there_is_one_level() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "{{libpath: 'x.so', snapshot_dir: 'snap', commitment: 'finalized', genesis_hash: '{}'}}",
            aldb_verify::hash_to_base58(&[1; 32])
        );
        let mut r = Records::from_config(&Config::parse(&text, dir.path()).unwrap()).unwrap().unwrap();
        assert!(r.rooted_slots().is_none());
        let counters = PluginCounters::default();
        r.record(&commit(0, None), &counters);
        r.tick(&counters);
        assert_eq!(levels(dir.path()), [(0, Commitment::Finalized)]);
    }
}
