//! `aldb proof --trust votes` on real files: the validator set (both forms) and vote evidence
//! from `tests/vectors/votes-v1.json` (`docs/SPEC.md` §10), written to a temporary directory. An
//! accepted case prints the account and the stake that voted; exactly 2/3, a changed account, a
//! bad signature, the wrong key or slot, and a bad set each fail with the reason.
//!
//! Then `--url` against a real Hyades on loopback, serving a snapshot directory and a
//! vote-evidence log written by their real writers with votes signed by real keys: a slot voted
//! on by more than 2/3 is accepted; too little stake, a tampered vote, and a service that lies
//! about the root are refused with the reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use aldb_fixture::History;
use aldb_fixture::votes::Voter;
use aldb_format::Account;
use aldb_format::votes::{AldbCommitment, BankEntry, VoteLog, VoteLogEntry, VotesEntry};
use aldb_snapshot::WriterConfig;
use aldb_verify::hash_to_base58;
use aldb_verify::votes::bank_hash;
use common::service::{Hyades, tampering_proxy};
use common::{aldb, text};
use serde_json::Value;

fn vectors() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/vectors/votes-v1.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn case<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["evidence"].as_array().unwrap().iter().find(|c| c["name"] == name).unwrap_or_else(|| panic!("case {name}"))
}

struct Files {
    dir: tempfile::TempDir,
}

impl Files {
    fn new() -> Self {
        Files { dir: tempfile::tempdir().unwrap() }
    }

    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, contents).unwrap();
        p
    }

    fn evidence(&self, v: &Value, name: &str) -> (PathBuf, String) {
        let c = case(v, name);
        let p = self.write(&format!("{name}.json"), &c["evidence"].to_string());
        (p, c["evidence"]["pubkey"].as_str().unwrap().to_string())
    }
}

fn prove(evidence: &Path, pubkey: &str, set: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["proof", pubkey, "--trust", "votes", "--validators"];
    args.push(set.to_str().unwrap());
    args.push("--evidence");
    args.push(evidence.to_str().unwrap());
    args.extend_from_slice(extra);
    aldb(&args)
}

#[test]
fn accepts_an_account_voted_for_by_more_than_two_thirds() {
    let v = vectors();
    let f = Files::new();
    let set = f.write("set.json", &v["sets"]["main"].to_string());
    for name in ["all_vote", "just_above", "switch", "hard_fork", "invalid_then_valid"] {
        let (ev, key) = f.evidence(&v, name);
        let out = prove(&ev, &key, &set, &[]);
        let stdout = text(&out.stdout);
        assert!(out.status.success(), "{name}: {}", text(&out.stderr));
        let c = case(&v, name);
        assert!(
            stdout.starts_with(&format!("account {key}\n  lamports: {}", c["evidence"]["account"]["lamports"])),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!(
                "stake {} of 300 (more than 2/3) for bank hash {}",
                c["stake"].as_str().unwrap(),
                c["bank_hash"].as_str().unwrap()
            )),
            "{name}: {stdout}"
        );
        assert!(stdout.ends_with(&format!("at slot {}\n", c["evidence"]["slot"])), "{stdout}");
    }
    // Absent accounts are proven absent, and --slot must match.
    let (ev, key) = f.evidence(&v, "absent_account");
    let out = prove(&ev, &key, &set, &["--slot", "312456789"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with(&format!("account {key}: absent\n")));
}

#[test]
fn the_line_form_of_a_validator_set_works_the_same() {
    let v = vectors();
    let f = Files::new();
    let mut lines = String::from("# vote account, authorized voter, stake\n");
    for m in v["sets"]["main"].as_array().unwrap() {
        lines.push_str(&format!(
            "{} {} {}  # a validator\n",
            m["voteAccount"].as_str().unwrap(),
            m["authorizedVoter"].as_str().unwrap(),
            m["stake"]
        ));
    }
    let set = f.write("set.txt", &lines);
    let (ev, key) = f.evidence(&v, "just_above");
    let out = prove(&ev, &key, &set, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("votes of 3 vote accounts with stake 250 of 300"));
}

#[test]
fn refuses_what_the_votes_do_not_carry() {
    let v = vectors();
    let f = Files::new();
    let set = f.write("set.json", &v["sets"]["main"].to_string());
    for (name, why) in [
        ("exactly_two_thirds", "stake 200 of 300 agree, not more than 2/3"),
        ("bad_voter_signature", "stake 200 of 300"),
        ("wrong_hash", "stake 200 of 300"),
        ("duplicate_voter", "stake 200 of 300"),
        ("account_mismatch", "the account does not match the proof"),
        ("proof_other_root", "the account proof does not verify against the voted root"),
    ] {
        let (ev, key) = f.evidence(&v, name);
        let out = prove(&ev, &key, &set, &[]);
        assert!(!out.status.success(), "{name} accepted");
        assert!(out.stdout.is_empty(), "{name}: printed {}", text(&out.stdout));
        assert!(text(&out.stderr).contains(why), "{name}: {}", text(&out.stderr));
    }
    let (ev, key) = f.evidence(&v, "all_vote");
    let other = aldb_verify::json::hash_to_base58(&[9; 32]);
    let out = prove(&ev, &other, &set, &[]);
    assert!(text(&out.stderr).contains(&format!("the evidence is about {key}")), "{}", text(&out.stderr));
    let out = prove(&ev, &key, &set, &["--slot", "5"]);
    assert!(text(&out.stderr).contains("asked for slot 5, the evidence is for slot 312456789"));
    // The big set does not hold the main set's vote accounts.
    let big = f.write("big.json", &v["sets"]["big"].to_string());
    let out = prove(&ev, &key, &big, &[]);
    assert!(text(&out.stderr).contains("stake 0 of"), "{}", text(&out.stderr));
    // Not evidence, not a set, no evidence at all.
    let junk = f.write("junk.json", "{\"version\": 2}");
    assert!(text(&prove(&junk, &key, &set, &[]).stderr).contains("not vote evidence"));
    let bad_set = f.write("bad-set.txt", "nonsense\n");
    assert!(
        text(&prove(&ev, &key, &bad_set, &[]).stderr).contains("line 1: expected VOTE_ACCOUNT AUTHORIZED_VOTER STAKE")
    );
    let out = aldb(&[
        "proof",
        &key,
        "--url",
        "http://127.0.0.1:1/",
        "--trust",
        "votes",
        "--validators",
        set.to_str().unwrap(),
    ]);
    assert!(text(&out.stderr).contains("getSlotVotes"), "{}", text(&out.stderr));
}

/// Replaces the root `getSlotVotes` answers with another 32 bytes.
fn other_root(v: &mut Value) {
    if v["result"]["value"].get("votes").is_some() {
        v["result"]["value"]["root"] = Value::from(hash_to_base58(&[0x33; 32]));
    }
}

#[test]
fn proof_by_votes_from_a_running_service() {
    let dir = tempfile::tempdir().unwrap();
    let account = |i: u8, lamports: u64| Account {
        pubkey: [i; 32],
        lamports,
        owner: [200; 32],
        executable: false,
        data: vec![i; usize::from(i % 7)],
    };
    let mut history = History::start(WriterConfig::new(dir.path()), 64).unwrap();
    history.commit(0, None, &(1..40).map(|i| account(i, 1000 + u64::from(i))).collect::<Vec<_>>()).unwrap();
    for slot in 1..=3u8 {
        history.commit(u64::from(slot), Some(u64::from(slot - 1)), &[account(3, 7 + u64::from(slot))]).unwrap();
    }
    let roots = history.finish().unwrap();

    // Four validators, stakes 100, 100, 50, 50. Slot 1 is voted on by the two large ones (2/3
    // exactly), slot 2 by all, slot 3 by three of which one vote was altered after signing.
    let voters: Vec<Voter> =
        (0..4u8).map(|i| Voter::new([40 + i; 32], (i % 2 == 1).then_some([60 + i; 32]), [80 + i; 32])).collect();
    let mut set = String::from("# vote account, authorized voter, stake\n");
    for (v, stake) in voters.iter().zip([100, 100, 50, 50]) {
        set.push_str(&format!(
            "{} {} {stake}\n",
            hash_to_base58(&v.vote_account()),
            hash_to_base58(&v.authorized_voter())
        ));
    }
    let f = Files::new();
    let set = f.write("set.txt", &set);
    let mut log = VoteLog::open(dir.path()).unwrap();
    for slot in 1..=3u64 {
        let h = [slot as u8; 32];
        let hash = bank_hash(&h, &roots[&slot], None);
        let bank = BankEntry {
            slot,
            parent: slot - 1,
            bank_hash: hash,
            aldb: Some(AldbCommitment { h, root: roots[&slot] }),
            hard_forks: None,
            next_set_hash: None,
        };
        let mut votes: Vec<Vec<u8>> = match slot {
            1 => voters[..2].iter().map(|v| v.vote(slot, &hash)).collect(),
            2 => voters.iter().map(|v| v.vote(slot, &hash)).collect(),
            _ => voters[..3].iter().map(|v| v.vote(slot, &hash)).collect(),
        };
        if slot == 3 {
            votes[1][70] ^= 1;
        }
        let block = VotesEntry { slot: slot + 1, transactions: votes };
        log.append(&[VoteLogEntry::Bank(bank), VoteLogEntry::Votes(block)]).unwrap();
    }

    let hyades = Hyades::start(dir.path());
    let url = hyades.url.clone();
    let key = hash_to_base58(&[3; 32]);
    let prove = |url: &str, slot: Option<&str>| {
        let mut args = vec!["proof", &key, "--url", url, "--trust", "votes", "--validators", set.to_str().unwrap()];
        if let Some(s) = slot {
            args.extend_from_slice(&["--slot", s]);
        }
        aldb(&args)
    };

    // Accepted: the account at slot 2 on the votes of all four. (Without --slot the newest slot
    // with votes is asked for: 3, refused below.)
    let out = prove(&url, Some("2"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with(&format!("account {key}\n  lamports: 9\n")), "{stdout}");
    let bank2 = hash_to_base58(&bank_hash(&[2; 32], &roots[&2], None));
    assert!(
        stdout
            .contains(&format!("votes of 4 vote accounts with stake 300 of 300 (more than 2/3) for bank hash {bank2}")),
        "{stdout}"
    );
    assert!(stdout.ends_with(&format!("verified against root {} at slot 2\n", hash_to_base58(&roots[&2]))));
    // An absent account is proven absent the same way.
    let absent = aldb(&[
        "proof",
        &hash_to_base58(&[99; 32]),
        "--url",
        &url,
        "--trust",
        "votes",
        "--validators",
        set.to_str().unwrap(),
        "--slot",
        "2",
    ]);
    assert!(text(&absent.stdout).starts_with(&format!("account {}: absent", hash_to_base58(&[99; 32]))));

    // Refused, each with its reason.
    for (slot, why) in [
        (Some("1"), "votes of stake 200 of 300 agree, not more than 2/3 (2 votes offered: 2 counted)"),
        (Some("3"), "votes of stake 150 of 300 agree, not more than 2/3 (3 votes offered: 2 counted, 1 bad_signature)"),
        (None, "slot 3: votes of stake 150 of 300"),
        (Some("0"), "getSlotVotes failed: error -32001"),
        (Some("9"), "getSlotVotes failed: error -32004"),
    ] {
        let out = prove(&url, slot);
        assert!(!out.status.success(), "slot {slot:?} accepted");
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
        assert!(text(&out.stderr).contains(why), "slot {slot:?}: {}", text(&out.stderr));
    }
    // A service that names another root: the votes do not carry its bank hash.
    let liar = tampering_proxy(url.clone(), other_root);
    let out = prove(&liar, Some("2"));
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("votes of stake 0 of 300 agree, not more than 2/3 (4 votes offered: 4 wrong_hash)"),
        "{}",
        text(&out.stderr)
    );
}

/// Now by this machine's clock, in Unix seconds.
fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// A real Hyades whose log holds, in the block after slot 1, more than 4,096 votes of vote
/// accounts nobody trusts (signed by real keys) and a vote naming a validator's account signed
/// by an outsider, then the four validators' votes, stamped 30 days ago: `aldb proof --trust
/// votes` asks for its set's vote accounts and accepts slot 1 anyway. Asked for the newest, the
/// service answers that old slot, and `--max-age` refuses it; once fresh votes on slot 2 land,
/// the newest is accepted within the bound.
#[test]
fn outsiders_cannot_crowd_out_the_set_and_max_age_refuses_an_old_newest() {
    let dir = tempfile::tempdir().unwrap();
    let account = |i: u8, lamports: u64| Account {
        pubkey: [i; 32],
        lamports,
        owner: [200; 32],
        executable: false,
        data: vec![i; usize::from(i % 5)],
    };
    let mut history = History::start(WriterConfig::new(dir.path()), 64).unwrap();
    history.commit(0, None, &(1..20).map(|i| account(i, 500 + u64::from(i))).collect::<Vec<_>>()).unwrap();
    for slot in 1..=3u8 {
        history.commit(u64::from(slot), Some(u64::from(slot - 1)), &[account(3, 70 + u64::from(slot))]).unwrap();
    }
    let roots = history.finish().unwrap();
    let voters: Vec<Voter> =
        (0..4u8).map(|i| Voter::new([40 + i; 32], (i % 2 == 1).then_some([60 + i; 32]), [80 + i; 32])).collect();
    let mut set = String::from("\u{feff}# a file some editors save with a byte-order mark\n");
    for (v, stake) in voters.iter().zip([100, 100, 50, 50]) {
        set.push_str(&format!(
            "{} {} {stake}\r\n",
            hash_to_base58(&v.vote_account()),
            hash_to_base58(&v.authorized_voter())
        ));
    }
    let f = Files::new();
    let set = f.write("set.txt", &set);
    let bank = |slot: u64| {
        let h = [slot as u8; 32];
        BankEntry {
            slot,
            parent: slot - 1,
            bank_hash: bank_hash(&h, &roots[&slot], None),
            aldb: Some(AldbCommitment { h, root: roots[&slot] }),
            hard_forks: None,
            next_set_hash: None,
        }
    };
    let old = now() - 30 * 24 * 3600;
    let (b1, b2) = (bank(1), bank(2));
    let outsiders: Vec<Vec<u8>> = (0..aldb_verify::votes::MAX_EVIDENCE_VOTES as u32 + 100)
        .map(|i| {
            let mut seed = [7u8; 32];
            seed[..4].copy_from_slice(&i.to_le_bytes());
            let mut vote_account = [9u8; 32];
            vote_account[..4].copy_from_slice(&i.to_le_bytes());
            Voter::new(seed, None, vote_account).vote_at(1, &b1.bank_hash, Some(old))
        })
        .collect();
    let forged = Voter::new([0xEE; 32], None, voters[0].vote_account()).vote_at(1, &b1.bank_hash, Some(old));
    let mut log = VoteLog::open(dir.path()).unwrap();
    let mut entries = vec![VoteLogEntry::Bank(b1), VoteLogEntry::Bank(b2)];
    for chunk in outsiders.chunks(1024) {
        entries.push(VoteLogEntry::Votes(VotesEntry { slot: 2, transactions: chunk.to_vec() }));
    }
    entries.push(VoteLogEntry::Votes(VotesEntry { slot: 2, transactions: vec![forged] }));
    let honest = voters.iter().map(|v| v.vote_at(1, &b1.bank_hash, Some(old))).collect();
    entries.push(VoteLogEntry::Bank(bank(3)));
    entries.push(VoteLogEntry::Votes(VotesEntry { slot: 3, transactions: honest }));
    log.append(&entries).unwrap();

    let hyades = Hyades::start(dir.path());
    let key = hash_to_base58(&[3; 32]);
    let prove = |extra: &[&str]| {
        let mut args = vec!["proof", &key, "--url", &hyades.url, "--trust", "votes", "--validators"];
        args.push(set.to_str().unwrap());
        args.extend_from_slice(extra);
        aldb(&args)
    };

    // Slot 1, asked for and as the newest: accepted on the four votes the outsiders did not
    // crowd out, stamped 30 days ago.
    for extra in [&["--slot", "1"][..], &[][..]] {
        let out = prove(extra);
        assert!(out.status.success(), "{extra:?}: {}", text(&out.stderr));
        let stdout = text(&out.stdout);
        assert!(stdout.contains("votes of 4 vote accounts with stake 300 of 300"), "{stdout}");
        assert!(stdout.contains(&format!("voted at unix time {old} or later")), "{stdout}");
        assert!(stdout.ends_with(" at slot 1\n"), "{stdout}");
    }
    // With a bound on age, the old newest is refused, saying how old it is.
    for extra in [&["--max-age", "3600"][..], &["--slot", "1", "--max-age", "3600"][..]] {
        let out = prove(extra);
        assert!(!out.status.success(), "{extra:?} accepted");
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
        let stderr = text(&out.stderr);
        assert!(stderr.contains("slot 1: the votes were cast 259"), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "(timestamp {old}, vouched by more than 1/3 of the stake), more than the 3600 s allowed"
            )),
            "{stderr}"
        );
    }

    // Fresh votes on slot 2 land: the newest is slot 2, within the bound; slot 1 still is not.
    let fresh = now();
    let votes = voters.iter().map(|v| v.vote_at(2, &b2.bank_hash, Some(fresh))).collect();
    VoteLog::open(dir.path())
        .unwrap()
        .append(&[VoteLogEntry::Votes(VotesEntry { slot: 4, transactions: votes })])
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let out = loop {
        let out = prove(&["--max-age", "3600"]);
        if out.status.success() || std::time::Instant::now() > deadline {
            break out;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).ends_with(" at slot 2\n"), "{}", text(&out.stdout));
    assert!(!prove(&["--slot", "1", "--max-age", "3600"]).status.success());
    // Votes that carry no timestamp cannot satisfy a bound.
    let (ev, pubkey) = f.evidence(&vectors(), "unstamped");
    let vset = f.write("vset.json", &vectors()["sets"]["main"].to_string());
    let out = super_prove(&ev, &pubkey, &vset, &["--max-age", "1000000000000"]);
    assert!(text(&out.stderr).contains("the votes do not say when they were cast"), "{}", text(&out.stderr));
    let out = super_prove(&ev, &pubkey, &vset, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}

/// The evidence-file form of [`prove`], for use where a closure shadows it.
fn super_prove(evidence: &Path, pubkey: &str, set: &Path, extra: &[&str]) -> Output {
    prove(evidence, pubkey, set, extra)
}
