//! The ways a validator starts and hands over to live operation: a genesis start, a snapshot
//! start with duplicate and deleted accounts from many threads, and ledger replay that sends
//! account updates with no slot statuses.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use aldb_core::CaptureOptions;
use aldb_naive::NaiveState;
use common::{Acct, COMMITMENTS, Ev, Knobs, acct, adapter, check, generate, run, slot_hashes, startup, status};
use geyser_adapter::{
    AccountRecord, Adapter, AdapterConfig, CommitKind, Commitment, Committed, IgnoreReason, Irregularity, KeepAccounts,
    KeepUpdates, SlotStatus::*, StatusChange, StatusKind,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn feed<R: geyser_adapter::Retain>(a: &Adapter<R>, events: Vec<Ev>) {
    for e in events {
        match e {
            Ev::Account(x) => {
                let _ = a.update_account(&x.update());
            }
            Ev::Status(s) => {
                let _ = a.update_slot_status(s);
            }
            Ev::EndOfStartup => {
                let _ = a.end_of_startup();
            }
            Ev::Block(slot, b) => {
                let _ = a.block_metadata(slot, b.blockhash, Some(b.block_height));
            }
        }
    }
}

fn slots<R>(c: &[Committed<R>]) -> Vec<(u64, Option<u64>)> {
    c.iter().map(|c| (c.slot, c.parent)).collect()
}

fn state_of(writes: &[&Acct]) -> NaiveState {
    let mut s = NaiveState::default();
    for w in writes {
        w.apply(&mut s);
    }
    s
}

fn config(commitment: Commitment) -> AdapterConfig {
    AdapterConfig::new(commitment, aldb_core::Config::new(2, 2, 6).expect("valid layout"))
}

#[test]
fn genesis_slot_zero_becomes_the_base_when_its_child_appears() {
    for commitment in COMMITMENTS {
        let a = adapter(commitment);
        let genesis: Vec<Acct> = (0..6u8).map(|k| acct(0, k, 100 + u64::from(k), u64::from(k))).collect();
        for g in &genesis {
            a.update_account(&g.update()).expect("genesis accounts are ordinary updates");
        }
        // Slot 0 never gets a status; until a child names it, nothing is committed.
        assert!(a.commit_ready().is_empty());
        a.update_slot_status(status_of(2, Some(0), CreatedBank)).expect("created");
        let c = a.commit_ready();
        assert_eq!(slots(&c), [(0, None)]);
        assert_eq!(c[0].kind, CommitKind::Genesis);
        let mut model = state_of(&genesis.iter().collect::<Vec<_>>());
        assert_eq!(c[0].root, model.root());

        // Slot 2: a delete, a write, and two versions of one account (the higher wins).
        let s2 = [acct(2, 1, 0, 20), acct(2, 9, 5, 21), acct(2, 3, 7, 23), acct(2, 3, 8, 22)];
        for w in [&s2[2], &s2[0], &s2[3], &s2[1]] {
            a.update_account(&w.update()).expect("buffered");
        }
        a.update_slot_status(status_of(2, Some(0), Processed)).expect("processed");
        a.update_slot_status(status_of(2, None, Confirmed)).expect("confirmed");
        let c = a.commit_ready();
        for w in [&s2[0], &s2[1], &s2[2]] {
            w.apply(&mut model);
        }
        match commitment {
            Commitment::Confirmed => {
                assert_eq!(slots(&c), [(2, Some(0))]);
                assert_eq!(c[0].root, model.root());
                assert_eq!(c[0].updates, 3);
            }
            Commitment::Finalized => {
                assert!(c.is_empty());
                a.update_slot_status(status_of(2, Some(0), Rooted)).expect("rooted");
                let c = a.commit_ready();
                assert_eq!(slots(&c), [(2, Some(0))]);
                assert_eq!(c[0].root, model.root());
            }
            Commitment::Processed => {
                // Frozen at `Processed`; the base is confirmed and final at once, slot 2 is
                // confirmed, then rooted.
                assert_eq!(slots(&c), [(2, Some(0))]);
                assert_eq!((c[0].root, c[0].updates), (model.root(), 3));
                let changes: Vec<_> = a.take_status_changes().iter().map(|c| (c.slot, c.kind, c.root)).collect();
                let genesis_root = state_of(&genesis.iter().collect::<Vec<_>>()).root();
                assert_eq!(
                    changes,
                    [
                        (0, StatusKind::Confirmed, genesis_root),
                        (0, StatusKind::Finalized, genesis_root),
                        (2, StatusKind::Confirmed, model.root())
                    ]
                );
                a.update_slot_status(status_of(2, Some(0), Rooted)).expect("rooted");
                assert!(a.commit_ready().is_empty());
                let changes: Vec<_> = a.take_status_changes().iter().map(|c| (c.slot, c.kind, c.parent)).collect();
                assert_eq!(changes, [(2, StatusKind::Finalized, Some(0))]);
                // Slot 2 is the base now.
                let late = a.update_account(&acct(2, 4, 1, 99).update()).expect_err("slot 2 is rooted");
                assert_eq!(late.reason, IgnoreReason::UpdateBelowBase);
            }
        }
        // Late or foreign updates are refused, never applied.
        let late = a.update_account(&acct(0, 4, 1, 99).update()).expect_err("slot 0 is committed");
        assert_eq!(late.reason, IgnoreReason::UpdateBelowBase);
        let snap = a.update_account(&startup(0, 4, 1, 99).update()).expect_err("startup is over");
        assert_eq!(snap.reason, IgnoreReason::LateStartupUpdate);
        assert_eq!(a.with_tree(|t| t.root()), model.root());
    }
}

fn status_of(slot: u64, parent: Option<u64>, s: geyser_adapter::SlotStatus) -> geyser_adapter::SlotEvent {
    geyser_adapter::SlotEvent::new(slot, parent, s)
}

/// Startup accounts from several storage slots, duplicated within and across storages, some
/// deleted, shuffled.
fn snapshot(seed: u64, keys: u16) -> (Vec<Acct>, NaiveState, u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let storages = [3u64, 7, 12];
    let mut all = Vec::new();
    let mut wv = 0u64;
    for k in 0..keys {
        let key = {
            let mut p = [0u8; 32];
            p[..2].copy_from_slice(&k.to_le_bytes());
            p[2] = 0xaa;
            p
        };
        for &slot in &storages {
            for _ in 0..rng.random_range(0..3) {
                wv += 1;
                // Write versions are not ordered across slots: the slot decides first.
                let lamports = if rng.random_ratio(1, 5) { 0 } else { rng.random_range(1..1000) };
                let mut a = startup(slot, 0, lamports, rng.random_range(0..1_000_000) * 4096 + wv);
                a.pubkey = key;
                a.data = (0..rng.random_range(0..20)).map(|_| rng.random()).collect();
                all.push(a);
            }
        }
    }
    let mut best: BTreeMap<[u8; 32], &Acct> = BTreeMap::new();
    for a in &all {
        let e = best.entry(a.pubkey).or_insert(a);
        if (a.slot, a.write_version) > (e.slot, e.write_version) {
            *e = a;
        }
    }
    let model = state_of(&best.values().copied().collect::<Vec<_>>());
    let max = all.iter().map(|a| a.slot).max().unwrap_or(0);
    for i in (1..all.len()).rev() {
        all.swap(i, rng.random_range(0..=i));
    }
    (all, model, max)
}

fn deliver_threads<R: geyser_adapter::Retain>(a: &Adapter<R>, accts: &[Acct], threads: usize) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for x in accts.iter().skip(t).step_by(threads) {
                    a.update_account(&x.update()).expect("startup accepted");
                }
            });
        }
    });
}

#[test]
fn snapshot_startup_from_many_threads_resolves_duplicates_and_tombstones() {
    let (accts, model, s0) = snapshot(11, 3000);
    let a = Adapter::with_retain(config(Commitment::Confirmed), KeepAccounts).expect("adapter");
    deliver_threads(&a, &accts, 4);
    assert!(a.commit_ready().is_empty(), "nothing before end of startup");
    a.end_of_startup().expect("end of startup");
    let c = a.commit_ready();
    assert_eq!(slots(&c), [(s0, None)]);
    assert_eq!(c[0].kind, CommitKind::Startup);
    assert_eq!(c[0].root, model.root());
    assert_eq!(c[0].updates, model.leaves.len());
    // The retained records are exactly the accounts in the state.
    let mut got: BTreeMap<[u8; 32], [u8; 32]> = BTreeMap::new();
    for r in &c[0].records {
        let AccountRecord { pubkey, lamports, owner, executable, data, hashed, .. } = r;
        assert_eq!(hashed.value, Some(aldb_naive::value(*lamports, owner, *executable, data)));
        got.insert(aldb_naive::path(pubkey), aldb_naive::value(*lamports, owner, *executable, data));
    }
    assert_eq!(got, model.leaves);
    assert_eq!(a.stats().startup_updates, accts.len() as u64);

    // Startup is over: more startup accounts and a second end are refused.
    let late = a.update_account(&startup(s0, 1, 5, 1).update()).expect_err("late");
    assert_eq!(late.reason, IgnoreReason::LateStartupUpdate);
    assert_eq!(a.end_of_startup().map_err(|e| e.reason), Err(IgnoreReason::RepeatedEndOfStartup));

    // The first live bank builds on the snapshot slot.
    let mut model = model;
    let next = [acct(s0 + 1, 1, 77, 1), acct(s0 + 1, 2, 0, 2)];
    feed(&a, vec![status(s0 + 1, Some(s0), CreatedBank)]);
    feed(&a, next.iter().cloned().map(Ev::Account).collect());
    feed(&a, vec![status(s0 + 1, Some(s0), Processed), status(s0 + 1, None, Confirmed)]);
    for w in &next {
        w.apply(&mut model);
    }
    let c = a.commit_ready();
    assert_eq!(slots(&c), [(s0 + 1, Some(s0))]);
    assert_eq!(c[0].root, model.root());
    assert_eq!(c[0].records.len(), 2);
}

#[test]
fn startup_ends_at_the_first_status_when_end_of_startup_never_comes() {
    let (accts, model, s0) = snapshot(5, 400);
    let a = adapter(Commitment::Finalized);
    deliver_threads(&a, &accts, 3);
    a.update_slot_status(status_of(s0 + 2, Some(s0), CreatedBank)).expect("created");
    let c = a.commit_ready();
    assert_eq!(slots(&c), [(s0, None)]);
    assert_eq!(c[0].root, model.root());
    assert_eq!(a.stats().irregular(Irregularity::ImplicitEndOfStartup), 1);
}

/// Startup at slot 200 (storages 0, 71, 200), then slots 201..=210 replayed with no statuses
/// (205 skipped), then live slot 211 whose parent is the last replayed slot.
struct Replay {
    events_startup: Vec<Ev>,
    replayed: Vec<(u64, Vec<Acct>)>,
    live: Vec<Acct>,
}

fn replay(hints: bool) -> Replay {
    let mut wv = 0;
    let mut next = || {
        wv += 1;
        wv
    };
    let mut events_startup = Vec::new();
    for (slot, keys) in [(0u64, 0..8u8), (71, 4..12), (200, 10..14)] {
        for k in keys {
            events_startup.push(Ev::Account(startup(slot, k, 10 + u64::from(k) + slot, next())));
        }
    }
    events_startup.push(Ev::EndOfStartup);
    let mut replayed = Vec::new();
    let mut parent = 200;
    for slot in (201..=210u64).filter(|s| *s != 205) {
        let mut w = vec![
            acct(slot, (slot % 16) as u8, slot, next()),
            acct(slot, 3, if slot % 3 == 0 { 0 } else { slot }, next()),
        ];
        if hints {
            w.push(slot_hashes(slot, parent, next()));
        }
        replayed.push((slot, w));
        parent = slot;
    }
    let mut live = vec![acct(211, 1, 211, next()), acct(211, 5, 0, next())];
    if hints {
        live.push(slot_hashes(211, 210, next()));
    }
    Replay { events_startup, replayed, live }
}

/// Roots of the chain 200, 201, ..., 211.
fn replay_roots(r: &Replay) -> BTreeMap<u64, [u8; 32]> {
    let mut model = NaiveState::default();
    let mut best: BTreeMap<[u8; 32], &Acct> = BTreeMap::new();
    for e in &r.events_startup {
        if let Ev::Account(a) = e {
            let cur = best.entry(a.pubkey).or_insert(a);
            if (a.slot, a.write_version) > (cur.slot, cur.write_version) {
                *cur = a;
            }
        }
    }
    for a in best.values() {
        a.apply(&mut model);
    }
    let mut roots = BTreeMap::from([(200, model.root())]);
    for (slot, w) in r.replayed.iter().chain(std::iter::once(&(211, r.live.clone()))) {
        for a in w {
            a.apply(&mut model);
        }
        roots.insert(*slot, model.root());
    }
    roots
}

fn start_replay(a: &Adapter, r: &Replay) {
    feed(a, r.events_startup.clone());
    for (_, w) in &r.replayed {
        feed(a, w.iter().cloned().map(Ev::Account).collect());
    }
    feed(a, vec![status(211, Some(210), CreatedBank)]);
    feed(a, r.live.iter().cloned().map(Ev::Account).collect());
    feed(a, vec![status(211, Some(210), Processed), status(211, None, Confirmed)]);
}

#[test]
fn replayed_slots_without_statuses_commit_as_rooted_reaches_them() {
    let r = replay(false);
    let roots = replay_roots(&r);
    for commitment in [Commitment::Confirmed, Commitment::Finalized] {
        let a = adapter(commitment);
        start_replay(&a, &r);
        // Nothing links the replayed slots yet: only the startup state is committed.
        let mut got = a.commit_ready();
        assert_eq!(slots(&got), [(200, None)]);
        // The root moves past the replayed slots; `Rooted` names each one's parent.
        let mut parent = 200;
        for (slot, _) in &r.replayed {
            a.update_slot_status(status_of(*slot, Some(parent), Rooted)).expect("rooted");
            let c = a.commit_ready();
            assert_eq!(c.first().map(|c| (c.slot, c.parent)), Some((*slot, Some(parent))));
            got.extend(c);
            parent = *slot;
        }
        // Slot 211 was confirmed long ago: under Confirmed it followed 210 at once.
        if commitment == Commitment::Finalized {
            assert_eq!(got.last().map(|c| c.slot), Some(210));
            a.update_slot_status(status_of(211, Some(210), Rooted)).expect("rooted");
            got.extend(a.commit_ready());
        }
        let want: Vec<u64> = roots.keys().copied().collect();
        assert_eq!(got.iter().map(|c| c.slot).collect::<Vec<_>>(), want);
        for c in &got {
            assert_eq!(c.root, roots[&c.slot], "slot {}", c.slot);
        }
    }
    // Under Processed the replayed slots freeze as `Rooted` links them, then 211 (processed
    // long ago) follows 210: confirmed as Confirmed commits them, finalized up to 210.
    let a = adapter(Commitment::Processed);
    start_replay(&a, &r);
    let mut parent = 200;
    for (slot, _) in &r.replayed {
        a.update_slot_status(status_of(*slot, Some(parent), Rooted)).expect("rooted");
        parent = *slot;
    }
    let (frozen, changes) = drain(&a);
    let want: Vec<(u64, [u8; 32])> = roots.iter().map(|(s, r)| (*s, *r)).collect();
    assert_eq!(frozen.iter().map(|c| (c.slot, c.root)).collect::<Vec<_>>(), want);
    let of = |kind| changes.iter().filter(|c| c.kind == kind).map(|c| (c.slot, c.root)).collect::<Vec<_>>();
    assert_eq!(of(StatusKind::Confirmed), want);
    assert_eq!(of(StatusKind::Finalized), want[..want.len() - 1]);
    assert!(of(StatusKind::Abandoned).is_empty());
}

/// Everything ready under `Commitment::Processed`: the freezes and the status changes.
fn drain(a: &Adapter) -> (Vec<Committed>, Vec<StatusChange>) {
    let (mut frozen, mut changes) = (Vec::new(), Vec::new());
    loop {
        let c = a.commit_ready();
        let s = a.take_status_changes();
        if c.is_empty() && s.is_empty() {
            return (frozen, changes);
        }
        frozen.extend(c);
        changes.extend(s);
    }
}

#[test]
fn replayed_slots_are_linked_by_their_slot_hashes_writes() {
    // Slots rooted while the validator replayed its ledger never get `Rooted`; their SlotHashes
    // writes still name their parents.
    let r = replay(true);
    let roots = replay_roots(&r);
    let a = adapter(Commitment::Confirmed);
    start_replay(&a, &r);
    let got = a.commit_ready();
    let want: Vec<u64> = roots.keys().copied().collect();
    assert_eq!(got.iter().map(|c| c.slot).collect::<Vec<_>>(), want);
    for c in &got {
        assert_eq!(c.root, roots[&c.slot], "slot {}", c.slot);
    }
    // Under Processed the hints link and complete the replayed chain at once: every slot
    // freezes, and 211's confirmation confirms them all, with the roots Confirmed commits.
    let p = adapter(Commitment::Processed);
    start_replay(&p, &r);
    let (frozen, changes) = drain(&p);
    let pairs = |v: &[Committed]| v.iter().map(|c| (c.slot, c.root)).collect::<Vec<_>>();
    assert_eq!(pairs(&frozen), pairs(&got));
    let confirmed: Vec<_> =
        changes.iter().filter(|c| c.kind == StatusKind::Confirmed).map(|c| (c.slot, c.root)).collect();
    assert_eq!(confirmed, pairs(&got));

    let a = adapter(Commitment::Finalized);
    start_replay(&a, &r);
    assert_eq!(slots(&a.commit_ready()), [(200, None)]);
    // The first `Rooted` after startup names a replayed parent that was rooted silently.
    a.update_slot_status(status_of(207, Some(206), Rooted)).expect("rooted");
    let got = a.commit_ready();
    assert_eq!(
        slots(&got),
        [(201, Some(200)), (202, Some(201)), (203, Some(202)), (204, Some(203)), (206, Some(204)), (207, Some(206))]
    );
    for c in &got {
        assert_eq!(c.root, roots[&c.slot], "slot {}", c.slot);
    }
}

#[test]
fn keep_updates_hands_over_each_slots_winning_updates() {
    let a = Adapter::with_retain(config(Commitment::Confirmed), KeepUpdates).expect("adapter");
    feed(&a, vec![Ev::Account(acct(0, 1, 5, 1)), status(1, Some(0), CreatedBank)]);
    let writes = [acct(1, 2, 9, 3), acct(1, 2, 8, 2), acct(1, 1, 0, 4)];
    feed(&a, writes.iter().cloned().map(Ev::Account).collect());
    feed(&a, vec![status(1, Some(0), Processed), status(1, None, Confirmed)]);
    let c = a.commit_ready();
    assert_eq!(slots(&c), [(0, None), (1, Some(0))]);
    let mut recs = c[1].records.clone();
    recs.sort();
    let mut want = vec![
        aldb_core::Update {
            path: aldb_naive::path(&[2; 32]),
            value: Some(aldb_naive::value(9, &[7; 32], false, &[2; 3])),
        },
        aldb_core::Update { path: aldb_naive::path(&[1; 32]), value: None },
    ];
    want.sort();
    assert_eq!(recs, want);
}

/// The plugin's arrangement: callbacks on several threads, commits on a worker thread that
/// waits for work, all at once.
#[test]
fn a_worker_thread_commits_while_callbacks_run() {
    for seed in [3u64, 8] {
        let k = Knobs {
            genesis: seed % 2 == 1,
            end_of_startup: true,
            replay: 3,
            hints: true,
            live: 80,
            keys: 20,
            fork_pct: 25,
            dead_pct: 20,
            restart_pct: 10,
            confirm_pct: 60,
            interleave_pct: 30,
        };
        let k = Knobs { replay: if k.genesis { 0 } else { k.replay }, ..k };
        let sc = generate(seed, &k);
        let a = adapter(Commitment::Confirmed);
        let done = AtomicBool::new(false);
        let committed = std::thread::scope(|s| {
            let worker = s.spawn(|| {
                let mut out = Vec::new();
                while !done.load(Ordering::Acquire) {
                    a.wait_for_work(Duration::from_millis(2));
                    out.extend(a.commit_ready());
                }
                out.extend(a.commit_ready());
                out
            });
            // `run` also commits now and then; here only the worker does.
            let _ = run_without_commits(&a, &sc.events);
            done.store(true, Ordering::Release);
            worker.join().unwrap_or_default()
        });
        check(&sc, Commitment::Confirmed, &committed).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
}

fn run_without_commits(a: &Adapter, events: &[Ev]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < events.len() {
        let j = events[i..].iter().position(|e| !matches!(e, Ev::Account(_))).map_or(events.len(), |p| i + p);
        if j > i {
            let accts: Vec<Acct> = events[i..j]
                .iter()
                .filter_map(|e| if let Ev::Account(x) = e { Some(x.clone()) } else { None })
                .collect();
            std::thread::scope(|s| {
                for t in 0..3 {
                    let accts = &accts;
                    s.spawn(move || {
                        for x in accts.iter().skip(t).step_by(3) {
                            let _ = a.update_account(&x.update());
                        }
                    });
                }
            });
            i = j;
            continue;
        }
        feed(a, vec![events[i].clone()]);
        n += 1;
        i += 1;
    }
    n
}

#[test]
fn run_helper_matches_single_threaded_delivery() {
    // The same generated run gives the same commits whether updates come from one thread or four.
    let k = Knobs {
        genesis: false,
        end_of_startup: true,
        replay: 4,
        hints: false,
        live: 40,
        keys: 12,
        fork_pct: 30,
        dead_pct: 30,
        restart_pct: 15,
        confirm_pct: 50,
        interleave_pct: 50,
    };
    let sc = generate(77, &k);
    let one = run(&adapter(Commitment::Confirmed), &sc.events, 1, 1);
    let four = run(&adapter(Commitment::Confirmed), &sc.events, 4, 2);
    assert_eq!(
        one.iter().map(|c| (c.slot, c.root)).collect::<Vec<_>>(),
        four.iter().map(|c| (c.slot, c.root)).collect::<Vec<_>>()
    );
}

#[test]
fn captured_changes_cover_each_commit() {
    let (accts, model, s0) = snapshot(21, 300);
    let mut c = config(Commitment::Confirmed);
    c.capture_changes = Some(aldb_core::CaptureOptions::ALL);
    let a = Adapter::with_retain(c, KeepUpdates).expect("adapter");
    deliver_threads(&a, &accts, 2);
    a.end_of_startup().expect("end of startup");
    let base = a.commit_ready();
    let changes = base[0].changes.as_ref().expect("captured");
    // A startup commit captures the whole tree.
    let leaves: BTreeMap<[u8; 32], [u8; 32]> =
        changes.buckets().flat_map(|b| b.paths.iter().copied().zip(b.values.iter().copied())).collect();
    assert_eq!(leaves, model.leaves);

    let writes = [acct(s0 + 1, 1, 5, 1), acct(s0 + 1, 2, 0, 2), acct(s0 + 1, 3, 9, 3)];
    feed(&a, vec![status(s0 + 1, Some(s0), CreatedBank)]);
    feed(&a, writes.iter().cloned().map(Ev::Account).collect());
    feed(&a, vec![status(s0 + 1, Some(s0), Processed), status(s0 + 1, None, Confirmed)]);
    let c = a.commit_ready();
    let changes = c[0].changes.as_ref().expect("captured");
    let leaves: BTreeMap<[u8; 32], [u8; 32]> =
        changes.buckets().flat_map(|b| b.paths.iter().copied().zip(b.values.iter().copied())).collect();
    // Every written account's bucket was rewritten: present ones with their new value, the
    // deleted one gone.
    for u in &c[0].records {
        assert_eq!(leaves.get(&u.path).copied(), u.value);
    }
    assert_eq!(c[0].records.len(), 3);
    assert_eq!(c[0].root, a.with_tree(|t| t.root()));
}

#[test]
fn recycled_change_sets_capture_exactly_what_fresh_ones_do() {
    // Two adapters see the same slots; one is handed back every change set it produced, so its
    // later commits capture into sets still holding earlier slots' entries. The captures must
    // be identical, with the trimmed options the snapshot writer uses and with everything.
    for options in [CaptureOptions::ALL, CaptureOptions::ALL.with_level_step(2).without_leaf_values()] {
        let (accts, _, s0) = snapshot(23, 300);
        let mut c = config(Commitment::Confirmed);
        c.capture_changes = Some(options);
        let fresh = Adapter::with_retain(c, KeepUpdates).expect("adapter");
        let recycling = Adapter::with_retain(c, KeepUpdates).expect("adapter");
        for a in [&fresh, &recycling] {
            deliver_threads(a, &accts, 2);
            a.end_of_startup().expect("end of startup");
        }
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut compared = 0;
        for slot in s0..s0 + 40 {
            if slot > s0 {
                // A handful of writes per slot over 256 keys, a third of them deletions.
                let writes: Vec<Ev> = (0..rng.random_range(1..12u64))
                    .map(|w| Ev::Account(acct(slot, rng.random_range(0..=255u8), rng.random_range(0..3u64) * 7, w + 1)))
                    .collect();
                let statuses = vec![status(slot, Some(slot - 1), CreatedBank)];
                let done = vec![status(slot, Some(slot - 1), Processed), status(slot, None, Confirmed)];
                for a in [&fresh, &recycling] {
                    feed(a, statuses.clone());
                    feed(a, writes.clone());
                    feed(a, done.clone());
                }
            }
            let (f, r) = (fresh.commit_ready(), recycling.commit_ready());
            assert_eq!(f.len(), r.len());
            for (f, r) in f.into_iter().zip(r) {
                assert_eq!((f.slot, f.root), (r.slot, r.root));
                let (fc, rc) = (f.changes.expect("captured"), r.changes.expect("captured"));
                assert_eq!(fc.options(), options);
                assert_eq!(fc, rc, "slot {}", f.slot);
                assert!(fc.bucket_count() > 0);
                compared += 1;
                recycling.recycle_changes(rc);
            }
        }
        assert!(compared >= 30, "{compared} commits compared");
    }
}
