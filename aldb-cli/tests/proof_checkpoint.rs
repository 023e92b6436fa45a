//! `aldb proof --trust votes --checkpoint FILE` against a real Hyades on loopback serving five
//! epochs whose validator set changes every epoch (`docs/SPEC.md` §11): from a checkpoint of
//! epoch 1's set the client follows every epoch to a slot three epochs later and proves the
//! account there, keeping its state in a file; a later run catches up from that state alone; a
//! checkpoint of another stake and one older than its trusting period are refused by name; a
//! leftover temporary state file does no harm; and two services whose bank hashes for one slot
//! differ, each voted for by the whole set, freeze the client, which writes the misbehaviour
//! file and refuses every later run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use aldb_verify::epochs::{LightClient, Misbehaviour, MisbehaviourKind, verify_misbehaviour};
use aldb_verify::hash_to_base58;
use common::epochs::{KEY, LAMPORTS_BASE, checkpoint, set, set_with_total, write};
use common::service::Hyades;
use common::{aldb, text};

fn write_checkpoint(dir: &Path, name: &str, c: &aldb_verify::epochs::Checkpoint) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, serde_json::to_string_pretty(&c.to_json_value()).unwrap()).unwrap();
    p
}

fn prove(url: &str, checkpoint: &Path, extra: &[&str]) -> Output {
    let key = hash_to_base58(&KEY);
    let mut args = vec!["proof", &key, "--url", url, "--trust", "votes", "--checkpoint", checkpoint.to_str().unwrap()];
    args.extend_from_slice(extra);
    aldb(&args)
}

fn state_of(path: &Path) -> LightClient {
    LightClient::from_state_json_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn state_path(checkpoint: &Path) -> PathBuf {
    let mut s = checkpoint.as_os_str().to_owned();
    s.push(".state");
    PathBuf::from(s)
}

#[test]
fn follows_every_epoch_from_a_checkpoint_and_catches_up_from_its_state() {
    let data = tempfile::tempdir().unwrap();
    write(data.path(), None);
    let hyades = Hyades::start(data.path());
    let files = tempfile::tempdir().unwrap();
    let cp = write_checkpoint(files.path(), "checkpoint.json", &checkpoint(set(1), 100, 1_000_000));
    let state = state_path(&cp);

    // Slot 130 is in epoch 4: the client follows epochs 2, 3 and 4, naming each, and proves the
    // account on epoch 4's votes.
    let out = prove(&hyades.url, &cp, &["--slot", "130"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with(&format!("account {}\n  lamports: {}\n", hash_to_base58(&KEY), LAMPORTS_BASE + 130)));
    for epoch in 2..=4 {
        let line = format!("followed to epoch {epoch}: set {}", hash_to_base58(&set(epoch).hash()));
        assert!(stdout.contains(&line), "{line}: {stdout}");
    }
    assert!(!stdout.contains("followed to epoch 5"), "{stdout}");
    assert!(stdout.contains("stake 300 of 300 (more than 2/3) of epoch 4's set"), "{stdout}");
    assert!(stdout.contains(&format!("client: trusts epoch 4, state in {}", state.display())), "{stdout}");
    assert!(stdout.trim_end().ends_with(" at slot 130"), "{stdout}");
    let client = state_of(&state);
    assert_eq!(client.epoch(), 4);
    assert_eq!(client.last_verified_slot(), Some(130));
    assert_eq!(client.state().held.len(), 2);
    assert!(!files.path().join("checkpoint.json.state.tmp").exists());

    // A write that a crash cut short leaves a temporary file, never a torn state: the next run
    // reads the state and replaces the leftover.
    std::fs::write(files.path().join("checkpoint.json.state.tmp"), "{\"version\": 1, \"sched").unwrap();
    // Without --slot: the newest slot with votes (139, epoch 4). The client follows only what
    // it had not (epoch 5, bound by epoch 4's banks), and takes epoch 4's set for the slot
    // though epoch 5's members alone hold half of it.
    let out = prove(&hyades.url, &cp, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for epoch in 2..=4 {
        assert!(!stdout.contains(&format!("followed to epoch {epoch}")), "{stdout}");
    }
    assert!(stdout.contains("followed to epoch 5"), "{stdout}");
    assert!(stdout.contains(&format!("lamports: {}\n", LAMPORTS_BASE + 139)), "{stdout}");
    assert!(stdout.contains("of epoch 4's set"), "{stdout}");
    assert!(stdout.trim_end().ends_with(" at slot 139"), "{stdout}");
    assert!(!files.path().join("checkpoint.json.state.tmp").exists());
    let client = state_of(&state);
    assert_eq!((client.epoch(), client.last_verified_slot()), (5, Some(139)));
    // An older slot of an epoch no longer held is refused by name, and the state is kept.
    let before = std::fs::read(&state).unwrap();
    let out = prove(&hyades.url, &cp, &["--slot", "100"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("epoch_behind"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&state).unwrap(), before);
    // A torn state file is refused, not replaced by a new client.
    let torn = &before[..before.len() / 2];
    std::fs::write(&state, torn).unwrap();
    let out = prove(&hyades.url, &cp, &[]);
    assert!(text(&out.stderr).contains("not a client state"), "{}", text(&out.stderr));
    assert_eq!(std::fs::read(&state).unwrap(), torn);
}

#[test]
fn refuses_a_checkpoint_of_another_stake_or_past_its_trusting_period() {
    let data = tempfile::tempdir().unwrap();
    write(data.path(), None);
    let hyades = Hyades::start(data.path());
    let files = tempfile::tempdir().unwrap();

    // Epoch 1's members with a total stake of 1000: their votes hold 300 of it.
    let wrong = write_checkpoint(
        files.path(),
        "wrong.json",
        &checkpoint(set_with_total(1, [100, 100, 50, 50], 1000), 100, 1_000_000),
    );
    for slot in ["40", "130"] {
        let out = prove(&hyades.url, &wrong, &["--slot", slot]);
        assert!(!out.status.success(), "slot {slot} accepted");
        assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
        let stderr = text(&out.stderr);
        assert!(stderr.contains("insufficient_stake"), "{slot}: {stderr}");
        assert!(stderr.contains("votes of stake 300 of 1000"), "{slot}: {stderr}");
    }
    assert_eq!(state_of(&state_path(&wrong)).epoch(), 1);

    // A checkpoint ten days old, trusted for one: never followed, and its own epoch not used.
    let old = write_checkpoint(files.path(), "old.json", &checkpoint(set(1), 10 * 86_400, 86_400));
    for slot in ["40", "130"] {
        let out = prove(&hyades.url, &old, &["--slot", slot]);
        assert!(!out.status.success(), "slot {slot} accepted");
        let stderr = text(&out.stderr);
        assert!(stderr.contains("expired"), "{slot}: {stderr}");
        assert!(stderr.contains("too old to follow safely"), "{slot}: {stderr}");
    }
    assert_eq!(state_of(&state_path(&old)).epoch(), 1);
}

#[test]
fn conflicting_bank_hashes_freeze_the_client() {
    // Two services: the second's bank at slot 135 has another hash, and all four validators
    // voted for both.
    let (honest_dir, forked_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write(honest_dir.path(), None);
    write(forked_dir.path(), Some(135));
    let (honest, forked) = (Hyades::start(honest_dir.path()), Hyades::start(forked_dir.path()));
    let files = tempfile::tempdir().unwrap();
    let cp = write_checkpoint(files.path(), "cp.json", &checkpoint(set(1), 100, 1_000_000));
    let state = files.path().join("client.json");
    let misbehaviour = files.path().join("client.json.misbehaviour.json");
    let st = ["--state", state.to_str().unwrap()];

    let out = prove(&honest.url, &cp, &[&st[..], &["--slot", "135"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!misbehaviour.exists());

    let out = prove(&forked.url, &cp, &[&st[..], &["--slot", "135"]].concat());
    assert!(!out.status.success(), "the fork was accepted");
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("misbehaviour (conflicting_bank_hashes)"), "{stderr}");
    assert!(stderr.contains(&misbehaviour.display().to_string()), "{stderr}");
    // The file stands on its own: anyone trusting epoch 4's set checks it without a client.
    let m = Misbehaviour::from_json_str(&std::fs::read_to_string(&misbehaviour).unwrap()).unwrap();
    assert_eq!(m.kind, MisbehaviourKind::ConflictingBankHashes);
    assert_eq!((m.first.slot, m.second.slot), (135, 135));
    assert_eq!(m.set, set(4));
    assert_eq!(verify_misbehaviour(&m, Some(&set(4).hash())), Ok(MisbehaviourKind::ConflictingBankHashes));
    assert!(state_of(&state).misbehaviour().is_some());

    // Every later run refuses, whatever it asks and of whichever service.
    let frozen = std::fs::read(&state).unwrap();
    for (url, extra) in [(&honest.url, &["--slot", "135"][..]), (&honest.url, &[][..]), (&forked.url, &[][..])] {
        let out = prove(url, &cp, &[&st[..], extra].concat());
        assert!(!out.status.success(), "{extra:?} accepted");
        assert!(text(&out.stderr).contains("frozen"), "{}", text(&out.stderr));
        assert_eq!(std::fs::read(&state).unwrap(), frozen);
    }
}
