//! The plugin driven through `GeyserPlugin` the way agave drives it — created through the
//! exported `_create_plugin`, loaded from a config file, fed account updates and slot statuses
//! from several threads, unloaded — and then checked from the outside: Hyades opens the snapshot
//! directory, and every committed slot must be served with proofs that verify against the root an
//! independent model (`aldb-naive`) computes for the accounts at that slot.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agave_geyser_plugin_interface::geyser_plugin_interface::{
    GeyserPlugin, ReplicaAccountInfo, ReplicaAccountInfoV2, ReplicaAccountInfoV3, ReplicaAccountInfoVersions,
    SlotStatus,
};
use aldb_format::SnapshotReader;
use aldb_verify::Claim;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

#[derive(Clone, Debug, PartialEq, Eq)]
struct Acct {
    lamports: u64,
    owner: [u8; 32],
    executable: bool,
    data: Vec<u8>,
}

/// One account write as the validator sends it.
#[derive(Clone, Debug)]
struct Write1 {
    pubkey: [u8; 32],
    acct: Acct,
    write_version: u64,
}

type State = BTreeMap<[u8; 32], Acct>;

fn naive_root(state: &State) -> [u8; 32] {
    let mut n = aldb_naive::NaiveState::default();
    for (k, a) in state {
        n.apply_account(k, a.lamports, &a.owner, a.executable, &a.data);
    }
    n.root()
}

/// Creates the plugin through the exported symbol, as agave does, and loads it.
fn load(dir: &Path, extra: &str) -> Box<dyn GeyserPlugin> {
    let cfg = dir.join("aldb.json5");
    let text = format!(
        "{{
            // what an operator would write, plus small snapshot settings to exercise the refresh
            libpath: 'libaldb_plugin.so',
            snapshot_dir: 'snap',
            threads: 2,
            refresh_slots: 8,
            snapshot_queue: 2,
            expected_accounts: 1000,
            metrics_addr: '127.0.0.1:0',
            log_level: 'debug',
            {extra}
        }}"
    );
    std::fs::write(&cfg, text).unwrap();
    // SAFETY: `_create_plugin` returns a pointer from `Box::into_raw` of a `Box<dyn
    // GeyserPlugin>`, built by this same compiler; taking it back once is what agave does.
    let mut plugin: Box<dyn GeyserPlugin> = unsafe { Box::from_raw(aldb_plugin::_create_plugin()) };
    assert_eq!(plugin.name(), "aldb");
    assert!(plugin.account_data_notifications_enabled());
    assert!(!plugin.transaction_notifications_enabled());
    assert!(!plugin.entry_notifications_enabled());
    plugin.on_load(cfg.to_str().unwrap(), false).unwrap();
    plugin
}

fn aldb(plugin: &dyn GeyserPlugin) -> &aldb_plugin::AldbPlugin {
    (plugin as &dyn std::any::Any).downcast_ref().expect("the plugin is an AldbPlugin")
}

/// Sends one write through the interface version chosen by `version`.
fn send(plugin: &dyn GeyserPlugin, w: &Write1, slot: u64, is_startup: bool, version: u64) {
    let a = &w.acct;
    let r = match version % 3 {
        0 => plugin.update_account(
            ReplicaAccountInfoVersions::V0_0_1(&ReplicaAccountInfo {
                pubkey: &w.pubkey,
                lamports: a.lamports,
                owner: &a.owner,
                executable: a.executable,
                rent_epoch: u64::MAX,
                data: &a.data,
                write_version: w.write_version,
            }),
            slot,
            is_startup,
        ),
        1 => plugin.update_account(
            ReplicaAccountInfoVersions::V0_0_2(&ReplicaAccountInfoV2 {
                pubkey: &w.pubkey,
                lamports: a.lamports,
                owner: &a.owner,
                executable: a.executable,
                rent_epoch: 0,
                data: &a.data,
                write_version: w.write_version,
                txn_signature: None,
            }),
            slot,
            is_startup,
        ),
        _ => plugin.update_account(
            ReplicaAccountInfoVersions::V0_0_3(&ReplicaAccountInfoV3 {
                pubkey: &w.pubkey,
                lamports: a.lamports,
                owner: &a.owner,
                executable: a.executable,
                rent_epoch: 0,
                data: &a.data,
                write_version: w.write_version,
                txn: None,
            }),
            slot,
            is_startup,
        ),
    };
    r.unwrap();
}

/// Sends writes from `threads` threads at once, as agave's replay does.
fn send_all(plugin: &dyn GeyserPlugin, writes: &[Write1], slot: u64, is_startup: bool, threads: usize) {
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for (i, w) in writes.iter().enumerate().skip(t).step_by(threads) {
                    send(plugin, w, slot, is_startup, i as u64);
                }
            });
        }
    });
}

fn status(plugin: &dyn GeyserPlugin, slot: u64, parent: Option<u64>, s: SlotStatus) {
    plugin.update_slot_status(slot, parent, &s).unwrap();
}

struct Gen {
    rng: ChaCha8Rng,
    keys: Vec<[u8; 32]>,
    write_version: AtomicU64,
}

impl Gen {
    fn new(seed: u64) -> Self {
        Self { rng: ChaCha8Rng::seed_from_u64(seed), keys: Vec::new(), write_version: AtomicU64::new(1) }
    }

    fn acct(&mut self, deletable: bool) -> Acct {
        let lamports = if deletable && self.rng.random_bool(0.12) { 0 } else { self.rng.random_range(1..10_000_000) };
        let len =
            if self.rng.random_bool(0.1) { self.rng.random_range(200..3000) } else { self.rng.random_range(0..120) };
        Acct {
            lamports,
            owner: [self.rng.random_range(0..4u8); 32],
            executable: self.rng.random_bool(0.05),
            data: (0..len).map(|_| self.rng.random()).collect(),
        }
    }

    fn key(&mut self, fresh: f64) -> [u8; 32] {
        if self.keys.is_empty() || self.rng.random_bool(fresh) {
            let k: [u8; 32] = self.rng.random();
            self.keys.push(k);
            k
        } else {
            self.keys[self.rng.random_range(0..self.keys.len())]
        }
    }

    /// `n` writes for one bank, some accounts written twice (the later write version wins, and
    /// is sometimes delivered first). Returns the writes in delivery order and the winners.
    fn bank(&mut self, n: usize) -> (Vec<Write1>, Vec<([u8; 32], Acct)>) {
        let mut writes = Vec::new();
        let mut winners = BTreeMap::new();
        for _ in 0..n {
            let pubkey = self.key(0.3);
            let acct = self.acct(true);
            let write_version = self.write_version.fetch_add(1, Ordering::Relaxed);
            winners.insert(pubkey, acct.clone());
            writes.push(Write1 { pubkey, acct, write_version });
            if self.rng.random_bool(0.15) {
                let newer = self.acct(true);
                let wv = self.write_version.fetch_add(1, Ordering::Relaxed);
                winners.insert(pubkey, newer.clone());
                let w = Write1 { pubkey, acct: newer, write_version: wv };
                if self.rng.random_bool(0.5) {
                    // Delivered before the older write: the write version decides, not arrival.
                    let at = writes.len() - 1;
                    writes.insert(at, w);
                } else {
                    writes.push(w);
                }
            }
        }
        (writes, winners.into_iter().collect())
    }
}

fn apply(state: &mut State, winners: &[([u8; 32], Acct)]) {
    for (k, a) in winners {
        if a.lamports == 0 {
            state.remove(k);
        } else {
            state.insert(*k, a.clone());
        }
    }
}

/// Waits until the plugin has committed `slot`.
fn wait_committed(plugin: &dyn GeyserPlugin, slot: u64) {
    let t = Instant::now();
    while aldb(plugin).stats().and_then(|s| s.last_committed_slot) < Some(slot) {
        assert!(t.elapsed() < Duration::from_secs(60), "slot {slot} never committed: {:?}", aldb(plugin).stats());
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn scrape(addr: SocketAddr) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200 OK"), "{out}");
    out
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {name} in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

/// Checks every committed slot against the model, and that the slots in `never` are not served.
fn check_snapshots(dir: &Path, history: &BTreeMap<u64, State>, probe: &[[u8; 32]], never: &[u64]) {
    let h = SnapshotReader::open(&dir.join("snap")).unwrap();
    for (&slot, state) in history {
        let info = h.slot(Some(slot)).unwrap_or_else(|e| panic!("slot {slot} not served: {e}"));
        let root = naive_root(state);
        assert_eq!(info.root, root, "slot {slot}: root differs from the model");
        for key in probe {
            let p = h.prove(key, Some(slot)).unwrap();
            assert_eq!(p.root, root);
            let claim =
                p.proof.verify(&root, key).unwrap_or_else(|e| panic!("slot {slot}: proof does not verify: {e:?}"));
            match state.get(key) {
                Some(a) => {
                    let want = aldb_naive::value(a.lamports, &a.owner, a.executable, &a.data);
                    assert_eq!(claim, Claim::Present { value: want }, "slot {slot}");
                    let got = p.account.unwrap_or_else(|| panic!("slot {slot}: account missing"));
                    assert_eq!(
                        (got.lamports, got.owner, got.executable, &got.data),
                        (a.lamports, a.owner, a.executable, &a.data)
                    );
                    assert_eq!(&got.pubkey, key);
                }
                None => {
                    assert_eq!(claim, Claim::Absent, "slot {slot}");
                    assert!(p.account.is_none());
                }
            }
        }
    }
    for &slot in never {
        assert!(h.slot(Some(slot)).is_err(), "slot {slot} must not be served");
    }
}

#[test]
fn a_genesis_start_is_served_slot_by_slot_with_proofs_matching_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut plugin = load(dir.path(), "");
    let p = plugin.as_ref();
    let mut g = Gen::new(42);
    let mut history: BTreeMap<u64, State> = BTreeMap::new();
    let mut never = Vec::new();

    // Genesis, as solana-test-validator sends it: slot 0's accounts as ordinary updates, no
    // status for slot 0 and no end of startup.
    let genesis: Vec<Write1> = (0..120)
        .map(|_| {
            let pubkey = g.key(1.0);
            let acct = g.acct(false);
            Write1 { pubkey, acct, write_version: g.write_version.fetch_add(1, Ordering::Relaxed) }
        })
        .collect();
    send_all(p, &genesis, 0, false, 3);
    let mut state = State::new();
    apply(&mut state, &genesis.iter().map(|w| (w.pubkey, w.acct.clone())).collect::<Vec<_>>());
    history.insert(0, state.clone());

    // Then banks: created, written from several threads, processed, completed, confirmed;
    // rooted eight slots later. Every fifth slot also gets a sibling fork that is processed but
    // never confirmed, and every seventh a sibling that dies half-way.
    let mut parent = 0u64;
    let mut slot = 1u64;
    let mut chain = vec![0u64];
    while chain.len() < 40 {
        if chain.len() % 5 == 0 {
            let fork = slot;
            slot += 1;
            let (writes, _) = g.bank(30);
            status(p, fork, Some(parent), SlotStatus::CreatedBank);
            send_all(p, &writes, fork, false, 2);
            status(p, fork, Some(parent), SlotStatus::Processed);
            never.push(fork);
        }
        if chain.len() % 7 == 0 {
            let dead = slot;
            slot += 1;
            let (writes, _) = g.bank(20);
            status(p, dead, Some(parent), SlotStatus::CreatedBank);
            send_all(p, &writes[..10], dead, false, 1);
            status(p, dead, Some(parent), SlotStatus::Dead("replay failed".into()));
            never.push(dead);
        }
        // Skipped slot numbers have no bank at all.
        slot += u64::from(g.rng.random_bool(0.2));
        let n = g.rng.random_range(0..60);
        let (writes, winners) = g.bank(n);
        status(p, slot, Some(parent), SlotStatus::CreatedBank);
        send_all(p, &writes, slot, false, 3);
        // Confirmed sometimes arrives before Processed.
        let early = g.rng.random_bool(0.3);
        if early {
            status(p, slot, None, SlotStatus::Confirmed);
        }
        status(p, slot, Some(parent), SlotStatus::Processed);
        status(p, slot, Some(parent), SlotStatus::Completed);
        if !early {
            status(p, slot, None, SlotStatus::Confirmed);
        }
        apply(&mut state, &winners);
        history.insert(slot, state.clone());
        chain.push(slot);
        if chain.len() > 8 {
            let r = chain[chain.len() - 9];
            let rp = (chain.len() > 9).then(|| chain[chain.len() - 10]);
            status(p, r, rp, SlotStatus::Rooted);
        }
        parent = slot;
        slot += 1;
    }
    let last = parent;
    wait_committed(p, last);

    let addr = aldb(p).metrics_addr().expect("metrics are on");
    let m = scrape(addr);
    assert_eq!(metric(&m, "aldb_slots_committed_total"), history.len() as f64);
    assert_eq!(metric(&m, "aldb_last_committed_slot"), last as f64);
    assert_eq!(metric(&m, "aldb_callback_panics_total{callback=\"update_account\"}"), 0.0);
    assert!(metric(&m, "aldb_slots_dropped_total{reason=\"dead\"}") >= 1.0);
    assert!(metric(&m, "aldb_commit_seconds_count") >= 1.0);
    assert!(metric(&m, "aldb_account_updates_total") > 1000.0);

    plugin.on_unload();
    assert!(TcpStream::connect(addr).is_err(), "the metrics server stops with the plugin");

    let probe: Vec<[u8; 32]> = g.keys.iter().copied().chain([[0u8; 32], [0xff; 32]]).collect();
    check_snapshots(dir.path(), &history, &probe, &never);
}

#[test]
fn a_snapshot_start_serves_the_startup_state_and_the_slots_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut plugin = load(dir.path(), "commitment: 'finalized',");
    let p = plugin.as_ref();
    let mut g = Gen::new(7);

    // Startup accounts from three storage slots, not de-duplicated, in random order from four
    // threads: the highest (slot, write version) wins and zero lamports is a tombstone.
    let mut startup: Vec<(u64, Write1)> = Vec::new();
    for _ in 0..150 {
        let pubkey = g.key(0.6);
        let slot = [0u64, 71, 200][g.rng.random_range(0..3)];
        let acct = g.acct(true);
        startup.push((slot, Write1 { pubkey, acct, write_version: g.rng.random_range(0..1000) }));
    }
    // Slot 200 must exist among them: it is the snapshot slot, the base.
    startup.push((200, Write1 { pubkey: g.key(1.0), acct: g.acct(false), write_version: 5 }));
    // Equal ranks resolve by arrival; keep them out of the test rather than model thread timing.
    startup.sort_by_key(|(s, w)| (w.pubkey, *s, w.write_version));
    startup.dedup_by_key(|(s, w)| (w.pubkey, *s, w.write_version));
    std::thread::scope(|s| {
        for t in 0..4 {
            let part: Vec<&(u64, Write1)> = startup.iter().skip(t).step_by(4).collect();
            s.spawn(move || {
                for (i, (slot, w)) in part.into_iter().enumerate() {
                    send(p, w, *slot, true, i as u64);
                }
            });
        }
    });
    plugin.notify_end_of_startup().unwrap();
    let mut state = State::new();
    let mut best: BTreeMap<[u8; 32], (u64, u64, Acct)> = BTreeMap::new();
    for (slot, w) in &startup {
        if best.get(&w.pubkey).is_none_or(|(s, v, _)| (*s, *v) < (*slot, w.write_version)) {
            best.insert(w.pubkey, (*slot, w.write_version, w.acct.clone()));
        }
    }
    apply(&mut state, &best.into_iter().map(|(k, (_, _, a))| (k, a)).collect::<Vec<_>>());
    let mut history = BTreeMap::from([(200u64, state.clone())]);

    // Live slots on top, rooted (the commitment here) two slots behind.
    let mut chain = vec![200u64];
    for slot in 201..=215u64 {
        let parent = *chain.last().unwrap();
        let (writes, winners) = g.bank(40);
        status(p, slot, Some(parent), SlotStatus::CreatedBank);
        send_all(p, &writes, slot, false, 2);
        status(p, slot, Some(parent), SlotStatus::Processed);
        status(p, slot, None, SlotStatus::Confirmed);
        apply(&mut state, &winners);
        chain.push(slot);
        if chain.len() > 3 {
            let r = chain[chain.len() - 3];
            status(p, r, Some(chain[chain.len() - 4]), SlotStatus::Rooted);
        }
        history.insert(slot, state.clone());
    }
    // Only rooted slots commit under `finalized`: keep the model's states for those.
    let rooted: Vec<u64> = chain.iter().copied().filter(|s| *s <= chain[chain.len() - 3]).collect();
    history.retain(|s, _| rooted.contains(s));
    let last = *rooted.last().unwrap();
    wait_committed(p, last);
    let s = aldb(p).stats().unwrap();
    assert_eq!(s.last_committed_slot, Some(last));
    assert_eq!(s.base_slot, Some(last));
    plugin.on_unload();

    let unrooted: Vec<u64> = chain.iter().copied().filter(|s| *s > last).collect();
    let probe: Vec<[u8; 32]> = g.keys.clone();
    check_snapshots(dir.path(), &history, &probe, &unrooted);
}

#[test]
fn the_genesis_change_set_is_the_whole_tree() {
    // The plugin writes the first snapshot (which must be the whole state) from the genesis
    // commit's change set. The adapter commits genesis onto an empty tree, so that change set is
    // everything `capture_all` would give; this pins the assumption down.
    use geyser_adapter::{AccountUpdate, Adapter, AdapterConfig, Commitment, KeepAccounts, SlotEvent, SlotStatus as S};
    let mut config = AdapterConfig::new(Commitment::Confirmed, aldb_core::Config::for_leaves(64, 1));
    config.capture_changes = Some(aldb_core::CaptureOptions::ALL);
    let adapter = Adapter::with_retain(config, KeepAccounts).unwrap();
    let mut g = Gen::new(3);
    for i in 0..200u64 {
        let (pubkey, a) = (g.key(1.0), g.acct(false));
        let u = AccountUpdate {
            slot: 0,
            pubkey,
            lamports: a.lamports,
            owner: a.owner,
            executable: a.executable,
            data: &a.data,
            write_version: i,
            is_startup: false,
        };
        adapter.update_account(&u).unwrap();
    }
    adapter.update_slot_status(SlotEvent::new(1, Some(0), S::CreatedBank)).unwrap();
    let mut commits = adapter.commit_ready();
    assert_eq!(commits.len(), 1);
    let c = commits.pop().unwrap();
    let mut got = c.changes.unwrap();
    let mut all = aldb_core::ChangeSet::default();
    adapter.with_tree(|t| t.capture_all(&mut all));
    let norm = |c: &mut aldb_core::ChangeSet| {
        let mut nodes: Vec<_> = c.nodes().filter(|n| n.hash != [0; 32]).collect();
        nodes.sort_by_key(|n| (n.level, n.index));
        type Bucket = (u64, [u8; 32], Vec<[u8; 32]>, Vec<[u8; 32]>);
        let buckets: Vec<Bucket> = c
            .buckets()
            .filter(|b| !b.paths.is_empty())
            .map(|b| (b.index, b.hash, b.paths.to_vec(), b.values.to_vec()))
            .collect();
        (c.bucket_bits(), nodes, buckets)
    };
    assert_eq!(norm(&mut got), norm(&mut all));
    assert_eq!(c.records.len(), 200);
}

/// `commitment: "processed"`: every frozen bank, forks included, is frozen and written at once;
/// the chain's slots are served with proofs matching the model, forks are rolled back to and
/// abandoned, and only confirmed and finalized records are made, each with the bank's root.
#[test]
fn at_processed_every_bank_is_written_and_only_confirmed_and_finalized_slots_get_records() {
    use aldb_format::records::RecordLogReader;
    let dir = tempfile::tempdir().unwrap();
    let genesis_hash = aldb_verify::hash_to_base58(&[9; 32]);
    let mut plugin = load(dir.path(), &format!("commitment: 'processed', genesis_hash: '{genesis_hash}',"));
    let p = plugin.as_ref();
    let mut g = Gen::new(7);
    let mut history: BTreeMap<u64, State> = BTreeMap::new();
    let mut forks: BTreeMap<u64, [u8; 32]> = BTreeMap::new();
    let mut never = Vec::new();
    let genesis: Vec<Write1> = (0..80)
        .map(|_| Write1 {
            pubkey: g.key(1.0),
            acct: g.acct(false),
            write_version: g.write_version.fetch_add(1, Ordering::Relaxed),
        })
        .collect();
    send_all(p, &genesis, 0, false, 2);
    let mut state = State::new();
    apply(&mut state, &genesis.iter().map(|w| (w.pubkey, w.acct.clone())).collect::<Vec<_>>());
    history.insert(0, state.clone());

    let (mut parent, mut slot, mut chain) = (0u64, 1u64, vec![0u64]);
    while chain.len() < 30 {
        if chain.len() % 4 == 0 {
            // A sibling fork, frozen before the chain's bank: the engine rolls back to leave it.
            let fork = slot;
            slot += 1;
            let (writes, winners) = g.bank(25);
            status(p, fork, Some(parent), SlotStatus::CreatedBank);
            send_all(p, &writes, fork, false, 2);
            status(p, fork, Some(parent), SlotStatus::Processed);
            let mut s = state.clone();
            apply(&mut s, &winners);
            forks.insert(fork, naive_root(&s));
        }
        if chain.len() % 7 == 0 {
            let dead = slot;
            slot += 1;
            let (writes, _) = g.bank(10);
            status(p, dead, Some(parent), SlotStatus::CreatedBank);
            send_all(p, &writes[..5], dead, false, 1);
            status(p, dead, Some(parent), SlotStatus::Dead("replay failed".into()));
            never.push(dead);
        }
        let n = g.rng.random_range(1..40);
        let (writes, winners) = g.bank(n);
        status(p, slot, Some(parent), SlotStatus::CreatedBank);
        send_all(p, &writes, slot, false, 2);
        status(p, slot, Some(parent), SlotStatus::Processed);
        status(p, slot, None, SlotStatus::Confirmed);
        apply(&mut state, &winners);
        history.insert(slot, state.clone());
        chain.push(slot);
        if chain.len() > 6 {
            let r = chain[chain.len() - 7];
            let rp = (chain.len() > 7).then(|| chain[chain.len() - 8]);
            status(p, r, rp, SlotStatus::Rooted);
        }
        parent = slot;
        slot += 1;
    }
    let last = parent;
    let t = Instant::now();
    while aldb(p).stats().and_then(|s| s.last_confirmed_slot) < Some(last) {
        assert!(t.elapsed() < Duration::from_secs(60), "slot {last} never confirmed: {:?}", aldb(p).stats());
        std::thread::sleep(Duration::from_millis(10));
    }
    let addr = aldb(p).metrics_addr().expect("metrics are on");
    let m = scrape(addr);
    assert_eq!(metric(&m, "aldb_slots_committed_total"), (history.len() + forks.len()) as f64);
    assert!(metric(&m, "aldb_fork_slots_rolled_back_total") >= 1.0);
    let abandoned = metric(&m, "aldb_bank_status_changes_total{status=\"abandoned\"}");
    let passed = forks.keys().filter(|&&f| f < chain[chain.len() - 7]).count();
    assert!(abandoned >= passed as f64, "{abandoned} abandoned, {passed} forks passed by a root");
    assert_eq!(metric(&m, "aldb_freezes_refused_total"), 0.0);
    assert_eq!(metric(&m, "aldb_snapshot_fork_refused_total"), 0.0);
    assert_eq!(metric(&m, "aldb_last_confirmed_slot"), last as f64);
    plugin.on_unload();

    let probe: Vec<[u8; 32]> = g.keys.iter().copied().chain([[0u8; 32]]).collect();
    check_snapshots(dir.path(), &history, &probe, &never);
    // Records: a confirmed one per chain slot and a finalized one per rooted slot, with the
    // model's roots, each level chained; none for a fork.
    let logged = RecordLogReader::new(&dir.path().join("snap")).refresh().unwrap();
    for level in [aldb_verify::Commitment::Confirmed, aldb_verify::Commitment::Finalized] {
        let recs: Vec<_> = logged.iter().filter(|l| l.record.commitment == level).collect();
        let want = if level == aldb_verify::Commitment::Confirmed { chain.len() } else { chain.len() - 6 };
        assert_eq!(recs.iter().map(|l| l.record.slot).collect::<Vec<_>>(), chain[..want], "{level:?}");
        for l in &recs {
            assert_eq!(l.record.state_root, naive_root(&history[&l.record.slot]), "slot {}", l.record.slot);
        }
        for w in recs.windows(2) {
            assert!(w[1].record.extends(&w[0].record, &w[0].record_hash));
        }
    }
    assert!(logged.iter().all(|l| !forks.contains_key(&l.record.slot)));
}
