//! The vote-evidence writer (the geyser plugin's `vote_evidence: true`, a build against the
//! patched interface): frozen banks and vote transactions from the front end to `votes/` in the
//! snapshot directory (`aldb_format::votes`, `docs/PLUGIN.md` §9), on a thread of its own.
//!
//! A validator callback never waits for it: it hands its item to a bounded queue and, when the queue is
//! full (the disk stalls, the thread is gone), drops the item and counts it. The thread checks
//! every vote's signatures over the bytes the plugin rebuilt from the validator's transaction, so
//! the log only ever holds the exact bytes that were signed, and appends what it gathered about
//! five times a second with one `fdatasync`.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use aldb_format::votes::{BankEntry, SetEntry, VoteLog, VoteLogEntry, VotesEntry};
use aldb_verify::Hash;
use aldb_verify::epochs::EpochSet;
use aldb_verify::votes::VoteTransaction;

use crate::error::NodeError;

/// Items the queue holds: at mainnet rates (some 1,500 votes a slot) about 40 slots.
pub const QUEUE_BOUND: usize = 65_536;
/// How long the thread gathers before it appends.
const FLUSH_EVERY: Duration = Duration::from_millis(200);
/// Transactions per log entry (well under the entry bound at 1232 bytes each).
const VOTES_PER_ENTRY: usize = 512;
/// Appends between two pruning passes.
const PRUNE_EVERY: u64 = 64;

/// What the front end hands the thread.
#[derive(Debug)]
pub enum Item {
    /// A frozen bank, from block metadata V0_0_5 (`next_set_hash` set when its hash binds the
    /// next epoch's set, `docs/SPEC.md` §11.1).
    Bank(BankEntry),
    /// The encoding of the set a bank binds (`docs/SPEC.md` §11.2), handed over when its hash
    /// differs from the last one handed over: the thread checks that it decodes and hashes to
    /// `hash` and logs it once per distinct hash.
    NextSet {
        /// The slot of the bank binding it.
        slot: u64,
        /// The bank's `next_set_hash`.
        hash: Hash,
        /// The set's canonical encoding.
        encoding: Vec<u8>,
    },
    /// A vote transaction of the block of `slot`, as rebuilt from the validator's.
    Vote {
        /// The slot of the block holding the vote.
        slot: u64,
        /// The transaction's wire bytes.
        tx: Vec<u8>,
    },
}

/// The evidence counters, which the metrics render.
#[derive(Debug, Default)]
pub struct EvidenceCounters {
    /// Bank entries appended.
    pub banks: AtomicU64,
    /// Vote transactions appended.
    pub votes: AtomicU64,
    /// Items dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Vote transactions not logged: versioned, oversized, not a TowerSync, or bytes whose
    /// signatures do not verify.
    pub rejected: AtomicU64,
    /// Appends or prunes of the log that failed.
    pub errors: AtomicU64,
    /// Slots whose V0_0_5 aldb root differs from the root the plugin committed.
    pub root_mismatches: AtomicU64,
    /// Slots whose V0_0_5 root the plugin checked against its own.
    pub roots_checked: AtomicU64,
    /// Banks whose hash does not follow from the `h`, root and next set hash the validator sent.
    pub unexplained_bank_hashes: AtomicU64,
    /// Sets appended to the log.
    pub sets: AtomicU64,
    /// Set encodings not logged: they do not decode by §11.2's rules or do not hash to the bank's
    /// `next_set_hash`.
    pub set_mismatches: AtomicU64,
}

/// The running evidence writer.
pub struct Evidence {
    tx: Option<SyncSender<Item>>,
    thread: Option<JoinHandle<()>>,
    counters: Arc<EvidenceCounters>,
    name: &'static str,
}

impl std::fmt::Debug for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evidence").field("counters", &self.counters).finish_non_exhaustive()
    }
}

impl Evidence {
    /// Opens the log under `snapshot_dir` and starts the thread; `keep_slots` bounds what is kept,
    /// and with `hold_for_shipper` no segment the archive may lack is deleted
    /// (`VoteLog::prune_held`: the shipper's `shipped-votes.slot`, nothing while it is absent).
    /// `name` (the front end's) starts its log lines.
    pub fn start(
        snapshot_dir: &Path,
        keep_slots: u64,
        hold_for_shipper: bool,
        counters: Arc<EvidenceCounters>,
        name: &'static str,
    ) -> Result<Self, NodeError> {
        let log = VoteLog::open(snapshot_dir)
            .map_err(|source| NodeError::EvidenceLog { dir: snapshot_dir.to_path_buf(), source })?;
        let (tx, rx) = sync_channel(QUEUE_BOUND);
        let thread = {
            let counters = counters.clone();
            let dir = snapshot_dir.to_path_buf();
            std::thread::Builder::new()
                .name("aldb-evidence".into())
                .spawn(move || run(&rx, Some(log), &dir, Retention { keep_slots, hold_for_shipper }, &counters, name))
                .map_err(|source| NodeError::Thread { thread: "evidence", source })?
        };
        Ok(Self { tx: Some(tx), thread: Some(thread), counters, name })
    }

    /// Hands `item` to the thread without waiting; a full queue drops it (counted). Returns
    /// whether it was queued (a front end hands a set again when it was not).
    pub fn send(&self, item: Item) -> bool {
        let Some(tx) = &self.tx else { return false };
        match tx.try_send(item) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.counters.dropped.fetch_add(1, Relaxed);
                false
            }
        }
    }

    /// The counters.
    pub fn counters(&self) -> &EvidenceCounters {
        &self.counters
    }
}

impl Drop for Evidence {
    /// Closes the queue; the thread appends what it holds and ends.
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            log::error!("{}: the evidence thread panicked", self.name);
        }
    }
}

/// A hash in hex, for the log.
fn hex(h: &Hash) -> String {
    h.iter().map(|b| format!("{b:02x}")).collect()
}

/// What the thread gathered since its last append.
#[derive(Default)]
struct Pending {
    sets: Vec<SetEntry>,
    banks: Vec<BankEntry>,
    votes: BTreeMap<u64, Vec<Vec<u8>>>,
}

impl Pending {
    fn is_empty(&self) -> bool {
        self.sets.is_empty() && self.banks.is_empty() && self.votes.is_empty()
    }

    /// Takes `item`; `logged` says whether the log already holds a set.
    fn add(&mut self, item: Item, logged: &dyn Fn(&Hash) -> bool, counters: &EvidenceCounters) {
        match item {
            Item::Bank(b) => self.banks.push(b),
            Item::NextSet { slot, hash, encoding } => {
                if logged(&hash) || self.sets.iter().any(|s| s.hash == hash) {
                    return;
                }
                // A client recomputes the set's hash and rules: only a set that passes them is
                // worth logging, and one that does not says the validator and plugin disagree.
                match EpochSet::decode(&encoding) {
                    Ok(set) if set.hash() == hash => self.sets.push(SetEntry { slot, hash, encoding }),
                    Ok(set) => {
                        counters.set_mismatches.fetch_add(1, Relaxed);
                        log::error!(
                            "slot {slot}: the set handed over hashes to {}, not to the bank's next_set_hash {}",
                            hex(&set.hash()),
                            hex(&hash)
                        );
                    }
                    Err(e) => {
                        counters.set_mismatches.fetch_add(1, Relaxed);
                        log::error!("slot {slot}: the set handed over does not decode: {e}");
                    }
                }
            }
            Item::Vote { slot, tx } => {
                // Only the bytes that were signed are evidence.
                let signed = VoteTransaction::parse(&tx).is_ok_and(|v| v.verify_signatures().is_ok());
                if signed {
                    self.votes.entry(slot).or_default().push(tx);
                } else {
                    counters.rejected.fetch_add(1, Relaxed);
                }
            }
        }
    }

    fn entries(&mut self) -> Vec<VoteLogEntry> {
        // A set before the banks binding it, so a reader that sees a bank sees its set.
        let mut out: Vec<VoteLogEntry> = self.sets.drain(..).map(VoteLogEntry::Set).collect();
        out.extend(self.banks.drain(..).map(VoteLogEntry::Bank));
        for (slot, txs) in std::mem::take(&mut self.votes) {
            for chunk in txs.chunks(VOTES_PER_ENTRY) {
                out.push(VoteLogEntry::Votes(VotesEntry { slot, transactions: chunk.to_vec() }));
            }
        }
        out
    }
}

/// What the thread keeps of the log.
#[derive(Clone, Copy)]
struct Retention {
    keep_slots: u64,
    hold_for_shipper: bool,
}

impl Retention {
    fn prune(self, log: &mut VoteLog, newest: u64) -> Result<usize, aldb_format::votes::VoteLogError> {
        let keep_from = newest.saturating_sub(self.keep_slots);
        if self.hold_for_shipper { log.prune_held(keep_from) } else { log.prune(keep_from) }
    }
}

fn run(
    rx: &Receiver<Item>,
    mut log: Option<VoteLog>,
    dir: &Path,
    retention: Retention,
    counters: &EvidenceCounters,
    name: &str,
) {
    let mut pending = Pending::default();
    let mut appends = 0u64;
    let mut last_flush = Instant::now();
    loop {
        let closed = match rx.recv_timeout(FLUSH_EVERY) {
            Ok(item) => {
                pending.add(item, &|h| log.as_ref().is_some_and(|l| l.holds_set(h)), counters);
                false
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        };
        if !closed && last_flush.elapsed() < FLUSH_EVERY {
            continue;
        }
        last_flush = Instant::now();
        if !pending.is_empty() {
            append(&mut log, dir, &mut pending, counters, name);
            appends += 1;
            if appends.is_multiple_of(PRUNE_EVERY)
                && let Some(l) = log.as_mut()
                && let Some(newest) = l.newest_slot()
                && let Err(e) = retention.prune(l, newest)
            {
                counters.errors.fetch_add(1, Relaxed);
                log::warn!("{name}: pruning the vote-evidence log: {e}");
            }
        }
        if closed {
            return;
        }
    }
}

/// Appends what is pending. A failed append may leave a torn entry: the log is dropped and
/// reopened on the next append, which cuts it; the items of the failed append are lost (counted).
fn append(log: &mut Option<VoteLog>, dir: &Path, pending: &mut Pending, counters: &EvidenceCounters, name: &str) {
    let entries = pending.entries();
    if log.is_none() {
        match VoteLog::open(dir) {
            Ok(l) => *log = Some(l),
            Err(e) => {
                counters.errors.fetch_add(1, Relaxed);
                log::error!("{name}: cannot reopen the vote-evidence log: {e}");
                return;
            }
        }
    }
    let Some(l) = log.as_mut() else { return };
    match l.append(&entries) {
        Ok(()) => {
            for e in &entries {
                match e {
                    VoteLogEntry::Bank(_) => counters.banks.fetch_add(1, Relaxed),
                    VoteLogEntry::Votes(v) => counters.votes.fetch_add(v.transactions.len() as u64, Relaxed),
                    VoteLogEntry::Set(_) => counters.sets.fetch_add(1, Relaxed),
                    _ => 0,
                };
            }
        }
        Err(e) => {
            counters.errors.fetch_add(1, Relaxed);
            log::error!("{name}: appending to the vote-evidence log: {e}");
            *log = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use aldb_format::votes::{AldbCommitment, VoteLogReader};

    use super::*;

    fn base64(s: &str) -> Vec<u8> {
        let val = |c: u8| match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            _ => 63,
        };
        let digits: Vec<u8> = s.bytes().filter(|&c| c != b'=').map(val).collect();
        let mut out = Vec::new();
        for chunk in digits.chunks(4) {
            let n = chunk.iter().enumerate().fold(0u32, |n, (i, &d)| n | u32::from(d) << (18 - 6 * i));
            out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
        }
        out
    }

    /// The honest one-signer vote of the vote vectors, and the slot it votes on.
    fn signed_vote() -> (Vec<u8>, u64) {
        let v: serde_json::Value = serde_json::from_str(include_str!("../../tests/vectors/votes-v1.json")).unwrap();
        let t = &v["transactions"][0];
        (base64(t["bytes"].as_str().unwrap()), t["slot"].as_u64().unwrap())
    }

    #[test]
    fn banks_and_signed_votes_reach_the_log_and_tampered_ones_do_not() {
        let dir = tempfile::tempdir().unwrap();
        let counters = Arc::new(EvidenceCounters::default());
        let ev = Evidence::start(dir.path(), 1000, false, counters.clone(), "test").unwrap();
        let (vote, voted) = signed_vote();
        let (h, root) = ([1; 32], [2; 32]);
        let bank = BankEntry {
            slot: voted,
            parent: voted - 1,
            bank_hash: aldb_verify::votes::mix_root(&h, &root),
            aldb: Some(AldbCommitment { h, root }),
            hard_forks: None,
            next_set_hash: None,
        };
        ev.send(Item::Bank(bank));
        ev.send(Item::Vote { slot: voted + 1, tx: vote.clone() });
        let mut tampered = vote.clone();
        let last = tampered.len() - 1;
        tampered[last] ^= 1;
        ev.send(Item::Vote { slot: voted + 1, tx: tampered });
        ev.send(Item::Vote { slot: voted + 2, tx: vec![1, 2, 3] });
        drop(ev);
        assert_eq!(counters.banks.load(Relaxed), 1);
        assert_eq!(counters.votes.load(Relaxed), 1);
        assert_eq!(counters.rejected.load(Relaxed), 2);
        let mut r = VoteLogReader::new(dir.path());
        r.refresh().unwrap();
        let got = r.slot_votes(voted, 32).unwrap().unwrap();
        assert_eq!(got.bank, bank);
        assert_eq!(got.votes, [vote]);
    }

    /// A set handed over with its bank is logged once per hash, across a restart of the writer,
    /// and only when it decodes and hashes to the bank's `next_set_hash`.
    #[test]
    fn a_bound_set_is_logged_once_and_only_when_it_is_the_banks() {
        use aldb_verify::votes::Validator;
        let dir = tempfile::tempdir().unwrap();
        let members = [Validator { vote_account: [1; 32], authorized_voter: [2; 32], stake: 5 }];
        let set = EpochSet::new(3, 9, &members).unwrap();
        let other = EpochSet::new(4, 9, &members).unwrap();
        let (h, root) = ([1; 32], [2; 32]);
        let bank = |slot: u64, next: Hash| BankEntry {
            slot,
            parent: slot - 1,
            bank_hash: aldb_verify::epochs::bank_hash_with_set(&h, &root, &next, None),
            aldb: Some(AldbCommitment { h, root }),
            hard_forks: None,
            next_set_hash: Some(next),
        };
        for round in 0..2 {
            let counters = Arc::new(EvidenceCounters::default());
            let ev = Evidence::start(dir.path(), 1000, false, counters.clone(), "test").unwrap();
            for slot in [10 + round * 10, 11 + round * 10] {
                assert!(ev.send(Item::Bank(bank(slot, set.hash()))));
                ev.send(Item::NextSet { slot, hash: set.hash(), encoding: set.encode() });
            }
            // Another set's encoding for a hash not logged yet, and bytes that are no set. (A
            // hash already logged is not checked again: its set is in the log.)
            ev.send(Item::NextSet { slot: 12, hash: [9; 32], encoding: other.encode() });
            ev.send(Item::NextSet { slot: 12, hash: other.hash(), encoding: vec![0; 19] });
            drop(ev);
            assert_eq!(counters.banks.load(Relaxed), 2);
            assert_eq!(counters.sets.load(Relaxed), u64::from(round == 0), "round {round}");
            assert_eq!(counters.set_mismatches.load(Relaxed), 2);
        }
        let mut r = VoteLogReader::new(dir.path());
        r.refresh().unwrap();
        assert_eq!(r.set_epochs(), [3]);
        assert_eq!(r.set_encoding(&set.hash()).unwrap(), Some(set.encode()));
        assert_eq!(r.bank(20).unwrap().next_set_hash, Some(set.hash()));
    }

    /// With `hold_for_shipper` the thread's pruning keeps what the shipper has not recorded as
    /// archived, and nothing before it recorded anything; without it `keep_slots` alone rules.
    #[test]
    fn pruning_waits_for_the_shipper_when_held() {
        use aldb_format::votes::VoteLogOptions;
        let bank = |slot| {
            VoteLogEntry::Bank(BankEntry {
                slot,
                parent: slot - 1,
                bank_hash: [1; 32],
                aldb: None,
                hard_forks: None,
                next_set_hash: None,
            })
        };
        let opts = VoteLogOptions { segment_bytes: 1 << 20, segment_slots: 10 };
        let held = Retention { keep_slots: 5, hold_for_shipper: true };
        for hold_for_shipper in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let mut log = VoteLog::open_with(dir.path(), opts).unwrap();
            for s in 1..=45 {
                log.append(&[bank(s)]).unwrap();
            }
            let r = Retention { hold_for_shipper, ..held };
            let deleted = r.prune(&mut log, 45).unwrap();
            assert_eq!(deleted, if hold_for_shipper { 0 } else { 3 }, "held: {hold_for_shipper}");
        }
        let dir = tempfile::tempdir().unwrap();
        let mut log = VoteLog::open_with(dir.path(), opts).unwrap();
        for s in 1..=45 {
            log.append(&[bank(s)]).unwrap();
        }
        aldb_format::shipped::write_votes_shipped(dir.path(), 21).unwrap();
        assert_eq!(held.prune(&mut log, 45).unwrap(), 2, "segments 1 and 11 are below the hold");
        assert_eq!(aldb_format::votes::list_segments(log.dir()).unwrap().len(), 3);
    }

    #[test]
    fn a_full_queue_drops_and_counts_instead_of_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let counters = Arc::new(EvidenceCounters::default());
        // A sender whose thread never reads: the queue fills and every item after is dropped.
        let (tx, rx) = sync_channel(2);
        let ev = Evidence { tx: Some(tx), thread: None, counters: counters.clone(), name: "test" };
        for slot in 0..5 {
            ev.send(Item::Vote { slot, tx: vec![0] });
        }
        assert_eq!(counters.dropped.load(Relaxed), 3);
        drop(rx);
        ev.send(Item::Vote { slot: 9, tx: vec![0] });
        assert_eq!(counters.dropped.load(Relaxed), 4);
        drop(dir);
    }
}
