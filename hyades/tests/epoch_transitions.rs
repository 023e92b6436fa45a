//! `getEpochTransition` and `getSlotVotes`' `nextSetHash` against the real service on loopback,
//! over a vote-evidence log written by its real writer across four epochs of 32 slots whose sets
//! change, with TowerSync votes signed by real keys: each epoch's transition is accepted in
//! sequence by the light client of `docs/SPEC.md` §11.5 from the first set; a slot whose votes do
//! not reach 2/3 of the epoch's set is not chosen; an epoch whose set the log does not hold says
//! so; the transitions survive the pruning of the segments they were logged in; and a replica
//! on SeaweedFS serves them byte for byte as the directory does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use aldb_fixture::votes::Voter;
use aldb_format::votes::{
    AldbCommitment, BankEntry, Carry, SetEntry, VoteLog, VoteLogEntry, VoteLogOptions, VoteLogReader, VotesEntry,
};
use aldb_snapshot::WriterConfig;
use aldb_verify::epochs::{
    Advanced, Checkpoint, EpochSchedule, EpochSet, LightClient, SlotEvidence, Transition, bank_hash_with_set,
};
use aldb_verify::votes::{Validator, bank_hash};
use common::replica::{ask, replica, replica_with, shipper};
use common::votes::{h_of, voters};
use common::weed::Weed;
use common::{Model, Server, b58, metric, wait_until};
use hyades::codes;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(30);
/// Slots per epoch: epoch `e` is slots `32e..32e+31`.
const EPOCH: u64 = 32;
/// The newest slot logged.
const LAST: u64 = 127;
/// Slots with a snapshot (0 to this), for `getSlotVotes`.
const SNAPSHOTS: u64 = 40;
const NOW: i64 = 1_700_000_000;

fn schedule() -> EpochSchedule {
    EpochSchedule::new(EPOCH, EPOCH, false).unwrap()
}

/// The set of `epoch`: validators `i` of `vs` with stakes `stakes[i]` (0: not a member).
fn set(epoch: u64, vs: &[Voter], stakes: [u64; 4]) -> EpochSet {
    let members: Vec<Validator> = vs
        .iter()
        .zip(stakes)
        .filter(|(_, s)| *s > 0)
        .map(|(v, stake)| Validator { vote_account: v.vote_account(), authorized_voter: v.authorized_voter(), stake })
        .collect();
    EpochSet::new(epoch, stakes.iter().sum(), &members).unwrap()
}

/// The sets of epochs 1 to 4: one validator's stake drops in 2, another leaves in 3 and comes
/// back in 4.
fn sets(vs: &[Voter]) -> [EpochSet; 4] {
    [
        set(1, vs, [100, 100, 50, 50]),
        set(2, vs, [10, 100, 100, 100]),
        set(3, vs, [100, 100, 100, 0]),
        set(4, vs, [50, 50, 100, 100]),
    ]
}

/// Who votes on `slot`: everyone, but on slot 32 (first of epoch 1) only two validators, and on
/// slot 64 only validators 0 and 1 (110 of epoch 2's 310: not 2/3).
fn who(slot: u64) -> &'static [usize] {
    match slot {
        32 | 64 => &[0, 1],
        _ => &[0, 1, 2, 3],
    }
}

/// Epoch 0 binds no set (the feature activated at epoch 1); a bank of epoch `e >= 1` binds the
/// set of `e + 1`.
fn bank(slot: u64, root: [u8; 32], sets: &[EpochSet; 4]) -> BankEntry {
    let h = h_of(slot);
    let epoch = slot / EPOCH;
    let next = (epoch >= 1).then(|| sets[epoch as usize].hash());
    let bank_hash = match next {
        Some(n) => bank_hash_with_set(&h, &root, &n, None),
        None => bank_hash(&h, &root, None),
    };
    BankEntry {
        slot,
        parent: slot.saturating_sub(1),
        bank_hash,
        aldb: Some(AldbCommitment { h, root }),
        hard_forks: None,
        next_set_hash: next,
    }
}

/// A snapshot directory of slots 0 to 40, and a vote log of banks 0 to 127 in segments of 16
/// slots, each slot voted on in the next block, sets logged with the first bank binding them.
fn history(dir: &std::path::Path, vs: &[Voter], sets: &[EpochSet; 4]) -> (Model, VoteLog) {
    history_carried(dir, vs, sets, Carry::default())
}

/// [`history`], the writer carrying transitions forward as `carry` says.
fn history_carried(dir: &std::path::Path, vs: &[Voter], sets: &[EpochSet; 4], carry: Carry) -> (Model, VoteLog) {
    let mut m = Model::new(WriterConfig { keep_slots: 1000, direct_io: false, ..WriterConfig::new(dir) }, 5);
    for _ in 0..=SNAPSHOTS {
        m.commit_random(3);
    }
    m.flush();
    let opts = VoteLogOptions { segment_bytes: 64 << 20, segment_slots: 16 };
    let mut log = VoteLog::open_with(dir, opts).unwrap().with_carry(carry);
    let mut prev: Option<BankEntry> = None;
    for s in 0..=LAST {
        let root = if s <= SNAPSHOTS { m.root(s) } else { [s as u8; 32] };
        let b = bank(s, root, sets);
        let mut entries = Vec::new();
        if s % EPOCH == 0 && s >= EPOCH {
            let next = &sets[(s / EPOCH) as usize];
            entries.push(VoteLogEntry::Set(SetEntry::new(s, next.encode())));
        }
        entries.push(VoteLogEntry::Bank(b));
        if let Some(p) = prev {
            let txs = who(p.slot).iter().map(|&i| vs[i].vote(p.slot, &p.bank_hash)).collect();
            entries.push(VoteLogEntry::Votes(VotesEntry { slot: s, transactions: txs }));
        }
        log.append(&entries).unwrap();
        prev = Some(b);
    }
    (m, log)
}

/// Follows epochs 2 to 4 from the set of epoch 1 with what `s` serves; returns the transitions'
/// slots.
fn follow(s: &Server, first: &EpochSet) -> Vec<u64> {
    let checkpoint =
        Checkpoint { schedule: schedule(), set: first.clone(), time: NOW - 100, trusting_period: 1_000_000 };
    let mut client = LightClient::new(checkpoint).unwrap();
    let mut slots = Vec::new();
    for epoch in 2..=4u64 {
        let got = s.ok("getEpochTransition", json!([epoch]));
        let t = Transition::from_json_value(&got["value"]).unwrap();
        assert_eq!(got["context"]["slot"], t.evidence.slot);
        match client.advance(&t, NOW).unwrap() {
            Advanced::Advanced { epoch: e, set_hash, .. } => assert_eq!((e, set_hash), (epoch, t.set.hash())),
            other => panic!("epoch {epoch}: {other:?}"),
        }
        slots.push(t.evidence.slot);
    }
    assert_eq!(client.epoch(), 4);
    slots
}

#[test]
fn transitions_are_served_followed_by_a_light_client_and_kept_past_pruning() {
    let dir = tempfile::tempdir().unwrap();
    let vs = voters();
    let sets = sets(&vs);
    let (_m, mut log) = history(dir.path(), &vs, &sets);
    let s = Server::start(dir.path());
    wait_until("the log read", WAIT, || s.call("getEpochTransition", json!([4])).get("result").is_some());

    // Epoch 2: no set of epoch 1 is logged, so the slot with the most voters (33, not 32).
    // Epoch 3: slot 64's votes hold 110 of epoch 2's 310, not 2/3: slot 65. Epoch 4: slot 96.
    assert_eq!(follow(&s, &sets[0]), [33, 65, 96]);
    let t3 = s.ok("getEpochTransition", json!([3]))["value"].clone();
    assert_eq!(t3["set"], sets[2].to_json_value());
    assert_eq!(t3["evidence"]["nextSetHash"], b58(&sets[2].hash()));
    assert_eq!(t3["evidence"]["votes"].as_array().unwrap().len(), 4);
    // Epoch 4's evidence holds the votes of epoch 3's members only: validator 3 left.
    let t4 = s.ok("getEpochTransition", json!([4]))["value"].clone();
    assert_eq!(t4["evidence"]["votes"].as_array().unwrap().len(), 3);

    // Epochs whose sets the log does not hold, and epoch 0.
    for epoch in [1u64, 5, 1000] {
        let e = s.err("getEpochTransition", json!([epoch]), codes::NO_TRANSITION);
        assert_eq!(e["data"], json!({"epoch": epoch, "oldestEpoch": 2, "newestEpoch": 4}), "{epoch}");
    }
    s.err("getEpochTransition", json!([0]), codes::INVALID_PARAMS);
    s.err("getEpochTransition", json!([]), codes::INVALID_PARAMS);
    s.err("getEpochTransition", json!(["2"]), codes::INVALID_PARAMS);
    s.err("getEpochTransition", json!([2, 3]), codes::INVALID_PARAMS);

    // getSlotVotes: a bank binding a set says which; one of before the feature does not.
    let v = s.ok("getSlotVotes", json!([33]))["value"].clone();
    assert_eq!(v["nextSetHash"], b58(&sets[1].hash()));
    let ev = SlotEvidence::from_json_value(&v).unwrap();
    assert_eq!(ev.bank_hash(), bank(33, ev.root, &sets).bank_hash);
    assert!(ev.vouch(&sets[0]).is_ok());
    let old = s.ok("getSlotVotes", json!([20]))["value"].clone();
    assert!(old.get("nextSetHash").is_none(), "{old}");

    // Pruning every segment but the last two: the transitions are kept, served alike.
    let before: Vec<Value> = (2..=4).map(|e| s.ok("getEpochTransition", json!([e]))).collect();
    assert_eq!(log.prune(100).unwrap(), 6);
    wait_until("the pruning read", WAIT, || s.call("getSlotVotes", json!([33]))["error"]["code"] == codes::SLOT_PRUNED);
    s.err("getSlotVotes", json!([33]), codes::SLOT_PRUNED);
    let after: Vec<Value> = (2..=4).map(|e| s.ok("getEpochTransition", json!([e]))).collect();
    assert_eq!(after, before);
    assert_eq!(follow(&s, &sets[0]), [33, 65, 96]);
    // A service started afresh on the pruned log reads the same.
    drop(s);
    let s = Server::start(dir.path());
    wait_until("the log read", WAIT, || s.call("getEpochTransition", json!([4])).get("result").is_some());
    let fresh: Vec<Value> = (2..=4).map(|e| s.ok("getEpochTransition", json!([e]))).collect();
    assert_eq!(fresh, before);
}

#[test]
fn a_replica_serves_the_transitions_as_the_directory_does() {
    let Some(weed) = Weed::start() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let vs = voters();
    let sets = sets(&vs);
    let (_m, mut log) = history(dir.path(), &vs, &sets);
    const URL: &str = "s3://epochs/mainnet";
    let mut ship = shipper(dir.path(), &weed, URL);
    rt.block_on(ship.ship_once()).unwrap();
    let local = Server::start(dir.path());
    let cache = tempfile::tempdir().unwrap();
    let r = replica(&weed, URL, cache.path(), 1 << 30);
    wait_until("the replica's transitions", WAIT, || r.call("getEpochTransition", json!([4])).get("result").is_some());
    wait_until("the directory's transitions", WAIT, || {
        local.call("getEpochTransition", json!([4])).get("result").is_some()
    });
    let compare = |what: &str| {
        for epoch in 0..=6u64 {
            let p = json!([epoch]);
            assert_eq!(
                ask(&r, "getEpochTransition", &p),
                ask(&local, "getEpochTransition", &p),
                "{what}: epoch {epoch}"
            );
        }
    };
    compare("shipped");
    for slot in [20u64, 33] {
        let p = json!([slot]);
        assert_eq!(ask(&r, "getSlotVotes", &p), ask(&local, "getSlotVotes", &p), "slot {slot}");
    }
    assert_eq!(follow(&r, &sets[0]), [33, 65, 96]);

    // The directory prunes its old segments; what the writer kept is shipped, and the replica
    // still serves every transition as the directory does.
    assert_eq!(log.prune(100).unwrap(), 6);
    rt.block_on(ship.ship_once()).unwrap();
    wait_until("the directory's pruning", WAIT, || local.call("getSlotVotes", json!([33])).get("error").is_some());
    compare("pruned");
    assert_eq!(follow(&r, &sets[0]), [33, 65, 96]);
}

#[test]
fn a_replica_whose_copy_is_short_serves_older_transitions_from_the_bucket() {
    let Some(weed) = Weed::start() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let vs = voters();
    let sets = sets(&vs);
    // Only the newest epoch's transition is carried, every segment (16 slots): segments 48 and
    // 64 hold epoch 2's whole, 80 and 96 epoch 3's, 112 epoch 4's.
    let carry = Carry { every_slots: 16, epochs: 1, refresh_slots: 0 };
    let (_m, _log) = history_carried(dir.path(), &vs, &sets, carry);
    const URL: &str = "s3://epochs/short";
    let mut ship = shipper(dir.path(), &weed, URL);
    rt.block_on(ship.ship_once()).unwrap();
    let listed: Vec<(u64, Vec<u64>)> = ship
        .manifest()
        .unwrap()
        .vote_segments
        .iter()
        .filter(|g| !g.transitions.is_empty())
        .map(|g| (g.first_slot, g.transitions.clone()))
        .collect();
    assert_eq!(listed, [(48, vec![2]), (64, vec![2]), (80, vec![3]), (96, vec![3]), (112, vec![4])]);

    let local = Server::start(dir.path());
    // The copy keeps the segment reaching the newest 4 slots: 112, which holds epoch 4's alone.
    let cache = tempfile::tempdir().unwrap();
    let r = replica_with(&weed, URL, cache.path(), 1 << 30, |c| c.vote_keep_slots = 4);
    wait_until("the replica's transitions", WAIT, || r.call("getEpochTransition", json!([4])).get("result").is_some());
    wait_until("the directory's transitions", WAIT, || {
        local.call("getEpochTransition", json!([4])).get("result").is_some()
    });
    let mut copy = VoteLogReader::new(cache.path());
    copy.refresh().unwrap();
    assert_eq!(copy.set_epochs(), [4], "the copy holds no set of epochs 2 and 3");

    // Every epoch, byte for byte, errors included (the epochs held are the bucket's too).
    for epoch in 0..=6u64 {
        let p = json!([epoch]);
        assert_eq!(ask(&r, "getEpochTransition", &p), ask(&local, "getEpochTransition", &p), "epoch {epoch}");
    }
    let fetches = metric(&r.metrics(), "aldb_cache_archive_segment_fetches_total");
    assert_eq!(fetches, 2.0, "segments 64 and 96, each once");
    assert_eq!(follow(&r, &sets[0]), [33, 65, 96]);
    assert_eq!(metric(&r.metrics(), "aldb_cache_archive_segment_fetches_total"), fetches, "held, not fetched again");
    drop((r, local));
}

#[test]
fn older_transitions_are_carried_again_once_their_newest_whole_copy_is_old() {
    let dir = tempfile::tempdir().unwrap();
    let vs = voters();
    let sets = sets(&vs);
    // The newest epoch's transition every segment (16 slots); an older one again once its
    // newest whole copy is 32 slots old: epoch 2's (last carried into 64) goes into 96 with
    // epoch 3's, and nothing is due at 112 (both newest copies are in 96).
    let carry = Carry { every_slots: 16, epochs: 1, refresh_slots: 32 };
    let (_m, log) = history_carried(dir.path(), &vs, &sets, carry);
    let listed = |log: &VoteLog| -> Vec<(u64, Vec<u64>)> {
        aldb_format::votes::list_segments(log.dir())
            .unwrap()
            .into_iter()
            .map(|(first, path)| (first, aldb_format::votes::segment_extent(&std::fs::read(path).unwrap()).transitions))
            .filter(|(_, t)| !t.is_empty())
            .collect()
    };
    assert_eq!(listed(&log), [(48, vec![2]), (64, vec![2]), (80, vec![3]), (96, vec![2, 3]), (112, vec![4])]);
    // Due after 16 slots: at 112 both 2 and 3 are (their newest copies are in 96), and one
    // carry takes at most `epochs` of them, the oldest copy first (then the older epoch).
    let other = tempfile::tempdir().unwrap();
    let carry = Carry { every_slots: 16, epochs: 1, refresh_slots: 16 };
    let (_m, often) = history_carried(other.path(), &vs, &sets, carry);
    assert_eq!(listed(&often), [(48, vec![2]), (64, vec![2]), (80, vec![2, 3]), (96, vec![2, 3]), (112, vec![2, 4])]);
    // Whatever copy of it the log holds, every transition reads as it did.
    let s = Server::start(dir.path());
    wait_until("the log read", WAIT, || s.call("getEpochTransition", json!([4])).get("result").is_some());
    assert_eq!(follow(&s, &sets[0]), [33, 65, 96]);
}
