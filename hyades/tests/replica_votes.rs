//! `getSlotVotes` on a replica (SeaweedFS on loopback): the shipper ships the directory's
//! vote-evidence log, and a Hyades serving the bucket answers every slot byte for byte as the
//! Hyades of the directory does, errors included (pruned, not voted on yet, no snapshot yet);
//! votes shipped later are served; a light client trusting only votes accepts what the replica
//! serves. A bucket without a vote log says so. A replica whose copy of the log keeps only the
//! newest slots answers older ones from the bucket's sealed segments, byte for byte as the
//! directory, fetching each group of segments once, and refuses a segment the bucket damaged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use aldb_fixture::votes::Voter;
use aldb_format::votes::{BankEntry, VoteLog, VoteLogEntry, VoteLogOptions, VotesEntry};
use aldb_snapshot::WriterConfig;
use aldb_verify::votes::{Validator, ValidatorSet, VoteEvidence, verify_account_by_votes};
use common::replica::{ask, replica, replica_with, shipper};
use common::votes::{bank, voters};
use common::weed::Weed;
use common::{Model, Server, b58, metric, wait_until};
use hyades::codes;
use object_store::ObjectStore as _;
use serde_json::{Value, json};

/// How long a replica may take to pick up what was shipped.
const WAIT: Duration = Duration::from_secs(30);

const URL: &str = "s3://votes/mainnet";

/// Block `block`'s votes: every voter on `slot`.
fn votes_in(block: u64, slot: u64, b: &BankEntry, vs: &[Voter]) -> VoteLogEntry {
    VoteLogEntry::Votes(VotesEntry {
        slot: block,
        transactions: vs.iter().map(|v| v.vote(slot, &b.bank_hash)).collect(),
    })
}

#[test]
fn a_replica_serves_the_vote_evidence_as_the_directory_does() {
    let Some(weed) = Weed::start() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig { keep_slots: 1000, direct_io: false, ..WriterConfig::new(dir.path()) }, 17);
    m.commit_random(200);
    for _ in 1..=12 {
        m.commit_random(20);
    }
    m.flush();
    let vs = voters();
    // Banks 0..=12, each voted on by all four in the next block; segments of four slots, the
    // first pruned as a writer keeping few slots prunes it.
    let mut log = VoteLog::open_with(dir.path(), VoteLogOptions { segment_bytes: 64 << 20, segment_slots: 4 }).unwrap();
    let banks: Vec<BankEntry> = (0..=12).map(|s| bank(s, m.root(s), None)).collect();
    for s in 0..=12u64 {
        let mut entries = vec![VoteLogEntry::Bank(banks[s as usize])];
        if s > 0 {
            entries.push(votes_in(s, s - 1, &banks[s as usize - 1], &vs));
        }
        log.append(&entries).unwrap();
    }
    assert_eq!(log.prune(4).unwrap(), 1);
    let mut ship = shipper(dir.path(), &weed, URL);
    rt.block_on(ship.ship_once()).unwrap();
    assert_eq!(ship.manifest().unwrap().vote_segments.len(), 3);

    let local = Server::start(dir.path());
    let cache = tempfile::tempdir().unwrap();
    let r = replica(&weed, URL, cache.path(), 1 << 30);
    wait_until("the replica's slot 12", WAIT, || r.call("getStateRoot", json!([12])).get("result").is_some());

    // Every slot, byte for byte: served ones, pruned ones, the one not voted on yet, and ones
    // without a snapshot yet.
    let mut served = 0;
    for slot in 0..=15u64 {
        let params = json!([slot]);
        let (a, b) = (ask(&r, "getSlotVotes", &params), ask(&local, "getSlotVotes", &params));
        assert_eq!(a, b, "slot {slot}: replica and directory differ");
        served += usize::from(serde_json::from_str::<Value>(&a).unwrap().get("result").is_some());
    }
    assert_eq!(served, 12 - 4, "slots 4..=11");
    assert_eq!(ask(&r, "getSlotVotes", &json!([])), ask(&local, "getSlotVotes", &json!([])));
    let e = r.err("getSlotVotes", json!([2]), codes::SLOT_PRUNED);
    assert_eq!(e["data"], json!({"slot": 2, "oldestVotedSlot": 4, "newestVotedSlot": 12}));
    let e = r.err("getSlotVotes", json!([12]), codes::SLOT_NOT_COMMITTED);
    assert_eq!(e["data"], json!({"slot": 12, "searchedTo": 12}));
    r.err("getSlotVotes", json!([14]), codes::SLOT_NOT_COMMITTED);

    // A client trusting only votes accepts the replica's evidence joined with its proof.
    let members: Vec<Validator> = vs
        .iter()
        .map(|v| Validator { vote_account: v.vote_account(), authorized_voter: v.authorized_voter(), stake: 100 })
        .collect();
    let set = ValidatorSet::new(&members).unwrap();
    let key = *m.states[&8].keys().next().unwrap();
    let votes = r.ok("getSlotVotes", json!([8]))["value"].clone();
    let proof = r.ok("getAccountProof", json!([b58(&key), {"slot": 8}]))["value"].clone();
    let doc = json!({
        "version": votes["version"], "slot": votes["slot"], "h": votes["h"], "root": votes["root"],
        "hardForks": votes["hardForks"], "votes": votes["votes"],
        "pubkey": b58(&key), "account": proof["account"], "proof": proof["proof"],
    });
    let ok = verify_account_by_votes(&VoteEvidence::from_json_value(&doc).unwrap(), &set).unwrap();
    assert_eq!((ok.accepted.slot, ok.accepted.voters), (8, 4));
    assert_eq!(ok.account.unwrap().lamports, m.states[&8][&key].lamports);

    // Votes on 12 land in block 13 and are shipped: the replica serves them as the directory.
    log.append(&[votes_in(13, 12, &banks[12], &vs)]).unwrap();
    rt.block_on(ship.ship_once()).unwrap();
    wait_until("votes on 12 at the replica", WAIT, || r.call("getSlotVotes", json!([12])).get("result").is_some());
    assert_eq!(ask(&r, "getSlotVotes", &json!([12])), ask(&local, "getSlotVotes", &json!([12])));
    assert_eq!(ask(&r, "getSlotVotes", &json!([])), ask(&local, "getSlotVotes", &json!([])));

    // A bucket whose directory keeps no vote log.
    let bare = tempfile::tempdir().unwrap();
    let mut b = Model::new(WriterConfig { direct_io: false, ..WriterConfig::new(bare.path()) }, 5);
    b.commit_random(30);
    b.flush();
    rt.block_on(shipper(bare.path(), &weed, "s3://votes/bare").ship_once()).unwrap();
    let bare_cache = tempfile::tempdir().unwrap();
    let rb = replica(&weed, "s3://votes/bare", bare_cache.path(), 1 << 30);
    wait_until("the bare replica's slot 0", WAIT, || rb.call("getStateRoot", json!([0])).get("result").is_some());
    let e = rb.err("getSlotVotes", json!([0]), codes::NOTHING_PUBLISHED);
    assert!(e["message"].as_str().unwrap().contains("the bucket holds no vote-evidence log"), "{e}");
    rb.err("getSlotVotes", json!([]), codes::NOTHING_PUBLISHED);
    drop((rb, r, local));
    b.finish();
    m.finish();
}

/// The value of the metric `name` in a Prometheus text dump.
#[test]
fn a_replica_answers_slots_older_than_its_copy_of_the_votes_from_the_bucket() {
    const OLD: &str = "s3://votes/old";
    let Some(weed) = Weed::start() else { return };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig { keep_slots: 1000, direct_io: false, ..WriterConfig::new(dir.path()) }, 29);
    m.commit_random(200);
    for _ in 1..=40 {
        m.commit_random(20);
    }
    m.flush();
    let vs = voters();
    // Banks 0..=40 voted on in the next block, segments of four slots; the directory pruned the
    // first before it was shipped, so the bucket starts at 4 as the directory does.
    let mut log = VoteLog::open_with(dir.path(), VoteLogOptions { segment_bytes: 64 << 20, segment_slots: 4 }).unwrap();
    let banks: Vec<BankEntry> = (0..=40).map(|s| bank(s, m.root(s), None)).collect();
    for s in 0..=40u64 {
        let mut entries = vec![VoteLogEntry::Bank(banks[s as usize])];
        if s > 0 {
            entries.push(votes_in(s, s - 1, &banks[s as usize - 1], &vs));
        }
        log.append(&entries).unwrap();
    }
    assert_eq!(log.prune(4).unwrap(), 1);
    let mut ship = shipper(dir.path(), &weed, OLD);
    rt.block_on(ship.ship_once()).unwrap();
    let shipped = ship.manifest().unwrap().vote_segments.clone();
    assert_eq!(shipped.len(), 10);
    assert!(shipped[..9].iter().all(|g| g.sealed));

    let local = Server::start(dir.path());
    // The copy keeps the segments reaching the newest 4 slots: 36..=40.
    let cache = tempfile::tempdir().unwrap();
    let r = replica_with(&weed, OLD, cache.path(), 1 << 30, |c| c.vote_keep_slots = 4);
    wait_until("the replica's slot 40", WAIT, || r.call("getStateRoot", json!([40])).get("result").is_some());
    let copied = std::fs::read_dir(cache.path().join("votes")).unwrap().count();
    assert_eq!(copied, 2, "the copy holds segments 36 and 40 only");

    // Every slot, byte for byte: those older than the copy come from the sealed segments; older
    // than the bucket's oldest segment is pruned with the bucket's range.
    let mut served = 0;
    for slot in 0..=42u64 {
        let params = json!([slot]);
        let (a, b) = (ask(&r, "getSlotVotes", &params), ask(&local, "getSlotVotes", &params));
        assert_eq!(a, b, "slot {slot}: replica and directory differ");
        served += usize::from(serde_json::from_str::<Value>(&a).unwrap().get("result").is_some());
    }
    assert_eq!(served, 40 - 4, "slots 4..=39");
    let e = r.err("getSlotVotes", json!([2]), codes::SLOT_PRUNED);
    assert_eq!(e["data"], json!({"slot": 2, "oldestVotedSlot": 4, "newestVotedSlot": 40}));
    let text = r.metrics();
    let fetches = metric(&text, "aldb_cache_archive_segment_fetches_total");
    assert!(fetches > 0.0, "{text}");
    assert_eq!(metric(&text, "aldb_cache_archive_segment_refused_total"), 0.0);
    // A group already held is not fetched again.
    assert_eq!(ask(&r, "getSlotVotes", &json!([5])), ask(&local, "getSlotVotes", &json!([5])));
    assert_eq!(metric(&r.metrics(), "aldb_cache_archive_segment_fetches_total"), fetches);

    // A client trusting only votes accepts the old slot's evidence joined with its proof.
    let members: Vec<Validator> = vs
        .iter()
        .map(|v| Validator { vote_account: v.vote_account(), authorized_voter: v.authorized_voter(), stake: 100 })
        .collect();
    let set = ValidatorSet::new(&members).unwrap();
    let key = *m.states[&9].keys().next().unwrap();
    let votes = r.ok("getSlotVotes", json!([9]))["value"].clone();
    let proof = r.ok("getAccountProof", json!([b58(&key), {"slot": 9}]))["value"].clone();
    let doc = json!({
        "version": votes["version"], "slot": votes["slot"], "h": votes["h"], "root": votes["root"],
        "hardForks": votes["hardForks"], "votes": votes["votes"],
        "pubkey": b58(&key), "account": proof["account"], "proof": proof["proof"],
    });
    let ok = verify_account_by_votes(&VoteEvidence::from_json_value(&doc).unwrap(), &set).unwrap();
    assert_eq!((ok.accepted.slot, ok.accepted.voters), (9, 4));
    assert_eq!(ok.account.unwrap().lamports, m.states[&9][&key].lamports);

    // The segment of slots 8..=11 damaged in the bucket (one byte, same size): a replica that
    // has not verified it yet refuses it, and still serves slots whose segments are sound.
    let seg = shipped.iter().find(|g| g.first_slot == 8).unwrap();
    let (store, prefix) = aldb_objstore::open_bucket(OLD, &weed.options()).unwrap();
    let at = seg.name.split('/').fold(prefix, |p, part| p.child(part));
    let mut bytes = rt.block_on(async { store.get(&at).await.unwrap().bytes().await.unwrap() }).to_vec();
    let n = bytes.len();
    bytes[n - 5] ^= 0x55;
    rt.block_on(store.put(&at, bytes.into())).unwrap();
    let cache2 = tempfile::tempdir().unwrap();
    let r2 = replica_with(&weed, OLD, cache2.path(), 1 << 30, |c| c.vote_keep_slots = 4);
    wait_until("the second replica's slot 40", WAIT, || r2.call("getStateRoot", json!([40])).get("result").is_some());
    let e = r2.err("getSlotVotes", json!([9]), codes::SLOT_CORRUPT);
    assert_eq!(e["data"]["slot"], 9);
    assert!(e["data"]["reason"].as_str().unwrap().contains(&seg.name), "{e}");
    assert_eq!(metric(&r2.metrics(), "aldb_cache_archive_segment_refused_total"), 1.0);
    assert_eq!(ask(&r2, "getSlotVotes", &json!([28])), ask(&local, "getSlotVotes", &json!([28])));
    // The first replica verified its copy before the damage and keeps serving it.
    assert_eq!(ask(&r, "getSlotVotes", &json!([9])), ask(&local, "getSlotVotes", &json!([9])));
    drop((r2, r, local));
    m.finish();
}
