//! A directory whose snapshots and vote-evidence log span five epochs of 32 slots with a set
//! that changes every epoch (`docs/SPEC.md` §11): every bank from epoch 1 on binds the next
//! epoch's set, each set is logged with the first bank binding it, and every slot is voted on by
//! all four validators, with real keys, in the next block. Account `[3; 32]` holds
//! `LAMPORTS_BASE + slot` lamports at each slot.

use std::path::Path;

use aldb_fixture::History;
use aldb_fixture::votes::Voter;
use aldb_format::Account;
use aldb_format::votes::{AldbCommitment, BankEntry, SetEntry, VoteLog, VoteLogEntry, VotesEntry};
use aldb_snapshot::WriterConfig;
use aldb_verify::epochs::{Checkpoint, EpochSchedule, EpochSet, bank_hash_with_set};
use aldb_verify::votes::{Validator, bank_hash};

/// Slots per epoch (and the leader-schedule offset): epoch `e` is slots `32e..32e+31`.
pub const EPOCH: u64 = 32;
/// The newest slot written: in epoch 4, so its banks bind the set of epoch 5.
pub const LAST: u64 = 140;
/// The account whose lamports change every slot.
pub const KEY: [u8; 32] = [3; 32];
/// Its lamports at slot `s` are this plus `s`.
pub const LAMPORTS_BASE: u64 = 1000;

/// The schedule: 32-slot epochs without warmup.
pub fn schedule() -> EpochSchedule {
    EpochSchedule::new(EPOCH, EPOCH, false).unwrap()
}

/// Four validators: two vote with their node identity, two with keys of their own.
pub fn voters() -> Vec<Voter> {
    (0..4u8).map(|i| Voter::new([40 + i; 32], (i % 2 == 1).then_some([60 + i; 32]), [80 + i; 32])).collect()
}

/// The set of `epoch`: validators `i` with stakes `stakes[i]` (0: not a member), the total
/// `total` (at least their sum).
pub fn set_with_total(epoch: u64, stakes: [u64; 4], total: u64) -> EpochSet {
    let members: Vec<Validator> = voters()
        .iter()
        .zip(stakes)
        .filter(|(_, s)| *s > 0)
        .map(|(v, stake)| Validator { vote_account: v.vote_account(), authorized_voter: v.authorized_voter(), stake })
        .collect();
    EpochSet::new(epoch, total, &members).unwrap()
}

/// The sets of epochs 1 to 5: a stake drops in 2, a validator leaves in 3 and comes back in 4,
/// and two leave in 5 (whose members alone hold half of epoch 4's stake, not 2/3).
pub fn sets() -> Vec<EpochSet> {
    [[100, 100, 50, 50], [10, 100, 100, 100], [100, 100, 100, 0], [50, 50, 100, 100], [100, 0, 0, 100]]
        .into_iter()
        .zip(1u64..)
        .map(|(stakes, epoch)| set_with_total(epoch, stakes, stakes.iter().sum()))
        .collect()
}

/// The set of `epoch` (1 to 5).
pub fn set(epoch: u64) -> EpochSet {
    sets()[usize::try_from(epoch - 1).unwrap()].clone()
}

/// A slot's `h`; `fork` changes it, and so the bank hash, keeping the root.
pub fn h_of(slot: u64, fork: bool) -> [u8; 32] {
    let mut h = [if fork { 0xCD } else { 0xAB }; 32];
    h[..8].copy_from_slice(&slot.to_le_bytes());
    h
}

/// A checkpoint of `set` taken `age` seconds before now, trusted for `trusting_period` seconds.
pub fn checkpoint(set: EpochSet, age: i64, trusting_period: u64) -> Checkpoint {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    Checkpoint { schedule: schedule(), set, time: now - age, trusting_period }
}

/// Writes the snapshots of slots 0 to [`LAST`] and the vote log into `dir`. With `fork`, that
/// slot's bank has another `h` (so another bank hash), voted on by all four validators: what a
/// service following another fork, or lying with more than 1/3 of the stake, serves.
pub fn write(dir: &Path, fork: Option<u64>) {
    let account = |i: u8, lamports: u64| Account {
        pubkey: [i; 32],
        lamports,
        owner: [200; 32],
        executable: false,
        data: vec![i; usize::from(i % 5)],
    };
    let config = WriterConfig { keep_slots: 1000, direct_io: false, ..WriterConfig::new(dir) };
    let mut history = History::start(config, 64).unwrap();
    let mut first: Vec<Account> = (1..20).map(|i| account(i, 500 + u64::from(i))).collect();
    first.push(account(KEY[0], LAMPORTS_BASE));
    history.commit(0, None, &first).unwrap();
    for slot in 1..=LAST {
        history.commit(slot, Some(slot - 1), &[account(KEY[0], LAMPORTS_BASE + slot)]).unwrap();
    }
    let roots = history.finish().unwrap();

    let (vs, sets) = (voters(), sets());
    let mut log = VoteLog::open(dir).unwrap();
    let mut prev: Option<BankEntry> = None;
    for slot in 0..=LAST {
        let (epoch, root) = (slot / EPOCH, roots[&slot]);
        let h = h_of(slot, fork == Some(slot));
        // Epoch 0 binds no set: the feature activated at epoch 1.
        let next = (epoch >= 1).then(|| sets[usize::try_from(epoch).unwrap()].hash());
        let bank = BankEntry {
            slot,
            parent: slot.saturating_sub(1),
            bank_hash: match next {
                Some(n) => bank_hash_with_set(&h, &root, &n, None),
                None => bank_hash(&h, &root, None),
            },
            aldb: Some(AldbCommitment { h, root }),
            hard_forks: None,
            next_set_hash: next,
        };
        let mut entries = Vec::new();
        if epoch >= 1 && slot % EPOCH == 0 {
            entries.push(VoteLogEntry::Set(SetEntry::new(slot, sets[usize::try_from(epoch).unwrap()].encode())));
        }
        entries.push(VoteLogEntry::Bank(bank));
        if let Some(p) = prev {
            let txs = vs.iter().map(|v| v.vote(p.slot, &p.bank_hash)).collect();
            entries.push(VoteLogEntry::Votes(VotesEntry { slot, transactions: txs }));
        }
        log.append(&entries).unwrap();
        prev = Some(bank);
    }
}
