//! `getSlotVotes` against the real service on loopback, over a snapshot directory written by the
//! real engine and writer and a vote-evidence log written by its real writer, with TowerSync
//! votes signed by real keys. The votes served for a slot, joined with `getAccountProof` at the
//! slot, are accepted by the verifier of `docs/SPEC.md` §10.4; every slot without evidence says
//! why (pruned, skipped, no root in the bank hash, not voted on yet, never voted on, a root that is
//! not the snapshot's, abandoned, below the level asked for); votes appended while it runs are
//! served.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use aldb_core::{AccountRef, ChangeSet, Config, ForkEngine, ForkLimits, Pleiades};
use aldb_fixture::votes::Voter;
use aldb_format::Account;
use aldb_format::votes::{BankEntry, VoteLog, VoteLogEntry, VotesEntry};
use aldb_snapshot::{AccountBatch, CAPTURE_OPTIONS, SlotInput, SlotMark, SnapshotWriter, WriterConfig};
use aldb_verify::votes::{Validator, ValidatorSet, VoteChainError, VoteEvidence, verify_account_by_votes};
use base64::Engine as _;
use common::votes::{bank, h_of, voters};
use common::{Model, Server, b58, wait_until};
use hyades::codes;
use serde_json::{Value, json};

/// How long the service may take to read what was appended.
const WAIT: Duration = Duration::from_secs(10);

/// Stakes 100, 100, 50, 50: any three hold more than 2/3, the two large ones exactly 2/3.
fn set(voters: &[Voter]) -> ValidatorSet {
    let members: Vec<Validator> = voters
        .iter()
        .zip([100, 100, 50, 50])
        .map(|(v, stake)| Validator { vote_account: v.vote_account(), authorized_voter: v.authorized_voter(), stake })
        .collect();
    ValidatorSet::new(&members).unwrap()
}

/// Block `block`'s votes: each of `who` votes on `slot` with `bank`'s hash.
fn votes_in(block: u64, slot: u64, bank: &BankEntry, who: &[&Voter]) -> VoteLogEntry {
    VoteLogEntry::Votes(VotesEntry {
        slot: block,
        transactions: who.iter().map(|v| v.vote(slot, &bank.bank_hash)).collect(),
    })
}

/// The evidence of §10.5 for `key` at `slot`, as a client joins it from the two methods.
fn evidence(s: &Server, key: &[u8; 32], slot: u64) -> (Value, VoteEvidence) {
    let votes = s.ok("getSlotVotes", json!([slot]))["value"].clone();
    let proof = s.ok("getAccountProof", json!([b58(key), {"slot": slot}]))["value"].clone();
    let doc = json!({
        "version": votes["version"], "slot": votes["slot"], "h": votes["h"], "root": votes["root"],
        "hardForks": votes["hardForks"], "votes": votes["votes"],
        "pubkey": b58(key), "account": proof["account"], "proof": proof["proof"],
    });
    (votes, VoteEvidence::from_json_value(&doc).unwrap())
}

#[test]
fn votes_of_a_slot_are_served_and_accepted_and_every_gap_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig { keep_slots: 1000, ..WriterConfig::new(dir.path()) }, 21);
    m.commit_random(300);
    for _ in 1..=13 {
        m.commit_random(30);
    }
    m.flush();
    let roots = m.history.as_ref().unwrap().roots().clone();
    let vs = voters();
    let all: Vec<&Voter> = vs.iter().collect();

    // Banks of 1..=12 (0 before the log began, 5 skipped), each voted on in the next block by
    // all four, with the block also holding a repeated vote and a vote with a wrong hash on the
    // slot before.
    let mut log = VoteLog::open(dir.path()).unwrap();
    let mut banks = BTreeMap::new();
    for slot in 1..=12u64 {
        if slot == 5 {
            continue;
        }
        let b = match slot {
            7 => bank(slot, roots[&slot], Some(2)),
            10 => bank(slot, [0xEE; 32], None),
            _ => bank(slot, roots[&slot], None),
        };
        let mut entry = b;
        if slot == 11 {
            entry.aldb = None;
        }
        banks.insert(slot, b);
        log.append(&[VoteLogEntry::Bank(entry)]).unwrap();
        if let Some(prev) = slot.checked_sub(1).and_then(|p| banks.get(&p).map(|b| (p, *b))) {
            let (p, pb) = prev;
            // Slot 3 is never voted on; slot 9 only by the two large validators (2/3 exactly).
            let who: Vec<&Voter> = match p {
                3 => vec![],
                9 => vec![&vs[0], &vs[1]],
                _ => all.clone(),
            };
            let mut e = votes_in(slot, p, &pb, &who);
            if let VoteLogEntry::Votes(v) = &mut e
                && let Some(first) = v.transactions.first().cloned()
            {
                v.transactions.push(first);
                v.transactions.push(vs[2].vote(p.saturating_sub(1), &[1; 32]));
            }
            log.append(&[e]).unwrap();
        }
    }
    let s = Server::start(dir.path());
    let set = set(&vs);
    let key = *m.states[&8].keys().next().unwrap();

    // A slot voted on by all: its fields, one vote per validator (block 9's repeat is served
    // once, and block 10's vote by the third validator for another hash is not served beside
    // its vote for the bank's), accepted by the verifier.
    let (v, ev) = evidence(&s, &key, 8);
    assert_eq!(v["version"], 1);
    assert_eq!(v["slot"], 8);
    assert_eq!(v["h"], b58(&h_of(8)));
    assert_eq!(v["root"], b58(&roots[&8]));
    assert_eq!(v["hardForks"], Value::Null);
    assert_eq!(v["votes"].as_array().unwrap().len(), 4, "{v}");
    let first = base64::engine::general_purpose::STANDARD.decode(v["votes"][0].as_str().unwrap()).unwrap();
    assert_eq!(first, vs[0].vote(8, &banks[&8].bank_hash));
    let ok = verify_account_by_votes(&ev, &set).unwrap();
    assert_eq!((ok.accepted.stake, ok.accepted.total_stake, ok.accepted.voters), (300, 300, 4));
    assert_eq!(ok.account.unwrap().lamports, m.states[&8][&key].lamports);
    assert_eq!(s.ok("getSlotVotes", json!([8]))["context"]["slot"], 8);

    // Hard-fork data is served and honoured.
    let (v, ev) = evidence(&s, &key, 7);
    assert_eq!(v["hardForks"], 2);
    assert_eq!(verify_account_by_votes(&ev, &set).unwrap().accepted.slot, 7);

    // Exactly 2/3 is served (the server does not judge votes) and refused by the client.
    let (v, ev) = evidence(&s, &key, 9);
    assert_eq!(v["votes"].as_array().unwrap().len(), 3);
    assert!(matches!(
        verify_account_by_votes(&ev, &set),
        Err(VoteChainError::InsufficientStake { stake: 200, total: 300 })
    ));

    // Without a slot: the newest slot with votes that is served (12 has none yet, 11 no root,
    // 10 a root that is not the snapshot's).
    assert_eq!(s.ok("getSlotVotes", json!([]))["value"]["slot"], 9);
    assert_eq!(s.ok("getSlotVotes", json!([{"commitment": "processed"}]))["value"]["slot"], 9);

    // Every slot without evidence, and why.
    let e = s.err("getSlotVotes", json!([0]), codes::SLOT_PRUNED);
    assert_eq!(e["data"], json!({"slot": 0, "oldestVotedSlot": 1, "newestVotedSlot": 12}));
    let e = s.err("getSlotVotes", json!([5]), codes::SLOT_NO_SNAPSHOT);
    assert!(e["message"].as_str().unwrap().contains("no bank of it was recorded"), "{e}");
    let e = s.err("getSlotVotes", json!([11]), codes::SLOT_NO_SNAPSHOT);
    assert!(e["message"].as_str().unwrap().contains("does not commit to a state root"), "{e}");
    let e = s.err("getSlotVotes", json!([10]), codes::SLOT_CORRUPT);
    assert!(e["data"]["reason"].as_str().unwrap().contains(&b58(&[0xEE; 32])), "{e}");
    let e = s.err("getSlotVotes", json!([12]), codes::SLOT_NOT_COMMITTED);
    assert_eq!(e["message"], "slot not voted on yet: no vote for it has landed in the blocks after it so far");
    assert_eq!(e["data"], json!({"slot": 12, "searchedTo": 12}));
    let e = s.err("getSlotVotes", json!([3]), codes::SLOT_NOT_COMMITTED);
    assert_eq!(e["data"]["searchedTo"], 12);
    // 14 has no snapshot yet, like a proof would say.
    s.err("getSlotVotes", json!([14]), codes::SLOT_NOT_COMMITTED);
    s.err("getSlotVotes", json!([-1]), codes::INVALID_PARAMS);
    s.err("getSlotVotes", json!([8, {"slot": 8}]), codes::INVALID_PARAMS);
    s.err("getSlotVotes", json!([8, {}, 1]), codes::INVALID_PARAMS);

    // Votes appended while serving are served: block 13 votes on 12.
    log.append(&[votes_in(13, 12, &banks[&12], &all)]).unwrap();
    wait_until("votes on 12", WAIT, || s.call("getSlotVotes", json!([12])).get("result").is_some());
    let (_, ev) = evidence(&s, &key, 12);
    assert_eq!(verify_account_by_votes(&ev, &set).unwrap().accepted.voters, 4);
    assert_eq!(s.ok("getSlotVotes", json!([]))["value"]["slot"], 12);

    // Once the log holds blocks past slot 3's window, slot 3 will never be voted on.
    log.append(&[votes_in(40, 39, &bank(39, [0; 32], None), &all)]).unwrap();
    wait_until("block 40", WAIT, || s.call("getSlotVotes", json!([3]))["error"]["code"] == codes::SLOT_NO_SNAPSHOT);
    let e = s.err("getSlotVotes", json!([3]), codes::SLOT_NO_SNAPSHOT);
    assert_eq!(e["data"], json!({"slot": 3, "window": 32}));
    assert!(s.metrics().contains("hyades_requests_total{method=\"getSlotVotes\"}"));
    drop(s);
    m.finish();
}

#[test]
fn a_directory_without_a_vote_log_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig::new(dir.path()), 3);
    m.commit_random(50);
    m.flush();
    let s = Server::start(dir.path());
    let e = s.err("getSlotVotes", json!([0]), codes::NOTHING_PUBLISHED);
    assert!(e["message"].as_str().unwrap().starts_with("no vote evidence recorded"), "{e}");
    s.err("getSlotVotes", json!([]), codes::NOTHING_PUBLISHED);
    drop(s);
    m.finish();
}

/// One entry per key, as a bank takes them.
fn refs(accounts: &[Account]) -> Vec<AccountRef<'_>> {
    accounts
        .iter()
        .map(|a| AccountRef {
            pubkey: &a.pubkey,
            lamports: a.lamports,
            owner: &a.owner,
            executable: a.executable,
            data: &a.data,
        })
        .collect()
}

fn accounts(slot: u64) -> Vec<Account> {
    (0..20u8)
        .map(|i| Account {
            pubkey: [i.wrapping_add(slot as u8 * 20); 32],
            lamports: 1 + slot * 100 + u64::from(i),
            owner: [7; 32],
            executable: false,
            data: vec![i; 8],
        })
        .collect()
}

#[test]
fn abandoned_banks_and_levels_answer_as_proofs_do() {
    let dir = tempfile::tempdir().unwrap();
    // Fork mode with its journal: 0 <- 1 <- 2 and 1 <- 3, frozen by the fork-aware engine.
    let mut tree = Pleiades::new(Config::for_leaves(1 << 10, 2)).unwrap();
    let a0 = accounts(0);
    let r = refs(&a0);
    let updates = tree.hash_accounts(&r);
    let batch = AccountBatch::from_updates(&updates, &r);
    let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
    let root0 = tree.commit_capture(updates, &mut changes);
    tree.capture_all(&mut changes);
    let config = WriterConfig { forks: true, keep_slots: 1000, direct_io: false, ..WriterConfig::new(dir.path()) };
    let writer = SnapshotWriter::start(config, None).unwrap();
    writer.submit(SlotInput { slot: 0, parent: None, root: root0, changes, accounts: batch, full: true }).unwrap();
    let mut engine = ForkEngine::new(tree, 0, ForkLimits::default());
    let mut roots = BTreeMap::from([(0u64, root0)]);
    for (slot, parent) in [(1u64, 0u64), (2, 1), (3, 1)] {
        let a = accounts(slot);
        let r = refs(&a);
        let updates = engine.tree().hash_accounts(&r);
        let batch = AccountBatch::from_updates(&updates, &r);
        let mut changes = ChangeSet::new(CAPTURE_OPTIONS);
        let root = engine.freeze_capture(slot, parent, updates, &mut changes).unwrap();
        roots.insert(slot, root);
        writer.submit(SlotInput { slot, parent: Some(parent), root, changes, accounts: batch, full: false }).unwrap();
    }
    writer.flush().unwrap();

    let vs = voters();
    let all: Vec<&Voter> = vs.iter().collect();
    let mut log = VoteLog::open(dir.path()).unwrap();
    for slot in 1..=3u64 {
        let b = bank(slot, roots[&slot], None);
        log.append(&[VoteLogEntry::Bank(b), votes_in(slot + 10, slot, &b, &all)]).unwrap();
    }
    let s = Server::start(dir.path());
    let v = s.ok("getSlotVotes", json!([2]))["value"].clone();
    assert_eq!(v["commitment"], "processed");
    assert_eq!(v["root"], b58(&roots[&2]));
    // Below the level asked for, as a proof would be.
    let e = s.err("getSlotVotes", json!([2, {"commitment": "confirmed"}]), codes::SLOT_NOT_COMMITTED);
    assert_eq!(e["data"]["requested"], "confirmed");
    s.err("getSlotVotes", json!([{"commitment": "confirmed"}]), codes::SLOT_NOT_COMMITTED);

    writer.mark(2, SlotMark::Confirmed).unwrap();
    writer.mark(3, SlotMark::Abandoned).unwrap();
    writer.flush().unwrap();
    wait_until("3 abandoned", WAIT, || s.call("getSlotVotes", json!([3]))["error"]["code"] == codes::SLOT_ABANDONED);
    let e = s.err("getSlotVotes", json!([3]), codes::SLOT_ABANDONED);
    assert_eq!(e["message"], "slot abandoned: its fork was dropped");
    let v = s.ok("getSlotVotes", json!([2, {"commitment": "confirmed"}]))["value"].clone();
    assert_eq!(v["commitment"], "confirmed");
    // The newest slot with votes skips the abandoned bank.
    assert_eq!(s.ok("getSlotVotes", json!([]))["value"]["slot"], 2);
    let set = set(&vs);
    let (_, ev) = evidence(&s, &[20; 32], 1);
    assert_eq!(verify_account_by_votes(&ev, &set).unwrap().account.unwrap().lamports, 101);
    drop(s);
    writer.shutdown().unwrap();
}

/// The set's `voteAccounts` parameter: each vote account with its authorized voter.
fn vote_accounts(voters: &[Voter]) -> Value {
    voters.iter().map(|v| json!([b58(&v.vote_account()), b58(&v.authorized_voter())])).collect()
}

/// More than 4,096 vote-shaped transactions of vote accounts nobody trusts, signed by real keys,
/// land in the block right after slot 1, and the four validators' votes in the next: asked for
/// every vote account, the service fills its answer with outsiders and the client refuses the
/// slot; asked for the set's vote accounts, it serves the four and the client accepts. A vote
/// naming a validator's account but signed by an outsider, landed first, does not take its
/// place.
#[test]
fn outsiders_cannot_crowd_out_the_votes_of_the_set() {
    let dir = tempfile::tempdir().unwrap();
    let mut m = Model::new(WriterConfig { keep_slots: 1000, ..WriterConfig::new(dir.path()) }, 5);
    m.commit_random(100);
    for _ in 1..=3 {
        m.commit_random(10);
    }
    m.flush();
    let roots = m.history.as_ref().unwrap().roots().clone();
    let vs = voters();
    let b1 = bank(1, roots[&1], None);
    let outsiders: Vec<Vec<u8>> = (0..aldb_verify::votes::MAX_EVIDENCE_VOTES as u32 + 100)
        .map(|i| {
            let mut seed = [7u8; 32];
            seed[..4].copy_from_slice(&i.to_le_bytes());
            let mut account = [9u8; 32];
            account[..4].copy_from_slice(&i.to_le_bytes());
            Voter::new(seed, None, account).vote(1, &b1.bank_hash)
        })
        .collect();
    // An outsider's vote naming the first validator's vote account.
    let forged = Voter::new([0xEE; 32], None, vs[0].vote_account()).vote(1, &b1.bank_hash);
    let mut log = VoteLog::open(dir.path()).unwrap();
    let mut entries = vec![VoteLogEntry::Bank(b1), VoteLogEntry::Bank(bank(2, roots[&2], None))];
    for chunk in outsiders.chunks(1024) {
        entries.push(VoteLogEntry::Votes(VotesEntry { slot: 2, transactions: chunk.to_vec() }));
    }
    entries.push(VoteLogEntry::Votes(VotesEntry { slot: 2, transactions: vec![forged.clone()] }));
    entries.push(VoteLogEntry::Bank(bank(3, roots[&3], None)));
    let all: Vec<&Voter> = vs.iter().collect();
    entries.push(votes_in(3, 1, &b1, &all));
    log.append(&entries).unwrap();

    let s = Server::start(dir.path());
    let set = set(&vs);
    let key = *m.states[&1].keys().next().unwrap();
    let b64 = |v: &Value| base64::engine::general_purpose::STANDARD.decode(v.as_str().unwrap()).unwrap();

    // Every vote account: 4,096 outsiders, in the order they landed; refused.
    let (v, ev) = evidence(&s, &key, 1);
    let served: Vec<Vec<u8>> = v["votes"].as_array().unwrap().iter().map(b64).collect();
    assert_eq!(served[..], outsiders[..aldb_verify::votes::MAX_EVIDENCE_VOTES]);
    assert!(matches!(verify_account_by_votes(&ev, &set), Err(VoteChainError::InsufficientStake { stake: 0, .. })));

    // The set's vote accounts: the four validators' votes, and nothing else; accepted.
    let config = json!({"voteAccounts": vote_accounts(&vs)});
    let v = s.ok("getSlotVotes", json!([1, config]))["value"].clone();
    let served: Vec<Vec<u8>> = v["votes"].as_array().unwrap().iter().map(b64).collect();
    assert_eq!(served, vs.iter().map(|x| x.vote(1, &b1.bank_hash)).collect::<Vec<_>>());
    let proof = s.ok("getAccountProof", json!([b58(&key), {"slot": 1}]))["value"].clone();
    let doc = json!({
        "version": v["version"], "slot": v["slot"], "h": v["h"], "root": v["root"],
        "hardForks": v["hardForks"], "votes": v["votes"],
        "pubkey": b58(&key), "account": proof["account"], "proof": proof["proof"],
    });
    let ok = verify_account_by_votes(&VoteEvidence::from_json_value(&doc).unwrap(), &set).unwrap();
    assert_eq!((ok.accepted.stake, ok.accepted.voters), (300, 4));
    // Without a slot, the newest slot the set voted on.
    assert_eq!(s.ok("getSlotVotes", json!([config]))["value"]["slot"], 1);
    // One validator alone; one that did not vote says so.
    let one = json!({"voteAccounts": vote_accounts(&vs[2..3]), "commitment": "processed"});
    assert_eq!(s.ok("getSlotVotes", json!([1, one]))["value"]["votes"].as_array().unwrap().len(), 1);
    let nobody = json!({"voteAccounts": [[b58(&[1; 32]), b58(&[2; 32])]]});
    let e = s.err("getSlotVotes", json!([1, nobody]), codes::SLOT_NOT_COMMITTED);
    assert!(e["message"].as_str().unwrap().contains("by the vote accounts asked for"), "{e}");

    // Bad parameters, each named.
    let a = b58(&vs[0].vote_account());
    for (config, why) in [
        (json!({"voteAccounts": []}), "between 1 and 4096"),
        (json!({"voteAccounts": [[a, a], [a, a]]}), &*format!("vote account {a} is listed twice")),
        (json!({"voteAccounts": [[a]]}), "voteAccounts[0] must be a pair"),
        (json!({"voteAccounts": [[a, "x"]]}), "voteAccounts[0][1]"),
        (json!({"voteAccounts": a}), "must be an array"),
        (json!({"voteAccount": []}), "unknown config field `voteAccount`"),
    ] {
        let e = s.err("getSlotVotes", json!([1, config]), codes::INVALID_PARAMS);
        assert!(e["message"].as_str().unwrap().contains(why), "{why}: {e}");
    }
    let many: Vec<Value> = (0..4097u32)
        .map(|i| {
            let mut k = [3u8; 32];
            k[..4].copy_from_slice(&i.to_le_bytes());
            json!([b58(&k), b58(&k)])
        })
        .collect();
    let e = s.err("getSlotVotes", json!([1, {"voteAccounts": many}]), codes::INVALID_PARAMS);
    assert_eq!(e["data"], json!({"max": 4096, "got": 4097}));
    // The most a request may name fits the default body bound.
    let most: Vec<Value> = many[..4096].to_vec();
    let e = s.err("getSlotVotes", json!([1, {"voteAccounts": most}]), codes::SLOT_NOT_COMMITTED);
    assert!(e["message"].as_str().unwrap().contains("by the vote accounts asked for"), "{e}");
    drop(s);
    m.finish();
}
