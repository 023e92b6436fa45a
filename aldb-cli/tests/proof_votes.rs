//! `aldb proof --trust votes` on real files: the validator set (both forms) and vote evidence
//! from `tests/vectors/votes-v1.json` (`docs/SPEC.md` §10), written to a temporary directory. An
//! accepted case prints the account and the stake that voted; exactly 2/3, a changed account, a
//! bad signature, the wrong key or slot, and a bad set each fail with the reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn aldb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_aldb")).args(args).env("RUST_BACKTRACE", "0").output().expect("run aldb")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

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
